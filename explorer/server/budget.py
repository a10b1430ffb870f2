"""The server's memory budget, in one place.

A hosted demo gets about 1 GB of memory, and one visitor must not be able to
use it up. ``EXPLORER_MEMORY_BUDGET_MB`` (default 1024) is the resident memory
the whole server may use. `BASELINE_BYTES`, what Python, torch, transformers,
Streamlit, plotly and pandas take once imported, comes off first; the rest
(`AVAILABLE_BYTES`, 640 MB of the default) is shared out, and the shares add
up to exactly that:

- `MODEL_BYTES` (50%): the real models of the "Real model" page, loaded once
  per name and shared by every session. Their float32 weights: GPT-2 small
  475 MB, BERT base 415 MB, DistilGPT-2 312 MB (MB = 2**20 bytes, as in
  ``EXPLORER_MEMORY_BUDGET_MB``). The default share, 320 MB, holds DistilGPT-2;
  BERT needs ``EXPLORER_MEMORY_BUDGET_MB=1280`` and GPT-2 small 1536
  (`budget_for_model`), and a model larger than the share is refused with the
  figures;
- `TRACE_CACHE_BYTES` (18%): finished traces kept for reuse across sessions;
- `WORK_BYTES` (25%): tensors being computed at the same time, across all
  sessions (traces and model passes), and what a page holds from asking for
  its trace until its charts are sent (`drawing_bytes`); a request that alone
  needs more is refused with a message, and concurrent ones wait their turn;
- `MODEL_TRACE_CACHE_BYTES` (5%): real-model traces, head overviews and checks
  (GPT-2 small: about 10 MB a trace of a short sentence, 66 MB at 512 tokens);
- `TABLE_CACHE_BYTES` (2%): embedding-table rows kept per (seed, vocab_size, d_in).

The byte counts are exact for tensors (`trace_bytes`), so a cache never holds
more than its share, whatever visitors ask for. A page drawing its charts
counts too (`drawing_bytes`: its traces, from the moment it asks for them, the
chart payloads while they are encoded and sent, and the multi-head page's
PyTorch check), out of `WORK_BYTES`.

What Python frees is returned to the system (`tune_malloc`): glibc would
otherwise keep a heap per script thread and hold on to freed tensors' pages,
so that the server's resident memory stayed far above what it used.

``EXPLORER_MODEL_FOLDERS`` (default off) is the other server switch read here:
``1`` offers the Real model page's "local folder" option (`MODEL_FOLDERS`).
Leave it off on a public server, so that its visitors cannot make it read
folders of its disk; ``make run`` turns it on, serving on localhost only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from explorer.core.config import AttentionConfig, ConfigError
from explorer.server import settings

MIB = 2**20
MEMORY_BUDGET_BYTES = int(settings.MEMORY_BUDGET_MB * MIB)
"""The whole server's resident-memory budget, ``EXPLORER_MEMORY_BUDGET_MB`` (default 1024)."""

BASELINE_BYTES = 384 * MIB
"""Python, torch, transformers, Streamlit, plotly and pandas once imported and
one page drawn: 347 MiB of imports, about 360 MiB after a visit (measured)."""
CHECK_BYTES = 384 * MIB
"""The memory one check of pasted code may hold, all its processes together
(the box's memory cgroup, `explorer.checker.box.MEMORY_BYTES`): measured, a check
of the book's class peaks at 155-161 MiB (Python and torch, the worker forked
from its supervisor)."""
CHECKS_AT_ONCE = 2
"""Checks of pasted code that run at once; more wait their turn (`CHECKS`)."""
CHECKS_BYTES = CHECK_BYTES * CHECKS_AT_ONCE if settings.RUN_CODE else 0
"""What running checks take off the budget first, when the server runs pasted
code (``EXPLORER_RUN_CODE=1``); 0 otherwise."""
MIN_SHARES_BYTES = 256 * MIB
"""The least the pages' shares below may get beside the checks (`checks_problem`)."""
AVAILABLE_BYTES = max(MEMORY_BUDGET_BYTES - BASELINE_BYTES - CHECKS_BYTES, 64 * MIB)
"""What the shares below divide: the budget less the baseline and the checks."""

