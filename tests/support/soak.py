"""Many visitors at once: `python -m tests.support.soak` (``make soak``).

One freshly started server, one headless Chromium, ``--contexts`` browser
contexts (8) driven concurrently for ``--seconds`` (180). Each context is a
visitor with its own seed and sentence: it opens its first page by link, tours
every page once (the warm-up), then makes random valid edits until the time is
up: the seed, the sentence, d_in / d_k / d_v, causal and n_heads and the head
on the multi-head page, a query token, a click on a heatmap cell, and page
switches through the sidebar.

After every edit the context waits (a real wait, bounded by `TIMEOUT_MS`)
until Streamlit has finished the run the edit started and every step chart
on the page (``.st-key-chart-<step>``) holds the numbers that
`explorer.compute_trace` gives for THAT context's own configuration: the
checksum of the chart's z values (count, sum, position-weighted sum of the
finite float32 values), compared with the same checksum of the trace's
tensors, of the head shown for a per-head step. Seeds are unique per context,
so numbers that leaked between sessions would not match.

Pass criteria, printed as a report and returned as the exit status:

- no error message (``stAlertContentError``) and no exception
  (``stException``) in any context, and no "Traceback" in the server's log;
- every settled edit shows the context's own numbers;
- the server's resident memory (VmRSS of the process and its children,
  sampled every `SAMPLE_SECONDS`) stays within the memory budget, and grows
  from the end of the warm-up to the end by no more than the byte-bounded
  caches that may still fill plus `MAX_GROWTH`.

The edits stay small (at most `MAX_WORDS` words, dims at most `MAX_D`), so
that the run measures concurrency, not the memory budget.

``--url`` points the visitors at a server that is already running (one
process, or a reverse proxy in front of several: `benchmarks.capacity`)
instead of a fresh one; ``--pid`` names its streamlit processes, whose memory
is then sampled (none named: memory is not checked).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from google.protobuf.message import DecodeError
from playwright.async_api import Browser, Page, async_playwright
from playwright.async_api import Error as PlaywrightError
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from explorer import AttentionConfig, compute_trace
from explorer.core.steps import STEPS
from explorer.core.tokenizer import token_labels
from explorer.lessons.pages import (
    BACKWARD_PAGE,
    EXPERIMENTS_PAGE,
    HOME_PAGE,
    MULTI_HEAD_PAGE,
    SELF_ATTENTION_PAGE,
    SIMPLIFIED_PAGE,
)
from explorer.lessons.presets import SIMPLIFIED
from explorer.server import budget
from explorer.ui.navigation import PAGES
from explorer.ui.state import ENTRIES
from tests.support.server import Server, rss_mib

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
SOAK_PAGES = (HOME_PAGE, SIMPLIFIED_PAGE, SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE, EXPERIMENTS_PAGE)
"""The pages a visitor moves between (the Real model page needs a model on disk)."""
CHART_PAGES = (SIMPLIFIED_PAGE, SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE)
"""Pages whose matrices are step charts (``chart-<step>``), checked after every edit."""
TIMEOUT_MS = 120_000
"""Longest wait for one edit to settle (8 visitors share 2 cores)."""
SAMPLE_SECONDS = 3.0
MAX_GROWTH = 0.10
"""Growth allowed after the warm-up beyond the caches still filling (below)."""
CACHES_BYTES = budget.TRACE_CACHE_BYTES + budget.TABLE_CACHE_BYTES
"""The byte-bounded caches a visit may fill after the warm-up."""
REL_TOLERANCE = 1e-4
"""Checksums agree within this fraction of the weighted sum of |values|: both sides
add the same float32 numbers in float64."""
MAX_WORDS, MAX_D, MAX_SOAK_HEADS = 24, 64, 8


@dataclass(frozen=True)
class Workload:
    """What the visitors do: the pages they tour and move between, the kinds of
    edit they make (None: every kind `_edit` knows), and the longest sentence.
    The soak's own is `SOAK`; `benchmarks.capacity` keeps visitors at the
    default sizes.

    ``plotly`` (JavaScript) is served in place of Plotly.js when given: a stub
    that keeps each chart's data where the check reads it and draws nothing
    makes visitors that load the server but not this machine's cores (a cell
    click needs real axes: leave "cell" out of ``kinds`` then)."""

    pages: tuple[str, ...] = SOAK_PAGES
    kinds: tuple[str, ...] | None = None
    max_words: int = MAX_WORDS
    plotly: str | None = None


SOAK = Workload()
WORDS = ("life is short eat dessert first the cat sat on mat attention all you need "
         "queries keys values softmax weights context every token looks at other ones "
         "journey starts with one step your quick brown fox jumps over lazy dog").split()


def url_path(page: str) -> str:
    """A page's URL path ("" for Home): its file name without the number prefix."""
    script = PAGES[page][0]
    return "" if page == HOME_PAGE else Path(script).stem.split("_", 1)[1]


