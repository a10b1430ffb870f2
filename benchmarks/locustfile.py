"""Locust users that learn at a class's pace, on Streamlit's own protocol.

Run by `benchmarks.capacity` (``--protocol``) as ``locust -f
benchmarks/locustfile.py --headless``, pinned to a core of its own; the
settings come from the environment (`RAMP_ENV`).

A `Learner` (`benchmarks.protocol.Visitor`, no browser) opens the worked
example's link (`WORKED_EXAMPLE`, the Self-attention page), then every 5–10 s
(random think time) makes one edit as a learner would: a new seed or
sentence, d_k, the head shown, causal, the number of heads, or a switch
between the Self-attention and the multi-head page. Each run is a Locust
request ("open", or "edit"), timed from the request until the run finished;
its charts are checked against `explorer.compute_trace` of the learner's own
settings, and a wrong number makes it a failure.

`Ramp` holds each visitor count of ``EXPLORER_RAMP_COUNTS`` for
``EXPLORER_RAMP_STEP_S`` seconds (new visitors arrive at once, as a class
opening a link), resets Locust's statistics at each step and writes each
step's figures (edits, p50 and p95 of an edit, failures, the server's CPU
and peak resident memory) to ``EXPLORER_RAMP_OUT`` as JSON. It stops by
itself after the last count, at the first step whose edit p95 passes
`P95_LIMIT_S` or with a failure, and never later than the counts' time. With
``EXPLORER_RAMP_HOLD=1`` (the overload run) a slow p95 does not stop it: every
count is held to its end, and a step also says how many visitors' first page
came, the slowest run, and how many runs showed a waiting note
(`benchmarks.protocol.Run.notes`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from locust import LoadTestShape, User, between, task

from benchmarks.protocol import WORKED_EXAMPLE, ProtocolError, Visitor, wrong_numbers
from explorer.lessons.pages import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from tests.support.server import rss_mib
from tests.support.soak import WORDS, Settings

P95_LIMIT_S = 2.0
"""An edit's p95 (seconds) above which a visitor count is not served."""
RAMP_ENV = {"EXPLORER_RAMP_COUNTS": "visitor counts, comma-separated",
            "EXPLORER_RAMP_STEP_S": "seconds each count is held",
            "EXPLORER_RAMP_OUT": "where the steps' figures are written (JSON)",
            "EXPLORER_SERVER_PIDS": "the server processes whose CPU and memory are read",
            "EXPLORER_SERVER_CORE": "the core the server is pinned to, if it is",
            "EXPLORER_LOAD_CORE": "the core Locust is pinned to, if it is",
            "EXPLORER_RAMP_HOLD": "1: hold every count to its end, however slow"}
MAX_WORDS = 7
EDITS = {"seed": 3, "sentence": 3, "d_k": 2, "head": 3, "causal": 2, "n_heads": 1, "page": 2}
"""The edits a learner makes, with their weights; those the page has no control
for are left out at the time (the head and causal are on the multi-head page)."""
TICK = os.sysconf("SC_CLK_TCK")
_numbers = itertools.count(1)
_edits: list[tuple[str, float]] = []
"""(kind, seconds) of each edit of the step under way, for its p95 by kind."""
_runs: list[tuple[str, float, bool]] = []
"""(request name, seconds, whether it showed a waiting note) of each run of the
step under way that came back."""


class WrongNumbers(AssertionError):
    """A chart did not hold the visitor's own numbers."""