MODEL_SHARE_PERCENT = 50
MODEL_BYTES = AVAILABLE_BYTES * MODEL_SHARE_PERCENT // 100
TRACE_CACHE_BYTES = AVAILABLE_BYTES * 18 // 100
WORK_BYTES = AVAILABLE_BYTES * 25 // 100
MODEL_TRACE_CACHE_BYTES = AVAILABLE_BYTES * 5 // 100
TABLE_CACHE_BYTES = AVAILABLE_BYTES * 2 // 100
WORK_FACTOR = 1.5
"""A trace's peak while being computed, as a multiple of its finished size
(softmax's exponentials and the like exist for a moment)."""
WAIT_SECONDS = 30.0
DRAWING_WAIT_SECONDS = 120.0
"""How long a page waits to draw large charts while others do (`drawing_bytes`)."""
PAYLOAD_COPIES = 4
"""Copies of a page's chart payload alive at once while it is sent: the float32
blocks and their join (`explorer.render.payload.encode`), Streamlit's protobuf message
and its serialised bytes."""
SMALL_DRAWING_BYTES = 2**20
"""A page drawing less than this is not counted (the defaults draw about 10 kB)."""
MODEL_FOLDERS = settings.MODEL_FOLDERS
"""Whether the Real model page offers to open a local folder holding a GPT-2 or
BERT checkpoint: ``EXPLORER_MODEL_FOLDERS=1`` (or true, yes, on); off by default,
so that a public server reads no path its visitors type."""


class BudgetError(ConfigError):
    """A request this server cannot serve within its memory budget. The message
    says how much it needs and how much the server allows."""

    def __init__(self, message: str):
        super().__init__("budget", message)


class TabBudgetError(BudgetError):
    """A page too large for the visitor's browser tab (`check_tab_drawn`): shown
    as an error, like a bad setting, where the server's own limit is a warning."""


def trace_bytes(config: AttentionConfig) -> int:
    """The bytes `explorer.core.trace.compute_trace` will hold for ``config``, exactly.

    Per step (n tokens, h heads; float32 = 4 bytes, ids 8, the causal mask 1):
    X (n, d_in); W_query, W_key (d_in, d_k); W_value (d_in, d_v); Q, K (n, d_k);
    V (n, d_v); scores, scaled scores and weights (h, n, n), plus the masked
    scores when causal and the dropout mask and dropped weights with dropout;
    the context (n, d_v); out_proj's W (d_v, d_v), b (d_v) and output (n, d_v).
    """
    c = config
    n, h = len(c.tokens), c.n_heads
    per_head_steps = 3 + (1 if c.causal else 0) + (2 if c.dropout > 0 else 0)
    elements = (n * c.d_in + 2 * c.d_in * c.d_k + c.d_in * c.d_v
                + 2 * n * c.d_k + n * c.d_v + per_head_steps * h * n * n + n * c.d_v)
    if c.has_out_proj:
        elements += c.d_v * c.d_v + c.d_v + n * c.d_v
    return 4 * elements + 8 * n + (n * n if c.causal else 0)


def _mb(nbytes: float) -> str:
    return f"{nbytes / MIB:,.0f} MB"