# ---------------------------------------------------------------------------
# What a visitor has set, and the numbers the page must show for it
# ---------------------------------------------------------------------------
def _default(key: str, page: str | None = None):
    return ENTRIES[key].default_on(page)


@dataclass(frozen=True)
class Settings:
    """A visitor's settings as the widgets hold them (the multi-head page's own
    ones start at that page's defaults), and the head shown."""

    sentence: str
    seed: int
    d_in: int = _default("d_in")
    d_k: int = _default("d_k")
    d_v: int = _default("d_v")
    causal: bool = _default("causal", MULTI_HEAD_PAGE)
    n_heads: int = _default("n_heads", MULTI_HEAD_PAGE)
    head: int = 0

    def config(self, page: str) -> AttentionConfig:
        """The `AttentionConfig` that ``page`` draws for these settings."""
        fields = {"sentence": self.sentence, "seed": self.seed, "d_in": self.d_in,
                  "d_k": self.d_k, "d_v": self.d_v}
        if page == SIMPLIFIED_PAGE:
            fields.update(SIMPLIFIED, d_k=self.d_in, d_v=self.d_in)
        if page in (MULTI_HEAD_PAGE, BACKWARD_PAGE):  # the same settings at the top
            fields.update(causal=self.causal, n_heads=self.n_heads)
        return AttentionConfig(**fields)

    def shown_head(self, page: str) -> int:
        return self.head if page in (MULTI_HEAD_PAGE, BACKWARD_PAGE) else 0


def checksum(matrix: np.ndarray) -> dict[str, float]:
    """Count, sum and position-weighted sum (weight ``1 + k % 7`` for the k-th
    value, row-major) of the finite values, and the weighted sum of |values|
    that scales the tolerance. The same reduction as `CHECK_JS`."""
    flat = np.asarray(matrix, dtype=np.float32).astype(np.float64).ravel()
    weights = 1.0 + np.arange(flat.size) % 7
    finite = np.isfinite(flat)
    return {"count": float(finite.sum()), "sum": float(flat[finite].sum()),
            "wsum": float((flat[finite] * weights[finite]).sum()),
            "scale": float((np.abs(flat[finite]) * weights[finite]).sum())}


def step_numbers(trace, name: str, head: int) -> np.ndarray:
    """The matrix a step chart shows: one head of a per-head step, a vector as a row."""
    tensor = trace[name]
    if tensor.dim() == 3:
        tensor = tensor[head]
    if tensor.dim() == 1:
        tensor = tensor[None, :]
    return tensor.to(torch.float32).numpy()


def expected_charts(settings: Settings, page: str) -> dict[str, dict[str, float]]:
    """Step name -> checksum, for every step of the trace ``page`` draws."""
    trace = compute_trace(settings.config(page))
    head = settings.shown_head(page)
    return {name: checksum(step_numbers(trace, name, head)) for name in trace
            if name in STEPS and STEPS[name].heatmap}


