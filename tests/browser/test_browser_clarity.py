"""What only a browser can tell: cell numbers that never overlap, a link that
reproduces the view in a fresh browser, and a toolbar that covers nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import chart_count, page_url, settle, sidebar_link
from tests.support.server import RUN_COUNTER

TEN_TOKENS = "the cat sat on the mat and then it slept"
CELL_TEXTS = """() => [...document.querySelectorAll('.explorer-chart')].map((gd) => {
  const z = gd.data[0].z;
  const rows = z.length, cols = z[0].length;
  const area = gd.querySelector('.nsewdrag').getBoundingClientRect();
  const texts = [...gd.querySelectorAll('.heatmaplayer text')].filter((t) => t.textContent)
    .map((t) => { const b = t.getBoundingClientRect();
                  return {x0: b.left, x1: b.right, y0: b.top, y1: b.bottom}; });
  return {title: gd.layout.title.text, cellWidth: area.width / cols,
          cellHeight: area.height / rows, texts};
})"""
NUMBERS = """() => [...document.querySelectorAll('.explorer-chart')].map((gd) => {
  let sum = 0, count = 0;
  for (const row of gd.data[0].z) for (const v of row) if (Number.isFinite(v)) { sum += v; count++; }
  const shapes = (gd.layout.shapes || []).map((s) => [s.x0, s.y0]);
  return [gd.layout.title.text, count, Math.round(sum * 1e4) / 1e4, JSON.stringify(shapes)];
})"""


def _overlap(a: dict, b: dict) -> bool:
    return min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > 0.5 and \
        min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > 0.5


@pytest.mark.parametrize("width", [1400, 390])
def test_numbers_in_cells_never_overlap_and_fit_their_cell(shared_server, browser: Browser,
                                                           width):
    context = browser.new_context(viewport={"width": width, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(shared_server, "Self_attention", sentence=TEN_TOKENS))
    settle(page)
    chart_count(page)
    charts = page.evaluate(CELL_TEXTS)
    assert len(charts) == 11
    printed = 0
    for chart in charts:
        texts = chart["texts"]
        printed += len(texts)
        for i, a in enumerate(texts):
            assert a["x1"] - a["x0"] <= chart["cellWidth"] + 0.5, chart["title"]
            assert not any(_overlap(a, b) for b in texts[i + 1:]), chart["title"]
    if width == 1400:  # at desktop width the 10×10 weights print their numbers
        weights = next(c for c in charts if c["title"].startswith("Attention weights"))
        assert len(weights["texts"]) == 100
    assert printed > 0
    context.close()


def test_the_link_opens_the_same_view_in_a_fresh_browser(shared_server, page: Page,
                                                         browser: Browser):
    page.goto(page_url(shared_server, "Self_attention", preset="life-is-short", d_k="3",
                       query="2"))
    settle(page)
    chart_count(page)
    # Explain a cell by clicking it: attn_scores row 3 ("eat"), column 1 ("is").
    scores = page.locator(".st-key-chart-attn_scores .explorer-chart")
    scores.scroll_into_view_if_needed()
    area = scores.locator(".nsewdrag").bounding_box()
    page.mouse.click(area["x"] + area["width"] * 1.5 / 6, area["y"] + area["height"] * 3.5 / 6)
    settle(page)
    expect(page.get_by_text('ω["eat", "is"]', exact=True)).to_be_visible()
    link = sidebar_link(page)
    assert "preset=life-is-short" in link and "d_k=3" in link and "cell=attn_scores:3,1" in link
    chart_count(page)
    here = page.evaluate(NUMBERS)

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    fresh.add_init_script(RUN_COUNTER)
    other = fresh.new_page()
    other.goto(link)
    settle(other)
    chart_count(other)
    assert other.evaluate(NUMBERS) == here  # same numbers, same outlines (query and cell)
    expect(other.get_by_text('ω["eat", "is"]', exact=True)).to_be_visible()
    fresh.close()


def test_the_toolbar_shows_on_hover_beside_the_title_and_not_on_touch_screens(
        shared_server, browser: Browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(shared_server, "Self_attention"))
    settle(page)
    chart_count(page)
    chart = page.locator(".st-key-chart-attn_weights .explorer-chart")
    modebar = chart.locator(".modebar")
    chart.hover()
    expect(modebar).to_be_visible()
    bar, title = modebar.bounding_box(), chart.locator(".gtitle").bounding_box()
    assert bar["x"] >= title["x"] + title["width"] or bar["y"] >= title["y"] + title["height"]
    context.close()

    # Nor does it cover cells: on a short, wide chart (2 tokens × 32 dims) it once
    # wrapped into two columns over the top-right cells, which a click then missed.
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(page_url(shared_server, "Self_attention", sentence="one two", d_in="32",
                       d_k="32", d_v="32"))
    page.locator(".st-key-chart-queries .explorer-chart .nsewdrag").wait_for()
    for key in ("queries", "keys", "values", "attn_weights"):
        chart = page.locator(f".st-key-chart-{key} .explorer-chart")
        chart.scroll_into_view_if_needed()
        chart.hover()
        bar, cells = chart.locator(".modebar").bounding_box(), \
            chart.locator(".nsewdrag").first.bounding_box()
        assert bar["x"] >= cells["x"] + cells["width"] or bar["y"] >= cells["y"] + cells[
            "height"], (key, bar, cells)
    page.context.close()

    touch = browser.new_context(viewport={"width": 390, "height": 800}, has_touch=True,
                                is_mobile=True)
    touch.add_init_script(RUN_COUNTER)
    phone = touch.new_page()
    phone.goto(page_url(shared_server, "Self_attention"))
    settle(phone)
    chart_count(phone)
    phone.locator(".st-key-chart-attn_weights .explorer-chart").tap()
    expect(phone.locator(".st-key-chart-attn_weights .modebar")).to_have_count(0)
    touch.close()


def _cell_texts(page: Page, locator: str) -> dict:
    """One chart's printed cell numbers (their boxes) and its cell size."""
    return page.locator(locator).evaluate(f"(gd) => ({CELL_TEXTS})().find((c) => "
                                          "c.title === gd.layout.title.text)")


