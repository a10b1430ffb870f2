"""Captions that agree with the numbers beside them.

Every caption that states a property of its numbers (`explorer.core.steps.STEPS`'
``explain``, `explorer.lessons.explain` notes) is checked here on numbers where the
property fails, and there it must say so (`explorer.core.steps.chart_caption`,
`Step.remark`); and on numbers where it holds, where it must not cry wolf.
"""

from __future__ import annotations

import re

import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.core.steps import STEPS, chart_caption, visible_steps
from explorer.lessons.explain import explain_cell
from explorer.render.export import html_report
from tests.support.apptest import open_page
from tests.support.server import PAGE_FILES

QUICK_FOX = AttentionConfig(sentence="The quick brown fox jumps over the lazy dog today", d_in=8)
"""The issue's example: scores ÷ √d_k that still spread over tens, weights at 1.0000."""
ZERO_FIRST = AttentionConfig(sentence="a b c d", causal=True, normalization="sum",
                             embedding="given",
                             embeddings=((0, 0, 0), (0.5, -0.2, 0.1), (0.3, 0.8, -0.6), (1, 1, 1)))
"""Token "a" is all zeros: its only kept score is 0, so with normalization = sum its
row is 0 / 0 = NaN, the masked keys included."""
OVERFLOW = AttentionConfig(sentence="a b c d", normalization="naive_softmax", embedding="given",
                           embeddings=((0, 0, 0), (20, -8, 4), (12, 32, -24), (40, 40, 40)))
"""Scores past 88.7: the naive softmax's exp overflows, ∞ / ∞ = NaN."""
CLAIMS = {"scaled_scores": "spread back to about 1", "masked_scores": "exactly zero weight",
          "attn_weights": "Each row sums to 1", "dropped_weights": "expected sum stays 1",
          "context": "a weighted mix of the values"}
"""Each caption that states a property of its numbers, and the claim."""


def _number(x: float) -> str:
    return f"{x:.{1 if abs(x) >= 1 else 2}f}".replace("-", "−")


def test_every_caption_that_claims_something_of_its_numbers_has_a_remark():
    claiming = {name for name, step in STEPS.items()
                if step.explain and any(claim in step.explain for claim in CLAIMS.values())}
    assert claiming == set(CLAIMS)
    assert all(STEPS[name].remark is not None for name in CLAIMS)
    assert all(claim in STEPS[name].explain for name, claim in CLAIMS.items())


def test_scaled_scores_that_still_spread_say_so_and_that_softmax_saturates():
    trace = compute_trace(QUICK_FOX)
    scores, weights = trace["scaled_scores"], trace["attn_weights"]
    assert float(scores.std()) > 3 and float(weights.max()) > 0.999
    caption = chart_caption(trace, "scaled_scores")
    assert caption.startswith(STEPS["scaled_scores"].caption(trace.config))
    assert f"from {_number(float(scores.min()))} to {_number(float(scores.max()))}" in caption
    assert f"standard deviation is {_number(float(scores.std()))}" in caption
    saturated = int((weights.amax(dim=-1) >= 0.99).sum())
    assert f"{saturated} of 10 rows give 0.99 or more" in caption
    assert caption.endswith("so the softmax saturates.")


def test_scaled_scores_near_one_do_not_cry_wolf():
    trace = compute_trace(AttentionConfig(weight_init="linear"))
    assert float(trace["attn_weights"].max()) < 0.99
    caption = chart_caption(trace, "scaled_scores")
    assert "no row gives 0.99 of its weight to one key" in caption
    assert "saturates" not in caption.split("Here")[1]
    # A causal first row has a single key, whose weight is 1 whatever the scores.
    causal = compute_trace(AttentionConfig(weight_init="linear", causal=True))
    assert "saturates" not in chart_caption(causal, "scaled_scores").split("Here")[1]


def test_masked_keys_whose_weight_is_nan_not_zero_are_named():
    trace = compute_trace(ZERO_FIRST)
    weights, mask = trace["attn_weights"], trace["causal_mask"]
    assert torch.isnan(weights[0]).all() and (weights[1:][mask[1:]] == 0).all()
    caption = chart_caption(trace, "masked_scores")
    assert "there is no exp: the masked scores count as 0" in caption
    assert "Here 3 masked weights in 1 of 4 rows are NaN, not 0" in caption
    # The explained cell says it too; a masked cell of a healthy row keeps "exactly 0".
    assert "yet its weight is NaN, not 0" in explain_cell(trace, "masked_scores", 0, 1).note
    assert "so its weight is exactly 0." in explain_cell(trace, "masked_scores", 2, 3).note
    healthy = compute_trace(AttentionConfig(causal=True))
    assert chart_caption(healthy, "masked_scores") == STEPS["masked_scores"].explain


