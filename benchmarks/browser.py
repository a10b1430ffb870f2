"""Browser benchmark: `python -m benchmarks.browser` (the second half of `make bench`).

What it measures, in headless Chromium against one freshly started
``streamlit run streamlit_app.py`` (file watcher off, see `SERVER_ENV`), for
each case (`CASES`) on the Self-attention and the Causal & multi-head pages,
in this order in one browser tab:

- **first open**: ``page.goto(url)`` in a new browser context (nothing cached
  in the browser) until every chart of the page is drawn and holds the
  expected numbers and Streamlit's script has finished.
- **edit**: type a seed the server has never seen into the sidebar's seed box
  and press Enter, until every chart holds the new seed's numbers (so the
  server computes a new trace, as it does for a learner's edit).
- **first screen** and **edit in view** (the headline, `print_headline`): the
  same first open and edit, timed until every chart in the window (at the top
  of the page, where a first open leaves it; `CHECK_JS` ``checkInView``) holds
  its numbers, once the window is filled (a later chart starts below it, or
  the page has every chart): what the learner sees before scrolling, like
  Largest Contentful Paint. The full times above stay beside them ("all charts").
  An edit is also timed by the page itself ("in page", `INSTANT_JS`): from the
  Enter key's event to the frame after the window's charts painted the new
  numbers (each chart's ``explorer:painted``, caused by the server's payload).
- **head switch** (multi-head page): click "head 1" until the per-head charts
  hold head 1's numbers.
- **cell click**: click the centre of cell (1, 0) of the attention-scores
  heatmap (Plotly's own ``plotly_click``, at every size) until the explanation
  of exactly that cell appears and every chart shows the new outlines (the
  marked cell; a click also makes its row the highlighted query). A click that
  explains another cell is a failed measurement that names the cell explained.
- **query pick**: choose the last token in "Highlight a query token" until every
  chart outlines its row.

Before each local interaction the app and the floor wait `THINK_S` (a learner's
glance at the page, unmeasured). For the three local interactions (cell click,
query pick, head switch) the
charts follow in the page before the server hears of them (explorer/render/chart/chart.js
``setView``); the times above run until the server's run has confirmed them.
The page also times them itself (`INSTANT_JS`): from the input event's own
timestamp to the ``requestAnimationFrame`` after each chart's change
(chart.js's ``explorer:painted``), read in Chromium: the first chart, the last
chart in the window, the last of the page. Beside them, in the same run, the
floor: on the floor's page, a click's time to the next frame (no
handler runs: no page can show a change sooner). It also counts the
charts the server's run painted again (0: the run that confirms a view redraws
nothing), and for a cell click the time until the server's explanation of the
cell (its title, from `explain_cell`) is in the page.

"Holds the numbers" is checked, not assumed. Every chart of the app is an
`explorer.render.payload.Chart` drawn by ``explorer/render/chart/chart.js`` into a Plotly graph div
(``.explorer-chart``) in the ``st-key-<key>`` container Streamlit gives a keyed
element. In the page each such div is reduced to a `checksum` of its z values
(count, sum and a position-weighted sum of the finite values; chart.js hands
Plotly rows of float32 with NaN for non-finite values), which must equal the
checksum of the same numbers taken from `explorer.compute_trace` for the page's
configuration (`page_charts`, `expected_checksums`). The outlines (highlighted
row, marked cell, heads) are compared by their shapes' count and coordinates
with the charts the app's own figure code builds. A chart that is missing, or
never holds the expected numbers within `TIMEOUT_MS`, makes a failed
measurement, printed and stored, not a hang. Charts the page may or may not
draw (the softmax-overflow demo, drawn only while its toggle is on) are
optional: checked when present; which of them the app drew on its first open
decides what the floor draws.

**The floor.** Interleaved with the app's runs (app, floor, app, floor, ...),
the same pictures are drawn by the most direct route: a static page served
from loopback loads the Plotly.js bundle the app serves
(`explorer.ui.component.PLOTLY_JS`) and the app's own ``explorer/render/chart/chart.js`` (as an
ES module), fetches each chart's payload (`explorer.render.payload.encode` of the chart
the app's figure code builds; one precomputed file per chart, fetched as an
ArrayBuffer) and calls chart.js's
``draw(div, header, matrices)`` for it, in divs as wide as the app's columns
(Streamlit's wide layout at `VIEWPORT` with the sidebar open, rows split into
equal columns like ``st.columns``; the app's and the floor's chart sizes are
compared on the first run and any difference printed). The floor's first open
uses a new browser context too; its edit draws the other seed's payloads, and a
local interaction draws again only the charts whose picture it changes, with
payloads that leave out the matrices the page already holds (``known`` = their
hashes, as the app does), so that only headers travel. The floor is what any
web page pays to show these pictures, so **ratio = app median / floor median**
is the price of everything else: Streamlit rerunning the whole script, building
and encoding charts on the server, the websocket, React. A ratio near 1 means
the app is as fast as its pictures allow; a large one is overhead worth
removing. The floor's edit draws precomputed charts, so the app's edit also
pays the server's trace computation (`benchmarks.run` times that alone).

**The bare-Streamlit floors**, in the same runs: `bare_app.py`, a Streamlit page
that prints text and one ``st.number_input``, served by a second server with the
same options, opened in a new context until its script has finished and its
last line shows; then its number edited (typed, Enter timed) until the rerun has
finished and the page shows the new value (``ratio_bare`` = the app's first open
or edit / the bare page's; ``ratio_in_view_bare`` = first screen or edit in view /
the bare page's).

Bytes: for the app, the websocket payload bytes (after decompression, as
Playwright reports them) the page received from the action until it settled;
for the first open also the HTTP response bodies (Streamlit's own scripts).
For the floor, the chart payload bytes it fetched (what the data alone costs).
Timings are wall-clock seconds from the action until the page settled, taken in
this process, so Playwright's round trips count for app and floor alike. The
first app run of a case is the server's first sight of its configuration.
Repeats are few and the machine may be shared: read the median with its min-max
spread, not single numbers.

**Memory line** (`--memory`, and at the end of a default run): the resident
memory of a freshly started server, after one visit, after four seeds at
d_in=1024, after eight 512-token × d=1024 configurations, and 30 s and 90 s
after the browser closed (`memory_line`).

Results are printed and written to ``benchmarks/results/latest.json`` under
"browser" and "memory"; other keys (e.g. "backend") are kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import http.server
import importlib.metadata
import json
import os
import statistics
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path

import numpy as np
import torch
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from explorer import AttentionConfig, compute_trace
from explorer.core import verify
from explorer.core.steps import STEPS, layout_rows, scale_group, split_after, stages, visible_steps
from explorer.core.tokenizer import token_labels
from explorer.core.trace import Trace
from explorer.lessons.explain import explain_cell
from explorer.render import figures
from explorer.render.payload import CHART_JS, Chart, encode, matrix_hash
from explorer.ui import component as app_component
from tests.support.server import Server, rss_mib

try:  # the app's own rule (explorer.ui.render.step_charts uses it)
    from explorer.core.steps import shows_colour_bar
except ImportError:  # before it existed: the same rule, written out
    def shows_colour_bar(row: list[str], i: int) -> bool:
        """Whether the ``i``-th chart of a page row shows its colour bar."""
        return not (i + 1 < len(row) and row[i + 1] in scale_group(row[i]))

RESULTS = Path(__file__).parent / "results" / "latest.json"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
SIDEBAR_PX = 300
"""Streamlit's sidebar, open (its default width)."""
MAIN_PADDING_PX = 80
"""The wide layout's padding of the main block, left and right (5rem)."""
COLUMN_GAP_PX = 16
"""``st.columns``' default gap ("small", 1rem)."""
BORDER_INSET_PX = 17
"""``st.container(border=True)``: a 1px border and 1rem of padding on each side."""
MAIN_WIDTH_PX = VIEWPORT["width"] - SIDEBAR_PX - 2 * MAIN_PADDING_PX
"""The width of the app's main area at `VIEWPORT` (940 px): a chart alone in
its row is this wide; a row of k charts splits it into k equal columns."""
SERVER_ENV = {"STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
"""No file watcher: edits to the app made while the benchmark runs cannot reload
it mid-run, and the watcher's own work is not timed."""
TIMEOUT_MS = 120_000
"""Longest wait for one measurement before it counts as failed."""
REL_TOLERANCE = 1e-4
"""Checksums agree when they differ by less than this fraction of the sum of
|values| (with the same weights). Both sides add the same float32 numbers in
float64, so only a chart that is recomputed differently (the second causal
route) differs at all; two seeds differ by ~1/sqrt(cells) >> 1e-4."""
PLOTLY_JS = app_component.PLOTLY_JS
"""The floor draws with the app's own Plotly.js bundle (until 2026-11-26: plotly.py's
full plotly.min.js, 4.8 MB, which made the floor's first open slower than the app's
Plotly part)."""
EDIT_SEED = 1000
"""The floor's edit and the app's first edit go to this seed; the app's run r
goes to ``EDIT_SEED + r``, a seed the server has not computed yet."""
CLICKED_STEP, CLICKED_CELL = "attn_scores", (1, 0)
PICKED_QUERY = -1  # the last token

SELF_ATTENTION, MULTI_HEAD = "self-attention", "multi-head"
PAGE_PATHS = {SELF_ATTENTION: "Self_attention", MULTI_HEAD: "Causal_and_multi_head"}
"""--pages name -> the page's URL path."""
FIRST_OPEN, EDIT, CELL_CLICK, QUERY_PICK, HEAD_SWITCH = (
    "first open", "edit", "cell click", "query pick", "head switch")
LOCAL_MEASURES = (CELL_CLICK, QUERY_PICK, HEAD_SWITCH)
FIRST_SCREEN, EDIT_IN_VIEW = "first screen", "edit in view"
IN_VIEW = {FIRST_OPEN: FIRST_SCREEN, EDIT: EDIT_IN_VIEW}
"""The measures also timed until the charts in the window are right: measure -> headline."""
THINK_S = 1.0
"""A learner's glance at the page before a local interaction: the app and the floor
wait this long after the previous measure (unmeasured). The app's page uses idle
time to draw the other heads of per-head charts (explorer/render/chart/chart.js `predrawHeads`,
ready about 0.2 s after an edit at the defaults); without the pause a head switch
right after an edit redraws its charts in place (120-250 ms)."""
"""What the browser already holds: drawn in the page before the server's run."""
LINKED_VIEW = {QUERY_PICK: lambda scenario: ("query", str(scenario.query)),
               HEAD_SWITCH: lambda scenario: ("head", "1")}
"""measure -> the link parameter and value that show the server has confirmed it (a
run that only confirms the page's view can end before the page marks it running)."""


@dataclass(frozen=True)
class Case:
    """A configuration to measure: ``tokens`` words and d_in = d_k = d_v = ``dim``
    (None: the app's defaults)."""

    tokens: int | None = None
    dim: int | None = None


CASES = {
    "defaults": Case(),
    "64": Case(tokens=64, dim=64),
    "512x64": Case(tokens=512, dim=64),
    "512x1024": Case(tokens=512, dim=1024),
}
"""--cases name -> case. "defaults" is the app's default configuration (on the
multi-head page with d_k = d_v = 4 so that 4 heads divide them)."""
MULTI_HEAD_PARAMS = {"n_heads": "4", "causal": "true"}


def words(n: int) -> str:
    """A sentence of ``n`` distinct readable tokens: ``"w0 w1 ... w{n-1}"``."""
    return " ".join(f"w{i}" for i in range(n))


def url_params(case: Case, page: str) -> dict[str, str]:
    """The URL query parameters (= `AttentionConfig` field names) of ``case`` on ``page``."""
    params: dict[str, str] = {}
    if case.tokens is not None:
        params["sentence"] = words(case.tokens)
    if case.dim is not None:
        params.update(d_in=str(case.dim), d_k=str(case.dim), d_v=str(case.dim))
    if page == MULTI_HEAD:
        params.update(MULTI_HEAD_PARAMS)
        if case.dim is None:
            params.update(d_k="4", d_v="4")
    return params


def page_url(base: str, page: str, params: dict[str, str]) -> str:
    """The address of ``page`` with ``params`` on the server at ``base``."""
    query = urllib.parse.urlencode(params)
    return f"{base}/{PAGE_PATHS[page]}" + (f"?{query}" if query else "")


# ---------------------------------------------------------------------------
# What a page shows: one function, used for the floor and for the checks
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """What the visitor has picked on a page: the head, the highlighted query
    row and the explained cell ``(step, row, col, head)``, as
    `explorer.ui.render` keeps them."""

    head: int = 0
    query: int | None = None
    explained: tuple[str, int, int, int] | None = None

    def marked(self, step: str) -> tuple[int, int] | None:
        """The cell marked on ``step``'s chart: the explained one, if it belongs
        to this step (and, for a per-head step, to the head shown)."""
        if self.explained is None or self.explained[0] != step:
            return None
        if STEPS[step].per_head and self.explained[3] != self.head:
            return None
        return self.explained[1], self.explained[2]


MAIN, BORDERED = "main", "bordered"
"""Where a chart's row sits: the main area, or a bordered container in it."""


@dataclass(frozen=True)
class PageChart:
    """One chart of a page: ``key`` names its ``st-key-<key>`` container,
    ``numbers()`` gives the matrices it shows (one per heatmap trace) straight
    from the trace, ``build()`` the `explorer.render.payload.Chart` the app's figure
    code makes of them. ``columns`` charts share its row, which sits in
    ``frame``; an ``optional`` chart may or may not be on the page."""

    key: str
    numbers: Callable[[], list[np.ndarray]]
    build: Callable[[], Chart]
    columns: int = 1
    optional: bool = False
    frame: str = MAIN


def _step_numbers(trace: Trace, name: str, head: int) -> list[np.ndarray]:
    tensor = trace[name]
    if tensor.dim() == 3:  # (n_heads, n, m): the page shows one head
        tensor = tensor[head]
    return [tensor.to(torch.float64).numpy()]


def _clickable(build: Callable[[], Chart]) -> Callable[[], Chart]:
    """``build`` for a chart the page shows with an ``on_click`` (`explorer.ui.component.show`)."""
    def built() -> Chart:
        chart = build()
        chart.clickable = True
        return chart
    return built


def _step_charts(trace: Trace, names: list[str], view: View, head: int = 0) -> list[PageChart]:
    """`explorer.ui.render.step_charts` (and `step_chart`): the steps in layout
    rows; in a row, a step followed by one on its colour scale has no colour bar."""
    return [PageChart(f"chart-{name}", partial(_step_numbers, trace, name, head),
                      _clickable(partial(figures.heatmap_chart, trace, name, head=head,
                                         highlight_row=view.query, marked_cell=view.marked(name),
                                         colorbar=shows_colour_bar(row, i), columns=len(row))),
                      columns=len(row))
            for row in layout_rows(names) for i, name in enumerate(row)]


def page_charts(page: str, trace: Trace, view: View = View()) -> list[PageChart]:
    """The charts ``page`` draws for ``trace`` in ``view``, in page order.

    This mirrors pages/2_Self_attention.py and pages/3_Causal_and_multi_head.py
    (with explorer/ui/render.py, multihead.py and lessons.py); update it when
    they change what they draw.
    """
    steps = visible_steps(trace)
    if page == SELF_ATTENTION:
        return _step_charts(trace, steps, view) + _overflow_demo_charts(trace)
    c = trace.config
    before, per_head, after = stages(steps)
    charts = _step_charts(trace, before, view)
    if c.n_heads > 1:  # explorer.ui.multihead.head_split
        charts += [PageChart(f"split-{name}",
                             partial(lambda name: [figures.combine_heads_np(trace[name])], name),
                             partial(figures.head_split_chart, trace, name), columns=3)
                   for name in ("queries", "keys", "values")]
    weights, dropout = split_after(per_head, "attn_weights")
    charts += _step_charts(trace, weights, view, head=view.head)
    if c.causal and c.normalization == "softmax":  # multihead.causal_second_route
        charts.append(PageChart("causal-second-route",
                                lambda: [_second_route(trace, view.head)],
                                lambda: _second_route_chart(trace, view.head)))
    charts += _step_charts(trace, dropout, view, head=view.head)
    if c.n_heads > 1:  # multihead.heads_grid
        charts.append(PageChart(
            "heads-grid", lambda: list(trace["attn_weights"].to(torch.float64).numpy()),
            _clickable(partial(figures.heads_grid_chart, trace))))
    return charts + _step_charts(trace, after, view)


def _overflow_demo_charts(trace: Trace) -> list[PageChart]:
    """`explorer.ui.lessons.softmax_overflow` at its default factor (X × 1): the
    naive and the stable softmax side by side in a bordered container, drawn
    only while the section is open (so optional)."""
    @cache
    def shown(normalization: str) -> Trace:
        base = trace.config.replace(embedding="given", embeddings=trace["embeddings"] * 1)
        return compute_trace(base.replace(normalization=normalization))

    return [PageChart(f"overflow-demo-{name.replace(' ', '-')}",
                      partial(lambda n: _step_numbers(shown(n), "attn_weights", 0), normalization),
                      partial(lambda n, name: figures.heatmap_chart(
                          shown(n), "attn_weights", columns=2, title=f"{name}, X × 1"),
                          normalization, name),
                      columns=2, optional=True, frame=BORDERED)
            for name, normalization in (("naive softmax", "naive_softmax"),
                                        ("softmax", "softmax"))]


def _second_route(trace: Trace, head: int) -> np.ndarray:
    """The weights of the book's second causal route, as the multi-head page draws them."""
    weights = verify.second_causal_route(trace).weights
    return (weights[head] if weights.dim() == 3 else weights).to(torch.float64).numpy()


def _second_route_chart(trace: Trace, head: int) -> Chart:
    """The multi-head page's "same weights by the other route" chart."""
    return figures.second_route_chart(trace, verify.second_causal_route(trace), head)


# ---------------------------------------------------------------------------
# Checksums: the same reduction in Python (expected) and in the page (drawn)
# ---------------------------------------------------------------------------
def checksum(matrices: list[np.ndarray]) -> dict[str, float]:
    """Count, sum and position-weighted sum of the finite values (weight
    ``1 + k % 7`` for the k-th value of a matrix in row-major order), and the
    weighted sum of |values| that scales the tolerance. Same as `CHECK_JS`."""
    count = total = weighted = scale = 0.0
    for matrix in matrices:
        flat = np.asarray(matrix, dtype=np.float64).ravel()
        weights = 1.0 + np.arange(flat.size) % 7
        finite = np.isfinite(flat)
        count += float(finite.sum())
        total += float(flat[finite].sum())
        weighted += float((flat[finite] * weights[finite]).sum())
        scale += float((np.abs(flat[finite]) * weights[finite]).sum())
    return {"count": count, "sum": total, "wsum": weighted, "scale": scale}


def shapes_signature(chart: Chart) -> list[float]:
    """[number of layout shapes, sum of their numeric x0, x1, y0, y1]."""
    shapes = chart.figure["layout"].get("shapes") or ()
    coordinates = [s.get(a) for s in shapes for a in ("x0", "x1", "y0", "y1")]
    return [len(shapes), float(sum(v for v in coordinates
                                   if isinstance(v, (int, float)) and not isinstance(v, bool)))]


def expected_checksums(charts: list[PageChart],
                       shapes: dict[str, list[float]] | None = None) -> dict:
    """What the page must show: chart key (e.g. ``"chart-attn_weights"``) -> the
    `checksum` of its numbers from the trace (and its shapes signature, and
    whether it is optional); a chart missing from ``shapes`` has its numbers
    checked only."""
    return {chart.key: {**checksum(chart.numbers()),
                        **({"shapes": shapes[chart.key]} if shapes and chart.key in shapes
                           else {}),
                        **({"optional": True} if chart.optional else {})}
            for chart in charts}


CHECK_JS = """
window.__bench = (() => {
  const cache = new WeakMap();  // z input object -> its checksum (recomputed only on new data)
  const DTYPES = {f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array,
                  i2: Int16Array, u2: Uint16Array, i1: Int8Array, u1: Uint8Array};
  function rows(z) {  // z as a list of flat rows (row-major)
    if (z == null) return [];
    if (ArrayBuffer.isView(z)) return [z];
    if (Array.isArray(z)) {
      if (z.length && (Array.isArray(z[0]) || ArrayBuffer.isView(z[0]))) return z;
      return [z];
    }
    if (z._inputArray) return [z._inputArray];
    if (z.bdata) {
      const bytes = Uint8Array.from(atob(z.bdata), ch => ch.charCodeAt(0));
      return [new (DTYPES[z.dtype] || Float64Array)(bytes.buffer)];
    }
    return [];
  }
  function traceSum(full) {
    const input = full._input || {};
    const key = (input.z && typeof input.z === 'object') ? input.z : null;
    if (key && cache.has(key)) return cache.get(key);
    let count = 0, sum = 0, wsum = 0, k = 0;
    for (const row of rows(full.z != null ? full.z : input.z)) {
      for (let j = 0; j < row.length; j++, k++) {
        const v = Number(row[j]);
        if (Number.isFinite(v)) { count++; sum += v; wsum += v * (1 + k % 7); }
      }
    }
    const result = {count, sum, wsum};
    if (key) cache.set(key, result);
    return result;
  }
  function drawn(gd) {
    if (!gd || !gd._fullData || !gd._fullLayout || !gd.querySelector('.main-svg')) return null;
    const total = {count: 0, sum: 0, wsum: 0};
    for (const full of gd._fullData) {
      if (full.z == null && !(full._input && full._input.z != null)) continue;
      const s = traceSum(full);
      total.count += s.count; total.sum += s.sum; total.wsum += s.wsum;
    }
    const shapes = (gd.layout && gd.layout.shapes) || [];
    let coords = 0;
    for (const s of shapes) for (const a of ['x0', 'x1', 'y0', 'y1'])
      if (typeof s[a] === 'number') coords += s[a];
    total.shapes = [shapes.length, coords];
    return total;
  }
  const close = (a, b, tol) => Math.abs(a - b) <= tol;
  // {ok, problems}: every expected chart drawn with its numbers (an optional one
  // only if its container is on the page); for the app also every chart on the
  // page drawn and Streamlit's script finished after at least `minRuns` runs.
  function check(expected, minRuns, relTol) {
    const problems = [];
    if (window.__floorError) problems.push('floor: ' + window.__floorError);
    if (minRuns !== null) {
      const app = document.querySelector("[data-testid='stApp']");
      const state = app && app.getAttribute('data-test-script-state');
      if ((window.__runs || 0) < minRuns || state !== 'notRunning')
        return {ok: false, problems: ['script ' + state + ', runs ' + (window.__runs || 0)]};
      for (const el of document.querySelectorAll('.explorer-chart'))
        if (!drawn(el)) problems.push('a chart is not drawn yet');
    }
    for (const [key, want] of Object.entries(expected)) {
      const box = document.querySelector('.st-key-' + key);
      if (!box && want.optional) continue;
      const got = drawn(box && box.querySelector('.explorer-chart'));
      if (!got) { problems.push(key + ': missing'); continue; }
      const tol = relTol * want.scale + 1e-9;
      const same = got.count === want.count && close(got.sum, want.sum, tol) &&
                   close(got.wsum, want.wsum, tol);
      if (!same)
        problems.push(key + ': numbers ' + JSON.stringify([got.count, got.sum, got.wsum]) +
                      ' != expected ' + JSON.stringify([want.count, want.sum, want.wsum]));
      else if (want.shapes && (got.shapes[0] !== want.shapes[0] ||
                               !close(got.shapes[1], want.shapes[1], 1e-6)))
        problems.push(key + ': shapes ' + JSON.stringify(got.shapes) + ' != expected ' +
                      JSON.stringify(want.shapes));
    }
    return {ok: problems.length === 0, problems};
  }
  // {ok, problems, shown}: every expected chart in the window (its container meets
  // the viewport) drawn with its numbers, once the window is filled: a later chart's
  // container starts below it, or every expected chart is on the page. `shown`:
  // how many charts the window holds. What a visitor sees before scrolling.
  function checkInView(expected, relTol) {
    const inView = {}, problems = [];
    let below = false, present = 0, total = 0;
    for (const [key, want] of Object.entries(expected)) {
      const box = document.querySelector('.st-key-' + key);
      if (!want.optional) total++;
      if (!box) continue;
      if (!want.optional) present++;
      const r = box.getBoundingClientRect();
      if (r.top >= innerHeight) below = true;
      else if (r.bottom >= 0) inView[key] = want;
    }
    if (!below && present < total)
      problems.push(`window not filled: ${present} of ${total} charts`);
    const shown = Object.keys(inView).length;
    if (!shown) problems.push('no chart in the window');
    const drawnOk = check(inView, null, relTol);
    return {ok: !problems.length && drawnOk.ok, problems: problems.concat(drawnOk.problems), shown};
  }
  // key -> [width, height] of the chart's graph div (null if absent).
  function sizes(keys) {
    const out = {};
    for (const key of keys) {
      const gd = document.querySelector('.st-key-' + key + ' .explorer-chart');
      const box = gd && gd.getBoundingClientRect();
      out[key] = box ? [Math.round(box.width * 10) / 10, Math.round(box.height * 10) / 10] : null;
    }
    return out;
  }
  return {check, checkInView, sizes};
})();
"""
"""Injected into every page (app and floor): ``window.__bench.check(expected, minRuns,
tol)``, ``window.__bench.checkInView(expected, tol)`` and ``window.__bench.sizes(keys)``."""

SCRIPT_FINISHED_FIELD = ForwardMsg.DESCRIPTOR.fields_by_name["script_finished"].number
RUN_COUNTER_JS = """
// Count the server's script_finished messages: the field of a ForwardMsg (the
// protobuf on Streamlit's websocket), found by scanning its top-level fields.
// Counting the page's 'running' state would miss a quick run whose messages
// React applies in one commit (the attribute never reads 'running').
window.__runs = 0;
(() => {
  const FIELD = %d;
  const finished = (data) => {
    if (!(data instanceof ArrayBuffer)) return false;
    const b = new Uint8Array(data);
    let i = 0;
    const varint = () => {
      let value = 0, shift = 0, byte;
      do { byte = b[i++]; value += (byte & 0x7f) * 2 ** shift; shift += 7; } while (byte & 0x80);
      return value;
    };
    while (i < b.length) {
      const key = varint();
      if (Math.floor(key / 8) === FIELD) return true;
      const wire = key & 7;
      if (wire === 0) varint();
      else if (wire === 2) { const length = varint(); i += length; } // not i += varint()
      else if (wire === 1) i += 8; else if (wire === 5) i += 4; else return false;
    }
    return false;
  };
  const add = WebSocket.prototype.addEventListener;
  WebSocket.prototype.addEventListener = function (type, listener, ...rest) {
    if (type === 'message') {
      add.call(this, 'message', (event) => { if (finished(event.data)) window.__runs++; });
    }
    return add.call(this, type, listener, ...rest);
  };
  const onmessage = Object.getOwnPropertyDescriptor(WebSocket.prototype, 'onmessage');
  Object.defineProperty(WebSocket.prototype, 'onmessage', {
    set(listener) {
      add.call(this, 'message', (event) => { if (finished(event.data)) window.__runs++; });
      onmessage.set.call(this, listener);
    },
    get() { return onmessage.get.call(this); },
  });
})();
""" % SCRIPT_FINISHED_FIELD
"""Counts the Streamlit script runs the server finished, so that a wait ends after
the run an action started."""

INSTANT_JS = """
window.__instant = (() => {
  const s = {armed: false, t0: null, frame: null, paints: [], label: null, explained: null};
  // Arm before an action: the next input event starts the clock. Its time is the
  // event's own timeStamp (the same clock as performance.now()). `label`: the
  // title of the explanation the action should bring (a cell click), timed when
  // it is added to the page.
  s.arm = (label = null) => {
    Object.assign(s, {armed: true, t0: null, frame: null, paints: [], label, explained: null});
    document.querySelectorAll('.explorer-chart').forEach((d) => { d.dataset.benchBefore = '1'; });
  };
  const start = (e) => {
    if (!s.armed) return;
    s.armed = false;
    s.t0 = e.timeStamp;
    requestAnimationFrame(() => { s.frame = performance.now() - s.t0; }); // the frame floor
  };
  for (const type of ['pointerdown', 'change']) addEventListener(type, start, true);
  addEventListener('keydown', (e) => { if (e.key === 'Enter') start(e); }, true); // an edit
  // explorer/render/chart/chart.js dispatches explorer:painted in the frame after a chart's
  // pixels changed, with that frame's time in data-painted and its cause: "view"
  // (the page followed the input itself) or "server" (a payload of the run).
  addEventListener('explorer:painted', (e) => {
    const div = e.target;
    if (s.t0 === null || !div.dataset.benchBefore) return;
    const box = div.getBoundingClientRect();
    s.paints.push([Number(div.dataset.painted) - s.t0,
                   box.bottom > 0 && box.top < innerHeight, e.detail.by]);
  }, true);
  new MutationObserver(() => {
    if (s.t0 === null || !s.label || s.explained !== null) return;
    for (const strong of document.querySelectorAll('strong')) {
      if (strong.textContent === s.label) s.explained = performance.now() - s.t0;
    }
  }).observe(document, {subtree: true, childList: true, characterData: true});
  // {frame, first, inView, all, byServer, serverInView, explained}: ms from the input
  // to the next frame, to the first chart the page redrew itself, the last such chart
  // in the window, the last such of the page; byServer: charts the server's run
  // repainted (0 when the run only confirms what the page shows); serverInView: to
  // the last of those in the window (an edit's new numbers, painted); explained: to
  // the explanation titled `label` (from the server's explain_cell) in the page.
  s.result = () => {
    if (s.t0 === null) return null;
    const own = s.paints.filter(([, , by]) => by === 'view');
    const server = s.paints.filter(([, , by]) => by !== 'view');
    const times = (list) => list.map(([t]) => t);
    const max = (list) => (list.length ? Math.max(...list) : null);
    return {frame: s.frame, first: own.length ? Math.min(...times(own)) : null,
            inView: max(times(own.filter(([, v]) => v))), all: max(times(own)),
            byServer: server.length, serverInView: max(times(server.filter(([, v]) => v))),
            explained: s.explained};
  };
  return s;
})();
"""
"""Injected into the app's pages: times a local interaction in the page itself, from
its input event until the charts' pixels changed (`Sample.instant`)."""


class MeasurementError(Exception):
    """A measurement did not reach its end condition (message says why)."""


def wait_until_shown(page: Page, want: dict, min_runs: int | None) -> None:
    """Wait until the page shows ``want`` (see `CHECK_JS`); raise `MeasurementError`
    with the charts still wrong after `TIMEOUT_MS`."""
    try:
        page.wait_for_function("([want, runs, tol]) => window.__bench.check(want, runs, tol).ok",
                               arg=[want, min_runs, REL_TOLERANCE], timeout=TIMEOUT_MS)
    except PlaywrightError as error:
        try:
            problems = page.evaluate("([want, runs, tol]) => window.__bench.check(want, runs, tol)"
                                     ".problems", [want, min_runs, REL_TOLERANCE])
        except PlaywrightError:
            problems = [str(error).splitlines()[0]]
        raise MeasurementError("; ".join(problems[:4]) or str(error).splitlines()[0]) from None


def wait_until_in_view(page: Page, want: dict) -> int:
    """Wait until every chart of ``want`` in the window shows its numbers (see
    `CHECK_JS` ``checkInView``); return how many charts the window holds. Raise
    `MeasurementError` with the charts still wrong after `TIMEOUT_MS`."""
    try:
        shown = page.wait_for_function(
            "([want, tol]) => { const r = window.__bench.checkInView(want, tol);"
            " return r.ok && r.shown; }", arg=[want, REL_TOLERANCE], timeout=TIMEOUT_MS)
        return int(shown.json_value())
    except PlaywrightError as error:
        try:
            problems = page.evaluate("([want, tol]) => window.__bench.checkInView(want, tol)"
                                     ".problems", [want, REL_TOLERANCE])
        except PlaywrightError:
            problems = [str(error).splitlines()[0]]
        raise MeasurementError("in view: " + ("; ".join(problems[:4])
                                              or str(error).splitlines()[0])) from None


# ---------------------------------------------------------------------------
# One case on one page: the views visited, expected numbers, floor figures
# ---------------------------------------------------------------------------
@dataclass
class Scenario:
    """One case on one page: its URL parameters and config, the measures in the
    order they are taken with the view after each, the traces of the first
    config and of the floor's edit seed, and which optional charts the app
    drew (known after the app's first open)."""

    case: str
    page: str
    params: dict[str, str]
    config: AttentionConfig
    first: Trace
    edited: Trace
    measures: list[str] = field(default_factory=list)
    views: list[View] = field(default_factory=list)
    optional_keys: list[str] = field(default_factory=list)
    optional_present: set[str] | None = None
    app_sizes: dict[str, list[float] | None] = field(default_factory=dict)
    shape_cache: dict[View, dict[str, list[float]]] = field(default_factory=dict)

    @property
    def query(self) -> int:
        """The row the query-pick measure picks."""
        return self.edited.n_tokens + PICKED_QUERY if PICKED_QUERY < 0 else PICKED_QUERY

    @property
    def query_label(self) -> str:
        """That row's label in the query picker."""
        return token_labels(self.edited.tokens)[self.query]

    @property
    def clicked_shape(self) -> tuple[int, int]:
        """(rows, columns) of the chart whose cell is clicked."""
        return figures.step_matrix(self.edited, CLICKED_STEP).shape

    def view_after(self, measure: str, view: View) -> View:
        """The view once ``measure`` is done, starting from ``view``."""
        if measure in (FIRST_OPEN, EDIT):
            return View()
        if measure == CELL_CLICK:  # a click in a token-row chart also picks its row
            row, col = CLICKED_CELL
            return dataclasses.replace(view, query=row, explained=(CLICKED_STEP, row, col,
                                                                   view.head))
        if measure == QUERY_PICK:
            return dataclasses.replace(view, query=self.query)
        return dataclasses.replace(view, head=1)

    def shapes(self, view: View) -> dict[str, list[float]]:
        """The charts' outline signatures in ``view`` (from the app's figure code;
        they do not depend on the seed), built once per view."""
        if view not in self.shape_cache:
            self.shape_cache[view] = {chart.key: shapes_signature(chart.build())
                                      for chart in page_charts(self.page, self.edited, view)
                                      if not chart.optional}
        return self.shape_cache[view]

    @property
    def present(self) -> set[str]:
        """The optional charts the app drew (all of them until that is known)."""
        if self.optional_present is None:
            return set(self.optional_keys)
        return self.optional_present

    def expected(self, trace: Trace, view: View, with_shapes: bool = True) -> dict:
        """What the app's page must show for ``trace`` in ``view``."""
        return expected_checksums([chart for chart in page_charts(self.page, trace, view)
                                   if not chart.optional or chart.key in self.present],
                                  self.shapes(view) if with_shapes else None)

    def cells_near(self, view: View, cell: tuple[int, int]) -> dict[str, tuple[int, int]]:
        """Explanation title -> cell, for ``cell`` and its neighbours on the clicked chart."""
        rows, cols = self.clicked_shape
        near = [(cell[0] + dr, cell[1] + dc) for dr in (0, -1, 1) for dc in (0, -1, 1)]
        return {explain_cell(self.edited, CLICKED_STEP, r, c, view.head).cell: (r, c)
                for r, c in near if 0 <= r < rows and 0 <= c < cols}


def build_scenario(case_name: str, page: str) -> Scenario:
    """Compute the traces and the views the measures visit."""
    params = url_params(CASES[case_name], page)
    config = AttentionConfig(**params)
    scenario = Scenario(case_name, page, params, config, compute_trace(config),
                        compute_trace(config.replace(seed=EDIT_SEED)))
    # The head switch comes before the click, so that the explained cell stays
    # in sight (the app marks it only on the head it was clicked on).
    scenario.measures = [FIRST_OPEN, EDIT] + (
        [HEAD_SWITCH] if page == MULTI_HEAD and config.n_heads > 1 else []) + [
        CELL_CLICK, QUERY_PICK]
    view = View()
    for measure in scenario.measures:
        view = scenario.view_after(measure, view)
        scenario.views.append(view)
    scenario.optional_keys = [chart.key for chart in page_charts(page, scenario.first)
                              if chart.optional]
    return scenario


# ---------------------------------------------------------------------------
# The floor: a static page on loopback drawing the same charts with chart.js
# ---------------------------------------------------------------------------
FLOOR_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>floor</title>
<script src="/plotly.min.js"></script>
<style>
  body {{ margin: 0; font-family: sans-serif; }}
  main {{ box-sizing: content-box; width: {main}px; padding: 0 {padding}px;
         margin-left: {sidebar}px; }}
  .row {{ display: flex; gap: {gap}px; margin-bottom: 16px; }}
  .row > div {{ flex: 1 1 0; min-width: 0; }}
  .bordered {{ border: 1px solid #ddd; padding: {inset}px; margin-bottom: 16px; }}
</style></head>
<body><main>{rows}</main>
<script type="module">
  import {{ decode, draw }} from "/chart.js";
  // Fetch the payloads of measure `index` for `keys` (one file each, as bytes)
  // and draw each as soon as it is here.
  window.floorDraw = (index, keys) => Promise.all(keys.map(async (key) => {{
    const response = await fetch(`/payloads/${{index}}/${{key}}.bin`);
    const {{ header, matrices, missing }} = decode(await response.arrayBuffer());
    if (missing.length) throw new Error(`${{key}}: the page does not hold ${{missing}}`);
    await draw(document.querySelector(`.st-key-${{key}} .explorer-chart`), header, matrices);
  }})).catch((error) => {{ window.__floorError = String(error); }});
  window.floorDraw(0, {keys});
</script></body></html>
"""


def _floor_page(layout: list[PageChart]) -> bytes:
    """The floor's HTML: one ``st-key-<key>`` div per chart, ``columns`` of them
    to a row, the rows of a bordered frame in a bordered div."""
    rows, index = [], 0
    while index < len(layout):
        group = layout[index:index + layout[index].columns]
        row = '<div class="row">' + "".join(
            f'<div class="st-key-{chart.key}"><div class="explorer-chart"></div></div>'
            for chart in group) + "</div>"
        rows.append(f'<div class="bordered">{row}</div>' if group[0].frame == BORDERED else row)
        index += len(group)
    return FLOOR_PAGE.format(
        rows="\n".join(rows), main=MAIN_WIDTH_PX, padding=MAIN_PADDING_PX, sidebar=SIDEBAR_PX,
        gap=COLUMN_GAP_PX, inset=BORDER_INSET_PX - 1,
        keys=json.dumps([chart.key for chart in layout])).encode()


class Floor:
    """A loopback HTTP server for one scenario: ``/`` lays out a div per chart
    the app drew (rows as on the page), ``/payloads/<i>/<key>.bin`` holds the
    payload of each chart whose picture changes between the views of measures
    i-1 and i (every chart for i = 0), leaving out the matrices the page holds.
    ``changed[i]``, ``expected[i]`` and ``payload_bytes[i]``: per measure, the
    charts to draw, what the page must show and the bytes the page fetches."""

    def __init__(self, scenario: Scenario) -> None:
        self.files = {"/plotly.min.js": (PLOTLY_JS.read_bytes(), "text/javascript"),
                      "/chart.js": (CHART_JS.read_bytes(), "text/javascript")}
        self.changed: list[list[str]] = []
        self.expected: list[dict] = []
        self.payload_bytes: list[int] = []
        present = scenario.present
        pictures: dict[str, bytes] = {}  # key -> header-only payload of the chart drawn
        held: dict[str, set[str]] = {}    # key -> hashes of its matrices the page holds
        layout: list[PageChart] = []
        for index, view in enumerate(scenario.views):
            trace = scenario.first if index == 0 else scenario.edited
            shown = [chart for chart in page_charts(scenario.page, trace, view)
                     if not chart.optional or chart.key in present]
            layout = layout or shown
            changed, total, shapes = [], 0, {}
            for page_chart in shown:
                chart = page_chart.build()
                shapes[page_chart.key] = shapes_signature(chart)
                hashes = {matrix_hash(m) for m in chart.matrices}
                picture = encode(chart, hashes)
                if pictures.get(page_chart.key) == picture:
                    continue
                payload = encode(chart, held.get(page_chart.key, set()))
                self.files[f"/payloads/{index}/{page_chart.key}.bin"] = (
                    payload, "application/octet-stream")
                changed.append(page_chart.key)
                total += len(payload)
                pictures[page_chart.key], held[page_chart.key] = picture, hashes
            self.changed.append(changed)
            self.payload_bytes.append(total)
            self.expected.append(expected_checksums(shown, shapes))
        self.keys = [chart.key for chart in layout]
        self.files["/"] = (_floor_page(layout), "text/html")
        files = self.files

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                body, kind = files.get(path, (b"not found", "text/plain"))
                self.send_response(200 if path in files else 404)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------
@dataclass
class Sample:
    """One measurement: seconds (None if it failed), websocket and HTTP bytes
    received, why it failed, and anything odd the app did."""

    seconds: float | None
    bytes: int | None = None
    http_bytes: int | None = None
    error: str = ""
    note: str = ""
    instant: dict | None = None
    """A local interaction's in-page times (`INSTANT_JS` ``result()``), in ms."""
    in_view: float | None = None
    """For a first open or an edit: seconds until every chart in the window held its
    numbers (`IN_VIEW`: "first screen", "edit in view")."""
    charts_in_view: int | None = None


class ByteCounter:
    """Websocket payload bytes (and optionally HTTP response bodies) a page received."""

    def __init__(self, page: Page) -> None:
        self.websocket = 0
        self.requests: list = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))
        page.on("requestfinished", lambda request: self.requests.append(request))

    def _frame(self, payload: str | bytes) -> None:
        self.websocket += len(payload.encode() if isinstance(payload, str) else payload)

    def http_bytes(self) -> int:
        """Response body bytes of the HTTP requests finished so far."""
        return sum(max(0, request.sizes()["responseBodySize"]) for request in self.requests)


def _click_cell(page: Page) -> tuple[Callable[[], None], str]:
    """The action of the cell-click measure: a mouse click at the centre of the
    clicked cell, found from Plotly's axes after scrolling the chart to the
    middle of the window (unmeasured), and a note if that is not where it clicks.

    Chromium delivers a mouse event at whole CSS pixels (the coordinates cut
    down), and chart.js reads the cell under that pixel's centre
    (``cellUnderPointer``; Plotly itself would read the pixel's corner). When
    the cells are about a pixel or smaller, the pixel holding the centre may
    belong to a neighbour: then the click goes to the whole pixel nearest the
    centre that is read as the cell, as a visitor would aim (the note says
    so). Fails if no whole pixel is read as the cell (cells under a pixel:
    no mouse can click it) or if something else covers the point."""
    plot = page.locator(f".st-key-chart-{CLICKED_STEP} .explorer-chart")
    aim = plot.evaluate(CELL_TARGET_JS, list(CLICKED_CELL))
    (x, y), note = aim["centre"], ""
    read = tuple(int(v) for v in aim["centre_reads_as"])
    if read != CLICKED_CELL:
        note = (f"{aim['cell_px'][0]:.2f}×{aim['cell_px'][1]:.2f} px cells: the centre "
                f"({x:.2f}, {y:.2f}) of cell {CLICKED_CELL} arrives as whole pixel "
                f"({int(x)}, {int(y)}), which is read as cell {read}; ")
        if not aim["pixel"]:
            # Cells under a pixel tall: some rows hold no pixel's centre (at 512
            # tokens, 482 px: row 1 spans 246.55-247.49 px, between 246.5 and
            # 247.5). No mouse reaches such a cell, on the page or here.
            raise MeasurementError(note + "no whole pixel is read as the cell: a mouse "
                                   "cannot click it at this size (zoom in to reach it)")
        x, y = aim["pixel"]
        note += f"clicked whole pixel ({x}, {y}) instead"
    hit = plot.evaluate("(gd, [x, y]) => gd.contains(document.elementFromPoint(x, y))", [x, y])
    if not hit:
        raise MeasurementError(f"the point ({x:.1f}, {y:.1f}) of cell {CLICKED_CELL} is "
                               "covered by another element")
    # A learner's pointer rests on the cell (its tooltip shown) before the click:
    # the move is unmeasured. The action is one click there (down and up in one
    # call: two calls would put a round trip from Python between them).
    page.mouse.move(x, y)
    return (lambda: page.mouse.click(x, y)), note


CELL_TARGET_JS = """
(gd, [row, col]) => {
  gd.scrollIntoView({block: 'center'});
  const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const left = box.left + xa._offset, top = box.top + ya._offset;
  const x = left + xa.l2p(col), y = top + ya.l2p(row);
  // The cell chart.js reads at a whole pixel: under the pixel's centre (category
  // axes: cell i spans i ± 0.5).
  const cellAt = (px, py) => [Math.round(ya.p2l(py + 0.5 - top)),
                              Math.round(xa.p2l(px + 0.5 - left))];
  const w = Math.abs(xa.l2p(col + 1) - xa.l2p(col)), h = Math.abs(ya.l2p(row + 1) - ya.l2p(row));
  let pixel = null, best = Infinity;
  for (let px = Math.floor(x - w) - 1; px <= Math.ceil(x + w) + 1; px++)
    for (let py = Math.floor(y - h) - 1; py <= Math.ceil(y + h) + 1; py++) {
      const [r, c] = cellAt(px, py), d = Math.hypot(px + 0.5 - x, py + 0.5 - y);
      if (r === row && c === col && d < best) { best = d; pixel = [px, py]; }
    }
  return {centre: [x, y], centre_reads_as: cellAt(Math.floor(x), Math.floor(y)),
          pixel, cell_px: [w, h]};
}
"""
"""Viewport coordinates of the centre of cell (row, col) of a heatmap's graph
div, the cell chart.js reads at the whole pixel that holds it, the whole pixel
nearest the centre read as the cell (or null) and the cell's size."""


def _pick_query(page: Page, scenario: Scenario) -> Callable[[], None]:
    """The query picker (a native drop-down, first on the page) scrolled into view;
    the action chooses the token, as a visitor's choice in the open list does."""
    select = page.locator(".explorer-picker select").first
    select.scroll_into_view_if_needed()
    return lambda: select.select_option(value=str(scenario.query))


def _app_action(page: Page, server: Server, scenario: Scenario, measure: str,
                run: int) -> tuple[Callable[[], None], str]:
    """Prepare ``measure`` on the app's page (unmeasured); return the timed
    action and a note on how it was taken (if any)."""
    if measure == CELL_CLICK:
        return _click_cell(page)
    return _app_plain_action(page, server, scenario, measure, run), ""


def _app_plain_action(page: Page, server: Server, scenario: Scenario, measure: str,
                      run: int) -> Callable[[], None]:
    if measure == FIRST_OPEN:
        url = page_url(server.url, scenario.page, scenario.params)
        return lambda: page.goto(url, wait_until="commit", timeout=TIMEOUT_MS)
    if measure == EDIT:
        seed = page.locator(".st-key-seed input")
        seed.fill(str(EDIT_SEED + run))
        return lambda: seed.press("Enter")
    if measure == QUERY_PICK:
        return _pick_query(page, scenario)
    return page.get_by_role("radio", name="head 1", exact=True).first.click


def _settle_click(page: Page, scenario: Scenario, trace: Trace, view: View, runs: int) -> None:
    """Wait for the cell click's rerun (numbers unchanged) and the explanation of
    the clicked cell; raise `MeasurementError` naming the cell explained if the
    click explained a neighbour instead."""
    wait_until_shown(page, scenario.expected(trace, view, with_shapes=False), runs + 1)
    labels = scenario.cells_near(view, CLICKED_CELL)
    titles = [page.get_by_text(label, exact=True) for label in labels]
    any_title = titles[0]
    for title in titles[1:]:
        any_title = any_title.or_(title)
    any_title.first.wait_for(timeout=TIMEOUT_MS)
    shown = next(cell for label, cell in labels.items()
                 if page.get_by_text(label, exact=True).count())
    if shown != CLICKED_CELL:
        raise MeasurementError(f"clicking the centre of cell {CLICKED_CELL} of "
                               f"{CLICKED_STEP} explained cell {shown}")


def app_run(browser: Browser, server: Server, scenario: Scenario, run: int) -> dict[str, Sample]:
    """Open the page in a new context and take every measure once, in order; a
    failed measure ends the run (the later ones count as not reached). The
    first run also records which optional charts the app drew and every
    chart's size."""
    samples: dict[str, Sample] = {}
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(RUN_COUNTER_JS + CHECK_JS + INSTANT_JS)
    page = context.new_page()
    counter = ByteCounter(page)
    traces = (compute_trace(scenario.config),
              compute_trace(scenario.config.replace(seed=EDIT_SEED + run)))
    try:
        for index, measure in enumerate(scenario.measures):
            trace = traces[min(index, 1)]
            view, previous = scenario.views[index], scenario.views[index - 1] if index else None
            want = scenario.expected(trace, view)
            note = ""
            try:
                action, note = _app_action(page, server, scenario, measure, run)
                runs = page.evaluate("window.__runs") if index else 0
                local = measure in LOCAL_MEASURES
                timed_in_page = local or measure == EDIT
                if local:
                    time.sleep(THINK_S)
                if timed_in_page:
                    label = (explain_cell(scenario.edited, CLICKED_STEP, *CLICKED_CELL,
                                          previous.head).cell if measure == CELL_CLICK else None)
                    page.evaluate("(label) => window.__instant.arm(label)", label)
                before = counter.websocket
                start = time.perf_counter()
                action()
                in_view = charts_in_view = None
                if measure in IN_VIEW:  # the window first, then the rest of the page
                    charts_in_view = wait_until_in_view(page, want)
                    in_view = time.perf_counter() - start
                if measure == CELL_CLICK:
                    _settle_click(page, scenario, trace, previous, runs)
                if measure in LINKED_VIEW:  # the server confirmed: the link follows
                    name, value = LINKED_VIEW[measure](scenario)
                    page.wait_for_function(
                        "([name, value]) => new URL(location.href).searchParams.get(name)"
                        " === value", arg=[name, value], timeout=TIMEOUT_MS)
                wait_until_shown(page, want, runs + 1)
                seconds = time.perf_counter() - start
                instant = page.evaluate("window.__instant.result()") if timed_in_page else None
            except (MeasurementError, PlaywrightError) as error:
                samples[measure] = Sample(None, error=f"app: {str(error).splitlines()[0]}",
                                          note=note)
                break
            samples[measure] = Sample(seconds, counter.websocket - before,
                                      counter.http_bytes() if measure == FIRST_OPEN else None,
                                      note=note, instant=instant, in_view=in_view,
                                      charts_in_view=charts_in_view)
            if index == 0 and scenario.optional_present is None:
                scenario.optional_present = set(page.evaluate(
                    "keys => keys.filter(k => document.querySelector('.st-key-' + k))",
                    scenario.optional_keys))
                scenario.app_sizes = page.evaluate("keys => window.__bench.sizes(keys)",
                                                   list(want))
    finally:
        context.close()
    return samples


def floor_run(browser: Browser, floor: Floor, scenario: Scenario) -> tuple[dict[str, Sample],
                                                                           dict]:
    """The floor's first open in a new context, then each later view's redraw.
    Also returns the charts' sizes after the first open."""
    samples: dict[str, Sample] = {}
    sizes: dict = {}
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(CHECK_JS + INSTANT_JS)
    page = context.new_page()
    try:
        for index, measure in enumerate(scenario.measures):
            try:
                if measure in LOCAL_MEASURES:
                    time.sleep(THINK_S)
                instant = _floor_frame(page) if measure in LOCAL_MEASURES else None
                start = time.perf_counter()
                if index == 0:
                    page.goto(floor.url, wait_until="commit", timeout=TIMEOUT_MS)
                else:
                    page.evaluate("([i, keys]) => { window.floorDraw(i, keys); }",
                                  [index, floor.changed[index]])
                wait_until_shown(page, floor.expected[index], None)
                samples[measure] = Sample(time.perf_counter() - start,
                                          bytes=floor.payload_bytes[index], instant=instant)
            except (MeasurementError, PlaywrightError) as error:
                samples[measure] = Sample(None, error=f"floor: {str(error).splitlines()[0]}")
                break
            if index == 0:
                sizes = page.evaluate("keys => window.__bench.sizes(keys)", floor.keys)
    finally:
        context.close()
    return samples, sizes


def _floor_frame(page: Page) -> dict:
    """The floor of a local interaction: on the floor's page (charts drawn, no
    handler of ours on the input), a click's time until the next frame."""
    page.evaluate("window.__instant.arm()")
    page.mouse.click(2, 2)
    page.wait_for_function("window.__instant.frame !== null", timeout=TIMEOUT_MS)
    return page.evaluate("window.__instant.result()")


BARE_APP = "benchmarks/bare_app.py"
BARE_SHOWN_JS = """(text) => {
  const app = document.querySelector("[data-testid='stApp']");
  return app && app.dataset.testScriptState === 'notRunning'
    && [...document.querySelectorAll('p')].some((p) => p.textContent === text);
}"""
"""The bare page's script has finished and shows the paragraph ``text``."""


def bare_run(browser: Browser, bare: Server, run: int) -> dict[str, Sample]:
    """The bare-Streamlit floors, in a new context: the first open of `BARE_APP`
    until its script has finished and its last line is on the page; then, after
    `THINK_S`, an edit of its number (a value new to the server, typed, then Enter
    timed) until the rerun has finished and the page shows the new value."""
    samples: dict[str, Sample] = {}
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        for measure in (FIRST_OPEN, EDIT):
            value = 1 if measure == FIRST_OPEN else EDIT_SEED + run
            if measure == EDIT:
                time.sleep(THINK_S)
                number = page.locator(".st-key-n input")
                number.fill(str(value))
            start = time.perf_counter()
            if measure == FIRST_OPEN:
                page.goto(bare.url, wait_until="commit", timeout=TIMEOUT_MS)
            else:
                number.press("Enter")
            page.wait_for_function(BARE_SHOWN_JS, arg=f"n = {value}", timeout=TIMEOUT_MS)
            samples[measure] = Sample(time.perf_counter() - start)
    except PlaywrightError as error:
        samples[measure] = Sample(None, error=f"bare: {str(error).splitlines()[0]}")
    finally:
        context.close()
    return samples


def size_differences(app: dict[str, list[float] | None], floor: dict[str, list[float] | None],
                     tolerance_px: float = 1.0) -> list[str]:
    """The charts whose width or height differs between the app and the floor
    by more than ``tolerance_px`` (the floor should lay them out alike)."""
    out = []
    for key in sorted(set(app) | set(floor)):
        a, f = app.get(key), floor.get(key)
        if a is None and f is None:
            continue
        if a is None or f is None or any(abs(x - y) > tolerance_px for x, y in zip(a, f)):
            out.append(f"{key}: app {a} vs floor {f} (width, height px)")
    return out


def summarise(scenario: Scenario, app: list[dict[str, Sample]],
              floor: list[dict[str, Sample]], notes: list[str] = (),
              bare: list[dict[str, Sample]] = ()) -> list[dict]:
    """One result row per measure: every sample, medians, spread and ratio.
    ``notes`` go on the first row (the first open). The first open's and the
    edit's rows also hold the times until the charts in the window were right
    (``in_view_s``: "first screen", "edit in view"), the bare-Streamlit floor's
    samples of the same measure (``bare_s``: its first open, its rerun after an
    edit) and the app's ratios to it (``ratio_bare``: every chart drawn;
    ``ratio_in_view_bare``: the window). The edit's row also holds the page's own
    time from the key press until the window's charts painted the new numbers
    (``in_view_page_ms``, `INSTANT_JS` ``serverInView``): the bench's "edit in
    view" adds Playwright's key press and its polling, which can wait behind the
    next off-screen chart's drawing."""
    rows = []
    for measure in scenario.measures:
        app_s = [run[measure].seconds for run in app if measure in run]
        floor_s = [run[measure].seconds for run in floor if measure in run]
        ok_app = [s for s in app_s if s is not None]
        ok_floor = [s for s in floor_s if s is not None]
        received = [run[measure].bytes for run in app
                    if measure in run and run[measure].bytes is not None]
        http = [run[measure].http_bytes for run in app
                if measure in run and run[measure].http_bytes is not None]
        fetched = [run[measure].bytes for run in floor
                   if measure in run and run[measure].bytes is not None]
        row = {"case": scenario.case, "page": scenario.page, "measure": measure,
               "app_s": app_s, "floor_s": floor_s, "app_ws_bytes": received,
               "app_median_s": statistics.median(ok_app) if ok_app else None,
               "floor_median_s": statistics.median(ok_floor) if ok_floor else None,
               "ws_bytes_median": int(statistics.median(received)) if received else None,
               "http_bytes_median": int(statistics.median(http)) if http else None,
               "floor_payload_bytes": fetched[0] if fetched else None,
               "failures": [run[measure].error for run in app + floor
                            if measure in run and run[measure].error],
               "not_reached": (len(app) - len(app_s)) + (len(floor) - len(floor_s)),
               "notes": sorted({run[measure].note for run in app
                                if measure in run and run[measure].note})
               + (list(notes) if measure == scenario.measures[0] else [])}
        row["ratio"] = (row["app_median_s"] / row["floor_median_s"]
                        if ok_app and ok_floor and row["floor_median_s"] > 0 else None)
        if measure in IN_VIEW:
            row["in_view_s"] = [run[measure].in_view for run in app if measure in run]
            row["in_view_median_s"] = _median(row["in_view_s"])
            row["charts_in_view"] = sorted({run[measure].charts_in_view for run in app
                                            if measure in run and run[measure].charts_in_view})
        if measure in IN_VIEW and bare:
            row["bare_s"] = [run[measure].seconds for run in bare if measure in run]
            row["bare_median_s"] = _median(row["bare_s"])
            row["ratio_bare"] = (row["app_median_s"] / row["bare_median_s"]
                                 if ok_app and row["bare_median_s"] else None)
            row["ratio_in_view_bare"] = (
                row["in_view_median_s"] / row["bare_median_s"]
                if row["in_view_median_s"] is not None and row["bare_median_s"] else None)
            row["failures"] += [run[measure].error for run in bare
                                if measure in run and run[measure].error]
        instants = [run[measure].instant for run in app
                    if measure in run and run[measure].instant]
        if instants and measure == EDIT:  # the window's new numbers painted, in the page
            row["in_view_page_ms"] = _median([i["serverInView"] for i in instants])
        elif instants:
            row["instant_ms"] = {key: _median([i[key] for i in instants])
                                 for key in ("frame", "first", "inView", "all", "explained")}
            row["instant_ms_samples"] = instants
            row["floor_frame_ms"] = _median([run[measure].instant["frame"] for run in floor
                                             if measure in run and run[measure].instant])
        rows.append(row)
    return rows


def _median(values: list[float | None]) -> float | None:
    ok = [v for v in values if v is not None]
    return statistics.median(ok) if ok else None


def _spread(samples: list[float | None]) -> str:
    ok = [s for s in samples if s is not None]
    return f"{min(ok):.2f}-{max(ok):.2f}" if ok else "-"


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def print_headline(rows: list[dict]) -> None:
    """What the learner waits for (medians, s): the first screen (the charts in the
    first window right) and every chart drawn after opening a page, beside the
    bare Streamlit page's first open; the charts in the window right and every
    chart after an edit, beside the bare page's rerun after an edit; ratio = the
    window's time / the bare page's; "in page": the edit's window painted, in ms,
    timed by the page itself from the key press."""
    by_case: dict[tuple[str, str], dict[str, dict]] = {}
    for row in rows:
        by_case.setdefault((row["case"], row["page"]), {})[row["measure"]] = row
    header = (f"{'case':9s} {'page':14s} | {'first screen':>12s} {'all charts':>10s} "
              f"{'bare open':>9s} {'ratio':>5s} | {'edit in view':>12s} {'all charts':>10s} "
              f"{'bare rerun':>10s} {'ratio':>5s} {'in page':>7s} | {'charts in window':>16s}")
    print(header)
    print("-" * len(header))
    for (case, page), measures in by_case.items():
        cells = []
        for measure in (FIRST_OPEN, EDIT):
            row = measures.get(measure, {})
            cells.append(f"{_fmt(row.get('in_view_median_s')):>12s} "
                         f"{_fmt(row.get('app_median_s')):>10s} "
                         f"{_fmt(row.get('bare_median_s')):>{9 if measure == FIRST_OPEN else 10}s} "
                         f"{_fmt(row.get('ratio_in_view_bare'), '{:.1f}'):>5s}"
                         + ("" if measure == FIRST_OPEN else
                            f" {_fmt(row.get('in_view_page_ms'), '{:.0f}'):>7s}"))
        in_window = sorted({n for m in (FIRST_OPEN, EDIT)
                            for n in measures.get(m, {}).get("charts_in_view", [])})
        print(f"{case:9s} {page:14s} | {cells[0]} | {cells[1]} | "
              f"{'/'.join(map(str, in_window)) or '-':>16s}")


def print_table(rows: list[dict]) -> None:
    """The results as a table: seconds, ratio app/floor, the bytes the app's page
    received (websocket per rerun; HTTP on first open) and the chart payload
    bytes the floor fetched."""
    header = (f"{'case':9s} {'page':14s} {'measure':11s} {'app med':>8s} {'app min-max':>12s} "
              f"{'floor med':>9s} {'floor min-max':>13s} {'ratio':>6s} {'ws bytes':>12s} "
              f"{'http bytes':>11s} {'floor bytes':>12s}")
    print(header)
    print("-" * len(header))
    for row in rows:
        problems = row["notes"] + [f"FAILED: {f[:300]}" for f in row["failures"]]
        if row["not_reached"]:
            problems.append(f"not reached in {row['not_reached']} runs")
        print(f"{row['case']:9s} {row['page']:14s} {row['measure']:11s} "
              f"{_fmt(row['app_median_s']):>8s} {_spread(row['app_s']):>12s} "
              f"{_fmt(row['floor_median_s']):>9s} {_spread(row['floor_s']):>13s} "
              f"{_fmt(row['ratio'], '{:.1f}'):>6s} {_fmt(row['ws_bytes_median'], '{:,}'):>12s} "
              f"{_fmt(row['http_bytes_median'], '{:,}'):>11s} "
              f"{_fmt(row['floor_payload_bytes'], '{:,}'):>12s}"
              + "".join(f"\n{'':37s}^ {problem}" for problem in problems))
        if row.get("bare_median_s") is not None:
            print(f"{'':37s}^ bare Streamlit {_fmt(row['bare_median_s'])} s "
                  f"({_spread(row['bare_s'])}): ratio {_fmt(row['ratio_bare'], '{:.1f}')}")
    instant = [row for row in rows if row.get("instant_ms")]
    if not instant:
        return
    print()
    print("In the page, from the input event (ms, medians): the next frame on the floor's "
          "page (a click with no handler: no page shows a change sooner) and on the app's "
          "(after its handlers), the first chart painted, the last chart in the window, "
          "the last of the page, each drawn by the page itself; ratio = in the window / "
          "floor; charts the server's run repainted (most); a cell click's explanation "
          "in the page (from the server)")
    header = (f"{'case':9s} {'page':14s} {'measure':11s} {'floor':>6s} {'frame':>6s} "
              f"{'first':>6s} {'window':>7s} {'all':>6s} {'ratio':>6s} {'repaints':>9s} "
              f"{'explained':>10s}")
    print(header)
    print("-" * len(header))
    for row in instant:
        ms, floor_ms = row["instant_ms"], row["floor_frame_ms"]
        ratio = (ms["inView"] / floor_ms if ms["inView"] is not None and floor_ms else None)
        repaints = [i["byServer"] for i in row["instant_ms_samples"]]
        print(f"{row['case']:9s} {row['page']:14s} {row['measure']:11s} "
              f"{_fmt(floor_ms, '{:.0f}'):>6s} "
              f"{_fmt(ms['frame'], '{:.0f}'):>6s} {_fmt(ms['first'], '{:.0f}'):>6s} "
              f"{_fmt(ms['inView'], '{:.0f}'):>7s} {_fmt(ms['all'], '{:.0f}'):>6s} "
              f"{_fmt(ratio, '{:.1f}'):>6s} {max(repaints):>9d} "
              f"{_fmt(ms.get('explained'), '{:.0f}'):>10s}")


# ---------------------------------------------------------------------------
# Memory line
# ---------------------------------------------------------------------------
MEMORY_WAIT_S = (30, 90)


SETTLED_OR_MESSAGE_JS = """
(minRuns) => {
  const app = document.querySelector("[data-testid='stApp']");
  const state = app && app.getAttribute('data-test-script-state');
  if (!app || window.__runs < minRuns || state !== 'notRunning') return false;
  if (document.querySelector("[data-testid='stException'], [data-testid='stAlertContentError']"))
    return true;
  const charts = [...document.querySelectorAll('.explorer-chart')];
  return charts.length > 0 && charts.every(gd => gd._fullData && gd.querySelector('.main-svg'));
}
"""
"""A visit has ended: the script finished and every chart is drawn, or the page shows an error."""


def visit(page: Page, url: str) -> dict:
    """Open ``url`` and wait until it settles; return the time and any message shown."""
    start = time.perf_counter()
    try:
        page.goto(url, wait_until="commit", timeout=TIMEOUT_MS)
        page.wait_for_function(SETTLED_OR_MESSAGE_JS, arg=1, timeout=TIMEOUT_MS)
    except PlaywrightError as error:
        return {"url": url, "seconds": None,
                "message": f"did not settle: {str(error).splitlines()[0]}"}
    messages = page.locator("[data-testid='stException'], [data-testid='stAlertContentError']")
    shown = [text.strip()[:300] for text in messages.all_inner_texts()]
    return {"url": url, "seconds": round(time.perf_counter() - start, 2),
            "message": " | ".join(shown)}


def memory_line(browser_launcher: Callable[[], Browser]) -> dict:
    """The server's resident memory through a sequence of visits (see the module doc)."""
    server = Server(env=SERVER_ENV)
    readings: dict[str, float] = {}
    visits: list[dict] = []
    try:
        readings["fresh"] = rss_mib(server.pid)
        browser = browser_launcher()
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(RUN_COUNTER_JS)
        page = context.new_page()
        plan = [("after one default visit", [{}]),
                ("after 4 seeds at d_in=1024", [{"d_in": "1024", "seed": str(s)}
                                                for s in range(1, 5)]),
                ("after 8 configs at 512 tokens x d=1024",
                 [{**url_params(CASES["512x1024"], SELF_ATTENTION), "seed": str(s)}
                  for s in range(1, 9)])]
        for label, params_list in plan:
            for params in params_list:
                visits.append({"step": label, **visit(page, page_url(server.url, SELF_ATTENTION,
                                                                     params))})
                print(f"  visit {len(visits)}: {visits[-1]['seconds']} s"
                      + (f", message: {visits[-1]['message']}" if visits[-1]["message"] else ""),
                      flush=True)
            readings[label] = rss_mib(server.pid)
        browser.close()
        closed = time.monotonic()
        for seconds in MEMORY_WAIT_S:
            time.sleep(max(0.0, closed + seconds - time.monotonic()))
            readings[f"{seconds} s after the browser closed"] = rss_mib(server.pid)
    finally:
        log = server.stop()
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "rss_mib": {k: round(v, 1) for k, v in readings.items()}, "visits": visits,
            "server_logged_traceback": "Traceback" in log}


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.browser",
        description="Time the app's pages in headless Chromium against a floor (the "
                    "app's chart.js drawing the same charts on a static page); then the "
                    "server's memory line.")
    parser.add_argument("--runs", type=int, default=5,
                        help="repeats per (case, page), app and floor interleaved (default 5)")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, from {', '.join(CASES)} (default: all). "
                             "NxD = N tokens, d_in = d_k = d_v = D")
    parser.add_argument("--pages", default=",".join(PAGE_PATHS),
                        help=f"comma-separated, from {', '.join(PAGE_PATHS)} (default: both)")
    parser.add_argument("--memory", action="store_true", help="only the memory line")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the memory line that follows the timings")
    args = parser.parse_args()
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    args.pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    for name, known in (("case", CASES), ("page", PAGE_PATHS)):
        unknown = [v for v in getattr(args, name + "s") if v not in known]
        if unknown:
            parser.error(f"unknown {name} {unknown}; choose from {list(known)}")
    return args