# ---------------------------------------------------------------------------
# In the page: Streamlit runs counted, and the step charts' numbers checked
# ---------------------------------------------------------------------------
def finished_run(payload: str | bytes) -> bool:
    """Whether a websocket frame from the server is Streamlit's "script finished
    successfully" message. Counting these frames, rather than watching the page,
    sees every run: a browser that is starved of CPU may apply a whole run's
    messages in one go, and the page then never shows it as running."""
    if isinstance(payload, str) or len(payload) > 4096:  # that message is a few bytes
        return False
    message = ForwardMsg()
    try:
        message.ParseFromString(payload)
    except DecodeError:
        return False
    return (message.WhichOneof("type") == "script_finished"
            and message.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY)


CHECK_JS = """
window.__soak = (() => {
  const ERRORS = "[data-testid='stAlertContentError'], [data-testid='stException']";
  function checksum(gd) {
    let count = 0, sum = 0, wsum = 0;
    for (const trace of gd.data || []) {
      if (trace.z == null) continue;
      const rows = (Array.isArray(trace.z) && trace.z.length && typeof trace.z[0] !== 'number')
        ? trace.z : [trace.z];
      let k = 0;
      for (const row of rows) for (let j = 0; j < row.length; j++, k++) {
        const v = Number(row[j]);
        if (Number.isFinite(v)) { count++; sum += v; wsum += v * (1 + k % 7); }
      }
    }
    return {count, sum, wsum};
  }
  // {done, ok, problems}: done once the script is not running and either every step
  // chart holds its expected numbers or the page shows an error.
  function check(expected, relTol, needCharts) {
    const app = document.querySelector("[data-testid='stApp']");
    const state = app && app.getAttribute('data-test-script-state');
    if (state !== 'notRunning') return {done: false, ok: false, problems: ['script ' + state]};
    const errors = [...document.querySelectorAll(ERRORS)].map(e => e.innerText.slice(0, 300));
    if (errors.length) return {done: true, ok: false, problems: errors.map(e => 'page: ' + e)};
    const problems = [];
    let seen = 0;
    for (const box of document.querySelectorAll("[class*='st-key-chart-']")) {
      const key = [...box.classList].find(c => c.startsWith('st-key-chart-'));
      const step = key.slice('st-key-chart-'.length);
      const gd = box.querySelector(':scope .explorer-chart');
      if (!(step in expected)) {
        if (gd) problems.push(step + ': a chart the trace does not have');
        continue;
      }
      seen++;
      if (!gd || !gd._fullData || !gd.querySelector('.main-svg')) {
        problems.push(step + ': not drawn'); continue;
      }
      const got = checksum(gd), want = expected[step];
      const tol = relTol * want.scale + 1e-9;
      if (got.count !== want.count || Math.abs(got.sum - want.sum) > tol ||
          Math.abs(got.wsum - want.wsum) > tol)
        problems.push(step + ': numbers ' + JSON.stringify([got.count, got.sum, got.wsum]) +
                      ' != expected ' + JSON.stringify([want.count, want.sum, want.wsum]));
    }
    if (needCharts && seen === 0) problems.push('no step chart on the page');
    return {done: problems.length === 0, ok: problems.length === 0, problems};
  }
  return {check};
})();
"""
"""Injected into every page: `window.__soak.check(expected, tol, needCharts)`."""

CELL_CENTRE_JS = """
(gd, [row, col]) => {
  gd.scrollIntoView({block: 'center'});  // not under Streamlit's sticky header
  const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  return [box.left + xa._offset + xa.l2p(col), box.top + ya._offset + ya.l2p(row)];
}
"""
"""Viewport coordinates of cell (row, col) of a heatmap's graph div, scrolled to
the middle of the window first."""


class SettleError(Exception):
    """An edit did not settle on the expected page within `TIMEOUT_MS`."""


