"""Playwright: the "Real model" page with a Llama-family model in headless Chromium
at desktop and phone widths, against a freshly started server (offline, folders
allowed), a tiny random Llama saved to a folder (`tests.support.tiny_decoders`)
and opened through the sidebar: every chart drawn, the checks passed, nothing
wider than the screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from explorer.models.catalogue import DEFAULT_MODEL
from tests.support.browser import chart_count, choose_option, page_url, settle
from tests.support.server import RUN_COUNTER
from tests.support.tiny_decoders import save_tiny_decoder

SENTENCE = "the cat sat on the mat"
N_CHARTS = 30
"""A tiny Llama (no biases, no QK-norm): the layer's input, rms, its weight and X;
W_query, W_key, W_value; Q, K, V; θ, cos, sin; Q and K again beside Q and K after
RoPE; the scores, scaled, the mask, masked, the weights; the context, W_out,
the head's output, the output; the generated token's scores and weights, every
generated row; the layers × heads grid."""


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return save_tiny_decoder(tmp_path_factory.mktemp("decoders") / "tiny-llama", "llama")


@pytest.mark.parametrize("width", [1400, 390])
def test_a_llama_folder_draws_every_chart_within_the_screen(offline_server, llama_dir,
                                                             browser: Browser, width):
    context = browser.new_context(viewport={"width": width, "height": 1000})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(offline_server, "Real_model", sentence=SENTENCE, model=DEFAULT_MODEL))
    settle(page)
    if width < 500:  # the sidebar starts closed on a phone
        page.get_by_test_id("stExpandSidebarButton").click()
    sidebar = page.get_by_test_id("stSidebar")
    choose_option(page, sidebar.get_by_test_id("stSelectbox").filter(has_text="Model"),
                  "a local folder…")
    settle(page)
    box = sidebar.get_by_role("textbox", name="Folder")
    box.fill(str(llama_dir))
    box.press("Enter")
    settle(page)
    assert chart_count(page) == N_CHARTS
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    success = page.get_by_test_id("stAlertContentSuccess")
    expect(success.first).to_contain_text("Verified against the model")
    expect(success.filter(has_text="differ from the rows of one full forward pass")).to_have_count(1)
    main = page.get_by_test_id("stMain")
    assert main.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1")
    context.close()
