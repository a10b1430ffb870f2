"""A class opening one link at once: `python -m benchmarks.class_link`.

``--visitors`` (30) protocol visitors (`benchmarks.protocol.Visitor`) connect
to a fresh server, then all ask for the same link at the same moment, as a
class does with the teacher's link: the worked example (`WORKED_EXAMPLE`,
book-sized), and a larger one (`LARGE`) whose trace takes the server longer
to compute. The server is pinned to one core and the visitors to the other
(``taskset``); before the burst it has served one other page, so its modules
are loaded but the link's trace is not cached.

For each link: the server's CPU seconds during the burst, the time until the
last visitor's run finished (every chart received and checked against
`explorer.compute_trace`), and the median. Printed, and merged into
``benchmarks/results/latest.json`` under "class opening one link" → ``--label``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

from benchmarks.browser import RESULTS, write_results
from benchmarks.capacity import LOAD_CORE, SERVER_CORE, TICK, pin
from benchmarks.protocol import WORKED_EXAMPLE, Visitor, wrong_numbers
from explorer import AttentionConfig
from explorer.lessons.pages import SELF_ATTENTION_PAGE
from tests.support.server import Server

_LARGE_SENTENCE = " ".join(f"word{i}" for i in range(96))
LINKS = {
    "worked example": (WORKED_EXAMPLE, AttentionConfig()),
    "96 tokens, d = 256": (urlencode({"sentence": _LARGE_SENTENCE, "d_in": 256, "d_k": 256,
                                      "d_v": 256}),
                           AttentionConfig(sentence=_LARGE_SENTENCE, d_in=256, d_k=256,
                                           d_v=256)),
}
"""Link name -> (its query string on the Self-attention page, the config it shows)."""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def burst(server: Server, visitors: int, query: str, config: AttentionConfig) -> dict:
    """``visitors`` open ``query`` at once on ``server``; CPU and times."""
    clients = [Visitor(server.url) for _ in range(visitors)]
    start = threading.Barrier(visitors + 1)

    def one(visitor: Visitor) -> tuple[float, list[str]]:
        start.wait()
        run = visitor.open(SELF_ATTENTION_PAGE, query)
        return time.monotonic(), wrong_numbers(run, config)

    try:
        with ThreadPoolExecutor(max_workers=visitors) as pool:
            futures = [pool.submit(one, c) for c in clients]
            cpu = _cpu_seconds(server.pid)
            start.wait()
            began = time.monotonic()
            done = [f.result() for f in futures]
        cpu = _cpu_seconds(server.pid) - cpu
    finally:
        for client in clients:
            client.close()
    times = sorted(t - began for t, _ in done)
    return {"visitors": visitors, "server cpu s": round(cpu, 2),
            "last visitor's charts s": round(times[-1], 2),
            "median s": round(statistics.median(times), 2),
            "wrong": sum(bool(problems) for _, problems in done)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.class_link",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--visitors", type=int, default=30)
    parser.add_argument("--label", default="now", help="this run's name in latest.json")
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {int(LOAD_CORE)})  # the visitors' threads follow
    rows = {}
    for name, (query, config) in LINKS.items():
        server = Server()
        try:
            pin(server.pid, SERVER_CORE)
            with Visitor(server.url) as warm:  # the app's modules, not this link's trace
                warm.open(SELF_ATTENTION_PAGE, "seed=1")
            rows[name] = burst(server, args.visitors, query, config)
        finally:
            server.stop()
        print(f"{args.label}: {name}: {json.dumps(rows[name])}", flush=True)
    try:
        before = json.loads(RESULTS.read_text()).get("class opening one link", {})
    except (FileNotFoundError, ValueError):
        before = {}
    write_results({"class opening one link": {**before, args.label: {
        **rows, "date": time.strftime("%Y-%m-%d %H:%M")}}})
    return 0 if not any(r["wrong"] for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
