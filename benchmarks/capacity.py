"""How many visitors one server serves: `python -m benchmarks.capacity`.

For 1, 2, 3, 4, 6, ... visitors at once (``--counts``), `tests.support.soak` drives
that many Chromium contexts for ``--seconds`` after its warm-up, each making
small edits at the default sizes (`AT_DEFAULTS`: a new seed or short
sentence, a query picked, a cell clicked, causal, heads and the head on the
multi-head page, a switch between the Self-attention and the multi-head
page), and checks after every edit that every chart holds that visitor's own
numbers. An edit's latency runs from its input until that check passed. The
capacity is the largest count whose p95 is at most `P95_LIMIT_S`; the counts
stop at the first one above it (unless ``--all``).

While the visitors edit, `CpuSampler` reads /proc: the CPU used by the server
processes (nginx included, with ``--replicas``), by this process and its
Chromium (the visitors), and by everything else on the machine ("other"), in
% of one core; and from it the server's CPU time per settled edit, which says
what the server alone could serve on a core of its own, whatever the visitors'
Chromium took here. With ``--profile`` (and py-spy installed) the server is
sampled too once the warm-up is over, and its busy time is split into torch
and the trace, chart payloads (encoding and sending them), Streamlit's rerun
(the script, widgets and the runtime around them) and files served.

The target is a fresh `streamlit run` per count (`tests.support.server.Server`);
with ``--replicas N``, N fresh ones behind Debian's nginx per count
(`deploy/replicas.sh`, sticky sessions by cookie: `tests.support.server.Replicas`);
or ``--url``: a server already running, e.g. ``make replicas``, with
``--pid`` naming its streamlit processes (repeat), whose CPU and memory are
then measured. Results are printed and merged into
``benchmarks/results/latest.json`` under "capacity" (``--label`` names the
entry: by default "1 process" or "N replicas behind nginx", and ", not
drawing" with ``--no-draw``).

The visitors' Chromium runs on the same 2 cores as the server here, and the
machine is shared with other work: the figures are what this machine serves
with its own clients, a lower bound of what the server alone would serve.
Each count starts once the machine is quiet, and is measured again (up to
twice) when other work took more than `OTHER_LIMIT` of a core meanwhile.

``--protocol`` measures the server alone: the visitors are Locust users that
speak Streamlit's websocket protocol (`benchmarks.locustfile`, no browser, a
few ms of CPU per edit), opening the worked example's link and editing every
5–10 s; the server is pinned to one core (``taskset``) and Locust to the other.
The counts go up (`PROTOCOL_COUNTS`), each held ``--seconds``, until an edit's
p95 passes `P95_LIMIT_S` or a number is wrong (`protocol_ramp`). With
``--replicas N`` the replicas are not pinned: they and the load share the cores.

``--protocol --overload`` holds twice the capacity the last ramp measured
(latest.json; or ``--counts N``) for ``--seconds``, however slow: beyond its
capacity the server must only get slower (`overload_verdict`: no failure or
wrong number, every visitor's first page served, no traceback, the peak
resident memory within the budget); the exit code says whether it did.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from benchmarks.browser import RESULTS, write_results
from benchmarks.protocol import WORKED_EXAMPLE, Visitor
from explorer.lessons.pages import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from explorer.server import budget
from tests.support import soak
from tests.support.server import Replicas, Server

P95_LIMIT_S = 2.0
"""The edit latency (p95, seconds) a count must stay within to count as served."""
AT_DEFAULTS = soak.Workload(
    pages=(SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE),
    kinds=("page", "seed", "sentence", "causal", "n_heads", "head", "query", "cell"),
    max_words=7)
"""Visitors at the default sizes: d_in, d_k and d_v stay at their defaults, and a
sentence has at most 6 words and the visitor's tag (the default has 6 tokens)."""
PLOTLY_STUB = """
window.Plotly = {
  Icons: { disk: {} },
  downloadImage() {},
  // Keeps what the check reads (data, an svg) and the plot area chart.js asks for.
  async react(gd, data, layout) {
    gd.data = data; gd.layout = layout; gd._fullData = data;
    const axis = { _length: 300, _offset: 0, l2p: (v) => v };
    gd._fullLayout = { xaxis: axis, yaxis: axis };
    if (!gd.querySelector('.main-svg')) {
      const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
      svg.setAttribute('class', 'main-svg');
      gd.appendChild(svg);
    }
    gd.on ??= () => {};
    return gd;
  },
  async relayout(gd, update) { Object.assign(gd.layout, update); return gd; },
};
"""
"""Served instead of Plotly.js to visitors that do not draw (``--no-draw``)."""
NOT_DRAWING = replace(AT_DEFAULTS, plotly=PLOTLY_STUB,
                      kinds=tuple(k for k in AT_DEFAULTS.kinds if k != "cell"))