class WorkBudget:
    """Bytes of tensors being computed at once, shared by every session.

    `reserve` blocks while the others' reservations leave too little room, and
    refuses a request larger than the whole allowance with a `BudgetError`, so
    that many visitors at once cannot push the server past its budget. Waiting
    requests are served first come, first served (a large one is not passed
    over forever by small ones), and each can be told its place in the queue.
    A thread that already holds bytes (a page drawing, which then computes
    another trace) is served at once: it would otherwise wait for itself.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.in_use = 0
        self._free = threading.Condition()
        self._queue: list[object] = []  # the waiting requests' tickets, oldest first
        self._running = 0  # requests holding bytes now
        self._held = threading.local()  # .count: reservations this thread holds

    @contextmanager
    def reserve(self, nbytes: int, what: str = "this configuration",
                timeout: float = WAIT_SECONDS,
                on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        """Hold ``nbytes`` of the allowance for the duration of the ``with``.

        ``on_wait(ahead)`` is called, from the waiting thread, as soon as the
        request has to wait and whenever its place changes: ``ahead`` is the
        number of requests before it (those running and those queued earlier);
        ``on_wait(0)`` once it may go on, if it waited at all.

        Raises `BudgetError` if ``nbytes`` exceeds the allowance, or if the
        server stays too busy for ``timeout`` seconds.
        """
        if nbytes > self.limit:
            raise BudgetError(
                f"{what} needs about {_mb(nbytes)} of memory; this server allows "
                f"{_mb(self.limit)} at a time. Use fewer tokens, heads or dimensions.")
        ticket = object()
        deadline = time.monotonic() + timeout
        told = None
        nested = getattr(self._held, "count", 0) > 0
        with self._free:
            self._queue.append(ticket)
            try:
                while not nested and not (self._queue[0] is ticket
                                          and self.in_use + nbytes <= self.limit):
                    ahead = self._running + self._queue.index(ticket)
                    if on_wait is not None and ahead != told:
                        told = ahead
                        self._free.release()  # the callback may draw on the page
                        try:
                            on_wait(ahead)
                        finally:
                            self._free.acquire()
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise BudgetError("The server is busy with other visitors' large "
                                          "configurations; try again in a moment.")
                    self._free.wait(left)
            finally:
                self._queue.remove(ticket)
                self._free.notify_all()
            self.in_use += nbytes
            self._running += 1
        if on_wait is not None and told is not None:
            on_wait(0)
        self._held.count = getattr(self._held, "count", 0) + 1
        try:
            yield
        finally:
            self._held.count -= 1
            with self._free:
                self.in_use -= nbytes
                self._running -= 1
                self._free.notify_all()


WORK = WorkBudget(WORK_BYTES)
"""The server's one work allowance."""
CHECKS = WorkBudget(CHECK_BYTES * CHECKS_AT_ONCE)
"""The running checks of pasted code: `CHECKS_AT_ONCE` of `CHECK_BYTES` each, in
the order they came (the Check page tells a waiting visitor its place)."""


def checks_problem() -> str:
    """Why this server's budget cannot hold `CHECKS_AT_ONCE` checks of pasted
    code beside its pages ("" when it can): the budget less the baseline and
    the checks must leave `MIN_SHARES_BYTES`."""
    needed = BASELINE_BYTES + CHECK_BYTES * CHECKS_AT_ONCE + MIN_SHARES_BYTES
    if MEMORY_BUDGET_BYTES >= needed:
        return ""
    return (f"its memory budget, EXPLORER_MEMORY_BUDGET_MB={MEMORY_BUDGET_BYTES / MIB:g}, "
            f"cannot hold {CHECKS_AT_ONCE} checks of {_mb(CHECK_BYTES)} beside its pages: "
            f"start it with EXPLORER_MEMORY_BUDGET_MB={-(-needed // MIB)} or more")


