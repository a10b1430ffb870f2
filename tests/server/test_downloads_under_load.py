"""Every download arrives while a class works (issue 52, point 8).

The sidebar's downloads are made on the click (`explorer.ui.downloads`), and
Streamlit 1.67 referenced the file it made from no session: the cleanup at the
end of any session's run removed it before the browser fetched it (HTTP 404,
a download Chromium calls canceled). Here `VISITORS` visitors rerun their
pages over Streamlit's protocol (`benchmarks.protocol`) while one visitor in
Chromium and one on the protocol download every file of "Take it with you"
several times; every file must arrive, whole. Before the hold in
`explorer.ui.private` (`_execute_deferred_held`), with 30 visitors at work, 0
or 1 of 16 protocol fetches arrived (HTTP 404) and Chromium canceled all 8.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from benchmarks.protocol import WORKED_EXAMPLE, Download, Visitor
from explorer.lessons.pages import SELF_ATTENTION_PAGE
from tests.browser.test_browser_export import DOWNLOADS
from tests.support.browser import page_url, settle

pytestmark = pytest.mark.slow

VISITORS = 30
"""Visitors rerunning their pages while the downloads are made (a class)."""
ROUNDS = 4
"""How many times each download is fetched over the protocol; Chromium takes half."""
KEYS = ("download-script", "download-report", "download-json", "download-csv")
"""The "Take it with you" buttons of the Self-attention page, by key."""
SEEDS = ("101", "102", "103")
"""What the visitors at work switch between: cached traces, so runs come fast."""


@dataclass
class Class:
    """The visitors at work: ``runs`` they finished, ``errors`` they met."""

    runs: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def work(self, url: str, i: int) -> None:
        """Visitor ``i`` opens the worked example and changes its seed until stopped."""
        try:
            with Visitor(url) as visitor:
                visitor.open(SELF_ATTENTION_PAGE, WORKED_EXAMPLE)
                k = i
                while not self.stop.is_set():
                    visitor.set("seed", SEEDS[k % len(SEEDS)])
                    self.runs, k = self.runs + 1, k + 1
        except Exception as error:  # noqa: BLE001 (any: reported by the test)
            self.errors.append(f"visitor {i}: {type(error).__name__}: {error}")


@contextmanager
def class_at_work(url: str, n: int) -> Iterator[Class]:
    """``n`` visitors rerunning on ``url`` while the block runs; every one of them
    has finished a run before it starts."""
    at_work = Class()
    threads = [threading.Thread(target=at_work.work, args=(url, i), daemon=True)
               for i in range(n)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 90
    while at_work.runs < n and not at_work.errors and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        yield at_work
    finally:
        at_work.stop.set()
        for thread in threads:
            thread.join(timeout=60)


def _in_chromium(page: Page, label: str, folder: Path) -> str:
    """Click the download ``label`` in Chromium: "" when its file arrived,
    otherwise Chromium's reason ("canceled")."""
    button = page.get_by_test_id("stSidebar").get_by_role("button", name=label)
    with page.expect_download() as info:
        button.click()
    download = info.value
    failure = download.failure()
    if failure:
        return failure
    path = folder / download.suggested_filename
    download.save_as(path)
    return "" if path.stat().st_size else "empty"


def test_every_download_arrives_while_thirty_visitors_work(fresh_server, page: Page, tmp_path):
    page.goto(page_url(fresh_server, "Self_attention", preset="life-is-short"))
    settle(page)
    page.get_by_test_id("stSidebar").get_by_text("Take it with you").click()
    fetched: list[tuple[str, Download]] = []
    clicked: list[tuple[str, str]] = []
    with Visitor(fresh_server.url) as downloader:
        downloader.open(SELF_ATTENTION_PAGE, WORKED_EXAMPLE)
        expected = {key: downloader.download(key).body for key in KEYS}  # the class not yet here
        with class_at_work(fresh_server.url, VISITORS) as at_work:
            started, runs = time.monotonic(), at_work.runs
            for i in range(ROUNDS):
                fetched += [(key, downloader.download(key)) for key in KEYS]
                if i % 2 == 0:
                    clicked += [(label, _in_chromium(page, label, tmp_path))
                                for label in DOWNLOADS]
            rate = (at_work.runs - runs) / (time.monotonic() - started)
    print(f"{VISITORS} visitors at {rate:.1f} runs/s: "
          f"{sum(d.arrived for _, d in fetched)}/{len(fetched)} fetched, "
          f"{sum(not f for _, f in clicked)}/{len(clicked)} in Chromium "
          f"{sorted({f for _, f in clicked if f})}")
    assert at_work.errors == []
    assert rate >= 5, f"the class was not at work: {rate:.1f} runs/s"
    assert all(expected.values())
    assert [(key, d.status, d.error) for key, d in fetched
            if not d.arrived or d.body != expected[key]] == []
    assert [(label, failure) for label, failure in clicked if failure] == []
    expect(page.get_by_test_id("stDownloadButtonError")).to_have_count(0)