class Learner(User):
    """One visitor of the class (see the module's docstring)."""

    wait_time = between(5, 10)

    def on_start(self) -> None:
        self.number = next(_numbers)
        self.edits = 0
        self.page = SELF_ATTENTION_PAGE
        self.settings = Settings(sentence="Life is short, eat dessert first", seed=123,
                                 causal=False, n_heads=1)  # the worked example's
        self.visitor = None
        try:
            self.visitor = Visitor(self.host)
        except ProtocolError as error:
            self._report("open", 0.0, 0, error)
            return
        self._run("open", lambda: self.visitor.open(self.page, WORKED_EXAMPLE))

    def on_stop(self) -> None:
        if self.visitor is not None:
            self.visitor.close()

    @task
    def edit(self) -> None:
        if self.visitor is None:
            return
        on_heads_page = self.page == MULTI_HEAD_PAGE
        kinds = [k for k in EDITS if on_heads_page or k not in ("head", "causal", "n_heads")]
        if self.settings.n_heads == 1 or not on_heads_page:
            kinds = [k for k in kinds if k != "head"]
        kind = random.choices(kinds, [EDITS[k] for k in kinds])[0]
        seconds = self._run("edit", getattr(self, f"_{kind}"))
        _edits.append((kind, seconds))

    # -- the edits: each changes the settings and returns the run ------------
    def _seed(self):
        self.edits += 1
        self.settings = replace(self.settings, seed=1000 * self.number + self.edits)
        return self.visitor.set("seed", str(self.settings.seed))

    def _sentence(self):
        words = random.sample(WORDS, random.randint(2, MAX_WORDS - 1))
        self.settings = replace(self.settings, sentence=" ".join([f"v{self.number}", *words]))
        return self.visitor.set("sentence", self.settings.sentence)

    def _d_k(self):
        heads = self.settings.n_heads
        choices = [d for d in range(heads, 7, heads) if d != self.settings.d_k]
        self.settings = replace(self.settings, d_k=random.choice(choices))
        return self.visitor.set("d_k", self.settings.d_k)

    def _head(self):
        head = random.choice([h for h in range(self.settings.n_heads) if h != self.settings.head])
        self.settings = replace(self.settings, head=head)
        return self.visitor.pick("head", head)

    def _causal(self):
        self.settings = replace(self.settings, causal=not self.settings.causal)
        return self.visitor.set("causal", self.settings.causal)

    def _n_heads(self):
        fits = math.gcd(self.settings.d_k, self.settings.d_v)
        choices = [h for h in (1, 2) if fits % h == 0 and h != self.settings.n_heads] or [1]
        self.settings = replace(self.settings, n_heads=choices[0], head=0)
        return self.visitor.set("n_heads", self.settings.n_heads)

    def _page(self):
        self.page = MULTI_HEAD_PAGE if self.page == SELF_ATTENTION_PAGE else SELF_ATTENTION_PAGE
        return self.visitor.open(self.page)  # a page link: the settings travel in the session

    # -- timing and checking -----------------------------------------------
    def _run(self, name: str, action) -> float:
        """Run ``action``, check its run and report it; returns its seconds."""
        started = time.monotonic()
        try:
            run = action()
        except ProtocolError as error:
            self._report(name, time.monotonic() - started, 0, error)
            return time.monotonic() - started
        config = self.settings.config(self.page)
        problems = wrong_numbers(run, config, self.settings.shown_head(self.page))
        error = WrongNumbers(f"visitor {self.number} on {self.page}, {config}: "
                             + "; ".join(problems[:3])) if problems else None
        self._report(name, run.seconds, run.received, error)
        _runs.append((name, run.seconds, bool(run.notes)))
        return run.seconds

    def _report(self, name: str, seconds: float, received: int, error) -> None:
        self.environment.events.request.fire(
            request_type="ws", name=name, response_time=1000 * seconds,
            response_length=received, exception=error, context={})


def _core_ticks(core: str | None) -> tuple[int, int]:
    """(busy, all) CPU ticks of ``core`` so far, from /proc/stat ((0, 0) for None)."""
    if core is None:
        return 0, 0
    line = next(row for row in Path("/proc/stat").read_text().splitlines()
                if row.startswith(f"cpu{core} "))
    values = [int(v) for v in line.split()[1:]]
    return sum(values) - values[3] - values[4], sum(values)


def _busy_percent(start: tuple[int, int], end: tuple[int, int]) -> float | None:
    """How busy a core was between two `_core_ticks` readings, in % (None for
    no core, or no time between them)."""
    (busy0, all0), (busy1, all1) = start, end
    return round(100 * (busy1 - busy0) / (all1 - all0), 1) if all1 > all0 else None