class Runs:
    """The script runs a page has finished, counted from its websocket frames."""

    def __init__(self, page: Page) -> None:
        self.finished = 0
        self._changed = asyncio.Event()
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload: str | bytes) -> None:
        if finished_run(payload):
            self.finished += 1
            self._changed.set()

    async def wait(self, count: int, timeout_ms: float = TIMEOUT_MS) -> None:
        """Wait until ``count`` runs have finished; `SettleError` after ``timeout_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while self.finished < count:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise SettleError(f"run {count} never finished ({self.finished} did)") from None


async def settle(page: Page, runs: Runs, min_runs: int, expected: dict,
                 need_charts: bool) -> list[str]:
    """Wait until the run an edit started has finished (``min_runs`` in all) and
    every step chart holds ``expected`` (or an error shows). Returns the
    problems ([] = fine); raises `SettleError` when the page never settles."""
    await runs.wait(min_runs)
    args = [expected, REL_TOLERANCE, need_charts]
    try:
        await page.wait_for_function("([e, t, n]) => window.__soak.check(e, t, n).done",
                                     arg=args, timeout=TIMEOUT_MS, polling=250)
    except PlaywrightError as error:
        try:
            problems = (await page.evaluate("([e, t, n]) => window.__soak.check(e, t, n)",
                                            args))["problems"]
        except PlaywrightError:
            problems = []
        raise SettleError("; ".join(problems[:4]) or str(error).splitlines()[0]) from None
    return (await page.evaluate("([e, t, n]) => window.__soak.check(e, t, n)", args))["problems"]


# ---------------------------------------------------------------------------
# One visitor
# ---------------------------------------------------------------------------
@dataclass
class Visitor:
    """One browser context: its settings, where it is, and what happened."""

    index: int
    n_visitors: int
    rng: random.Random
    settings: Settings | None = None
    page_name: str = HOME_PAGE
    edits: Counter = field(default_factory=Counter)
    checks: int = 0
    failures: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    warm: bool = False
    latencies: list[float] = field(default_factory=list)
    """Seconds from each edit until its run finished and every chart was checked."""
    latency_kinds: list[str] = field(default_factory=list)
    """The kind of each edit in `latencies` ("seed", "page", ...)."""
    workload: Workload = SOAK

    def own_seed(self) -> int:
        """A seed no other visitor uses: it is ``index`` modulo the visitors."""
        return self.rng.randrange(0, 100_000) * self.n_visitors + self.index

    def own_sentence(self) -> str:
        """Random words and this visitor's own tag word."""
        words = self.rng.choices(WORDS, k=self.rng.randint(1, self.workload.max_words - 1))
        words.insert(self.rng.randint(0, len(words)), f"visitor{self.index}")
        return " ".join(words)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _multiple(rng: random.Random, of: int, other_than: int) -> int:
    """A multiple of ``of`` in [1, MAX_D], different from ``other_than`` if possible."""
    choices = [v for v in range(of, MAX_D + 1, of) if v != other_than] or [of]
    return rng.choice(choices)


async def _fill(page: Page, key: str, value: str) -> None:
    box = page.locator(f".st-key-{key} input").first
    await box.fill(value)
    await box.press("Enter")