def write_results(updates: dict) -> None:
    """Merge ``updates`` into latest.json, keeping the keys other benchmarks wrote."""
    RESULTS.parent.mkdir(exist_ok=True)
    try:
        results = json.loads(RESULTS.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        results = {}
    results.update(updates)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(f"written to {RESULTS} ({', '.join(updates)})")


def main() -> None:
    """Run the timings (unless --memory) and the memory line (unless --no-memory)."""
    args = _parse_args()
    with sync_playwright() as playwright:
        def launch() -> Browser:
            return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        updates = {}
        if not args.memory:
            updates["browser"] = timings(launch(), args)
        if not args.no_memory:
            print("memory line (streamlit server VmRSS):")
            updates["memory"] = memory_line(launch)
            for label, mib in updates["memory"]["rss_mib"].items():
                print(f"  {label:40s} {mib:8.0f} MiB")
    write_results(updates)


def timings(browser: Browser, args: argparse.Namespace) -> dict:
    """Every (case, page), app and floor interleaved; prints and returns the table.
    The floor is built after the app's first run, which tells which optional
    charts the app draws."""
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "chromium": browser.version, "streamlit": importlib.metadata.version("streamlit"),
            "floor_plotly_js": f"{app_component.PLOTLY_JS_INFO['version']} ({PLOTLY_JS.name})",
            "runs": args.runs, "cases": args.cases, "pages": args.pages,
            "timeout_s": TIMEOUT_MS / 1000, "cpus": os.cpu_count(),
            "viewport": VIEWPORT, "main_width_px": MAIN_WIDTH_PX}
    rows: list[dict] = []
    server = Server(env=SERVER_ENV)
    bare = Server(env=SERVER_ENV, script=BARE_APP)
    try:
        for case in args.cases:
            for page in args.pages:
                print(f"{case} on {page}: computing the traces...", flush=True)
                scenario = build_scenario(case, page)
                floor: Floor | None = None
                app_runs, floor_runs, bare_runs, notes = [], [], [], []
                try:
                    for run in range(args.runs):
                        app_runs.append(app_run(browser, server, scenario, run))
                        if floor is None:
                            floor = Floor(scenario)
                            drawn = sorted(scenario.present)
                            if drawn:
                                notes.append(f"the app drew the optional charts {drawn}")
                        samples, sizes = floor_run(browser, floor, scenario)
                        floor_runs.append(samples)
                        bare_runs.append(bare_run(browser, bare, run))
                        if run == 0:
                            differences = size_differences(scenario.app_sizes, sizes)
                            notes += [f"size differs: {d}" for d in differences]
                            print(f"  chart sizes (app vs floor): {len(sizes)} charts, "
                                  f"{len(differences)} differ by more than 1 px", flush=True)
                        print(f"  run {run + 1}: app " + ", ".join(
                            f"{m} {_fmt(s.seconds)}" for m, s in app_runs[-1].items())
                            + " | floor " + ", ".join(
                            f"{m} {_fmt(s.seconds)}" for m, s in floor_runs[-1].items())
                            + " | bare Streamlit " + ", ".join(
                            f"{m} {_fmt(s.seconds)}" for m, s in bare_runs[-1].items())
                            + " | in view " + ", ".join(
                            f"{IN_VIEW[m]} {_fmt(s.in_view)}" for m, s in app_runs[-1].items()
                            if m in IN_VIEW), flush=True)
                finally:
                    if floor is not None:
                        floor.close()
                rows += summarise(scenario, app_runs, floor_runs, notes, bare_runs)
    finally:
        bare.stop()
        log = server.stop()
        browser.close()
    print()
    print_headline(rows)
    print()
    print_table(rows)
    return {"meta": {**meta, "server_logged_traceback": "Traceback" in log}, "results": rows}


if __name__ == "__main__":
    main()
