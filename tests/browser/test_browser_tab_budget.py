"""The tab's memory, measured in Chromium (issue 41, item 4): the link that took a
tab to 5.7-6.8 GiB is refused with the figures and the tab stays small; a large
page the budget allows stays within it (`explorer.server.budget.tab_bytes`)."""

from __future__ import annotations

import os
import subprocess

from playwright.sync_api import Page, expect

from explorer import AttentionConfig
from explorer.server.budget import BROWSER_BUDGET_BYTES, MIB, tab_bytes
from tests.browser.test_browser import page_url, settle


def renderer_bytes() -> int:
    """The resident memory of this test's Chromium renderer processes (those
    below this process: pytest-playwright's driver starts the browser)."""
    rows = {}
    for line in subprocess.run(["ps", "-eo", "pid,ppid,rss,args"], capture_output=True,
                               text=True, check=True).stdout.splitlines()[1:]:
        pid, ppid, rss, args = line.split(None, 3) + [""] * (4 - len(line.split(None, 3)))
        rows[int(pid)] = (int(ppid), int(rss), args)

    def mine(pid: int) -> bool:
        while pid in rows and pid > 1:
            if pid == os.getpid():
                return True
            pid = rows[pid][0]
        return False

    return 1024 * sum(rss for pid, (_, rss, args) in rows.items()
                      if "--type=renderer" in args and mine(pid))


def heap_bytes(page: Page) -> int:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return int(metrics["JSHeapUsedSize"])


def test_the_link_that_took_a_tab_to_six_gib_is_refused_and_the_tab_stays_small(
        shared_server, page: Page):
    page.goto(page_url(shared_server, "Causal_and_multi_head", n_heads="1000", d_k="1000",
                       d_v="1000", sentence="x"))
    settle(page)
    expect(page.get_by_test_id("stAlertContentError")).to_contain_text(
        "would take about 6,099 MB of your browser's memory to draw (1,000 heads")
    assert page.locator(".explorer-chart").count() == 0
    heap, renderers = heap_bytes(page), renderer_bytes()
    print(f"refused link: JS heap {heap / MIB:.0f} MiB, renderers {renderers / MIB:.0f} MiB")
    assert heap < 64 * MIB
    assert 0 < renderers < 1024 * MIB


def test_a_large_page_the_budget_allows_stays_within_it(shared_server, page: Page):
    fields = dict(n_heads=256, d_k=256, d_v=256, sentence="x", causal=True)
    estimate = tab_bytes(AttentionConfig(**fields))
    assert estimate <= BROWSER_BUDGET_BYTES
    page.goto(page_url(shared_server, "Causal_and_multi_head",
                       **{k: str(v).lower() for k, v in fields.items()}))
    # Every chart drawn, the heads grid's 256 panels included (a first run can end
    # quickly in a rerun, before anything is drawn).
    page.wait_for_function("""() => {
      const charts = [...document.querySelectorAll(".explorer-chart")];
      return charts.length > 10 && charts.every((c) => c.querySelector(".main-svg")
                                               && !c.dataset.drawing)
        && document.querySelector(".st-key-heads-grid .explorer-chart .main-svg");
    }""", timeout=300_000)
    settle(page, timeout=300_000)
    alerts = page.get_by_test_id("stAlertContentError").all_inner_texts()
    assert alerts == [], alerts
    heap, renderers = heap_bytes(page), renderer_bytes()
    print(f"256 heads: JS heap {heap / MIB:.0f} MiB, renderers {renderers / MIB:.0f} MiB, "
          f"estimate {estimate / MIB:.0f} MiB")
    assert renderers <= BROWSER_BUDGET_BYTES
    assert renderers <= 1.2 * estimate
