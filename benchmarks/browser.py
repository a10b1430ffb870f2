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
- **head switch** (multi-head page): click "head 1" until the per-head charts
  hold head 1's numbers.
- **cell click**: click cell (1, 0) of the attention-scores heatmap until the
  explanation of the cell appears and every chart shows the new outlines (the
  marked cell; a click also makes its row the highlighted query). Above 64×64
  cells the app offers a picker instead of clicks: the row and column are
  filled in first, untimed, and its "Explain" button is timed.
- **query pick**: choose the last token in "Highlight a query token" until every
  chart outlines its row.

"Holds the numbers" is checked, not assumed. In the page each chart's Plotly
graph div, found in the ``st-key-<key>`` container Streamlit gives a keyed
element, is reduced to a `checksum` of its z values (count, sum and a
position-weighted sum of the finite values, from plain, typed or ``bdata``
arrays), which must equal the checksum of the same numbers taken from
`explorer.compute_trace` for the page's configuration (`expected_checksums`,
`page_charts`). The outlines (highlighted row, marked cell, heads) are compared
by their shapes' count and coordinates with the figures the app's own figure
code builds. A chart that is missing, or never holds the expected numbers within
`TIMEOUT_MS`, makes a failed measurement, printed and stored, not a hang.

**The floor.** Interleaved with the app's runs (app, floor, app, floor, ...),
the same pictures are drawn by the most direct route: a static page served
from loopback loads the plotly.min.js of the installed plotly package and calls
``Plotly.react`` for each figure; the figures are built with the app's figure
code (`page_charts`) and serialised as ``fig.to_json()`` does. The floor's
first open uses a new browser context too; its edit and interactions fetch and
redraw only the charts that change, and send only the layout of a chart whose
data is unchanged (a new outline). The floor is what any web page pays to show
these pictures, so **ratio = app median / floor median** is the price of
everything else: Streamlit rerunning the whole script, building and
serialising figures on the server, the websocket, React. A ratio near 1 means
the app is as fast as its pictures allow; a large one is overhead worth
removing. The floor's edit draws precomputed figures, so the app's edit also
pays the server's trace computation (`benchmarks.run` times that alone).

