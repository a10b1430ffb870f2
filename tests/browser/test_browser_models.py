"""Playwright: the "Real model" page in headless Chromium against a freshly
started server (``HF_HUB_OFFLINE=1``, so "gpt2" has no weights), with a tiny
random GPT-2 saved to a folder and opened through the sidebar, as a visitor would.
Each starts from a link naming the catalogue's default model (no weights here),
not from the page's offline default (all-MiniLM-L6-v2, when its package is
installed: tests/ui/test_app_packaged.py), so that no trained model is loaded first."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from explorer.models import download_command
from explorer.ui.real_model import DEFAULT_MODEL
from tests.support.browser import chart_count, open_model_folder, page_url, settle
from tests.support.tiny_models import save_tiny_gpt2

SENTENCE = "the cat sat on the mat"
N_CHARTS = 21  # 20 steps (GPT-2: causal mask and masked scores; W, b, context sliced) + the grid


@pytest.fixture(scope="module")
def model_server(offline_server):
    return offline_server


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2")


def no_error(page: Page) -> None:
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)


def test_no_weights_and_no_network_is_said_with_the_command(model_server, page: Page):
    page.goto(page_url(model_server, "Real_model", model=DEFAULT_MODEL))
    settle(page)
    expect(page.get_by_test_id("stAlertContentInfo")).to_contain_text(
        f"No weights for '{DEFAULT_MODEL}' on this machine")
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(page.get_by_test_id("stCode").filter(has_text=download_command(DEFAULT_MODEL))).to_have_count(1)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    assert page.locator(".explorer-chart").count() == 0


def test_a_folder_model_draws_every_chart_opens_a_head_and_draws_lines(
        model_server, gpt2_dir, page: Page):
    open_model_folder(page, model_server, gpt2_dir, SENTENCE)
    chart_count(page)
    expect(page.locator(".explorer-chart")).to_have_count(N_CHARTS)
    no_error(page)
    expect(page.get_by_test_id("stAlertContentSuccess").first).to_contain_text(
        "Verified against the model")
    assert "model=" not in page.url  # a folder never goes into the link

    # Click the thumbnail of layer 1, head 1 (the grid's 4th plot).
    grid = page.locator(".explorer-chart", has=page.locator(
        ".gtitle", has_text="Every head's attention weights"))
    grid.scroll_into_view_if_needed()
    area = grid.locator(".nsewdrag").nth(3).bounding_box()
    page.mouse.click(area["x"] + area["width"] / 2, area["y"] + area["height"] / 2)
    settle(page)
    expect(page.get_by_role("radio", name="layer 1", exact=True)).to_have_attribute(
        "aria-checked", "true")
    expect(page.get_by_role("radio", name="head 1", exact=True)).to_have_attribute(
        "aria-checked", "true")
    weights = page.locator(".explorer-chart .gtitle", has_text="Attention weights: α")
    expect(weights.first).to_contain_text("head 1")
    assert "layer=1" in page.url and "head=1" in page.url

    # A click on a weight explains it; the chart reruns alone and, a real model's
    # layer not being in the trace cache, asks the whole page to draw it.
    main = page.get_by_test_id("stMain")
    codes = main.get_by_test_id("stCode").count()
    plot = page.locator(".st-key-chart-attn_weights .explorer-chart")
    plot.scroll_into_view_if_needed()
    area = plot.locator(".nsewdrag").bounding_box()
    page.mouse.click(area["x"] + 5, area["y"] + 5)  # the first row's first weight
    settle(page)
    expect(main.get_by_test_id("stCode")).to_have_count(codes + 1)
    expect(page).to_have_url(re.compile(r"cell=attn_weights(:|%3A)0(,|%2C)0"))
    no_error(page)

    # "Show as lines" draws the weights as lines from query to key tokens.
    page.get_by_role("switch", name="Show as lines").click()
    settle(page)
    lines = page.locator(".explorer-lines:not(.explorer-offscreen)",
                         has=page.locator(".gtitle", has_text="query → key"))
    expect(lines).to_have_count(1)
    assert lines.locator(".scatterlayer path.js-line").count() >= 2  # a path per weight bin
    no_error(page)