async def _edit(visitor: Visitor, page: Page) -> tuple[str, Settings, str] | None:
    """Make one random edit. Returns (kind, the settings after it, the page
    after it), or None when the chosen edit is not possible here."""
    rng, s, where = visitor.rng, visitor.settings, visitor.page_name
    kinds = ["page", "seed", "sentence", "d_in"]
    if where != SIMPLIFIED_PAGE:
        kinds += ["d_k", "d_v"]
    if where == MULTI_HEAD_PAGE:
        kinds += ["causal", "n_heads"] + (["head"] if s.n_heads > 1 else [])
    if where in CHART_PAGES:
        kinds += ["query", "cell", "cell"]
    if visitor.workload.kinds is not None:
        kinds = [k for k in kinds if k in visitor.workload.kinds]
        if not kinds:
            return None
    kind = rng.choice(kinds)
    if kind == "page":
        target = rng.choice([p for p in visitor.workload.pages if p != where])
        await page.get_by_test_id("stSidebar").get_by_role("link", name=target, exact=True).click()
        return kind, s, target
    if kind == "seed":
        new = replace(s, seed=visitor.own_seed())
        await _fill(page, "seed", str(new.seed))
        return kind, new, where
    if kind == "sentence":
        new = replace(s, sentence=visitor.own_sentence())
        await _fill(page, "sentence", new.sentence)
        return kind, new, where
    if kind in ("d_in", "d_k", "d_v"):
        step = 1 if kind == "d_in" else s.n_heads  # n_heads must divide d_k and d_v
        new = replace(s, **{kind: _multiple(rng, step, getattr(s, kind))})
        await _fill(page, kind, str(getattr(new, kind)))
        return kind, new, where
    if kind == "causal":
        new = replace(s, causal=not s.causal)
        await page.locator(".st-key-causal label").first.click()
        return kind, new, where
    if kind == "n_heads":
        choices = [d for d in _divisors(math.gcd(s.d_k, s.d_v))
                   if d <= MAX_SOAK_HEADS and d != s.n_heads]
        if not choices:
            return None
        n = rng.choice(choices)
        new = replace(s, n_heads=n, head=s.head if s.head < n else 0)
        await _fill(page, "n_heads", str(n))
        return kind, new, where
    if kind == "head":
        head = rng.choice([h for h in range(s.n_heads) if h != s.head])
        await page.get_by_role("radio", name=f"head {head}", exact=True).first.click()
        return kind, replace(s, head=head), where
    if kind == "query":
        labels = token_labels(s.config(where).tokens)
        label = rng.choice(labels)
        select = page.locator(".st-key-picker-query select").first  # chart.js's drop-down
        await select.scroll_into_view_if_needed()
        index = str(labels.index(label))
        if await select.input_value() == index:  # picking it again would start no run
            return None
        await select.select_option(value=index)
        return kind, s, where
    # a click on a random cell of a random step chart
    charts = page.locator("[class*='st-key-chart-'] .explorer-chart")
    count = await charts.count()
    if not count:
        return None
    chart = charts.nth(rng.randrange(count))
    shape = await chart.evaluate("gd => [gd.data[0].z.length, gd.data[0].z[0].length]")
    row, col = rng.randrange(shape[0]), rng.randrange(shape[1])
    x, y = await chart.evaluate(CELL_CENTRE_JS, [row, col])
    step = await chart.evaluate("gd => [...gd.closest('[class*=st-key-chart-]').classList]"
                                ".find(c => c.startsWith('st-key-chart-')).slice(13)")
    await page.mouse.click(x, y)
    return f"cell {step} ({row}, {col}) at ({x:.0f}, {y:.0f})", s, where


async def _check(visitor: Visitor, page: Page, runs: Runs, settings: Settings, where: str,
                 min_runs: int, what: str) -> None:
    """Wait for the edit ``what`` to settle and record what the page shows."""
    expected = expected_charts(settings, where) if where in CHART_PAGES else {}
    try:
        problems = await settle(page, runs, min_runs, expected, where in CHART_PAGES)
    except SettleError as error:
        problems = [f"did not settle within {TIMEOUT_MS / 1000:.0f} s: {error}"]
    visitor.checks += 1
    for problem in problems:
        line = f"visitor {visitor.index} after {what} on {where}: {problem}"
        (visitor.messages if problem.startswith("page: ") else visitor.failures).append(line)


