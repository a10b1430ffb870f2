"""The Modern attention page in Chromium at desktop and phone widths: every
chart drawn, every check passed, cell numbers inside their cells, nothing
wider than the screen; and a pick on the page (the query head) redraws it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.test_browser_clarity import CELL_TEXTS
from tests.support.browser import chart_count, page_url, settle
from tests.support.server import RUN_COUNTER

CHARTS = 15
"""cos, sin, Q before/after, scores before/after, shared K, GQA weights, the three
masks, windowed weights, the decoded row, the tile and its O."""


def _open(server, browser: Browser, width: int = 1400):
    """The page opened at ``width`` px, settled: its context and page."""
    context = browser.new_context(viewport={"width": width, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(server, "Modern_attention"))
    settle(page)
    return context, page


@pytest.mark.parametrize("width", [1400, 390])
def test_every_part_draws_and_passes_its_check(shared_server, browser: Browser, width):
    context, page = _open(shared_server, browser, width)
    # The first open of a fresh server may settle between two runs (6 charts drawn):
    # wait for the page's charts, then for every one of them to be drawn.
    expect(page.locator(".explorer-chart")).to_have_count(CHARTS)
    assert chart_count(page) == CHARTS
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentSuccess")).to_have_count(6)
    for chart in page.evaluate(CELL_TEXTS):
        for text in chart["texts"]:
            assert text["x1"] - text["x0"] <= chart["cellWidth"] + 0.5, chart["title"]
    # nothing but the tables' own scrolling is wider than the screen
    main = page.get_by_test_id("stMain")
    assert main.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1")
    context.close()


def test_picking_a_head_redraws_the_heads_charts(shared_server, browser: Browser):
    context, page = _open(shared_server, browser)
    chart_count(page)
    title = "() => document.querySelector('.st-key-modern-q-after .explorer-chart').layout.title.text"
    assert page.evaluate(title) == "Q of head 0, after RoPE"
    page.get_by_role("radio", name="head 2", exact=True).click()
    page.wait_for_function(f"({title})() === 'Q of head 2, after RoPE'")
    expect(page.get_by_text("Head 2's keys are K/V head 1's")).to_be_visible()
    context.close()


def test_a_click_on_a_score_with_rope_explains_it_in_the_browser(shared_server, browser: Browser):
    context, page = _open(shared_server, browser)
    chart_count(page)
    scores = page.locator(".st-key-modern-scores-after .explorer-chart")
    scores.scroll_into_view_if_needed()
    area = scores.locator(".nsewdrag").bounding_box()  # row 3 ("eat"), column 1 ("is")
    page.mouse.click(area["x"] + area["width"] * 1.5 / 6, area["y"] + area["height"] * 3.5 / 6)
    settle(page)
    expect(page.get_by_text("m − n = 2", exact=False)).to_be_visible()
    context.close()
