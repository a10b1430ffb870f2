"""A short soak in `make test`: four visitors at once for 30 seconds, each
checking that every chart shows its own numbers (`tests.support.soak`; ``make soak``
runs eight for three minutes)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support import soak

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_four_visitors_at_once_each_see_their_own_numbers():
    # In a thread of its own: the soak drives Chromium with asyncio, and the browser
    # tests' Playwright already runs an event loop in this one.
    with ThreadPoolExecutor(1) as pool:
        report = pool.submit(soak.run, seconds=30, contexts=4, seed=1).result()
    print(report.text())
    assert report.failures == [] and report.messages == [], report.text()
    assert not report.server_traceback, report.text()
    assert sum(v.checks for v in report.visitors) >= 4 * len(soak.SOAK_PAGES), report.text()
    assert report.memory_ok, report.text()
