"""Playwright in real headless Chromium against a freshly started server."""

from __future__ import annotations

import subprocess

import pytest
from playwright.sync_api import Page, expect

from explorer.lessons.presets import PRESETS
from explorer.ui.navigation import PAGES
from explorer.ui.state import ENTRIES
from tests.support.browser import (
    HOSTILE,
    PAGE_NAMES,
    cell_texts,
    chart_count,
    page_url,
    settle,
    tick_labels,
)
from tests.support.server import (
    PAGE_FILES,
    ROOT,
    RUN_TIMEOUT_MS,
    in_read_only_tree,
    serve,
    url_path,
)


@pytest.mark.parametrize("name", [n for n in PAGE_FILES
                                  if n != "Real_model"])  # tests/browser/test_browser_models.py
def test_each_page_opened_first_on_a_fresh_server(fresh_server, page: Page, name):
    page.goto(page_url(fresh_server, name))
    settle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(page.get_by_role("button", name="Deploy")).to_have_count(0)  # client.toolbarMode
    sidebar = page.get_by_test_id("stSidebar")
    # The shared sidebar, with its menu and settings, is there on the first page opened.
    for label in ("Home", "Simplified attention", "Self-attention", "Check your code"):
        expect(sidebar.get_by_role("link", name=label)).to_be_visible()
    expect(sidebar.get_by_role("textbox", name="Sentence")).to_have_value(
        ENTRIES["sentence"].default_on(PAGE_NAMES[name]))
    if name == "Check_your_code":  # off on this server: it says how to check elsewhere
        expect(page.get_by_text("This server does not run visitors' code")).to_be_visible()
    elif name != "Home":
        # The charts mount one after another (the Experiments page's after its line
        # charts): wait for a third, which fails here if the page never shows one.
        page.wait_for_function("() => document.querySelectorAll('.explorer-chart').length >= 3",
                               timeout=RUN_TIMEOUT_MS)
        assert chart_count(page) >= 3
        heatmaps = page.locator(".explorer-chart:has(g.heatmaplayer):visible")
        if name != "Experiments":  # it opens on line charts; every other page on heatmaps
            expect(heatmaps.first).to_be_visible(timeout=RUN_TIMEOUT_MS)
            assert tick_labels(page, heatmaps.first) == ["Life", "is", "short", "eat",
                                                         "dessert", "first"]


@pytest.fixture
def read_only_server():
    """A server whose process sees the project's tree read-only (`in_read_only_tree`),
    as a read-only deploy does; skipped where no mount namespace can be made."""
    probe = subprocess.run(in_read_only_tree(["touch", str(ROOT / ".read-only-probe")]),
                           capture_output=True, text=True)
    if "Read-only file system" not in probe.stderr:
        (ROOT / ".read-only-probe").unlink(missing_ok=True)
        pytest.skip(f"no read-only mount here: {probe.stderr.strip() or probe.returncode}")
    yield from serve(read_only=True)


def test_the_app_serves_from_a_read_only_source_tree(read_only_server, page: Page):
    """Issue 26: nothing is written into the project at run time (the chart modules
    and Plotly.js are served from static/ as committed). The Self-attention page
    draws its charts and an edit redraws them."""
    page.goto(page_url(read_only_server, "Self_attention"))
    settle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    assert chart_count(page) >= 5
    page.locator(".st-key-seed input").fill("7")
    page.locator(".st-key-seed input").press("Enter")
    settle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    assert chart_count(page) >= 5


