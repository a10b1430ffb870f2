"""Every page on a phone (390 px) in Chromium, measured by bounding boxes (issue 40):
no table column beyond the screen without a visible way to it, no table toolbar
over a heading, an axis title clear of its tick labels, "head" never parted
from its number in a chart title, and Home's directions for a folded sidebar."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from explorer.lessons.pages import HOME_PAGE
from explorer.ui.navigation import PAGES as MENU
from tests.support.browser import page_url, settle
from tests.support.server import PAGE_FILES, RUN_COUNTER

WIDTH = 390
GAP_PX = 3
"""The least air between an axis title and its tick labels (without a standoff: 1.4 px
beside the y ticks, -3.7 px, overlapping, under the x ticks)."""

TABLES = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const table of document.querySelectorAll("[data-testid=stTable] table")) {
    const heads = [...table.querySelectorAll("thead th")];
    const box = table.closest("[data-testid=stTable]").getBoundingClientRect();
    out.push({kind: "table", heads: heads.map((th) => th.textContent.trim()),
              beyond: heads.filter((th) => th.getBoundingClientRect().right > width + 0.5)
                           .map((th) => th.textContent.trim()), right: box.right});
  }
  return {width, tables: out};
}"""
GRID = """(frame) => { const scroller = frame.querySelector(".dvn-scroller");
  return scroller && {kind: "dataframe", hidden: scroller.scrollWidth - scroller.clientWidth,
                      right: frame.getBoundingClientRect().right}; }"""
"""A data grid (st.dataframe, drawn on a canvas when on the screen): how many px of its
columns are beyond its box."""

AXES = """() => [...document.querySelectorAll(".explorer-chart")].flatMap((gd) => {
  const title = gd.querySelector(".gtitle")?.textContent ?? "";
  const found = [];
  for (const axis of ["x", "y"]) {
    const name = gd.querySelector(`.g-${axis}title text`);
    const ticks = [...gd.querySelectorAll(`.${axis}axislayer-above .${axis}tick text`)]
      .map((t) => t.getBoundingClientRect()).filter((r) => r.width > 0);
    if (!name || !ticks.length || !name.textContent) continue;
    const box = name.getBoundingClientRect();
    const gap = axis === "y" ? Math.min(...ticks.map((r) => r.left)) - box.right
                             : box.top - Math.max(...ticks.map((r) => r.bottom));
    found.push({title, axis, text: name.textContent, gap});
  }
  return found;
})"""

TITLE_LINES = """() => [...document.querySelectorAll(".explorer-chart .gtitle")].map((title) => {
  const lines = [...title.querySelectorAll("tspan.line")].map((t) => t.textContent);
  return lines.length ? lines : [title.textContent];
})"""

HEADINGS = """() => [...document.querySelectorAll(
    "[data-testid=stMain] h1, [data-testid=stMain] h2, [data-testid=stMain] h3")]
  .map((h) => { const r = h.getBoundingClientRect();
                return {text: h.textContent, left: r.left, right: r.right, top: r.top,
                        bottom: r.bottom}; })"""


def _open(server, browser: Browser, name: str, **query: str):
    context = browser.new_context(viewport={"width": WIDTH, "height": 900}, is_mobile=True,
                                  has_touch=True)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(server, name, **query))
    settle(page)
    expect(page.get_by_test_id("stMain").locator("h1").first).to_be_visible()
    page.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for(
        state="attached")
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0)
    page.wait_for_function("""() => [...document.querySelectorAll(".explorer-chart")]
        .every((c) => c.querySelector(".main-svg") && !c.dataset.drawing)""")
    return context, page


def _scroll_through(page: Page) -> None:
    """Scroll the page top to bottom, so that every chart (drawn lazily) is drawn."""
    main = page.get_by_test_id("stMain")
    height = main.evaluate("(el) => el.scrollHeight")
    for top in range(0, int(height) + 900, 800):
        main.evaluate("(el, top) => el.scrollTo(0, top)", top)
        page.wait_for_timeout(60)
    page.wait_for_function("""() => [...document.querySelectorAll(".explorer-chart")]
        .every((c) => c.querySelector(".main-svg") && !c.dataset.drawing)""")


PAGES = [name for name in PAGE_FILES if name not in ("Real_model",)]
"""The pages with what they draw by default (the Real model page draws once a model loads)."""


@pytest.mark.parametrize("name", PAGES)
def test_a_phone_sees_every_table_column_and_every_axis_title_clear(shared_server,
                                                                    browser: Browser, name):
    context, page = _open(shared_server, browser, name)
    _scroll_through(page)
    measured = page.evaluate(TABLES)
    frames = page.get_by_test_id("stDataFrame")
    for i in range(frames.count()):
        frames.nth(i).scroll_into_view_if_needed()
        page.wait_for_function(f"() => document.querySelectorAll("
                               f"'[data-testid=stDataFrame]')[{i}].querySelector('.dvn-scroller')")
        page.wait_for_timeout(200)  # the grid sizes its columns
        measured["tables"].append(frames.nth(i).evaluate(GRID))
    for table in measured["tables"]:
        if table["kind"] == "table":
            assert table["beyond"] == [], (name, table)  # every column on the screen
        else:
            assert table["hidden"] <= 1, (name, table)  # a data grid no wider than its box
        assert table["right"] <= measured["width"] + 0.5, (name, table)
    for axis in page.evaluate(AXES):
        assert axis["gap"] >= GAP_PX, (name, axis)
    for lines in page.evaluate(TITLE_LINES):
        for line, after in zip(lines, lines[1:]):
            assert not (line.rstrip().endswith(("head", "layer")) and after[:1].isdigit()), (
                name, lines)
    context.close()


@pytest.mark.parametrize("name", ["Home", "Causal_and_multi_head", "Experiments"])
def test_a_tables_toolbar_covers_no_heading(shared_server, browser: Browser, name):
    context, page = _open(shared_server, browser, name)
    frames = page.get_by_test_id("stDataFrame")
    for i in range(frames.count()):
        frame = frames.nth(i)
        frame.scroll_into_view_if_needed()
        frame.tap()  # a phone shows the toolbar on a tap
        page.wait_for_timeout(300)
        for bar in page.get_by_test_id("stElementToolbar").all():
            box = bar.bounding_box()
            if not box or not bar.is_visible():
                continue
            for heading in page.evaluate(HEADINGS):
                overlap = (box["x"] < heading["right"] and heading["left"] < box["x"] + box["width"]
                           and box["y"] < heading["bottom"]
                           and heading["top"] < box["y"] + box["height"])
                assert not overlap, (name, heading["text"], box)
    context.close()


def test_home_on_a_phone_says_how_to_open_the_folded_sidebar(shared_server, browser: Browser):
    context, page = _open(shared_server, browser, "Home")
    expect(page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "true")
    main = page.get_by_test_id("stMain")
    expect(main).to_contain_text("on a phone it is folded away")
    expect(main).not_to_contain_text("pick the sizes in the sidebar")
    for label in MENU:
        if label != HOME_PAGE:
            expect(main.locator("li strong", has_text=label).first).to_be_visible()
    context.close()


def test_the_modern_page_keeps_its_parts_on_a_phone_when_a_tile_size_is_bad(shared_server,
                                                                            browser: Browser):
    context, page = _open(shared_server, browser, "Modern_attention", block_q="50")
    alert = page.get_by_test_id("stAlertContentError")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("block_q must be between 1 and the 6 tokens (got 50)")
    expect(page.locator(".st-key-modern-cos .explorer-chart")).to_have_count(1)
    context.close()
