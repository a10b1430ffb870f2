"""Playwright: the "Check your code" page in Chromium, with visitors' code
allowed (``EXPLORER_RUN_CODE=1``): a learner pastes a class with a classic
mistake and sees where it goes wrong. (Off by default: tests/browser/test_browser.py.)"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import chart_count, page_url, settle
from tests.support.server import serve
from tests.ui.test_app_check import ROOM_FOR_CHECKS_MB, SOFTMAX_OVER_QUERIES


@pytest.fixture(scope="module")
def code_server():
    yield from serve({"EXPLORER_RUN_CODE": "1",
                       "EXPLORER_MEMORY_BUDGET_MB": str(ROOM_FOR_CHECKS_MB)})


def test_a_pasted_class_is_checked_and_its_mistake_named(code_server, page: Page):
    page.goto(page_url(code_server, "Check_your_code"))
    settle(page)
    box = page.get_by_role("textbox", name="Your code")
    box.fill(SOFTMAX_OVER_QUERIES)
    box.press("Control+Enter")  # Streamlit's text area commits on Ctrl+Enter
    settle(page)
    page.get_by_role("button", name="Check my code").click()
    settle(page)
    expect(page.get_by_test_id("stAlertContentError")).to_have_text(
        "✗ Differs from the reference computed from your weights at attn_weights.")
    expect(page.get_by_text("Diagnosis: softmax over the wrong dim")).to_be_visible()
    assert chart_count(page) == 2  # our attn_weights beside yours, differing cells outlined
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_two_notebook_reports_on_one_page_load_plotly_once_and_both_draw(
        page: Page, tmp_path, monkeypatch):
    import torch

    from explorer.checker.check import check_module
    from explorer.render import check_view
    from explorer.render.figures import PLOTLY_MIN_JS
    from tests.support import learner_modules as L

    monkeypatch.setattr(check_view, "_plotly_sent", False)  # a fresh notebook kernel
    reports = []
    for cls in (L.SoftmaxOverQueries, L.MaskFilledWithZero):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(123)
            reports.append(check_module(cls(3, 4, 6, 0.0, num_heads=2))._repr_html_())
    banner = PLOTLY_MIN_JS.read_text(encoding="utf-8")[:40]  # "/**\n* plotly.js v…"
    assert [html.count(banner) for html in reports] == [1, 0]
    notebook = tmp_path / "notebook.html"  # two output cells, one after the other
    notebook.write_text("<!doctype html><meta charset=utf-8><body>" + "".join(
        f'<div class="output">{html}</div>' for html in reports) + "</body>", encoding="utf-8")
    page.goto(notebook.as_uri())
    assert chart_count(page) == 4  # ours and yours, twice