def drawing_bytes(config: AttentionConfig, checks: bool = False, traces: int = 1) -> int:
    """The bytes a page run holds for ``config``, an estimate for `WORK`, from
    the moment it asks for its trace until its charts are sent
    (`explorer.ui.cache.drawing`): ``traces`` traces of ``config``'s size
    (`trace_bytes`: the page's own, and those it computes beside it, such as
    the Simplified page's other normalisations), and `PAYLOAD_COPIES` times the
    trace, whose every matrix the page sends at most once (measured at 512 tokens
    × d = 1024: the Self-attention page sends 25.1 MB for a 25.0 MB trace, Causal &
    multi-head with 16 heads 56 MB for 92 MB). ``checks``: the page also reruns
    the attention in PyTorch and by the book's second causal route (the
    multi-head page), once more the trace's compute (`WORK_FACTOR`).

    The traces count here, not only in `TRACE_CACHE_BYTES`: a page holds its
    trace while it waits to draw and while it draws, whether or not the cache
    still does (issue 52: 16 visitors opening 512 tokens × d = 1024 at once held
    680 MiB of traces against the cache's 62 MiB, and the server peaked at
    1,097 MiB against a budget of 1,024).

    0 below `SMALL_DRAWING_BYTES`; at most `WORK_BYTES`, so that a page
    larger than the allowance still draws, alone."""
    nbytes = trace_bytes(config) * (traces + PAYLOAD_COPIES + (WORK_FACTOR if checks else 0))
    nbytes = min(int(nbytes), WORK_BYTES)
    return nbytes if nbytes >= SMALL_DRAWING_BYTES else 0


BROWSER_BUDGET_MB = 1536
"""The most memory a page may take in a visitor's browser tab, in MiB (2**20
bytes), estimated by `tab_bytes_drawn` before anything is computed or drawn (the
lesson pages' `tab_bytes`, the Real model page's count of what it draws): a
phone's browser or a 4-8 GB laptop keeps a tab this size, where
``Causal_and_multi_head?n_heads=1000&d_k=1000&d_v=1000`` took one to 5.7-6.8 GiB."""
BROWSER_BUDGET_BYTES = BROWSER_BUDGET_MB * MIB


@dataclass(frozen=True)
class TabCosts:
    """What a page costs in a browser tab, measured: ``base`` bytes for the page
    itself, ``cell`` per number drawn, ``panel`` per small chart of a grid
    (a head's panel, a thumbnail) and ``pair`` per pair of them (Plotly lays
    out every panel of a figure against the others); ``plot`` per plot of a
    head (a panel of the heads grid, or a spare head drawn off-screen), at full
    size (`tab_bytes`)."""

    base: int
    cell: int
    panel: int
    pair: int
    plot: int = 0


SPARE_CELLS = 2**16
"""A per-head chart whose heads hold at most this many numbers together has
every other head drawn off-screen as a spare plot, for instant head switches
(``PREDRAW_CELLS`` in explorer/render/chart/spares.js; a test holds them equal)."""
PLOT_TOKENS = 32
"""The tokens at which a head's plot costs `TabCosts.plot` in full; fewer tokens
cost less, in proportion, down to `MIN_PLOT_SHARE` of it (`plot_share`)."""
MIN_PLOT_SHARE = 1 / 8


def spare_plots(config: AttentionConfig) -> int:
    """The spare heads a lesson page of ``config`` draws off-screen: each
    per-head chart (Q, K and V, the scores, scaled scores, masked scores and
    weights, the dropout mask and dropped weights) draws its other heads once
    all heads together hold at most `SPARE_CELLS` numbers."""
    c, h = config, config.n_heads
    if h < 2:
        return 0
    n = len(c.tokens)
    square = 3 + (1 if c.causal else 0) + (2 if c.dropout > 0 else 0)  # (h, n, n) each
    charts = ((square if h * n * n <= SPARE_CELLS else 0)
              + (2 if n * c.d_k <= SPARE_CELLS else 0) + (1 if n * c.d_v <= SPARE_CELLS else 0))
    return charts * (h - 1)


def plot_share(n_tokens: int) -> float:
    """A head's plot at ``n_tokens`` as a share of one at `PLOT_TOKENS`."""
    return max(min(n_tokens, PLOT_TOKENS) / PLOT_TOKENS, MIN_PLOT_SHARE)


LESSON_TAB = TabCosts(base=576 * MIB, cell=24, panel=0, pair=int(0.0042 * MIB),
                      plot=9 * MIB)
