"""The declared state in Chromium: a link of random values opens the same view
in a fresh browser, on every page, and the three bugs of issue 16 are gone as a
visitor meets them (the Experiments link, hand-entered weights starting from
the numbers on screen, the CSV of the head shown)."""

from __future__ import annotations

import math
import urllib.parse

import numpy as np
import pytest
import torch
from playwright.sync_api import Browser, Page, expect

from explorer import AttentionConfig, compute_trace
from explorer.ui.matrices import parse_csv_matrix
from explorer.ui.navigation import PAGES
from tests.support.apptest import all_charts, page_link
from tests.support.browser import choose_option, page_url, settle, sidebar_link
from tests.support.server import RUN_COUNTER, RUN_TIMEOUT_MS, serve, url_path
from tests.support.tiny_models import plant_in_hub_cache, save_tiny_gpt2
from tests.ui.test_state import ATTENTION_PAGES, open_random

CHARTS = """() => Object.fromEntries([...document.querySelectorAll('.explorer-chart')].map((gd) => {
  const box = gd.closest("[class*='st-key-']");
  const key = [...box.classList].find((c) => c.startsWith('st-key-')).slice(7);
  const shapes = (gd.layout.shapes || []).map((s) => [s.x0, s.x1, s.y0, s.y1]);
  const z = gd.data.filter((t) => t.z).map((t) => t.z.map((row) => Array.from(row)));
  return [key, [gd.layout.title.text, shapes, JSON.stringify(z)]];
}))"""
"""Every chart in the page by its key: title, outlines, and its heatmaps'
numbers (NaN and ±∞, drawn as gaps, read as null)."""


def expected_charts(at) -> dict[str, list]:
    """`CHARTS` as the browser should read it, from an AppTest run's charts."""
    out = {}
    for key, figure in all_charts(at).items():
        shapes = [[s["x0"], s["x1"], s["y0"], s["y1"]] for s in figure["layout"].get("shapes", [])]
        z = [[[None if not math.isfinite(v) else float(v) for v in row]
              for row in np.asarray(t["z"], dtype=np.float32)] for t in figure["data"] if "z" in t]
        out[key] = [figure["layout"]["title"]["text"], shapes, z]
    return out


READ_WHEN_DRAWN = f"""(keys) => {{
  const charts = [...document.querySelectorAll('.explorer-chart')];
  const drawn = charts.length > 0 && charts.every((gd) => gd.layout && gd.data
    && gd.querySelector('.main-svg') && !gd.dataset.drawing);
  const read = drawn && ({CHARTS})();
  return read && keys.every((key) => key in read) && read;
}}"""
"""`CHARTS`, read in the same task as the check that every chart is drawn (a
chart mounted between a wait and a later read had no picture yet: seen once
in a full run, "Cannot read properties of undefined (reading 'shapes')"), and
once the charts named are all on the page."""


def browser_charts(page: Page, keys: tuple[str, ...] = ()) -> dict[str, list]:
    """Every chart on the page by its key (see `CHARTS`), read once each is drawn
    and every one of ``keys`` is among them: under CPU load, a chart of the run
    just settled can mount a moment later (a CI run read the Self-attention
    page without its W_query chart after a recipe switch)."""
    import json
    read = page.wait_for_function(READ_WHEN_DRAWN, arg=list(keys),
                                  timeout=RUN_TIMEOUT_MS).json_value()
    return {key: [title, shapes, json.loads(z)] for key, (title, shapes, z) in read.items()}


