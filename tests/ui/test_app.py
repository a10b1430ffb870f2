"""AppTest: every page as a visitor uses it, checked against the backend's numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.ui import state
from tests.support.apptest import (
    HOSTILE,
    all_charts,
    charts,
    errors,
    open_page,
    pick,
    picked,
    read_numbers,
    z_values,
)
from tests.support.server import HOME, PAGE_FILES

PAGES = [path for name, path in PAGE_FILES.items()  # the attention pages; their own tests:
         if name not in ("Real_model", "Check_your_code")]  # test_app_models, test_app_check


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_with_defaults_and_no_error(page):
    at = open_page(page)
    assert not at.exception
    assert errors(at) == []
    assert at.title[0].value  # every page explains itself under a title
    assert at.text_input(key="sentence").value == "Life is short, eat dessert first"
    assert at.number_input(key="d_in").value == 3
    assert at.text_input(key="seed").value == "123"
    # not offered: d_k = d_v = d_in on the Simplified page; head_dim on the Modern and
    # Frontier ones
    if page in (PAGE_FILES["Simplified_attention"], PAGE_FILES["Modern_attention"],
                PAGE_FILES["Frontier_attention"]):
        assert [w.key for w in at.number_input].count("d_k") == 0
    else:
        assert at.number_input(key="d_k").value == 2
        assert at.number_input(key="d_v").value == 4


def test_self_attention_heatmaps_equal_the_backend():
    at = open_page(PAGE_FILES["Self_attention"], {"d_in": "5", "d_k": "3", "d_v": "2", "seed": "7"})
    trace = compute_trace(AttentionConfig(d_in=5, d_k=3, d_v=2, seed=7))
    shown = charts(at)
    assert list(shown) == ["embeddings", "W_query", "W_key", "W_value", "queries", "keys",
                           "values", "attn_scores", "scaled_scores", "attn_weights", "context"]
    for name, spec in shown.items():
        np.testing.assert_allclose(z_values(spec), trace[name].numpy(), rtol=0, atol=1e-6,
                                   err_msg=name)
    assert shown["queries"]["layout"]["title"]["text"] == "Queries: Q = X·W_query (6×3)"
    assert shown["attn_scores"]["layout"]["xaxis"]["title"]["text"] == "key (column)"
    assert shown["attn_scores"]["layout"]["yaxis"]["title"]["text"] == "query (row)"
    assert list(shown["attn_weights"]["data"][0]["y"]) == trace.tokens
    assert len(at.latex) >= len(shown)  # a formula above every chart


def test_simplified_heatmaps_are_identity_attention():
    at = open_page(PAGE_FILES["Simplified_attention"])
    shown = charts(at)
    assert list(shown) == ["embeddings", "attn_scores", "attn_weights", "context"]
    x = compute_trace(AttentionConfig())["embeddings"]
    weights = torch.softmax(x @ x.T, dim=-1)
    np.testing.assert_allclose(z_values(shown["attn_scores"]), (x @ x.T).numpy(), atol=1e-6)
    np.testing.assert_allclose(z_values(shown["attn_weights"]), weights.numpy(), atol=1e-6)
    np.testing.assert_allclose(z_values(shown["context"]), (weights @ x).numpy(), atol=1e-6)


def test_simplified_query_picker_shows_that_tokens_row():
    at = open_page(PAGE_FILES["Simplified_attention"])
    pick(at, "query", 4)
    assert picked(at, "query") == 4
    assert not at.exception
    x = compute_trace(AttentionConfig())["embeddings"]
    scores = x @ x.T
    table = at.table[0].value  # numbers as the formulas write them: "−0.6150"
    np.testing.assert_allclose(read_numbers(table["score ω"]), scores[4].numpy(), atol=1e-4)
    context = at.dataframe[0].value
    np.testing.assert_allclose(read_numbers(context.iloc[-1]),
                               (torch.softmax(scores[4], -1) @ x).numpy(), atol=1e-4)
    shapes = charts(at)["attn_weights"]["layout"]["shapes"]
    assert shapes[0]["y0"] == 3.5 and shapes[0]["y1"] == 4.5  # the picked row is outlined


def test_home_shows_tokens_and_ids_as_a_table():
    at = open_page(HOME)
    frame = at.dataframe[0].value
    assert list(frame["token"]) == ["Life", "is", "short", "eat", "dessert", "first"]
    assert list(frame["token id"]) == [0, 4, 5, 2, 1, 3]


def test_typing_a_sentence_relabels_the_heatmaps():
    at = open_page(PAGE_FILES["Self_attention"])
    at.text_input(key="sentence").set_value("the cat sat on the mat").run()
    assert not at.exception
    labels = list(charts(at)["attn_weights"]["data"][0]["x"])
    assert labels == ["the", "cat", "sat", "on", "the (4)", "mat"]


def test_settings_persist_across_pages():
    at = open_page(HOME)
    at.number_input(key="d_in").set_value(6).run()
    at.text_input(key="seed").set_value("99").run()
    at.switch_page(PAGE_FILES["Self_attention"]).run()
    assert at.number_input(key="d_in").value == 6
    assert at.text_input(key="seed").value == "99"
    trace = compute_trace(AttentionConfig(d_in=6, seed=99))
    np.testing.assert_allclose(z_values(charts(at)["embeddings"]), trace["embeddings"].numpy(),
                               atol=1e-6)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("query, message", [
    ({"sentence": ""}, "sentence must have between 1 and 512 tokens (got 0)"),
    ({"sentence": " ".join(["word"] * 561)}, "sentence must have between 1 and 512 tokens (got 561)"),
    ({"d_in": "0"}, "d_in must be between 1 and 1024 (got 0)"),
    ({"d_k": "abc"}, "d_k must be a whole number between 1 and 1024"),
    ({"seed": "abc"}, "seed must be a whole number between 0 and 9223372036854775807"),
    ({"seed": "-5"}, "seed must be between 0 and 9223372036854775807 (got -5)"),
])
def test_bad_input_shows_the_backends_message_and_no_exception(page, query, message):
    at = open_page(page, query)
    assert not at.exception
    shown = " ".join(errors(at))
    assert message in shown
    (field, bad), = query.items()
    if field == "sentence":  # a bad sentence stops the page until the visitor fixes it
        assert page == HOME or len(all_charts(at)) == 0
        at.text_input(key="sentence").set_value("a working sentence").run()
        assert errors(at) == [] and at.text_input(key="sentence").value == "a working sentence"
    else:  # a bad number in a link is ignored: the page runs on the setting's default
        assert at.session_state[field] == state.ENTRIES[field].default != bad
    assert not at.exception
    if page != HOME:  # the page stays usable: it draws, with the tokens its sentence holds
        assert len(all_charts(at)) > 0
        tokens = 3 if field == "sentence" else 6
        step_charts = charts(at)  # the Experiments page draws curves, not steps, and the
        # Modern and Frontier pages their own steps (RoPE, grouped-query, window, cache,
        # tiles; each part's)
        assert page in (PAGE_FILES["Experiments"], PAGE_FILES["Modern_attention"],
                        PAGE_FILES["Frontier_attention"]) or (
            z_values(step_charts["attn_weights"]).shape == (tokens, tokens))


def test_widget_errors_keep_the_page_usable():
    at = open_page(PAGE_FILES["Self_attention"])
    at.text_input(key="sentence").set_value("   ").run()
    assert "sentence must have between 1 and 512 tokens (got 0)" in " ".join(errors(at))
    assert len(all_charts(at)) == 0
    at.text_input(key="sentence").set_value("back again").run()
    assert errors(at) == [] and len(charts(at)) == 11


def test_hostile_sentence_is_shown_as_text():
    at = open_page(HOME, {"sentence": HOSTILE})
    assert not at.exception
    frame = at.dataframe[0].value
    assert "<img" in list(frame["token"])
    assert "onerror=alert(1)>" in list(frame["token"])
    at.switch_page(PAGE_FILES["Self_attention"]).run()
    labels = list(charts(at)["embeddings"]["data"][0]["y"])
    assert "&lt;img" in labels  # escaped for Plotly, which renders some HTML tags