Bytes (app only): the websocket payload bytes (after decompression, as
Playwright reports them) the page received from the action until it settled;
for the first open also the HTTP response bodies (Streamlit's own scripts).
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
from pathlib import Path

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io as pio
import torch
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from explorer import AttentionConfig, compute_trace, figures
from explorer import attention as att
from explorer.explain import explain_cell
from explorer.steps import STEPS, layout_rows, split_after, stages, visible_steps
from explorer.tokenizer import token_labels
from explorer.trace import Trace
from tests.server import Server

RESULTS = Path(__file__).parent / "results" / "latest.json"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
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
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
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


@dataclass(frozen=True)
class Chart:
    """One chart of a page: ``key`` names its ``st-key-<key>`` container,
    ``share`` is how many charts its row holds, ``numbers()`` the matrices it
    shows (one per Plotly trace with z values) straight from the trace, and
    ``figure()`` builds it with the app's figure code."""

    key: str
    share: int
    numbers: Callable[[], list[np.ndarray]]
    figure: Callable[[], go.Figure]


def _step_numbers(trace: Trace, name: str, head: int) -> list[np.ndarray]:
    tensor = trace[name]
    if tensor.dim() == 3:  # (n_heads, n, m): the page shows one head
        tensor = tensor[head]
    return [tensor.to(torch.float64).numpy()]


def _step_chart(trace: Trace, name: str, view: View, head: int, share: int) -> Chart:
    """`explorer.ui.render.step_chart`: one step's heatmap."""
    return Chart(f"chart-{name}", share, lambda: _step_numbers(trace, name, head),
                 lambda: figures.heatmap(trace, name, head=head, highlight_row=view.query,
                                         share=share, marked_cell=view.marked(name)))


def _step_charts(trace: Trace, names: list[str], view: View, head: int = 0) -> list[Chart]:
    """`explorer.ui.render.step_charts`: the steps in layout rows."""
    return [_step_chart(trace, name, view, head, len(row))
            for row in layout_rows(names) for name in row]


def page_charts(page: str, trace: Trace, view: View = View()) -> list[Chart]:
    """The charts ``page`` draws for ``trace`` in ``view``, in page order.

    This mirrors pages/2_Self_attention.py and pages/3_Causal_and_multi_head.py
    (with explorer/ui/multihead.py and lessons.py); update it when they change
    what they draw.
    """
    steps = visible_steps(trace)
    if page == SELF_ATTENTION:
        return _step_charts(trace, steps, view) + _overflow_demo_charts(trace)
    c = trace.config
    before, per_head, after = stages(steps)
    charts = _step_charts(trace, before, view)
    if c.n_heads > 1:
        charts += [Chart(f"split-{name}", 3,
                         lambda name=name: [figures.combine_heads_np(trace[name])],
                         lambda name=name: figures.head_split(trace, name))
                   for name in ("queries", "keys", "values")]
    weights, dropout = split_after(per_head, "attn_weights")
    charts += _step_charts(trace, weights, view, head=view.head)
    if c.causal and c.normalization == "softmax":
        charts.append(Chart("causal-second-route", 1,
                            lambda: [_second_route(trace, view.head)],
                            lambda: _second_route_figure(trace, view.head)))
    charts += _step_charts(trace, dropout, view, head=view.head)
    if c.n_heads > 1:
        charts.append(Chart("heads-grid", 1,
                            lambda: list(trace["attn_weights"].to(torch.float64).numpy()),
                            lambda: figures.heads_grid(trace)))
    return charts + _step_charts(trace, after, view)


def _overflow_demo_charts(trace: Trace) -> list[Chart]:
    """`explorer.ui.lessons.softmax_overflow` at its default factor (X × 1): the
    naive and the stable softmax side by side, drawn in a collapsed expander."""
    base = trace.config.replace(embedding="given", embeddings=trace["embeddings"].tolist())
    charts = []
    for name, normalization in (("naive softmax", "naive_softmax"), ("softmax", "softmax")):
        shown = compute_trace(base.replace(normalization=normalization))
        charts.append(Chart(f"overflow-demo-{name.replace(' ', '-')}", 2,
                            lambda shown=shown: _step_numbers(shown, "attn_weights", 0),
                            lambda shown=shown, name=name: figures.heatmap(
                                shown, "attn_weights", share=2, title=f"{name}, X × 1")))
    return charts


def _second_route(trace: Trace, head: int) -> np.ndarray:
    """The weights of the book's second causal route (softmax, zero the future,
    renormalise), as the multi-head page computes them."""
    rerouted = att.mask_after_softmax(trace["scaled_scores"], trace["causal_mask"])
    return (rerouted[head] if rerouted.dim() == 3 else rerouted).to(torch.float64).numpy()


def _second_route_figure(trace: Trace, head: int) -> go.Figure:
    """The multi-head page's "same weights by the other route" chart."""
    values = _second_route(trace, head)
    labels = token_labels(trace.tokens)
    return figures.matrix_heatmap(
        values, labels, labels, STEPS["attn_weights"],
        f"softmax(ω̃), future zeroed, rows renormalised ({len(labels)}×{len(labels)})")


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


def shapes_signature(fig: go.Figure) -> list[float]:
    """[number of layout shapes, sum of their numeric x0, x1, y0, y1]."""
    shapes = fig.layout.shapes or ()
    coordinates = [getattr(s, a) for s in shapes for a in ("x0", "x1", "y0", "y1")]
    return [len(shapes), float(sum(v for v in coordinates if isinstance(v, (int, float))))]


def figure_json(fig: go.Figure) -> tuple[str, str]:
    """A figure's data and layout as Plotly JSON (arrays as typed ``bdata``, as
    ``fig.to_json()`` writes them), kept apart so that the floor can send a
    layout alone."""
    spec = fig.to_dict()
    return pio.json.to_json_plotly(spec["data"]), pio.json.to_json_plotly(spec["layout"])


def expected_checksums(charts: list[Chart],
                       shapes: dict[str, list[float]] | None = None) -> dict:
    """What the page must show: chart key (e.g. ``"chart-attn_weights"``) -> the
    `checksum` of its numbers from the trace (and its shapes signature)."""
    return {chart.key: {**checksum(chart.numbers()),
                        **({"shapes": shapes[chart.key]} if shapes else {})}
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
  // {ok, problems}: every expected chart drawn with its numbers; for the app also
  // every Plotly chart on the page drawn and Streamlit's script finished after
  // at least `minRuns` runs.
  function check(expected, minRuns, relTol) {
    const problems = [];
    if (minRuns !== null) {
      const app = document.querySelector("[data-testid='stApp']");
      const state = app && app.getAttribute('data-test-script-state');
      if ((window.__runs || 0) < minRuns || state !== 'notRunning')
        return {ok: false, problems: ['script ' + state + ', runs ' + (window.__runs || 0)]};
      for (const el of document.querySelectorAll("[data-testid='stPlotlyChart']"))
        if (!drawn(el.querySelector('.js-plotly-plot'))) problems.push('a chart is not drawn yet');
    }
    for (const [key, want] of Object.entries(expected)) {
      const gd = document.querySelector('.st-key-' + key + ' .js-plotly-plot');
      const got = drawn(gd);
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
  return {check};
})();
"""
"""Injected into every page (app and floor): `window.__bench.check(expected, minRuns, tol)`."""

RUN_COUNTER_JS = """
window.__runs = 0;
new MutationObserver(records => {
  for (const r of records)
    if (r.target.getAttribute('data-test-script-state') === 'running') window.__runs++;
}).observe(document, {attributes: true, subtree: true,
              attributeFilter: ['data-test-script-state']});
"""
"""Counts Streamlit script runs, so that a wait ends after the run an action started."""


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


# ---------------------------------------------------------------------------
# One case on one page: the views visited, expected numbers, floor figures
# ---------------------------------------------------------------------------
@dataclass
class Scenario:
    """One case on one page: its URL parameters and config, the measures in the
    order they are taken, the traces of the first config and of the floor's edit
    seed, and the floor's figures (JSON) and expected numbers per measure."""

    case: str
    page: str
    params: dict[str, str]
    config: AttentionConfig
    first: Trace
    edited: Trace
    measures: list[str] = field(default_factory=list)
    floor_figures: list[dict[str, tuple[str, str]]] = field(default_factory=list)
    floor_expected: list[dict] = field(default_factory=list)
    layout: list[tuple[str, int]] = field(default_factory=list)
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

    @property
    def clickable(self) -> bool:
        """Whether the app explains a click on that chart (else it offers a picker)."""
        rows, cols = self.clicked_shape
        return rows * cols <= figures.MAX_CLICK_CELLS

    def view_after(self, measure: str, view: View, cell: tuple[int, int] = CLICKED_CELL) -> View:
        """The view once ``measure`` is done, starting from ``view``."""
        if measure in (FIRST_OPEN, EDIT):
            return View()
        if measure == CELL_CLICK:  # a click (not the picker) in a token-row chart picks its row
            return dataclasses.replace(view, query=cell[0] if self.clickable else view.query,
                                       explained=(CLICKED_STEP, *cell, view.head))
        if measure == QUERY_PICK:
            return dataclasses.replace(view, query=self.query)
        return dataclasses.replace(view, head=1)

    def shapes(self, view: View) -> dict[str, list[float]]:
        """The charts' outline signatures in ``view`` (from the app's figure code;
        they do not depend on the seed), built once per view."""
        if view not in self.shape_cache:
            self.shape_cache[view] = {chart.key: shapes_signature(chart.figure())
                                      for chart in page_charts(self.page, self.edited, view)}
        return self.shape_cache[view]

    def expected(self, trace: Trace, view: View, with_shapes: bool = True) -> dict:
        """What the page must show for ``trace`` in ``view``."""
        return expected_checksums(page_charts(self.page, trace, view),
                                  self.shapes(view) if with_shapes else None)

    def cells_near(self, view: View, cell: tuple[int, int]) -> dict[str, tuple[int, int]]:
        """Explanation title -> cell, for ``cell`` and its neighbours on the clicked chart."""
        rows, cols = self.clicked_shape
        near = [(cell[0] + dr, cell[1] + dc) for dr in (0, -1, 1) for dc in (0, -1, 1)]
        return {explain_cell(self.edited, CLICKED_STEP, r, c, view.head).cell: (r, c)
                for r, c in near if 0 <= r < rows and 0 <= c < cols}


def build_scenario(case_name: str, page: str) -> Scenario:
    """Compute the traces, the floor's figures (as JSON) and its expected numbers."""
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
    for index, measure in enumerate(scenario.measures):
        view = scenario.view_after(measure, view)
        charts = page_charts(page, scenario.first if index == 0 else scenario.edited, view)
        built = {chart.key: chart.figure() for chart in charts}
        scenario.floor_figures.append({key: figure_json(fig) for key, fig in built.items()})
        scenario.shape_cache[view] = {key: shapes_signature(fig) for key, fig in built.items()}
        scenario.floor_expected.append(expected_checksums(charts, scenario.shape_cache[view]))
        if index == 0:
            scenario.layout = [(chart.key, chart.share) for chart in charts]
    return scenario


# ---------------------------------------------------------------------------
# The floor: a static page on loopback drawing the same figures with Plotly
# ---------------------------------------------------------------------------
FLOOR_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>floor</title>
<script src="/plotly.min.js"></script>
<style>
  body {{ margin: 0; font-family: sans-serif; }}
  main {{ width: 1000px; padding: 0 16px; }}
  .row {{ display: flex; gap: 16px; }}
  .row > div {{ flex: 1 1 0; min-width: 0; }}
</style></head>
<body><main>{rows}</main>
<script>
  // Fetch {{key: {{data, layout}}}} and draw each chart; without data, the
  // chart keeps its data and takes the new layout.
  window.floorDraw = async (path) => {{
    const figures = await (await fetch(path)).json();
    for (const [key, fig] of Object.entries(figures)) {{
      const div = document.getElementById(key);
      await Plotly.react(div, fig.data || div.data, fig.layout, {{displaylogo: false}});
    }}
  }};
  window.floorDraw("/figures/0.json");
</script></body></html>
"""


def _floor_page(layout: list[tuple[str, int]]) -> bytes:
    """The floor's HTML: one div per chart key, ``share`` of them to a row."""
    rows, index = [], 0
    while index < len(layout):
        group = layout[index:index + layout[index][1]]
        rows.append('<div class="row">' + "".join(
            f'<div class="st-key-{key}"><div id="{key}"></div></div>' for key, _ in group)
            + "</div>")
        index += len(group)
    return FLOOR_PAGE.format(rows="\n".join(rows)).encode()


class Floor:
    """A loopback HTTP server for one scenario: ``/`` lays out a div per chart
    (rows as on the page), ``/figures/<i>.json`` holds what changes between the
    views of measures i-1 and i: whole figures, or only the layout of those
    whose data is unchanged (everything for i = 0)."""

    def __init__(self, scenario: Scenario) -> None:
        self.files = {"/plotly.min.js": (PLOTLY_JS.read_bytes(), "text/javascript")}
        self.files["/"] = (_floor_page(scenario.layout), "text/html")
        previous: dict[str, tuple[str, str]] = {}
        for index, figures_json in enumerate(scenario.floor_figures):
            changed = []
            for key, (data, layout) in figures_json.items():
                if previous.get(key) == (data, layout):
                    continue
                same_data = key in previous and previous[key][0] == data
                changed.append(f'{json.dumps(key)}:{{' + ("" if same_data else f'"data":{data},')
                               + f'"layout":{layout}}}')
            body = "{" + ",".join(changed) + "}"
            self.files[f"/figures/{index}.json"] = (body.encode(), "application/json")
            previous = figures_json
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


def _click_cell(page: Page, scenario: Scenario) -> Callable[[], None]:
    """The action of the cell-click measure (after any unmeasured preparation)."""
    container = page.locator(f".st-key-chart-{CLICKED_STEP}")
    row, col = CLICKED_CELL
    if not scenario.clickable:  # the picker: fill row and column first, time "Explain"
        column = page.locator("[data-testid='stColumn']", has=container).last
        column.get_by_role("button", name="Explain a cell").click()
        for key, value in (("row", row), ("col", col)):
            box = page.locator(f".st-key-chart-{CLICKED_STEP}-{key} input")
            if box.input_value() != str(value):  # an unchanged value starts no run
                runs = page.evaluate("window.__runs")
                box.fill(str(value))
                box.press("Enter")
                wait_until_shown(page, {}, runs + 1)
        explain = page.locator(f".st-key-chart-{CLICKED_STEP}-explain button")
        return explain.click
    plot = container.locator(".js-plotly-plot")
    plot.scroll_into_view_if_needed()
    # Where Plotly draws the cell's centre (its axes are padded around the cells).
    x, y = plot.evaluate(CELL_CENTRE_JS, [row, col])
    return lambda: page.mouse.click(x, y)


CELL_CENTRE_JS = """
(gd, [row, col]) => {
  const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  return [box.left + xa._offset + xa.l2p(col), box.top + ya._offset + ya.l2p(row)];
}
"""
"""Viewport coordinates of cell (row, col) of a heatmap's graph div."""


def _pick_query(page: Page, scenario: Scenario) -> Callable[[], None]:
    """Open the query picker and type the token (untimed); the action is Enter."""
    box = page.get_by_test_id("stSelectbox").filter(has_text="Highlight a query token")
    box.scroll_into_view_if_needed()
    box.click()
    page.keyboard.type(scenario.query_label)
    page.get_by_role("option", name=scenario.query_label, exact=True).wait_for()
    return lambda: page.keyboard.press("Enter")


def _app_action(page: Page, server: Server, scenario: Scenario, measure: str,
                run: int) -> Callable[[], None]:
    """Prepare ``measure`` on the app's page (unmeasured) and return the timed action."""
    if measure == FIRST_OPEN:
        url = page_url(server.url, scenario.page, scenario.params)
        return lambda: page.goto(url, wait_until="commit", timeout=TIMEOUT_MS)
    if measure == EDIT:
        seed = page.locator(".st-key-seed input")
        seed.fill(str(EDIT_SEED + run))
        return lambda: seed.press("Enter")
    if measure == CELL_CLICK:
        return _click_cell(page, scenario)
    if measure == QUERY_PICK:
        return _pick_query(page, scenario)
    return page.get_by_role("radio", name="head 1", exact=True).click


def _settle_click(page: Page, scenario: Scenario, trace: Trace, view: View,
                  runs: int) -> tuple[View, str]:
    """Wait for the cell click's rerun and explanation (numbers unchanged). Returns
    the view the app shows and a note if it explained another cell than the one
    clicked (it then marks that cell, so the outlines are checked afterwards)."""
    wait_until_shown(page, scenario.expected(trace, view, with_shapes=False), runs + 1)
    labels = scenario.cells_near(view, CLICKED_CELL)
    titles = [page.get_by_text(label, exact=True) for label in labels]
    any_title = titles[0]
    for title in titles[1:]:
        any_title = any_title.or_(title)
    any_title.first.wait_for(timeout=TIMEOUT_MS)
    shown = next(cell for label, cell in labels.items()
                 if page.get_by_text(label, exact=True).count())
    note = "" if shown == CLICKED_CELL else (
        f"clicking cell {CLICKED_CELL} explained cell {shown}")
    return scenario.view_after(CELL_CLICK, view, shown), note


def app_run(browser: Browser, server: Server, scenario: Scenario, run: int) -> dict[str, Sample]:
    """Open the page in a new context and take every measure once, in order; a
    failed measure ends the run (the later ones count as not reached)."""
    samples: dict[str, Sample] = {}
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(RUN_COUNTER_JS + CHECK_JS)
    page = context.new_page()
    counter = ByteCounter(page)
    traces = (compute_trace(scenario.config),
              compute_trace(scenario.config.replace(seed=EDIT_SEED + run)))
    view = View()
    try:
        for index, measure in enumerate(scenario.measures):
            trace = traces[min(index, 1)]
            planned = scenario.view_after(measure, view)
            want = scenario.expected(trace, planned)
            note = ""
            try:
                action = _app_action(page, server, scenario, measure, run)
                runs = page.evaluate("window.__runs") if index else 0
                before = counter.websocket
                start = time.perf_counter()
                action()
                if measure == CELL_CLICK:
                    shown, note = _settle_click(page, scenario, trace, view, runs)
                    if shown == planned:
                        wait_until_shown(page, want, runs + 1)
                    seconds = time.perf_counter() - start
                    if shown != planned:  # another cell's outlines: checked, not timed
                        planned = shown
                        wait_until_shown(page, scenario.expected(trace, shown), runs + 1)
                else:
                    wait_until_shown(page, want, runs + 1)
                    seconds = time.perf_counter() - start
            except (MeasurementError, PlaywrightError) as error:
                samples[measure] = Sample(None, error=f"app: {str(error).splitlines()[0]}")
                break
            view = planned
            samples[measure] = Sample(seconds, counter.websocket - before,
                                      counter.http_bytes() if measure == FIRST_OPEN else None,
                                      note=note)
    finally:
        context.close()
    return samples


def floor_run(browser: Browser, floor: Floor, scenario: Scenario) -> dict[str, Sample]:
    """The floor's first open in a new context, then each later view's redraw."""
    samples: dict[str, Sample] = {}
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(CHECK_JS)
    page = context.new_page()
    try:
        for index, measure in enumerate(scenario.measures):
            try:
                start = time.perf_counter()
                if index == 0:
                    page.goto(floor.url, wait_until="commit", timeout=TIMEOUT_MS)
                else:
                    page.evaluate("path => { window.floorDraw(path); }", f"/figures/{index}.json")
                wait_until_shown(page, scenario.floor_expected[index], None)
                samples[measure] = Sample(time.perf_counter() - start)
            except (MeasurementError, PlaywrightError) as error:
                samples[measure] = Sample(None, error=f"floor: {str(error).splitlines()[0]}")
                break
    finally:
        context.close()
    return samples


def summarise(scenario: Scenario, app: list[dict[str, Sample]],
              floor: list[dict[str, Sample]]) -> list[dict]:
    """One result row per measure: every sample, medians, spread and ratio."""
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
        row = {"case": scenario.case, "page": scenario.page, "measure": measure,
               "app_s": app_s, "floor_s": floor_s, "app_ws_bytes": received,
               "app_median_s": statistics.median(ok_app) if ok_app else None,
               "floor_median_s": statistics.median(ok_floor) if ok_floor else None,
               "ws_bytes_median": int(statistics.median(received)) if received else None,
               "http_bytes_median": int(statistics.median(http)) if http else None,
               "failures": [run[measure].error for run in app + floor
                            if measure in run and run[measure].error],
               "not_reached": (len(app) - len(app_s)) + (len(floor) - len(floor_s)),
               "notes": sorted({run[measure].note for run in app
                                if measure in run and run[measure].note})}
        if measure == CELL_CLICK and not scenario.clickable:
            row["notes"].append("via the cell picker (matrix above 64×64 cells)")
        row["ratio"] = (row["app_median_s"] / row["floor_median_s"]
                        if ok_app and ok_floor and row["floor_median_s"] > 0 else None)
        rows.append(row)
    return rows


def _spread(samples: list[float | None]) -> str:
    ok = [s for s in samples if s is not None]
    return f"{min(ok):.2f}-{max(ok):.2f}" if ok else "-"


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def print_table(rows: list[dict]) -> None:
    """The results as a table: seconds, ratio app/floor, and the bytes the app's
    page received (websocket per rerun; HTTP on first open)."""
    header = (f"{'case':9s} {'page':14s} {'measure':11s} {'app med':>8s} {'app min-max':>12s} "
              f"{'floor med':>9s} {'floor min-max':>13s} {'ratio':>6s} {'ws bytes':>12s} "
              f"{'http bytes':>11s}")
    print(header)
    print("-" * len(header))
    for row in rows:
        problems = row["notes"] + [f"FAILED: {f[:200]}" for f in row["failures"]]
        if row["not_reached"]:
            problems.append(f"not reached in {row['not_reached']} runs")
        print(f"{row['case']:9s} {row['page']:14s} {row['measure']:11s} "
              f"{_fmt(row['app_median_s']):>8s} {_spread(row['app_s']):>12s} "
              f"{_fmt(row['floor_median_s']):>9s} {_spread(row['floor_s']):>13s} "
              f"{_fmt(row['ratio'], '{:.1f}'):>6s} {_fmt(row['ws_bytes_median'], '{:,}'):>12s} "
              f"{_fmt(row['http_bytes_median'], '{:,}'):>11s}"
              + "".join(f"\n{'':37s}^ {problem}" for problem in problems))


# ---------------------------------------------------------------------------
# Memory line
# ---------------------------------------------------------------------------
MEMORY_WAIT_S = (30, 90)


def rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of ``pid`` and all its descendants, in MiB."""
    total_kib, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total_kib += next(int(line.split()[1]) for line in status.splitlines()
                              if line.startswith("VmRSS:"))
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total_kib / 1024


SETTLED_OR_MESSAGE_JS = """
(minRuns) => {
  const app = document.querySelector("[data-testid='stApp']");
  const state = app && app.getAttribute('data-test-script-state');
  if (!app || window.__runs < minRuns || state !== 'notRunning') return false;
  if (document.querySelector("[data-testid='stException'], [data-testid='stAlertContentError']"))
    return true;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart']")];
  return charts.length > 0 && charts.every(c => {
    const gd = c.querySelector('.js-plotly-plot');
    return gd && gd._fullData && gd.querySelector('.main-svg');
  });
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
        description="Time the app's pages in headless Chromium against a floor (plain "
                    "Plotly drawing the same figures); then the server's memory line.")
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
    """Every (case, page), app and floor interleaved; prints and returns the table."""
    header = PLOTLY_JS.read_text()[:200]
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "chromium": browser.version, "streamlit": importlib.metadata.version("streamlit"),
            "floor_plotly_js": header.split("plotly.js v", 1)[-1].split()[0],
            "runs": args.runs, "cases": args.cases, "pages": args.pages,
            "timeout_s": TIMEOUT_MS / 1000, "cpus": os.cpu_count()}
    rows: list[dict] = []
    server = Server(env=SERVER_ENV)
    try:
        for case in args.cases:
            for page in args.pages:
                print(f"{case} on {page}: building the floor's figures...", flush=True)
                scenario = build_scenario(case, page)
                floor = Floor(scenario)
                app_runs, floor_runs = [], []
                try:
                    for run in range(args.runs):
                        app_runs.append(app_run(browser, server, scenario, run))
                        floor_runs.append(floor_run(browser, floor, scenario))
                        print(f"  run {run + 1}: app " + ", ".join(
                            f"{m} {_fmt(s.seconds)}" for m, s in app_runs[-1].items())
                            + " | floor " + ", ".join(
                            f"{m} {_fmt(s.seconds)}" for m, s in floor_runs[-1].items()),
                            flush=True)
                finally:
                    floor.close()
                rows += summarise(scenario, app_runs, floor_runs)
    finally:
        log = server.stop()
        browser.close()
    print()
    print_table(rows)
    return {"meta": {**meta, "server_logged_traceback": "Traceback" in log}, "results": rows}


if __name__ == "__main__":
    main()