def fresh_page(browser: Browser, width: int = 1400) -> Page:
    context = browser.new_context(viewport={"width": width, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    context.set_default_timeout(90_000)
    return context.new_page()


@pytest.mark.parametrize("page_name", ATTENTION_PAGES)
def test_a_random_link_opens_the_same_view_in_a_fresh_browser(shared_server, browser: Browser,
                                                              page_name):
    at, _ = open_random(page_name, seed=100 + ATTENTION_PAGES.index(page_name))
    query = page_link(at)  # "?...": AppTest has no address
    path = url_path(PAGES[page_name][0])
    url = f"{shared_server.url}/{'' if path == 'Home' else path}{query}"
    page = fresh_page(browser)
    page.goto(url)
    settle(page)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    if page_name != "Home":
        expected = expected_charts(at)
        assert browser_charts(page, tuple(expected)) == expected
    assert sidebar_link(page).endswith(query) or query == ""
    page.context.close()


@pytest.fixture(scope="module")
def cached_model_server(tmp_path_factory):
    """A server whose Hugging Face cache holds a tiny GPT-2 as "distilgpt2" (the
    model the default budget opens on), offline: a link naming it opens."""
    root = tmp_path_factory.mktemp("hub")
    cache = plant_in_hub_cache(save_tiny_gpt2(root / "tiny"), root / "cache", "distilgpt2")
    yield from serve({"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)})


def test_a_real_model_link_opens_the_same_view_in_a_fresh_browser(cached_model_server,
                                                                  browser: Browser):
    first = fresh_page(browser)
    first.goto(page_url(cached_model_server, "Real_model", sentence="the cat sat on the mat",
                        layer="1", head="1", query="2", cell="attn_weights:2,1", lines="true"))
    settle(first)
    expect(first.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(first.get_by_text('α_1["·sat", "·cat"]', exact=True)).to_be_visible()
    here = browser_charts(first)
    link = sidebar_link(first)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(link).query) == {
        "model": ["distilgpt2"], "sentence": ["the cat sat on the mat"], "layer": ["1"],
        "head": ["1"], "query": ["2"], "cell": ["attn_weights:2,1"], "lines": ["true"]}
    other = fresh_page(browser)
    other.goto(link)
    settle(other)
    assert browser_charts(other, tuple(here)) == here
    expect(other.get_by_text('α_1["·sat", "·cat"]', exact=True)).to_be_visible()
    first.context.close()
    other.context.close()


# ---------------------------------------------------------------------------
# The three bugs of issue 16, as a visitor meets them
# ---------------------------------------------------------------------------
def test_the_experiments_link_keeps_the_temperature(shared_server, browser: Browser):
    page = fresh_page(browser)
    page.goto(page_url(shared_server, "Experiments", seed="9", experiment="Temperature"))
    settle(page)
    slider = page.get_by_test_id("stSlider").filter(has_text="temperature T")
    slider.get_by_role("slider").focus()
    page.keyboard.press("Home")  # the lowest stop: T = 0.05
    settle(page)
    link = sidebar_link(page)
    assert "temperature=0.05" in link and "experiment=temperature" in link
    here = browser_charts(page)
    trace = compute_trace(AttentionConfig(seed=9))
    expected = torch.softmax(trace["scaled_scores"].double() / 0.05, dim=-1).float()
    np.testing.assert_allclose(here["exp-temperature-weights"][2][0], expected.numpy(),
                               atol=1e-7)
    other = fresh_page(browser)
    other.goto(link)
    settle(other)
    assert browser_charts(other, tuple(here)) == here
    page.context.close()
    other.context.close()


def test_given_weights_start_from_the_book_weights_on_screen(shared_server, browser: Browser):
    page = fresh_page(browser)
    page.goto(page_url(shared_server, "Self_attention", preset="self-attention-v1"))
    settle(page)
    before = browser_charts(page)
    assert round(before["chart-context"][2][0][0][0], 4) == 0.2996  # §3.4.1's context[0, 0]
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Advanced: the recipes").click()
    choose_option(page, sidebar.get_by_test_id("stSelectbox").filter(has_text="weight_init"), "given")
    settle(page)
    expect(page.get_by_text("W_query: 3×2.")).to_be_visible()
    compared = ("chart-W_query", "chart-queries", "chart-attn_weights", "chart-context")
    after = browser_charts(page, compared)
    for key in compared:
        assert after[key][2] == before[key][2], key
    page.context.close()


def test_the_csv_download_is_of_the_head_shown(shared_server, browser: Browser, tmp_path):
    page = fresh_page(browser)
    page.goto(page_url(shared_server, "Causal_and_multi_head", d_k="4", d_v="4", n_heads="4"))
    settle(page)
    page.get_by_role("radio", name="head 3", exact=True).click()
    settle(page)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Take it with you").click()
    expect(sidebar.get_by_text("Head 3, the head shown on the page.")).to_be_visible()
    with page.expect_download() as info:
        sidebar.get_by_role("button", name="CSV").click()
    assert info.value.suggested_filename.startswith("attn_weights_head3_")
    numbers = parse_csv_matrix(info.value.path().read_bytes(), (6, 6), "attn_weights")
    trace = compute_trace(AttentionConfig(d_k=4, d_v=4, n_heads=4, causal=True))
    assert torch.equal(torch.tensor(numbers, dtype=torch.float32), trace["attn_weights"][3])
    page.context.close()