@pytest.mark.parametrize("config, why", [
    (ZERO_FIRST, "1 of 4 rows holds NaN or ±∞ and sums to nothing: their scores sum to 0"),
    (OVERFLOW, ("2 of 4 rows hold NaN or ±∞ and sum to nothing: the naive softmax's exp "
                "overflowed")),
])
def test_weight_rows_that_do_not_sum_to_one_are_counted(config, why):
    trace = compute_trace(config)
    broken = int((~torch.isfinite(trace["attn_weights"])).any(dim=-1).sum())
    assert broken and f"{broken} of 4 rows" in why
    assert why in chart_caption(trace, "attn_weights")
    assert "passed on from the weights" in chart_caption(trace, "context")


def test_negative_weights_are_no_split_into_shares_and_no_average():
    trace = compute_trace(AttentionConfig(normalization="sum"))
    negative = int((trace["attn_weights"] < 0).sum())
    assert negative
    torch.testing.assert_close(trace["attn_weights"].sum(-1), torch.ones(6))  # still sum to 1
    assert f"{negative} weights are negative" in chart_caption(trace, "attn_weights")
    assert "not an average of the values" in chart_caption(trace, "context")


def test_weights_after_dropout_say_what_their_rows_really_sum_to():
    trace = compute_trace(AttentionConfig(dropout=0.5, d_k=4, n_heads=2))
    for head in (0, 1):
        sums = trace["dropped_weights"][head].sum(-1)
        caption = chart_caption(trace, "dropped_weights", head)
        assert (f"between {_number(float(sums.min()))} and {_number(float(sums.max()))}"
                in caption)
    assert "not their average" in chart_caption(trace, "context")


def test_healthy_numbers_keep_the_plain_captions():
    trace = compute_trace(AttentionConfig())
    for name in ("attn_weights", "context"):
        assert chart_caption(trace, name) == STEPS[name].explain
    assert chart_caption(trace, "token_ids") == ""


def test_the_report_writes_the_same_captions_as_the_page():
    trace = compute_trace(QUICK_FOX.replace(normalization="sum"))
    text = html_report(trace)
    for name in visible_steps(trace):
        caption = chart_caption(trace, name)
        if caption:
            escaped = re.sub(r"['\"&<>]", lambda m: {"'": "&#x27;", '"': "&quot;", "&": "&amp;",
                                                     "<": "&lt;", ">": "&gt;"}[m[0]], caption)
            assert escaped in text, name


TEXT_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "latex", "info",
                 "warning", "success", "error")
"""The AppTest element types that show a visitor text."""


def shown_text(at) -> list[str]:
    """Every text a page shows a visitor: its text elements and its widgets' help."""
    texts = [element.value for kind in TEXT_ELEMENTS for element in at.get(kind)]
    return texts + [element.help for kind in ("text_input", "number_input", "selectbox",
                                              "toggle", "slider", "button")
                    for element in at.get(kind) if getattr(element, "help", None)]


@pytest.mark.parametrize("page", sorted(PAGE_FILES))
def test_the_pages_say_hover_or_tap(page):
    # At 390 px a 10×10 chart prints no numbers, and a phone has no hover: every text a
    # page shows (from pages/ and explorer/ui alike) says "hover or tap" where it says hover.
    texts = shown_text(open_page(PAGE_FILES[page]))
    assert texts, page
    lonely = [t for t in texts if re.search(r"\b[Hh]over (a|any|the) cell", t)]
    assert lonely == [], lonely
    told = any(re.search(r"\b[Hh]over or tap (a|any) cell", t) for t in texts)
    assert told or page not in ("Home", "Self_attention"), texts  # the pages that teach it


def test_the_report_says_hover_or_tap():
    text = re.sub(r"<[^>]+>", " ", html_report(compute_trace(AttentionConfig())))
    assert not re.search(r"\b[Hh]over (a|any|the) cell", text)
    assert re.search(r"\b[Hh]over or tap a cell", text)


