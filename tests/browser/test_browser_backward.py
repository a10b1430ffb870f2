"""The Backward pass page in Chromium at desktop and phone widths: every chart
drawn, both checks passed, cell numbers inside their cells, nothing wider
than the screen; and a click on a gradient's cell explains it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.test_browser_clarity import CELL_TEXTS
from tests.support.browser import chart_count, page_url, settle
from tests.support.server import RUN_COUNTER

HEATMAP_CELL_TEXTS = CELL_TEXTS.replace(
    "querySelectorAll('.explorer-chart')]",
    "querySelectorAll('.explorer-chart')].filter((gd) => gd.data[0].z)")
"""`CELL_TEXTS` of the heatmaps (the line charts have no cells)."""
CHARTS = 42
"""With the page's defaults (causal, 2 heads, out_proj): the logits and
dL/dlogits, 15 gradients each beside its forward tensor, the Jacobian, the
loss curve and the weights at a step, 3 √d_k figures, the tiles and one
tile's P, dP and dS."""


def _open(server, browser: Browser, width: int = 1400):
    """The page opened at ``width`` px, settled: its context and page."""
    context = browser.new_context(viewport={"width": width, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(server, "Backward_pass"))
    settle(page)
    return context, page


@pytest.mark.parametrize("width", [1400, 390])
def test_every_chart_draws_and_both_checks_pass(shared_server, browser: Browser, width):
    context, page = _open(shared_server, browser, width)
    expect(page.locator(".explorer-chart")).to_have_count(CHARTS)
    assert chart_count(page) == CHARTS
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentSuccess")).to_have_count(2)
    heatmaps = page.evaluate(HEATMAP_CELL_TEXTS)
    assert len(heatmaps) == CHARTS - 4  # the loss curve and the three √d_k figures
    for chart in heatmaps:
        for text in chart["texts"]:
            assert text["x1"] - text["x0"] <= chart["cellWidth"] + 0.5, chart["title"]
    main = page.get_by_test_id("stMain")  # nothing but the tables' own scrolling is wider
    assert main.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1")
    context.close()


def test_a_click_on_a_gradient_cell_explains_it(shared_server, browser: Browser):
    context, page = _open(shared_server, browser)
    chart_count(page)
    grads = page.locator(".st-key-backward-grad-queries .explorer-chart")
    grads.scroll_into_view_if_needed()
    area = grads.locator(".nsewdrag").bounding_box()  # row 3 ("eat"), column 0 of 2 (head_dim)
    page.mouse.click(area["x"] + area["width"] * 0.25, area["y"] + area["height"] * 3.5 / 6)
    settle(page)
    expect(page.get_by_text('dL/dQ_0["eat", 0]', exact=False).first).to_be_visible()
    context.close()