def test_typing_a_sentence_changes_the_axis_labels(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention"))
    settle(page)
    box = page.get_by_role("textbox", name="Sentence")
    box.fill("attention is all you need")
    box.press("Enter")
    settle(page)
    expect(page.locator(".explorer-chart").first.locator(".ytick text")).to_have_count(5)
    assert tick_labels(page, 0) == ["attention", "is", "all", "you", "need"]
    assert "sentence=attention+is+all+you+need" in page.url  # the link reproduces the view
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_settings_follow_the_visitor_between_pages(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention", d_in="4", seed="7"))
    settle(page)
    page.get_by_test_id("stSidebar").get_by_role("link", name="Simplified attention").click()
    page.wait_for_url("**/Simplified_attention*")
    settle(page)
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_role("spinbutton", name="d_in: embedding dim")).to_have_value("4")
    expect(sidebar.get_by_role("textbox", name="seed")).to_have_value("7")
    # X is 6×4 now: the first chart has 4 embedding-dim columns. Read until it does: a
    # page switch can end a run while the old page's charts are still on screen (seen
    # under load: the first chart then had the 6 tokens).
    expect(page.locator(".explorer-chart").first.locator(".xtick text")).to_have_text(
        ["0", "1", "2", "3"])


def test_hostile_sentence_runs_no_script(fresh_server, page: Page):
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(page_url(fresh_server, "Self_attention", sentence=HOSTILE))
    settle(page)
    chart_count(page)
    assert dialogs == []
    assert page.locator("img[src='x']").count() == 0
    # The tokens appear as literal text on the axes.
    assert tick_labels(page, 0)[:2] == ["<img", "src=x"]
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_bad_url_values_show_an_error_not_a_traceback(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention", d_in="0", seed="abc"))
    settle(page)
    errors = page.get_by_test_id("stAlertContentError")
    expect(errors.filter(has_text="d_in must be between 1 and 1024 (got 0)")).to_have_count(1)
    expect(errors.filter(has_text="seed must be a whole number")).to_have_count(1)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    # Fixing the seed in the sidebar brings the charts back.
    seed = page.get_by_role("textbox", name="seed")
    seed.fill("5")
    seed.press("Enter")
    settle(page)
    assert chart_count(page) >= 4


def test_preset_by_url_then_edit_a_cell_of_x(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention", preset="illustrated"))
    settle(page)
    chart_count(page)
    expect(page.get_by_test_id("stAlertContentSuccess")).to_contain_text(
        f"Matches the numbers printed in {PRESETS['illustrated'].source}")
    assert cell_texts(page, 0)[:4] == ["1.0000", "0.0000", "1.0000", "0.0000"]  # X row v_1
    scores_before = cell_texts(page, 7)

    # Double-click X's cell (v_1, dim 1) in the table and type 3.
    grid = page.get_by_test_id("stDataFrame").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    index_width, header_height, row_height, n_cols = 52, 36, 35, 4
    column_width = (box["width"] - index_width) / n_cols
    page.mouse.dblclick(box["x"] + index_width + 1.5 * column_width,
                        box["y"] + header_height + row_height / 2)
    cell_editor = page.locator("textarea.gdg-input")  # the grid's text editor overlay
    cell_editor.fill("3")
    cell_editor.press("Enter")
    settle(page)
    expect(page.locator(".explorer-chart").first.locator("g.heatmaplayer text").nth(1)).to_have_text(
        "3.0000")
    assert cell_texts(page, 7) != scores_before  # the scores heatmap followed
    expect(page.get_by_test_id("stAlertContentInfo")).to_contain_text("You have changed the setup")
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_multi_head_page_switches_heads_and_reports_bad_n_heads(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Causal_and_multi_head", d_in="4", d_k="4", d_v="4",
                       n_heads="2", causal="true"))
    settle(page)
    chart_count(page)
    expect(page.get_by_test_id("stAlertContentSuccess")).to_contain_text(
        "Verified against PyTorch")
    title = page.locator(".explorer-chart .gtitle", has_text="Attention weights")
    expect(title.first).to_contain_text("head 0")
    weights_chart = page.locator(".explorer-chart", has=page.locator(
        ".gtitle", has_text="Attention weights: α")).first
    head0 = weights_chart.locator("g.heatmaplayer text").all_text_contents()

    page.get_by_role("radio", name="head 1", exact=True).click()
    settle(page)
    expect(title.first).to_contain_text("head 1")
    head1 = weights_chart.locator("g.heatmaplayer text").all_text_contents()
    assert head0 != head1 and len(head1) == 36

    n_heads = page.get_by_role("spinbutton", name="n_heads")
    n_heads.fill("3")
    n_heads.press("Enter")
    settle(page)
    expect(page.get_by_test_id("stAlertContentError")).to_contain_text(
        "n_heads must divide both d_k=4 and d_v=4; choose one of 1, 2, 4 (got 3)")
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_click_a_score_cell_to_see_how_it_was_computed(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention"))
    settle(page)
    chart_count(page)
    scores = page.locator(".explorer-chart", has=page.locator(
        ".gtitle", has_text="Attention scores: ω")).first
    scores.scroll_into_view_if_needed()
    area = scores.locator(".nsewdrag").first.bounding_box()
    # Cell (query "is", key "Life") of the 6×6 scores: row 1, column 0.
    page.mouse.click(area["x"] + area["width"] * 0.5 / 6, area["y"] + area["height"] * 1.5 / 6)
    settle(page)
    explanation = page.get_by_test_id("stCode").filter(has_text="1.3464")
    expect(explanation).to_have_text("(−0.2336)·0.5177 + 1.3464·(−0.3670) = (−0.6150)")
    expect(page.get_by_text('ω["is", "Life"]', exact=True)).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)


@pytest.mark.parametrize("slug", list(PRESETS))
def test_every_preset_matches_its_notebook_in_the_browser(shared_server, page: Page, slug):
    preset = PRESETS[slug]
    page.goto(page_url(shared_server, url_path(PAGES[preset.page][0]), preset=slug))
    settle(page)
    chart_count(page)
    expect(page.get_by_test_id("stAlertContentSuccess").filter(
        has_text="Matches the numbers printed in")).to_contain_text(preset.source)
    expect(page.get_by_test_id("stException")).to_have_count(0)