async def visit(visitor: Visitor, browser: Browser, base_url: str, arrived: asyncio.Event,
                arrivals: list[int], stop_at: list[float]) -> None:
    """One visitor's whole session: first page by link, the tour of every page
    (the warm-up), then random edits until ``stop_at[0]``. ``arrivals`` counts
    the visitors done with the tour, whether it went well or not (a visitor whose
    browser context failed counts too, or the others would wait for it forever);
    the last one sets ``arrived``."""
    context = None
    try:
        try:
            context = await browser.new_context(viewport=VIEWPORT)
            await context.add_init_script(CHECK_JS)
            if visitor.workload.plotly is not None:
                await context.route("**/plotly.min.js*", lambda route: route.fulfill(
                    body=visitor.workload.plotly, content_type="text/javascript"))
            page = await context.new_page()
            runs = Runs(page)
            await _tour(visitor, page, runs, base_url)
            visitor.warm = True
        finally:
            arrivals[0] += 1
            if arrivals[0] == visitor.n_visitors:
                arrived.set()
        await arrived.wait()
        while time.monotonic() < stop_at[0]:
            before = runs.finished
            started = time.monotonic()
            try:
                made = await _edit(visitor, page)
            except PlaywrightError as error:
                visitor.failures.append(f"visitor {visitor.index}: an edit failed on "
                                        f"{visitor.page_name}: {str(error).splitlines()[0]}")
                continue
            if made is None:
                continue
            kind, settings, where = made
            visitor.edits[kind.split()[0]] += 1
            visitor.settings, visitor.page_name = settings, where
            await _check(visitor, page, runs, settings, where, before + 1, kind)
            visitor.latencies.append(time.monotonic() - started)
            visitor.latency_kinds.append(kind.split()[0])
    except PlaywrightError as error:
        visitor.failures.append(f"visitor {visitor.index}: {str(error).splitlines()[0]}")
    finally:
        if context is not None:
            await context.close()


async def _tour(visitor: Visitor, page: Page, runs: Runs, base_url: str) -> None:
    """Open the visitor's first page by link (its seed and sentence in the URL),
    then every other page through the sidebar, each checked."""
    visitor.settings = Settings(sentence=visitor.own_sentence(), seed=visitor.own_seed())
    tour = list(visitor.workload.pages)
    tour = tour[visitor.index % len(tour):] + tour[:visitor.index % len(tour)]
    visitor.page_name = tour[0]
    query = urllib.parse.urlencode({"sentence": visitor.settings.sentence,
                                    "seed": visitor.settings.seed})
    await page.goto(f"{base_url}/{url_path(tour[0])}?{query}", wait_until="commit")
    await _check(visitor, page, runs, visitor.settings, tour[0], 1, "opening the link")
    for target in tour[1:]:
        before = runs.finished
        await page.get_by_test_id("stSidebar").get_by_role("link", name=target,
                                                           exact=True).click()
        visitor.page_name = target
        visitor.edits["page (tour)"] += 1
        await _check(visitor, page, runs, visitor.settings, target, before + 1,
                     f"opening {target}")


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------
async def sample_memory(pids: list[int], samples: list[tuple[float, float]], stop: asyncio.Event,
                        start: float) -> None:
    """Append (seconds since start, MiB of all ``pids``) every `SAMPLE_SECONDS` until ``stop``."""
    while not stop.is_set():
        samples.append((time.monotonic() - start, sum(map(rss_mib, pids))))
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)
        except asyncio.TimeoutError:
            pass