def test_the_worked_examples_differ_in_their_first_words():
    # The closed picker shows a title's start: two began "Your journey starts with one step".
    from explorer.lessons.presets import PRESETS

    starts = [" ".join(preset.title.split()[:3]) for preset in PRESETS.values()]
    assert len(set(starts)) == len(starts), starts


def _scaled_caption(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith(
        STEPS["scaled_scores"].explain[:20]))


def test_the_multi_head_pages_scaled_scores_caption_is_true_of_its_numbers():
    """Issue 31, point 10: at the page's defaults head_dim is 1, so √1 changes
    nothing; and a causal chart of 6 rows leaves its first row out of the count,
    which the caption must say."""
    from explorer.ui.navigation import PAGES
    from tests.support.apptest import charts, open_link, z_values

    at = open_link(PAGES["Causal & multi-head attention"][0])
    assert not at.exception
    shown = charts(at)
    assert (z_values(shown["scaled_scores"]) == z_values(shown["attn_scores"])).all()  # ÷ √1
    caption = _scaled_caption(at)
    assert "head_dim is 1: √1 = 1, so dividing changes nothing" in caption, caption
    assert re.search(r"\b1 of the 5 rows after the first gives 0.99 or more of its weight",
                     caption), caption
    assert "the first row has one key, whose weight is 1 whatever the scores" in caption
    # Wider heads: the division does something, and the caption does not deny it.
    wide = open_link(PAGES["Causal & multi-head attention"][0], {"d_k": "8", "d_in": "8"})
    assert "changes nothing" not in _scaled_caption(wide)


# ---------------------------------------------------------------------------
# Issue 40: numbers written so that they say what they describe
# ---------------------------------------------------------------------------
def _printed(text: str) -> float:
    return float(text.replace("−", "-"))


@pytest.mark.parametrize("dropout_seed", [12, 39])
def test_the_row_sums_after_dropout_print_apart_and_within_their_last_digit(dropout_seed):
    """Seed 12: the rows sum to 1.1111030 … 1.1111112; seed 39: 1.0722 … 1.1111. At
    one decimal both were written "between 1.1 and 1.1"."""
    trace = compute_trace(AttentionConfig(n_heads=2, causal=True, dropout=0.1,
                                          dropout_seed=dropout_seed))
    sums = trace.head("dropped_weights", 0).double().sum(dim=-1)
    low, high = float(sums.min()), float(sums.max())
    found = re.search(r"rows sum to between (\S+) and (\S+):", chart_caption(
        trace, "dropped_weights", 0))
    assert found, chart_caption(trace, "dropped_weights", 0)
    low_text, high_text = found.groups()
    assert low_text != high_text
    for text, true in ((low_text, low), (high_text, high)):
        decimals = len(text.split(".")[1])
        assert abs(_printed(text) - true) <= 0.5 * 10 ** -decimals + 1e-12


def test_a_tiny_weight_is_written_in_scientific_notation_not_as_zero():
    """A weight of about 2e-6 was written "0.0000 / 1.6749 = 0.0000"."""
    from explorer.lessons.explain import number

    trace = compute_trace(AttentionConfig(sentence="a b c", embedding="given", d_k=3, d_v=3,
                                          weight_init="identity", scale=False,
                                          embeddings=((4, 0, 0), (0, 1, 0), (-1, 0, 0))))
    weights = trace["attn_weights"]
    row, col = 0, 2  # exp(−4 − 16) / … : about 2e-9
    value = float(weights[row, col])
    assert 0 < value < 1e-6
    e = explain_cell(trace, "attn_weights", row, col)
    written = e.written()
    result = written.split(" = ")[-1]
    assert result != "0.0000" and "e−" in result
    assert abs(_printed(result.replace("e−", "e-")) - value) <= 0.05 * value
    assert number(0.0) == "0.0000" and number(-1.94e-6) == "−1.9e−6" and number(0.5) == "0.5000"


def test_the_simplified_pages_explanations_name_x_not_q_k_v():
    from explorer.lessons.presets import PRESETS

    trace = compute_trace(PRESETS["journey"].config)
    for name in ("attn_scores", "context"):
        e = explain_cell(trace, name, 1, 2)
        text = " ".join([e.formula, e.note, *(t.label for t in e.terms)])
        assert not re.search(r"\b[QKV]\[|\b[qk]\[", text), text
        assert "X[" in text and "No trainable weights" in e.note
    weighted = compute_trace(AttentionConfig())  # with weights: Q, K and V
    assert "Q[" in explain_cell(weighted, "attn_scores", 1, 2).formula
