"""The Frontier attention page in Chromium: every part's every step drawn, no
error, and a click on a cell explains it under its chart. Generic over
`explorer.modern.frontier.parts.PARTS`."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from explorer.core.config import AttentionConfig
from explorer.core.trace import compute_trace
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier.parts import compute_parts, step_matrix
from tests.support.browser import chart_count, page_url, settle
from tests.support.server import RUN_COUNTER


def _defaults():
    x_config = AttentionConfig()
    return compute_parts(compute_trace(x_config)["embeddings"], FrontierConfig(), x_config.seed)


def test_every_step_draws_and_a_clicked_cell_is_explained(shared_server, browser: Browser):
    trace = _defaults()
    n_charts = sum(len(part.steps) for part in trace.parts.values())
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(shared_server, "Frontier_attention"))
    settle(page)
    expect(page.locator(".explorer-chart")).to_have_count(n_charts)
    assert chart_count(page) == n_charts
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)

    key, part = next(iter(trace.parts.items()))
    step = part.steps[-1]
    n_rows, n_cols = step_matrix(step, 0).shape
    row, col = n_rows - 1, n_cols // 2
    chart = page.locator(f".st-key-frontier-{key}-{step.name} .explorer-chart")
    chart.scroll_into_view_if_needed()
    area = chart.locator(".nsewdrag").bounding_box()
    page.mouse.click(area["x"] + area["width"] * (col + 0.5) / n_cols,
                     area["y"] + area["height"] * (row + 0.5) / n_rows)
    settle(page)
    expect(page.get_by_text(f"{step.name}[{row}, {col}]", exact=False)).to_be_visible()
    context.close()