# ---------------------------------------------------------------------------
# The run and its report
# ---------------------------------------------------------------------------
@dataclass
class Report:
    seconds: float
    contexts: int
    visitors: list[Visitor]
    memory: dict[str, float]
    samples: list[tuple[float, float]]
    server_traceback: str
    """The server log from its first "Traceback" on, 3,000 characters ("" = none)."""
    warm_up_seconds: float
    total_seconds: float
    edits_window: tuple[float, float] = (math.nan, math.nan)
    """`time.monotonic()` when the edits after the warm-up began and when the last ended."""
    processes: int = 1
    """Server processes whose memory was summed: the peak may reach the budget times this."""

    @property
    def failures(self) -> list[str]:
        return [f for v in self.visitors for f in v.failures]

    @property
    def messages(self) -> list[str]:
        return [m for v in self.visitors for m in v.messages]

    @property
    def growth_mib(self) -> float:
        """Resident memory gained from the end of the warm-up to the end."""
        return self.memory["end"] - self.memory["after warm-up"]

    @property
    def allowed_growth_mib(self) -> float:
        """The caches still filling, plus `MAX_GROWTH` of the memory after the warm-up."""
        return CACHES_BYTES / 2**20 + MAX_GROWTH * self.memory["after warm-up"]

    @property
    def memory_ok(self) -> bool:
        if not self.memory:  # a server this run did not start, and no pid named
            return True
        return (self.growth_mib <= self.allowed_growth_mib
                and self.memory["peak"] * 2**20 <= budget.MEMORY_BUDGET_BYTES * self.processes)

    @property
    def ok(self) -> bool:
        return (not self.failures and not self.messages and not self.server_traceback
                and self.memory_ok)

    def timeline(self, step: float = 30.0) -> list[tuple[float, float]]:
        """The memory samples about every ``step`` seconds, and the last one."""
        picked, next_at = [], 0.0
        for t, mib in self.samples:
            if t >= next_at:
                picked.append((t, mib))
                next_at = t + step
        return picked + ([self.samples[-1]] if self.samples and picked[-1] != self.samples[-1]
                         else [])

    def latency(self, kinds: tuple[str, ...] | None = None) -> dict[str, float]:
        """{"edits", "p50", "p95"} of the visitors' edit latencies in seconds (NaN
        when none settled), of the edits of ``kinds`` only if given."""
        every = [t for v in self.visitors for t, k in zip(v.latencies, v.latency_kinds)
                 if kinds is None or k in kinds]
        if not every:
            return {"edits": 0, "p50": math.nan, "p95": math.nan}
        p50, p95 = np.percentile(every, [50, 95])
        return {"edits": len(every), "p50": float(p50), "p95": float(p95)}

    def latency_text(self) -> str:
        """p50 and p95 of every visitor's edit latencies (seconds)."""
        figures = self.latency()
        if not figures["edits"]:
            return "no edit settled"
        return (f"p50 {figures['p50']:.2f} s, p95 {figures['p95']:.2f} s over "
                f"{figures['edits']} edits")

    def text(self) -> str:
        edits = sum(sum(v.edits.values()) for v in self.visitors)
        kinds = sum((v.edits for v in self.visitors), Counter())
        lines = [
            f"soak: {self.contexts} contexts, {self.seconds:.0f} s of random edits after a "
            f"{self.warm_up_seconds:.0f} s warm-up ({self.total_seconds:.0f} s in all)",
            f"  edits settled and checked: {sum(v.checks for v in self.visitors)} "
            f"({edits} edits: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")",
            "  per context: " + ", ".join(f"#{v.index} {sum(v.edits.values())}"
                                          for v in self.visitors),
            "  edit latency, from the edit until every chart was checked: "
            + self.latency_text(),
            f"  error messages / exceptions on the pages: {len(self.messages)}",
            f"  charts not showing the context's own numbers: {len(self.failures)}",
            f"  Traceback in the server log: {'yes' if self.server_traceback else 'no'}",
            *([self.server_traceback] if self.server_traceback else []),
        ]
        if not self.memory:
            lines.append("  server memory: not sampled (a server this run did not start)")
        else:
            lines += self._memory_lines()
        for line in (self.messages + self.failures)[:20]:
            lines.append(f"    {line[:400]}")
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)

    def _memory_lines(self) -> list[str]:
        return [
            "  server memory (VmRSS, children included): " + ", ".join(
                f"{k} {v:.0f} MiB" for k, v in self.memory.items())
            + f"; growth after warm-up {self.growth_mib:+.0f} MiB (limit "
            f"{self.allowed_growth_mib:.0f}: the caches' {CACHES_BYTES / 2**20:.0f} + "
            f"{MAX_GROWTH:.0%}); peak limit "
            f"{self.processes * budget.MEMORY_BUDGET_BYTES / 2**20:.0f} MiB",
            "  memory over time (s: MiB): " + ", ".join(
                f"{t:.0f}: {mib:.0f}" for t, mib in self.timeline()),
        ]


