"""A heatmap for the keyboard and a screen reader in Chromium (issue 50): its
accessible name, the cell cursor (Tab in, arrows, Home/End, Enter explains the
cell as a click does, Escape out), the live region and the "Show as table" table
with the chart's numbers, and the same walk on every other page kind whose heatmaps
explain a clicked cell. The pure parts: tests/render/chart/keys.test.mjs."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from explorer.ui.backward import CHART_KEY
from tests.support.browser import (
    HOSTILE,
    chart_count,
    open_model_folder,
    page_url,
    settle,
)
from tests.support.tiny_models import save_tiny_gpt2

SCORES = "Attention scores: ω"
TOKENS = ["Life", "is", "short", "eat", "dessert", "first"]


def _scores(page: Page):
    """The host (Streamlit's element) of the Self-attention page's scores chart."""
    return page.locator(".explorer-host", has=page.locator(".gtitle", has_text=SCORES)).first


def _tab_into(page: Page, keys) -> None:
    """Tab from the last focusable element before the chart's ``keys`` into it."""
    keys.evaluate("""(keys) => {
      const all = [...document.querySelectorAll("a[href], button, input, select, summary, "
        + "textarea, [tabindex]")].filter((el) => el.tabIndex >= 0 && el.getClientRects().length
        && !el.disabled);
      all[all.indexOf(keys) - 1].focus();
    }""")
    # (Chromium makes a scroller without focusable content, such as a KaTeX equation a
    # pixel wider than its box, a Tab stop of its own: one may lie between.)
    for _ in range(3):
        page.keyboard.press("Tab")
        if keys.evaluate("(keys) => document.activeElement === keys"):
            break
    expect(keys).to_be_focused()


def test_a_heatmap_is_named_and_walked_by_keyboard_and_enter_explains_as_a_click(
        fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention"))
    settle(page)
    chart_count(page)
    host = _scores(page)
    host.scroll_into_view_if_needed()
    keys = host.locator(".explorer-keys")
    name = keys.get_attribute("aria-label")
    assert name.startswith("Heatmap: Attention scores: ω"), name
    assert "6 × 6 matrix; rows (query): Life, is, short, eat, dessert, first; " \
           "columns (key): Life, is, short, eat, dessert, first." in name
    _tab_into(page, keys)
    live = host.locator(".explorer-live")
    expect(live).to_have_text("query Life, key Life: 0.3522. Row 1 of 6, column 1 of 6.")
    cursor = host.locator(".explorer-cursor")
    expect(cursor).to_be_visible()
    area = host.locator(".explorer-chart .nsewdrag").first.bounding_box()
    box = cursor.bounding_box()
    assert abs(box["x"] - area["x"]) < 1.5 and abs(box["width"] - area["width"] / 6) < 1.5
    page.keyboard.press("End")
    expect(live).to_contain_text("query Life, key first:")
    page.keyboard.press("Home")
    page.keyboard.press("ArrowDown")
    expect(live).to_have_text("query is, key Life: −0.6150. Row 2 of 6, column 1 of 6.")
    box = cursor.bounding_box()
    assert abs(box["y"] - (area["y"] + area["height"] / 6)) < 1.5
    page.keyboard.press("Enter")  # what test_browser's click on (is, Life) shows
    settle(page)
    explanation = page.get_by_test_id("stCode").filter(has_text="1.3464")
    expect(explanation).to_have_text("(−0.2336)·0.5177 + 1.3464·(−0.3670) = (−0.6150)")
    expect(page.get_by_text('ω["is", "Life"]', exact=True)).to_be_visible()
    keys = _scores(page).locator(".explorer-keys")
    keys.focus()
    page.keyboard.press("Escape")
    expect(keys).not_to_be_focused()
    expect(page.get_by_test_id("stException")).to_have_count(0)


def test_show_as_table_holds_the_charts_numbers_with_headers(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention"))
    settle(page)
    chart_count(page)
    host = _scores(page)
    host.scroll_into_view_if_needed()
    summary = host.locator(".explorer-table summary")
    summary.focus()
    page.keyboard.press("Enter")  # one keystroke away
    # As Chromium's accessibility tree gives it to a screen reader (ARIA roles).
    table = host.get_by_role("table")
    expect(table).to_be_visible()
    assert table.get_by_role("columnheader").all_text_contents() == TOKENS
    assert table.get_by_role("rowheader").all_text_contents() == TOKENS
    second = table.get_by_role("row").nth(2)  # the header row, then "Life", then "is"
    assert second.get_by_role("cell").first.text_content() == "−0.6150"  # as the hover says
    assert second.get_by_role("cell").all_text_contents() == [
        "−0.6150", "2.4277", "−0.9584", "0.2260", "1.2082", "0.5242"]  # as the chart prints


def test_a_masked_cell_reads_masked_and_visitor_tokens_stay_text(fresh_server, page: Page):
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(page_url(fresh_server, "Causal_and_multi_head", sentence=HOSTILE))
    settle(page)
    chart_count(page)
    host = page.locator(".explorer-host", has=page.locator(".gtitle", has_text="Masked scores")
                        ).first
    host.scroll_into_view_if_needed()
    keys = host.locator(".explorer-keys")
    # HOSTILE's tokens: "<img", "src=x", "onerror=alert(1)>" (as the axes write them).
    assert "rows (query): <img, src=x, onerror=alert(1)>;" in keys.get_attribute("aria-label")
    keys.focus()
    page.keyboard.press("ArrowRight")  # query "<img", key "src=x": in the future
    expect(host.locator(".explorer-live")).to_have_text(
        "query <img, key src=x: masked (−∞). Row 1 of 3, column 2 of 3.")
    host.locator(".explorer-table summary").click()
    table = host.get_by_role("table")
    assert table.get_by_role("rowheader").all_text_contents() == [
        "<img", "src=x", "onerror=alert(1)>"]
    assert table.get_by_role("row").nth(1).get_by_role("cell").all_text_contents()[1:] == [
        "masked (−∞)", "masked (−∞)"]
    assert page.locator("img[src='x']").count() == 0 and dialogs == []


EXPLAINED = "xpath=ancestor::div[@data-testid='stVerticalBlock'][1]"
"""From the explanation's bold cell name up to its box (`explanation_box`)."""
EXPLANATION_TEXT = """(box) => [...box.querySelectorAll(
  "[data-testid='stMarkdown'], [data-testid='stCode'], [data-testid='stCaption']")]
  .map((el) => el.innerText.trim()).join("\\n")"""
LIVE = re.compile(r"Row 2 of (\d+), column 2 of (\d+)\.$")
HEATMAP = ".explorer-host:has(> .explorer-keys[tabindex='0'])"
"""A chart that shows one matrix: a Tab stop with a cell cursor."""
# Every page kind but Self-attention (the first test): its link's parameters and its
# first heatmap that explains a clicked cell. The Home, Experiments and Check pages'
# charts explain no clicked cell.
KINDS = {
    "Causal_and_multi_head": ({}, HEATMAP),  # per-head charts
    "Modern_attention": ({}, HEATMAP),
    # One training step keeps the run light. dL/dQ, as test_browser_backward clicks it:
    # the logits and their gradient, first on the page, explain no cell.
    "Backward_pass": ({"train_steps": "1"}, f".st-key-{CHART_KEY}queries {HEATMAP}"),
    "Frontier_attention": ({}, HEATMAP),
    "Real_model": ({}, HEATMAP),  # a tiny random GPT-2 opened from a folder
}


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2")


def _open(page: Page, server, name: str, folder) -> None:
    if name == "Real_model":
        open_model_folder(page, server, folder)
    else:
        page.goto(page_url(server, name, **KINDS[name][0]))
        settle(page)
    chart_count(page)


def _explanation(page: Page) -> str:
    """The text of the page's explained cell's box: its bold name (such as
    ``ω["is", "Life"]``) and position, formula, computation and note."""
    name = page.get_by_test_id("stMain").get_by_test_id("stMarkdown").locator(
        "strong", has_text=re.compile(r"\[.+\]")).first
    expect(name).to_be_visible()
    # The box's lines can arrive in more than one render (a loaded machine showed the
    # Backward page's sum line a moment after the rest): read until two reads agree.
    text = name.locator(EXPLAINED).evaluate(EXPLANATION_TEXT)
    for _ in range(40):
        page.wait_for_timeout(250)
        again = name.locator(EXPLAINED).evaluate(EXPLANATION_TEXT)
        if again == text:
            return text
        text = again
    return text


def _click_cell(page: Page, host, y: float, x: float) -> None:
    """Click the point (``x``, ``y``), as fractions of its width and height, of
    the plot area of ``host``'s chart, once the area has stopped moving (under load
    a formula drawn above it late can still push it down) and the point is the
    plot's own (not under another element)."""
    area = host.locator(".explorer-chart .nsewdrag").first
    box, before = area.bounding_box(), None
    while box != before:
        page.wait_for_timeout(250)
        box, before = area.bounding_box(), box
    point = {"x": box["x"] + box["width"] * x, "y": box["y"] + box["height"] * y}
    assert area.evaluate("(drag, p) => drag.contains(document.elementFromPoint(p.x, p.y))"
                         " || document.elementFromPoint(p.x, p.y) === drag", point)
    page.mouse.click(point["x"], point["y"])


@pytest.mark.parametrize("name", list(KINDS))
def test_on_every_page_kind_enter_explains_the_cell_a_click_explains(
        offline_server, gpt2_dir, page: Page, name):
    _open(page, offline_server, name, gpt2_dir)
    host = page.locator(KINDS[name][1]).first
    host.scroll_into_view_if_needed()
    keys = host.locator(".explorer-keys")
    title = keys.get_attribute("aria-label")
    _tab_into(page, keys)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    live = host.locator(".explorer-live")
    expect(live).to_have_text(LIVE)
    said = live.text_content()
    rows, cols = map(int, LIVE.search(said).groups())
    expect(page.get_by_test_id("stMain").locator("strong", has_text=re.compile(r"\[.+\]"))
           ).to_have_count(0)  # no cell explained yet
    page.keyboard.press("Enter")
    settle(page)
    by_keyboard = _explanation(page)
    assert "row 1, column 1)" in by_keyboard, by_keyboard  # the cursor's cell (per head too)
    expect(page.get_by_test_id("stException")).to_have_count(0)

    _open(page, offline_server, name, gpt2_dir)  # a fresh load: nothing explained
    host = page.locator(KINDS[name][1]).first
    host.scroll_into_view_if_needed()
    assert host.locator(".explorer-keys").get_attribute("aria-label") == title  # the same chart
    _click_cell(page, host, 1.5 / rows, 1.5 / cols)  # row 1, column 1
    settle(page)
    assert _explanation(page) == by_keyboard, said
    expect(page.get_by_test_id("stException")).to_have_count(0)