"""`AT_DEFAULTS` for visitors whose Chromium draws nothing: the page's own code
decodes every payload and the check reads its numbers, but no SVG is laid out
(a real visitor draws on their own machine). Without axes, no cell clicks."""
DEFAULT_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16)
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 1.0


# ---------------------------------------------------------------------------
# Where the CPU goes, from /proc
# ---------------------------------------------------------------------------
def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU ticks used) of every process: its own user and
    system time and that of its children that have ended and been waited for
    (Chromium's renderers end as the visitors close their pages: their time
    must not vanish from the sums)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        table[int(entry.name)] = (int(fields[1]), sum(map(int, fields[11:15])))
    return table


def _tree(table: dict[int, tuple[int, int]], roots: set[int]) -> set[int]:
    """``roots`` and all their descendants that are alive in ``table``."""
    members, grew = {r for r in roots if r in table}, True
    while grew:
        more = {pid for pid, (parent, _) in table.items() if parent in members} - members
        members |= more
        grew = bool(more)
    return members


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


class CpuSampler:
    """Samples, every `SAMPLE_S`, the CPU ticks of the server processes (and
    their children), of this process and its other descendants (the visitors'
    Chromium), and of the machine. `share` gives each one's CPU between two
    times, in % of one core."""

    def __init__(self, server_pids: tuple[int, ...]) -> None:
        self.server_pids = set(server_pids)
        self.exclude: set[int] = set()
        """Processes of ours that are not visitors (py-spy): counted as "other"."""
        self.samples: list[tuple[float, int, int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            table = _processes()
            server = _tree(table, self.server_pids)
            clients = _tree(table, {os.getpid()}) - server - _tree(table, self.exclude)
            busy, total = _machine_ticks()
            self.samples.append((time.monotonic(), sum(table[p][1] for p in server),
                                 sum(table[p][1] for p in clients), busy, total))
            if self._stop.wait(SAMPLE_S):
                return

    def share(self, start: float, end: float) -> dict[str, float]:
        """% of one core used by "server", "visitors" (Chromium and the driver),
        "other" (the rest of the machine) and "idle" between ``start`` and ``end``
        (monotonic seconds), from the samples nearest inside them."""
        inside = [s for s in self.samples if start <= s[0] <= end] or self.samples[-2:]
        if len(inside) < 2:
            return {}
        (t0, s0, c0, b0, n0), (t1, s1, c1, b1, n1) = inside[0], inside[-1]
        cores = os.cpu_count() or 1
        machine_s = (n1 - n0) / TICK / cores  # wall seconds the machine's ticks cover
        server, clients = (s1 - s0) / TICK, (c1 - c0) / TICK
        busy = (b1 - b0) / TICK
        return {"seconds": round(t1 - t0, 1),
                "server": round(100 * server / (t1 - t0), 1),
                "visitors": round(100 * clients / (t1 - t0), 1),
                "other": round(100 * max(0.0, busy - server - clients) / machine_s, 1),
                "idle": round(100 * cores * (1 - busy / (machine_s * cores)), 1)}


# ---------------------------------------------------------------------------
# Where the server's time goes: py-spy
# ---------------------------------------------------------------------------
CATEGORIES = (
    ("serving files", re.compile(r"StaticFiles|static_file|/staticfiles|component_file")),
    ("torch and the trace", re.compile(r"/torch/|explorer/(trace|attention|verify|recipes|"
                                       r"tokenizer|budget)\.py")),
    ("chart payloads", re.compile(r"explorer/(charts|figures)\.py|/google/protobuf/|"
                                  r"forward_msg|websocket|components/v2|"
                                  r"asyncio/selector_events")),
    ("Streamlit's rerun", re.compile(r"/streamlit/|explorer/|pages/|streamlit_app")),
)
"""A busy sample counts for the first category matched by its innermost frame that
any matches (walking from the leaf to the root); "other" when none does. Chart
payloads include sending them: the websocket's frames and the event loop's socket
reads and writes (the charts are most of the bytes). Serving files: the page's
scripts, Plotly.js and chart.js (static files, cached by browsers)."""
WAITING = re.compile(r"^(Condition\.wait|Event\.wait|EpollSelector\.select|_worker|"
                     r"PollingPathWatcher\._schedule\.<locals>\.task) \(")
"""Innermost frames of a thread that waits (a lock, the event loop's select, an
idle worker, the config file watcher's sleep). py-spy's idle check misses them
here, so they are dropped from the busy samples by name."""


PROFILE_HZ = 50
"""py-spy's samples per second."""


def py_spy() -> str | None:
    """The py-spy executable beside this interpreter or on PATH, or None."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def start_profile(pid: int, seconds: float) -> tuple[subprocess.Popen, Path] | None:
    """Start py-spy sampling ``pid`` for ``seconds``, `PROFILE_HZ` times a second, the thread
    holding the GIL only: the server's Python work, without threads waiting for
    the GIL or for anything else (torch's kernels run without the GIL, but at
    the default sizes they are a small part of each op's time)."""
    spy = py_spy()
    if spy is None:
        return None
    out = Path(tempfile.mkstemp(suffix=".txt")[1])
    process = subprocess.Popen([spy, "record", "--pid", str(pid), "--duration",
                                str(int(seconds)), "--rate", str(PROFILE_HZ), "--format", "raw",
                                "--nonblocking", "--gil", "--output", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, out


def profile_shares(raw: str) -> dict:
    """% of the busy samples in each of `CATEGORIES` (and "other"), from py-spy's
    raw (folded) output: ``frame;frame;... count`` per line, root first; and in
    "where" the frames (the innermost one matched) with most of each. Samples
    waiting (`WAITING`) are not busy: their % of all is given, and "samples"."""
    counts: Counter = Counter()
    where: dict[str, Counter] = {}
    waiting = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")[::-1]
        if WAITING.match(frames[0]):
            waiting += int(count)
            continue
        name, frame = next(((name, frame) for frame in frames for name, pattern in CATEGORIES
                            if pattern.search(frame)), ("other", frames[0]))
        counts[name] += int(count)
        where.setdefault(name, Counter())[re.sub(r":\d+\)$", ")", frame)] += int(count)
    busy = sum(counts.values()) or 1
    names = [c for c, _ in CATEGORIES] + ["other"]
    shares: dict = {name: round(100 * counts[name] / busy, 1) for name in names}
    shares["where"] = {name: {frame: round(100 * n / busy, 1)
                              for frame, n in where[name].most_common(3)}
                       for name in names if name in where}
    shares["samples waiting, not counted"] = round(100 * waiting / (waiting + busy), 1)
    shares["samples"] = waiting + sum(counts.values())
    return shares


# ---------------------------------------------------------------------------
# One count, and the series
# ---------------------------------------------------------------------------
def measure(visitors: int, seconds: float, url: str | None, pids: tuple[int, ...],
            profile: bool, workload: soak.Workload = AT_DEFAULTS, seed: int = 0,
            replicas: int = 0) -> dict:
    """One soak of ``visitors`` at once against ``url``, or if None a fresh
    server (``replicas`` of them behind nginx if given): edit latency,
    correctness, CPU shares, and py-spy's split if ``profile``."""
    server = None
    if url is None:
        server = Replicas(replicas) if replicas else Server()
        url, pids = server.url, server.pids
    # The server's CPU: the streamlit processes, and nginx with them (replicas.sh's tree).
    serving = (server.process.pid,) if server else pids
    spies, profiled_from = [], []
    try:
        with CpuSampler(serving) as cpu:
            def start_profiles() -> None:  # once the warm-up (imports, first runs) is over
                profiled_from.append(time.monotonic())
                spies.extend(s for s in (start_profile(p, 3600) for p in pids) if s)
                cpu.exclude = {process.pid for process, _ in spies}

            report = soak.run(seconds, visitors, seed, url, pids, workload,
                              start_profiles if profile else None)
            shares = cpu.share(*report.edits_window)
    finally:
        where_time_goes = {}
        profiled_s = time.monotonic() - profiled_from[0] if profiled_from else 0
        for process, out in spies:
            process.send_signal(2)  # SIGINT: py-spy writes what it has
            process.wait(timeout=30)
            split = profile_shares(out.read_text())
            split["GIL held, % of the time"] = round(
                100 * split.pop("samples") / (PROFILE_HZ * profiled_s), 1)
            where_time_goes[str(process.args[3])] = split
            out.unlink()
        if server:
            server.stop()
    latency = report.latency()
    kinds = {k: report.latency((k,)) for k in workload.kinds}
    result = {"visitors": visitors, **{k: latency[k] for k in ("edits", "p50", "p95")},
              "ok": report.ok, "wrong numbers": len(report.failures),
              "page errors": len(report.messages), "warm-up s": round(report.warm_up_seconds),
              "memory MiB": report.memory, "cpu % of one core": shares,
              "p95 by kind": {k: round(v["p95"], 2) for k, v in kinds.items() if v["edits"]}}
    if shares and latency["edits"]:
        # The server's CPU time per settled edit: what one core alone could serve,
        # whatever the visitors' Chromium took from this machine's cores.
        result["server cpu ms per edit"] = round(
            10 * shares["server"] * shares["seconds"] / latency["edits"])
    if where_time_goes:
        result["server busy time %"] = where_time_goes
    if not report.ok:
        result["problems"] = (report.messages + report.failures)[:5]
    return result


def _row(r: dict) -> str:
    cpu = r["cpu % of one core"]
    return (f"{r['visitors']:>8} {r['edits']:>6} {r['p50']:>7.2f} {r['p95']:>7.2f}"
            f" {'yes' if r['ok'] else 'NO':>6} {cpu.get('server', 0):>7.0f}"
            f" {cpu.get('visitors', 0):>9.0f} {cpu.get('other', 0):>6.0f}"
            f" {cpu.get('idle', 0):>5.0f} {r.get('server cpu ms per edit', math.nan):>11.0f}")


OTHER_LIMIT = 20.0
"""The CPU other work may take (% of one core) while a count is measured; above it
the count is measured again, up to `REPEATS` times, and the least disturbed kept."""
REPEATS = 2
QUIET_BUSY = 15.0
"""Before each count, `wait_until_quiet` waits for the machine to use less than this
(% of one core) for `QUIET_S` seconds: the previous count's processes gone, and no
other work running."""
QUIET_S = 10
QUIET_TIMEOUT_S = 900


def _other(row: dict) -> float:
    return row["cpu % of one core"].get("other", 0.0)


def wait_until_quiet() -> None:
    """Wait (at most `QUIET_TIMEOUT_S`) until the machine's busy CPU has stayed under
    `QUIET_BUSY` % of one core for `QUIET_S` seconds; say so when it waited."""
    started = time.monotonic()
    window = [_machine_ticks()]
    while time.monotonic() - started < QUIET_TIMEOUT_S:
        time.sleep(1)
        window = (window + [_machine_ticks()])[-(QUIET_S + 1):]
        (b0, n0), (b1, n1) = window[0], window[-1]
        cores = os.cpu_count() or 1
        if len(window) > QUIET_S and 100 * cores * (b1 - b0) / max(n1 - n0, 1) < QUIET_BUSY:
            break
    waited = time.monotonic() - started
    if waited > 2 * QUIET_S:
        print(f"    (waited {waited:.0f} s for other work on this machine to stop)", flush=True)


def series(counts: tuple[int, ...], seconds: float, url: str | None, pids: tuple[int, ...],
           profile: bool, every: bool, workload: soak.Workload = AT_DEFAULTS,
           replicas: int = 0) -> dict:
    """`measure` each count in turn, up to the first with p95 above `P95_LIMIT_S`
    (all of them if ``every``); the capacity is the largest count within it.
    Each count waits for a quiet machine first (`wait_until_quiet`), and is
    measured again when other work took more than `OTHER_LIMIT` meanwhile."""
    print(f"{'visitors':>8} {'edits':>6} {'p50 s':>7} {'p95 s':>7} {'right':>6}"
          f" {'server%':>7} {'visitors%':>9} {'other%':>6} {'idle%':>5} {'server ms/edit':>11}",
          flush=True)
    rows = []
    for count in counts:
        best = None
        for attempt in range(1 + REPEATS):
            wait_until_quiet()
            row = measure(count, seconds, url, pids, profile, workload, replicas=replicas)
            again = _other(row) > OTHER_LIMIT and attempt < REPEATS
            print(_row(row) + ("  (other work: measured again)" if again else ""), flush=True)
            if best is None or _other(row) < _other(best):
                best = row
            if not again:
                break
        rows.append(best)
        if not rows[-1]["p95"] <= P95_LIMIT_S and not every:  # above it, or none settled
            break
    within = [r["visitors"] for r in rows
              if r["p95"] <= P95_LIMIT_S and r["ok"] and r["edits"]]
    return {"p95 limit s": P95_LIMIT_S, "seconds per count": seconds,
            "capacity": max(within, default=0), "rows": rows,
            "other work limit, % of one core": OTHER_LIMIT,
            "visitors draw": workload.plotly is None, "replicas": replicas or None,
            "date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count()}


PROTOCOL_COUNTS = (1, 10, 20, 30, 40, 60, 80, 100, 120, 150, 200, 250, 300)
"""Visitor counts of the protocol ramp (``--protocol``), each held ``--seconds``."""
SERVER_CORE, LOAD_CORE = "0", "1"
"""The cores the server and the protocol visitors are pinned to (``taskset``)."""


def pin(pid: int, core: str) -> None:
    """Pin every thread of ``pid`` to ``core`` (threads it starts later follow)."""
    subprocess.run(["taskset", "--all-tasks", "--cpu-list", "--pid", core, str(pid)],
                   check=True, stdout=subprocess.DEVNULL)


def protocol_ramp(counts: tuple[int, ...], seconds: float, profile: bool,
                  replicas: int = 0, hold: bool = False) -> dict:
    """Protocol visitors (`benchmarks.locustfile`, run by Locust in a process of
    its own) against a fresh server: each count of ``counts`` held ``seconds``,
    stopping at the first whose edit p95 passes `P95_LIMIT_S` or with a failure.
    One process is pinned to `SERVER_CORE` and Locust to `LOAD_CORE`; ``replicas``
    behind nginx are not pinned. ``profile``: py-spy samples the server (the
    first replica) from after the warm-up to the end. ``hold``: every count is
    held to its end, however slow (`overload_verdict`). Returns the steps and the
    capacity: the largest count served."""
    locustfile = str(Path(__file__).with_name("locustfile.py"))  # not imported: Locust
    # patches this process's sockets and threads (gevent) on import
    server = Replicas(replicas) if replicas else Server()
    spy, out = None, Path(tempfile.mkstemp(suffix=".json")[1])
    try:
        if not replicas:
            pin(server.pid, SERVER_CORE)
        for _ in range(4 * replicas or 1):  # the first run imports the app's modules; each
            with Visitor(server.url) as visitor:  # new visitor reaches a replica at random
                visitor.open(SELF_ATTENTION_PAGE, WORKED_EXAMPLE)
                visitor.open(MULTI_HEAD_PAGE)
        if profile:
            spy = start_profile(server.pids[0], 3600)
        bound_s = len(counts) * seconds + 60
        command = [sys.executable, "-m", "locust", "-f", locustfile, "--headless",
                   "--host", server.url, "--only-summary", "--loglevel", "WARNING"]
        if not replicas:
            command = ["taskset", "--cpu-list", LOAD_CORE, *command]
        env = {**os.environ, "EXPLORER_RAMP_COUNTS": ",".join(map(str, counts)),
               "EXPLORER_RAMP_STEP_S": str(seconds), "EXPLORER_RAMP_OUT": str(out),
               "EXPLORER_SERVER_PIDS": ",".join(map(str, server.pids)),
               **({} if replicas else {"EXPLORER_SERVER_CORE": SERVER_CORE,
                                       "EXPLORER_LOAD_CORE": LOAD_CORE}),
               **({"EXPLORER_RAMP_HOLD": "1"} if hold else {}),
               "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        started = time.monotonic()
        try:
            subprocess.run(command, env=env, timeout=bound_s, check=False)
        except subprocess.TimeoutExpired:
            print(f"    (Locust stopped after {bound_s:.0f} s)", flush=True)
        rows = json.loads(out.read_text() or "[]")
    finally:
        split = None
        if spy is not None:
            process, raw = spy
            process.send_signal(2)  # SIGINT: py-spy writes what it has
            process.wait(timeout=30)
            split = profile_shares(raw.read_text())
            split["GIL held, % of the time"] = round(
                100 * split.pop("samples") / (PROFILE_HZ * (time.monotonic() - started)), 1)
            raw.unlink()
        log = server.stop()
        out.unlink(missing_ok=True)
    served = [r["visitors"] for r in rows
              if not r["failures"] and r["edits"] and r["p95"] <= P95_LIMIT_S]
    return {"p95 limit s": P95_LIMIT_S, "seconds per count": seconds,
            "capacity": max(served, default=0), "rows": rows,
            "visitors": "Locust users on Streamlit's protocol (benchmarks.locustfile)",
            "pinned": None if replicas else {"server": SERVER_CORE, "visitors": LOAD_CORE},
            "replicas": replicas or None, "server busy time %": split,
            "server logged a traceback": "Traceback" in log,
            "date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count()}


def last_capacity(label: str = "1 process, protocol visitors") -> int | None:
    """The capacity the last protocol ramp measured (latest.json), or None."""
    try:
        return json.loads(RESULTS.read_text())["capacity"][label]["capacity"] or None
    except (FileNotFoundError, ValueError, KeyError):
        return None


def overload_verdict(result: dict) -> list[str]:
    """What went wrong in an overload run (``protocol_ramp(..., hold=True)``);
    [] = it only got slower: every count held to its end without a failure or a
    wrong number, each visitor's first page served, the peak resident memory
    within `explorer.server.budget.MEMORY_BUDGET_BYTES`, no traceback in the log."""
    limit_mib = budget.MEMORY_BUDGET_BYTES / budget.MIB
    problems = [] if result["rows"] else ["no step was recorded"]
    if result["server logged a traceback"]:
        problems.append("the server logged a traceback")
    for r in result["rows"]:
        at = f"{r['visitors']} visitors"
        if r["failures"]:
            problems.append(f"{at}: {r['failures']} failures: {r['problems'][:2]}")
        if r.get("first pages served", 0) < r["visitors"]:
            problems.append(f"{at}: {r.get('first pages served', 0)} first pages served")
        if r["peak rss MiB"] > limit_mib:
            problems.append(f"{at}: peak RSS {r['peak rss MiB']} MiB over {limit_mib:.0f}")
    return problems


def _print_ramp(result: dict) -> None:
    print(f"{'visitors':>8} {'edits':>6} {'p50 s':>6} {'p95 s':>6} {'fails':>5}"
          f" {'server%':>7} {'ms/edit':>7} {'RSS MiB':>7}")
    for r in result["rows"]:
        print(f"{r['visitors']:>8} {r['edits']:>6} {r['p50'] or math.nan:>6.2f}"
              f" {r['p95'] or math.nan:>6.2f} {r['failures']:>5}"
              f" {r['server cpu % of one core']:>7.0f} {r['server cpu ms per edit'] or math.nan:>7.0f}"
              f" {r['peak rss MiB']:>7}")
        other, load = r.get("other work on the server's core %"), r.get("load core busy %")
        print(f"    p95 by kind: {r['p95 by kind']}" + ("" if other is None else
              f"; other work on the server's core: {other:.0f}% of it") + (
              "" if load is None else f"; the visitors' core busy: {load:.0f}%"))
        if "first pages served" in r:
            print(f"    first pages served: {r['first pages served']} of {r['visitors']};"
                  f" slowest run {r['slowest run s']:.1f} s;"
                  f" runs with a waiting note: {r['runs with a waiting note']}")
        for problem in r["problems"]:
            print(f"    {problem[:300]}")
    split = result["server busy time %"]
    if split:
        print("server: " + ", ".join(f"{k} {v:.0f}%" for k, v in split.items()
                                     if isinstance(v, float)))
        for name, frames in split["where"].items():
            print(f"  {name}: " + ", ".join(f"{f} {v:.0f}%" for f, v in frames.items()))
    print(f"capacity (edit p95 <= {P95_LIMIT_S:.0f} s, every number right): "
          f"{result['capacity']} visitors")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table and the details, and write latest.json."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capacity",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a server already running (e.g. nginx in front of "
                        "replicas); default: a fresh streamlit per count")
    parser.add_argument("--pid", type=int, action="append", default=[],
                        help="with --url: a streamlit process whose CPU and memory to "
                        "measure (repeat for each replica)")
    parser.add_argument("--counts", help="visitor counts, in order (default "
                        + ",".join(map(str, DEFAULT_COUNTS)) + ")")
    parser.add_argument("--seconds", type=float, default=40,
                        help="edits after each count's warm-up (default 40)")
    parser.add_argument("--all", action="store_true",
                        help="measure every count, not only up to the first above the limit")
    parser.add_argument("--profile", action="store_true",
                        help="sample the server with py-spy (if installed) during each count")
    parser.add_argument("--no-draw", action="store_true",
                        help="visitors whose Chromium draws nothing (Plotly.js stubbed, no "
                        "cell clicks): the server's load without the clients' drawing")
    parser.add_argument("--replicas", type=int, default=0,
                        help="N fresh streamlit processes behind nginx per count "
                        "(deploy/replicas.sh; needs Debian's nginx), not one process")
    parser.add_argument("--protocol", action="store_true",
                        help="visitors that speak Streamlit's protocol (Locust, no browser), "
                        "server and visitors pinned to a core each; counts default to "
                        + ",".join(map(str, PROTOCOL_COUNTS)))
    parser.add_argument("--overload", action="store_true",
                        help="with --protocol: hold twice the last measured capacity (or "
                        "--counts) for --seconds, however slow; fails unless nothing but "
                        "the speed suffered")
    parser.add_argument("--label", help='this run\'s name under "capacity" in latest.json '
                        '(default: "1 process" or "N replicas behind nginx", and '
                        '", not drawing" with --no-draw)')
    args = parser.parse_args(argv)
    if args.replicas and args.url:
        parser.error("--replicas starts its own replicas and nginx: leave out --url")
    if args.overload and not args.protocol:
        parser.error("--overload needs --protocol")
    label = args.label or ((f"{args.replicas} replicas behind nginx" if args.replicas
                            else "1 process") + (", protocol visitors" if args.protocol else "")
                           + (", not drawing" if args.no_draw else ""))
    if args.overload:
        measured = last_capacity()
        counts = (tuple(int(c) for c in args.counts.split(",")) if args.counts
                  else (2 * measured,) if measured else None)
        if counts is None:
            parser.error("no capacity measured yet (latest.json): run the ramp, or give --counts")
        result = protocol_ramp(counts, args.seconds, False, args.replicas, hold=True)
        result["capacity it doubles"] = measured
        _print_ramp(result)
        problems = overload_verdict(result)
        result["overload problems"] = problems
        print("beyond capacity: " + ("only slower" if not problems else "; ".join(problems)))
        _merge(args.label or "1 process, protocol visitors, overload", result)
        return 1 if problems else 0
    if args.protocol:
        counts = tuple(int(c) for c in args.counts.split(",")) if args.counts else PROTOCOL_COUNTS
        result = protocol_ramp(counts, args.seconds, args.profile, args.replicas)
        _print_ramp(result)
        _merge(label, result)
        return 0 if result["rows"] and not result["server logged a traceback"] else 1
    counts = tuple(int(c) for c in (args.counts or ",".join(map(str, DEFAULT_COUNTS))).split(","))
    result = series(counts, args.seconds, args.url, tuple(args.pid), args.profile, args.all,
                    NOT_DRAWING if args.no_draw else AT_DEFAULTS, args.replicas)
    print(f"capacity (edit p95 <= {P95_LIMIT_S:.0f} s, every number right): "
          f"{result['capacity']} visitors")
    for row in result["rows"]:
        print(f"  {row['visitors']} visitors: p95 by kind {row['p95 by kind']}")
        for pid, split in row.get("server busy time %", {}).items():
            print(f"    server {pid}: " + ", ".join(
                f"{k} {v:.0f}%" for k, v in split.items() if isinstance(v, float)))
            for name, frames in split["where"].items():
                print(f"      {name}: " + ", ".join(f"{f} {v:.0f}%" for f, v in frames.items()))
        for problem in row.get("problems", []):
            print(f"    {problem[:300]}")
    _merge(label, result)
    return 0 if all(r["ok"] for r in result["rows"]) else 1


def _merge(label: str, result: dict) -> None:
    """Write ``result`` under "capacity" → ``label`` in latest.json, keeping the others."""
    try:  # keep the other labels' entries (1 process, replicas)
        capacity = json.loads(RESULTS.read_text()).get("capacity", {})
    except (FileNotFoundError, ValueError):
        capacity = {}
    write_results({"capacity": {**capacity, label: result}})


if __name__ == "__main__":
    sys.exit(main())