def _server_ticks(pids: list[int]) -> int:
    """CPU ticks (user + system) used so far by ``pids`` (all their threads)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total


class Ramp(LoadTestShape):
    """The visitor counts in turn (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = [int(c) for c in os.environ.get("EXPLORER_RAMP_COUNTS", "1").split(",")]
        self.step_s = float(os.environ.get("EXPLORER_RAMP_STEP_S", "40"))
        self.out = Path(os.environ.get("EXPLORER_RAMP_OUT", "ramp.json"))
        self.pids = [int(p) for p in os.environ.get("EXPLORER_SERVER_PIDS", "").split(",") if p]
        self.core = os.environ.get("EXPLORER_SERVER_CORE")
        self.load_core = os.environ.get("EXPLORER_LOAD_CORE")
        self.hold = os.environ.get("EXPLORER_RAMP_HOLD") == "1"
        self.steps: list[dict] = []
        self._step = -1
        self._started = (0.0, 0, (0, 0))
        self._peak_rss = 0.0
        self._done = False

    def tick(self):
        if self._done:
            return None
        step = int(self.get_run_time() // self.step_s)
        self._peak_rss = max(self._peak_rss, sum(rss_mib(p) for p in self.pids))
        if step != self._step:
            if self._step >= 0 and self._close_step():
                self._done = True
                return None
            if step >= len(self.counts):
                self._done = True
                return None
            self._step = step
            self.runner.stats.reset_all()
            _edits.clear()
            _runs.clear()
            self._started = (time.monotonic(), _server_ticks(self.pids), _core_ticks(self.core),
                             _core_ticks(self.load_core))
            self._peak_rss = sum(rss_mib(p) for p in self.pids)
        count = self.counts[self._step]
        return count, count

    def _close_step(self) -> bool:
        """Record the step that ended; whether the ramp stops there."""
        stats = self.runner.stats
        edit, opened = stats.get("edit", "ws"), stats.get("open", "ws")
        seconds = time.monotonic() - self._started[0]
        cpu_s = (_server_ticks(self.pids) - self._started[1]) / TICK
        by_kind: dict[str, list[float]] = {}
        for kind, took in _edits:
            by_kind.setdefault(kind, []).append(took)
        failures = [f"{e.name}: {e.error}"[:400] for e in stats.errors.values()]
        row = {"visitors": self.counts[self._step], "seconds": round(seconds, 1),
               "edits": edit.num_requests, "opens": opened.num_requests,
               "p50": _seconds(edit, 0.5), "p95": _seconds(edit, 0.95),
               "open p95": _seconds(opened, 0.95),
               "failures": edit.num_failures + opened.num_failures, "problems": failures[:5],
               "server cpu % of one core": round(100 * cpu_s / seconds, 1),
               "server cpu ms per edit": round(1000 * cpu_s / edit.num_requests)
               if edit.num_requests else None,
               "peak rss MiB": round(self._peak_rss),
               "p95 by kind": {k: round(float(np.percentile(v, 95)), 2)
                               for k, v in sorted(by_kind.items())}}
        load = _busy_percent(self._started[3], _core_ticks(self.load_core))
        if load is not None:  # the visitors' own core: near 100% the latencies are theirs too
            row["load core busy %"] = load
        if self.hold:
            row["first pages served"] = sum(name == "open" for name, _, _ in _runs)
            row["slowest run s"] = round(max((took for _, took, _ in _runs), default=0.0), 2)
            row["runs with a waiting note"] = sum(noted for _, _, noted in _runs)
        busy = _busy_percent(self._started[2], _core_ticks(self.core))
        if busy is not None:  # what else ran on the server's core
            row["server core busy %"] = busy
            row["other work on the server's core %"] = round(
                max(0.0, row["server core busy %"] - row["server cpu % of one core"]), 1)
        self.steps.append(row)
        self.out.write_text(json.dumps(self.steps, indent=2))
        print(json.dumps(row), flush=True)
        if self.hold:
            return row["failures"] > 0
        return row["failures"] > 0 or row["p95"] is None or row["p95"] > P95_LIMIT_S


def _seconds(entry, fraction: float) -> float | None:
    """Locust's ``fraction`` percentile of ``entry``'s response times, in seconds
    (None without any)."""
    if not entry.num_requests:
        return None
    return round(entry.get_response_time_percentile(fraction) / 1000, 2)