"""The lesson pages' costs, measured in Chromium, 2 cores, software rendering: the
renderer processes' resident memory, peak, with the page drawn, then scrolled to the
end and every spare head drawn (``python -m benchmarks.tab_memory --lessons``,
benchmarks/results/history/2026-11-tab-memory.md; tests/server/test_tab_budget.py
holds the figures). A default page 573 MiB; the numbers drawn 24 bytes each (the
Self-attention page at 512 tokens × d = 1024, 6.6 M numbers: 746 MiB). What the
heads add is their plots: each head's panel in the heads grid and each spare head
(`spare_plots`), 8-9 MiB at 32 tokens (4 heads, 25 plots: 780 MiB; 8 heads at
d = 1024, 57 plots: 1,224; 16 heads, 121: 1,586; 64 heads, 505: 2,555; 128, 509:
2,764-4,351; 256, 1,021: 4,818), about 1 MiB at 1 token (100 heads, 793 plots:
1,312 MiB; 300 heads, 2,393: 1,720 MiB), plus 4.3 kB per pair of the grid's
panels. Before, measured unscrolled and without the plots, 256 heads at 32 tokens
(d = 1024) were estimated at 1,309 MiB and accepted; now 10,165."""
MODEL_TAB = TabCosts(base=808 * MIB, cell=24, panel=int(0.314 * MIB),
                     pair=int(0.00252 * MIB))
"""The Real model page's costs, its panels the overview's layers × heads
thumbnails, measured as `LESSON_TAB` with tiny random GPT-2 models at 6 tokens
(144, 448 and 720 thumbnails: 906, 1,455 and 2,341 MiB, the three fitted
exactly) and checked on a fourth (32 thumbnails at 216 tokens: 821 MiB
measured, 828 estimated). A thumbnail costs far less than a lesson page's head
panel; the page's own charts, about 230 MiB more than a lesson page's. So GPT-2
medium (384 thumbnails, 1,300 MiB) fits and GPT-2 large (720, 2,340 MiB) does
not. A Llama-family model's page has its own costs, `DECODER_TAB`."""
DECODER_TAB = TabCosts(base=600 * MIB, cell=112, panel=MODEL_TAB.panel, pair=MODEL_TAB.pair)
"""The Real model page's costs with a Llama-family model (decoder steps,
generation rows, the same overview), measured as `MODEL_TAB` with tiny random
models (``python -m benchmarks.tab_memory``, benchmarks/results/history/2026-11-tab-memory.md):
its own page about 200 MiB lighter than GPT-2's at the same thumbnails (Qwen3
28 × 16 at 6 tokens 1,238-1,262 MiB where GPT-2 28 × 16 takes 1,429-1,431;
Llama 30 × 9 868-879 MiB where `MODEL_TAB` said 1,077), but each number drawn
dearer: 95-137 bytes (Qwen3 28 × 16 at 198 tokens, 0.76 M numbers: 1,329-1,364 MiB;
Qwen3 2 × 16, d_model 1024 at 198 tokens, 1.9 M: 787-789 MiB). The thumbnails cost
what they cost on GPT-2's page (the same chart). So Qwen3-0.6B draws up to 241
tokens (1,308 MiB at 6), SmolLM2-135M every length (1,217 MiB at 512)."""


def tab_bytes_drawn(cells: int, panels: int, costs: TabCosts = LESSON_TAB,
                    plots: float = 0.0) -> int:
    """The memory a page takes in the visitor's browser tab, an estimate, from
    what it draws: ``costs.base``, plus ``costs.cell`` per number drawn
    (``cells``), plus ``costs.panel`` per panel of a grid and ``costs.pair``
    per pair of them (``panels``), plus ``costs.plot`` per head's plot
    (``plots``, counted at full size). Every page's estimate (`tab_bytes`, the
    Real model page's with `MODEL_TAB`) is this one."""
    return int(costs.base + costs.cell * cells + costs.panel * panels
               + costs.pair * panels * panels + costs.plot * plots)


