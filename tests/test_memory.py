"""The memory budget holds under a burst of large configurations (a real server,
real Chromium pages opened at once)."""

from __future__ import annotations

import threading
import time
import urllib.parse

import pytest

from explorer.budget import MEMORY_BUDGET_BYTES
from tests.server import Server, rss_mib

pytestmark = pytest.mark.browser

BIG = {"sentence": " ".join(f"w{i}" for i in range(512)), "d_in": "1024", "d_k": "1024",
       "d_v": "1024"}
SETTLED = ("() => document.querySelector(\"[data-testid='stApp']\")?.dataset.testScriptState"
           " === 'notRunning' && [...document.querySelectorAll('.explorer-chart')].length >= 11"
           " && [...document.querySelectorAll('.explorer-chart')].every(d => d.querySelector("
           "'.main-svg'))")


def resident_bytes(pid: int) -> int:
    """VmRSS of a process and its children, in bytes (`tests.server.rss_mib`)."""
    return int(rss_mib(pid) * 1024 * 1024)


class PeakSampler(threading.Thread):
    """Samples a process's resident memory every 50 ms and keeps the peak."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.running = pid, 0, True

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, resident_bytes(self.pid))
            time.sleep(0.05)


def test_a_burst_of_large_configurations_stays_within_the_budget(browser):
    server = Server()
    sampler = PeakSampler(server.pid)
    sampler.start()
    try:
        pages = [browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                 for _ in range(4)]
        for seed, page in enumerate(pages, start=1):  # all four sessions at once
            query = urllib.parse.urlencode({**BIG, "seed": str(seed)})
            page.goto(f"{server.url}/Self_attention?{query}", wait_until="commit")
        for page in pages:
            page.wait_for_function(SETTLED, timeout=240_000)
            assert page.get_by_test_id("stException").count() == 0
    finally:
        sampler.running = False
        sampler.join()
        log = server.stop()
    assert "Traceback" not in log
    print(f"peak resident memory {sampler.peak / 2**20:.0f} MiB")
    assert sampler.peak < MEMORY_BUDGET_BYTES, (
        f"peak {sampler.peak / 2**20:.0f} MiB over the {MEMORY_BUDGET_BYTES / 2**20:.0f} MiB budget")