async def _run(seconds: float, contexts: int, seed: int, url: str | None = None,
               pids: tuple[int, ...] = (), workload: Workload = SOAK,
               on_edits: Callable[[], object] | None = None) -> Report:
    server = None if url else Server()
    if server:
        url, pids = server.url, (server.pid,)
    started = time.monotonic()
    samples: list[tuple[float, float]] = []
    memory = {"fresh": sum(map(rss_mib, pids))} if pids else {}
    visitors = [Visitor(i, contexts, random.Random(seed * 1000 + i), workload=workload)
                for i in range(contexts)]
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_memory(list(pids), samples, stop, started))
    log, warm_index = "", 0
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                       args=CHROMIUM_ARGS)
            arrived, arrivals, stop_at = asyncio.Event(), [0], [math.inf]
            tasks = [asyncio.create_task(visit(v, browser, url, arrived, arrivals,
                                               stop_at)) for v in visitors]
            await arrived.wait()
            if on_edits:
                on_edits()
            edits_from = time.monotonic()
            warm_up = edits_from - started
            if pids:
                memory["after warm-up"] = sum(map(rss_mib, pids))
            warm_index = len(samples)
            stop_at[0] = time.monotonic() + seconds
            await asyncio.gather(*tasks)
            edits_to = time.monotonic()
            if pids:
                memory["end"] = sum(map(rss_mib, pids))
            await browser.close()
    finally:
        stop.set()
        await sampler
        if server:
            log = server.stop()
    if pids:
        after = ([mib for _, mib in samples[warm_index:]]
                 + [memory["after warm-up"], memory["end"]])
        memory["peak"] = max(after)
        memory = {k: memory[k] for k in ("fresh", "after warm-up", "peak", "end")}
    traceback = log[log.index("Traceback"):][:3000] if "Traceback" in log else ""
    return Report(seconds, contexts, visitors, memory, samples, traceback, warm_up,
                  time.monotonic() - started, (edits_from, edits_to), max(1, len(pids)))


def run(seconds: float = 180, contexts: int = 8, seed: int = 0, url: str | None = None,
        pids: tuple[int, ...] = (), workload: Workload = SOAK,
        on_edits: Callable[[], object] | None = None) -> Report:
    """The soak run: ``contexts`` visitors for ``seconds`` after the warm-up.

    ``url``: a server already running (its base address, e.g. a reverse proxy's)
    instead of a fresh one; ``pids``: its streamlit processes, whose memory is
    then sampled and checked (each within the budget on average); ``workload``:
    what the visitors do; ``on_edits``: called once every visitor is done with the
    warm-up, as the edits begin (`benchmarks.capacity` starts py-spy then)."""
    return asyncio.run(_run(seconds, contexts, seed, url, pids, workload, on_edits))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.soak", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180,
                        help="random edits after the warm-up, in seconds (default 180)")
    parser.add_argument("--contexts", type=int, default=8,
                        help="concurrent browser contexts, one visitor each (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seeds every visitor's choices")
    parser.add_argument("--url", help="a server already running (e.g. a reverse proxy in "
                        "front of replicas), instead of a fresh one")
    parser.add_argument("--pid", type=int, action="append", default=[],
                        help="with --url: a streamlit process to sample memory of (repeat)")
    args = parser.parse_args(argv)
    report = run(args.seconds, args.contexts, args.seed, args.url, tuple(args.pid))
    print(report.text(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