def _lesson_drawn(config: AttentionConfig) -> tuple[int, int, float]:
    """What a lesson page of ``config`` draws: numbers, the heads grid's panels,
    and its heads' plots at full size (`spare_plots` and the grid's, `plot_share`)."""
    h = config.n_heads
    plots = (h + spare_plots(config)) * plot_share(len(config.tokens))
    return trace_bytes(config) // 4, h, plots


def tab_bytes(config: AttentionConfig) -> int:
    """The memory a page of ``config``'s charts takes in the visitor's browser
    tab (`tab_bytes_drawn`): every matrix of the trace (`trace_bytes` / 4
    numbers), a panel per head (the heads grid) and the heads' plots (the
    grid's and the spares, `spare_plots`)."""
    cells, panels, plots = _lesson_drawn(config)
    return tab_bytes_drawn(cells, panels, plots=plots)


def check_tab_drawn(cells: int, panels: int, counted: str, advice: str,
                    costs: TabCosts = LESSON_TAB, plots: float = 0.0) -> None:
    """Raise `TabBudgetError` when a page drawing ``cells`` numbers, ``panels``
    panels and ``plots`` heads' plots would take a browser tab past
    `BROWSER_BUDGET_BYTES` (`tab_bytes_drawn` with ``costs``), with both figures,
    like the server's own budget: ``counted`` says what was counted ("1,000
    heads"), ``advice`` what to do."""
    nbytes = tab_bytes_drawn(cells, panels, costs, plots)
    if nbytes > BROWSER_BUDGET_BYTES:
        raise TabBudgetError(
            f"This page would take about {_mb(nbytes)} of your browser's memory to draw "
            f"({counted}, {cells:,} numbers); the explorer draws at most "
            f"{_mb(BROWSER_BUDGET_BYTES)} in a tab, so that a phone or a laptop keeps it. "
            + advice)


def check_tab(config: AttentionConfig) -> None:
    """Raise `TabBudgetError` when drawing ``config`` would take a browser tab past
    `BROWSER_BUDGET_BYTES` (`tab_bytes`), with both figures: nothing is
    computed or sent then."""
    cells, panels, plots = _lesson_drawn(config)
    check_tab_drawn(cells, panels, f"{config.n_heads:,} heads", "Use fewer heads, tokens or "
                    "dimensions.", plots=plots)


_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD_BYTES = 128 * 1024
ARENAS = 2
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None) if os.name == "posix" else None


def tune_malloc() -> bool:
    """Make glibc return freed memory to the system; True where it applies.

    Two settings, as ``MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072`` would
    give before the process starts (a host does not always let us set them):
    at most `ARENAS` heaps, instead of one per thread that ever allocated,
    which Streamlit's script threads multiply; and blocks of
    `MMAP_THRESHOLD_BYTES` or more (every large tensor and payload) each
    mapped alone and unmapped when freed, where glibc would otherwise raise
    that threshold after the first free and keep later ones in the heaps.
    Measured on issue 20's burst (8 large configurations, then 6 at once,
    ``tests/server/test_memory.py``), before the other fixes: peak 1,534 → 1,188 MiB,
    30 s after 1,383 → 983 MiB. Does nothing (False) without glibc."""
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_ARENA_MAX, ARENAS)) and bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trim_malloc() -> None:
    """Hand the heaps' free pages back to the system (glibc's ``malloc_trim(0)``),
    after a large page is drawn; nothing without glibc."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


def model_pass_bytes(n_layers: int, n_heads: int, d_model: int, n_tokens: int) -> int:
    """The peak bytes of one forward pass of a real model with
    ``output_attentions``, an estimate for `WORK`: every layer's (n_heads, n, n)
    float32 weights are kept, plus one layer's activations at a time (about
    16 · n · d_model floats: hidden states, Q, K, V, the MLP's 4 · d_model).
    GPT-2 small at 512 tokens: about 168 MB."""
    return 4 * (n_layers * n_heads * n_tokens * n_tokens + 16 * n_tokens * d_model)


TOKENIZER_BYTES_PER_FILE_BYTE = 24
"""The memory a tokenizer takes once loaded, per byte of its files
(`tokenizer_bytes`). Measured with ``python -m benchmarks.tokenizer_memory``
(a fresh Python with transformers 5.23 imported, the resident growth of
`explorer.models.loading`'s tokenizer load; benchmarks/results/history/2026-11-tokenizer-memory.md):
byte-level BPE tokenizer.json files shaped like GPT-2's, Llama 3's and Gemma 3's
(1.5, 4.1 and 8.8 MB) take 43, 98 and 172 MB (peak 49, 117, 227), 11 MB of it
the first load's own; 100,000 and 500,000 added tokens (12.8 and 64.3 MB of
JSON) take 224 and 994 MB (peak 242 and 1,180). Past the first 11 MB that is
15-21 bytes per byte resident and 18-26 at the peak: 24 covers the resident
growth of every case and the peak of all but the smallest.