def test_compare_with_sum_normalisation_prints_numbers_on_a_scale_that_covers_them(
        shared_server, browser: Browser):
    """Issue 31, point 5: B = sum gave weights from −1 to 1.6 on a 0–1 scale, and
    no numbers (two decimals did not fit the narrow panels; one does)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(shared_server, "Experiments", experiment="compare",
                       b_normalization="sum"))
    settle(page)
    chart_count(page)
    for part in ("a", "b", "diff"):
        for name in ("attn_weights", "context"):
            locator = f".st-key-exp-compare-{name}-{part} .explorer-chart"
            chart = _cell_texts(page, locator)
            assert len(chart["texts"]) == (36 if name == "attn_weights" else 24), (part, name)
            scale = page.locator(locator).evaluate(
                "(gd) => { const z = gd.data[0].z.flat().filter(Number.isFinite);"
                " return [gd.data[0].zmin, gd.data[0].zmax, Math.min(...z), Math.max(...z)]; }")
            assert scale[0] <= scale[2] and scale[1] >= scale[3], (part, name, scale)
    context.close()


FORMULAS_WIDER_THAN_THEIR_BOX = """() => [...document.querySelectorAll('.katex-display')]
  .filter((e) => e.scrollWidth > e.clientWidth + 4)
  .map((e) => [e.querySelector('annotation')?.textContent, e.scrollWidth, e.clientWidth])"""


@pytest.mark.parametrize("page_name, query", [
    ("Causal_and_multi_head", {}),  # Z = αV ... (heads concatenated)
    ("Causal_and_multi_head", {"dropout": "0.1"}),
    ("Self_attention", {"normalization": "naive_softmax"}),  # (no max shift: may overflow)
    ("Backward_pass", {"train_steps": "1"}),  # FlashAttention-2's six lines ran 11 px past
    ("Modern_attention", {}),
])
def test_no_formula_is_cut_on_a_phone(shared_server, browser: Browser, page_name, query):
    """Issue 31, point 7: at 390 px "Z = αV, z_i = Σ α_ij v_j (heads concatenated)"
    ran 52 px past its box and was cut (the multi-head and Real model pages)."""
    context = browser.new_context(viewport={"width": 390, "height": 900})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(shared_server, page_name, **query))
    settle(page)
    chart_count(page)
    # Every formula drawn (a CI run read the Modern page's with 2 of its 6 on screen).
    page.wait_for_function("() => document.querySelectorAll('.katex-display').length > 5")
    assert page.evaluate(FORMULAS_WIDER_THAN_THEIR_BOX) == []
    context.close()


def test_no_formula_is_cut_on_a_phone_on_the_real_model_page(offline_server, browser: Browser,
                                                              tmp_path):
    """The Real model page draws the same steps' formulas, and its X's ("token i's
    input to layer 0") ran 25 px past a phone's width. The folder is chosen at
    1400 px (the sidebar is open), then the window narrows to 390."""
    from tests.support.browser import open_model_folder
    from tests.support.tiny_models import save_tiny_gpt2

    folder = save_tiny_gpt2(tmp_path / "tiny-gpt2")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    open_model_folder(page, offline_server, folder)
    chart_count(page)
    page.set_viewport_size({"width": 390, "height": 900})
    page.wait_for_function("() => document.querySelector('.katex-display').clientWidth < 380")
    assert page.locator(".katex-display").count() > 10
    assert page.evaluate(FORMULAS_WIDER_THAN_THEIR_BOX) == []
    context.close()
