"""The browser's one seam to what is not public API (explorer/render/chart/seam.js):
Plotly's private fields and DOM classes, Streamlit's DOM attributes. Each
assumption is checked against the real Plotly.js and Streamlit in Chromium, so
that an upgrade that changes one fails here (docs/contributing.md: upgrading Streamlit or
Plotly)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from explorer.ui.component import CHART_URL
from tests.support.browser import chart_count, page_url, settle

CHECK = """async (url) => {
  const seam = await import(new URL(url, document.baseURI).href);  // the page's own copy
  return [...document.querySelectorAll('.explorer-chart')].map((gd) => seam.checkSeam(gd));
}"""


def test_the_seams_assumptions_hold_for_the_plotly_and_streamlit_installed(shared_server,
                                                                            page: Page):
    # 48 tokens, d = 64: a run long enough that the page renders its "running" (a run
    # at the defaults, under load, once came and went in one render: no "running").
    page.goto(page_url(shared_server, "Self_attention", sentence=" ".join(["word"] * 48),
                       d_in="64", d_k="64", d_v="64"))
    settle(page)
    count = chart_count(page)
    assert count >= 5
    # Streamlit says "running" during a run and "notRunning" after it.
    # Every change of the attribute, as it happens (a poll missed a short run
    # while the page's main thread was drawing).
    page.evaluate("""() => {
      const app = document.querySelector("[data-testid='stApp']");
      window.__states = [app.dataset.testScriptState];
      new MutationObserver(() => {
        const state = app.dataset.testScriptState;
        if (window.__states.at(-1) !== state) window.__states.push(state);
      }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
    }""")
    page.locator(".st-key-seed input").fill("5")
    page.locator(".st-key-seed input").press("Enter")
    # "running" then "notRunning" again (a loaded machine may show a second run after
    # the first, a page following a chart's run: that changes nothing of the seam).
    try:
        page.wait_for_function("""() => {
          const states = window.__states.join();
          return states.startsWith('notRunning,running,notRunning') && states.endsWith('notRunning')
            && window.__states.every((s) => s === 'running' || s === 'notRunning');
        }""")
    except PlaywrightError:  # say what the page went through (failed once, under load)
        pytest.fail(f"script states seen: {page.evaluate('window.__states')}")
    settle(page)
    broken = page.evaluate(CHECK, CHART_URL)
    assert len(broken) == count
    assert broken == [[]] * count, broken


def test_the_seam_notices_a_changed_private_field(shared_server, page: Page):
    # What an upgrade that renames Plotly's private axis length would look like.
    page.goto(page_url(shared_server, "Self_attention"))
    settle(page)
    chart_count(page)
    broken = page.evaluate("""async (url) => {
      const seam = await import(new URL(url, document.baseURI).href);
      const gd = document.querySelector('.explorer-chart');
      delete gd._fullLayout.xaxis._length;
      return seam.checkSeam(gd);
    }""", CHART_URL)
    assert len(broken) == 1 and "_length" in broken[0]


def test_an_uncaught_exception_shows_as_the_element_the_browser_tests_look_for(page: Page):
    """About 20 browser tests assert that no ``stException`` is on the page; they
    would pass without checking anything if an upgrade renamed it. A script that
    raises shows one, and (``showErrorDetails = "none"``) not the error's text."""
    from playwright.sync_api import expect

    from tests.support.server import Server

    server = Server(script="tests/support/apps/raises.py")
    try:
        page.goto(server.url)
        expect(page.get_by_text("before the exception")).to_be_visible()
        expect(page.get_by_test_id("stException")).to_have_count(1)
        assert "8c1f0e" not in page.content()
    finally:
        log = server.stop()
    assert "8c1f0e" in log  # the server's log keeps what the visitor does not see