So a model's tokenizer counts: GPT-2's (tokenizer.json 1.4 MB, with vocab.json
and merges.txt 2.9 MB) 33-69 MB, BERT's (vocab.txt 230 kB, with tokenizer.json
0.7 MB) 6-16 MB, Llama 3's (9 MB) 216 MB, Qwen's (11 MB) 264 MB, Gemma 3's
(33 MB) 792 MB; a folder with 2 M added tokens (258 MB of JSON) 6.2 GB."""


def tokenizer_bytes(file_bytes: int) -> int:
    """The memory tokenizer files of ``file_bytes`` bytes take once loaded, an
    estimate: `TOKENIZER_BYTES_PER_FILE_BYTE` per byte."""
    return TOKENIZER_BYTES_PER_FILE_BYTE * file_bytes


def check_model_fits(label: str, nbytes: int, tokenizer_file_bytes: int = 0) -> None:
    """Raise `BudgetError` when a model of ``nbytes`` (its float32 weights),
    with its tokenizer files of ``tokenizer_file_bytes`` (counted as
    `tokenizer_bytes`), is larger than `MODEL_BYTES`, saying the figures and
    the setting that raises the share, e.g. "GPT-2 small needs about 475 MB;
    this server allows 256 MB for models (EXPLORER_MEMORY_BUDGET_MB=512) ..."."""
    counted = tokenizer_bytes(tokenizer_file_bytes)
    nbytes += counted
    if nbytes > MODEL_BYTES:
        share = MODEL_BYTES / AVAILABLE_BYTES
        parts = (f" ({_mb(nbytes - counted)} of weights and {_mb(counted)} for its "
                 f"tokenizer, whose files hold {tokenizer_file_bytes / MIB:,.1f} MB)"
                 if counted >= MIB else "")  # a tokenizer worth naming
        raise BudgetError(
            f"{label} needs about {_mb(nbytes)}{parts}; this server allows "
            f"{_mb(MODEL_BYTES)} for "
            f"models (EXPLORER_MEMORY_BUDGET_MB={MEMORY_BUDGET_BYTES // MIB}: {share:.0%} of "
            f"what is left after {_mb(BASELINE_BYTES)} for Python and its libraries). Pick a "
            "smaller model, or start the server with "
            f"EXPLORER_MEMORY_BUDGET_MB={budget_for_model(nbytes)} or more.")


def budget_for_model(nbytes: int) -> int:
    """The smallest ``EXPLORER_MEMORY_BUDGET_MB``, a multiple of 256, whose model
    share holds a model of ``nbytes`` (float32 weights): GPT-2 small 1536,
    BERT base 1280, DistilGPT-2 1024 (the README's table says the same)."""
    needed = BASELINE_BYTES + nbytes * 100 / MODEL_SHARE_PERCENT
    return -(-int(needed) // (256 * MIB)) * 256
