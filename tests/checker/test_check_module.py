"""`explorer.checker.check`: a learner's own attention module, step by step, against the reference.

The modules are the book's chapter 3 listings and broken variants of them
(`tests/support/learner_modules.py`). They are built the way the book builds them,
after ``torch.manual_seed(123)``, inside ``torch.random.fork_rng()`` so that the
tests leave the global RNG alone, or with every weight redrawn from a local
generator. Expected numbers come from the book (Listing 3.1's printout) and
from PyTorch's own ``scaled_dot_product_attention`` / ``nn.MultiheadAttention``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.checker import check
from explorer.checker.check import (
    COMPARED,
    MATCH,
    NOT_SEEN,
    CheckError,
    check_module,
    reference_steps,
)
from explorer.checker.comparison import agreeing, close
from explorer.checker.listings import MULTI_HEAD_ATTENTION
from explorer.checker.report import CheckFailure, CheckReport, result_from_json
from explorer.checker.sandbox import check_source
from explorer.lessons.presets import JOURNEY_INPUTS
from explorer.render.check_view import difference_charts, report_html
from explorer.render.payload import decode, encode
from tests.support import learner_modules as L

ROOT = Path(__file__).resolve().parents[2]
JOURNEY = torch.tensor(JOURNEY_INPUTS)


def build(cls, *args, **kwargs):
    """``cls(*args, **kwargs)`` after the book's ``torch.manual_seed(123)``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        return cls(*args, **kwargs)


def randomise(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter (biases included) redrawn N(0, 0.5²) from a local generator."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return module


def statuses(report: CheckReport) -> dict[str, str]:
    return {r.step: r.status for r in report.steps}


# ---------------------------------------------------------------------------
# The book's listings pass, with the book's seed and with random weights
# ---------------------------------------------------------------------------
CAUSAL = {"queries": MATCH, "keys": MATCH, "values": MATCH, "attn_scores": MATCH,
          # the book masks, then scales inside the softmax: both steps are seen, in its order
          "masked_scores": MATCH, "scaled_scores": MATCH, "attn_weights": MATCH, "context": MATCH}
BOOK_MODULES = {
    "SelfAttention_v1": (L.SelfAttention_v1, (3, 2), {}, dict.fromkeys(
        ("queries", "keys", "values", "attn_scores", "scaled_scores", "attn_weights", "context"),
        MATCH)),
    "SelfAttention_v2": (L.SelfAttention_v2, (3, 2), {}, dict.fromkeys(
        ("queries", "keys", "values", "attn_scores", "scaled_scores", "attn_weights", "context"),
        MATCH)),
    "SelfAttention_v2 with bias": (L.SelfAttention_v2, (3, 2), {"qkv_bias": True}, dict.fromkeys(
        ("queries", "keys", "values", "attn_scores", "scaled_scores", "attn_weights", "context"),
        MATCH)),
    "CausalAttention": (L.CausalAttention, (3, 2, 6, 0.0), {}, CAUSAL),
    "MultiHeadAttentionWrapper": (L.MultiHeadAttentionWrapper, (3, 5, 6, 0.0),
                                  {"num_heads": 2}, CAUSAL),
    "MultiHeadAttention": (L.MultiHeadAttention, (3, 10, 6, 0.0), {"num_heads": 2},
                           {**CAUSAL, "output": MATCH}),
    "MultiHeadAttention with bias": (L.MultiHeadAttention, (3, 6, 6, 0.0),
                                     {"num_heads": 3, "qkv_bias": True},
                                     {**CAUSAL, "output": MATCH}),
    "Tweakable (Listing 3.5, one method a step)": (L.Tweakable, (3, 8, 6, 0.0),
                                                   {"num_heads": 2}, {**CAUSAL, "output": MATCH}),
}


@pytest.mark.parametrize("weights", ["torch.manual_seed(123)", "random"])
@pytest.mark.parametrize("name", list(BOOK_MODULES))
def test_the_book_listings_match_at_every_step_they_compute(name, weights):
    cls, args, kwargs, expected = BOOK_MODULES[name]
    module = build(cls, *args, **kwargs)
    if weights == "random":
        randomise(module, seed=len(name))
    report = check_module(module)
    assert report.ok, report.text()
    assert statuses(report) == expected
    assert list(statuses(report)) == [s for s in check.MASK_FIRST if s in expected] \
        if "masked_scores" in expected else list(expected)
    assert report.first_difference is None and report.diagnosis is None
    assert report.mistake is None
    assert report.max_difference < 1e-5
    assert report.summary().startswith("✓ Matches the reference computed from your weights: ")


def test_book_listing_3_1_prints_these_context_vectors_and_so_does_the_reference():
    # Book §3.4.1, Listing 3.1: torch.manual_seed(123); sa_v1 = SelfAttention_v1(3, 2);
    # print(sa_v1(inputs)), inputs = the hand-picked vectors of "Your journey starts with one step"
    printed = torch.tensor([[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                            [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
    sa_v1 = build(L.SelfAttention_v1, 3, 2)
    steps = reference_steps(sa_v1, JOURNEY)
    assert (steps["context"] - printed).abs().max() <= 0.5e-4
    # §3.4.1 also prints query_2, attn_scores_2 and attn_weights_2 (computed from the same weights)
    assert (steps["queries"][1] - torch.tensor([0.4306, 1.4551])).abs().max() <= 0.5e-4
    assert (steps["attn_scores"][1] - torch.tensor(
        [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])).abs().max() <= 0.5e-4
    assert (steps["attn_weights"][1] - torch.tensor(
        [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])).abs().max() <= 0.5e-4
    with torch.no_grad():
        assert torch.allclose(sa_v1(JOURNEY), steps["context"], atol=1e-6)
    report = check_module(sa_v1)  # the journey sentence with d_in = 3: the book's vectors
    assert report.ok and report.n_values == 4 * 12 + 2 * 36 + 36
    assert "the book's hand-picked vectors for this sentence (§3.3.1)" in report.settings[3]
    assert report.settings[0] == ("assumed: not causal (no mask in the module or its forward), "
                                  "measured; 1 head (the head axis seen in forward's (6, 6) "
                                  "scores), measured; dropout p = 0, none declared")


def test_a_constant_added_to_every_score_changes_no_weight_so_it_passes():
    class ShiftedScores(L.Tweakable):  # softmax(x + c) = softmax(x) row by row
        def scale(self, attn_scores, keys):
            return (attn_scores + 0.1) / keys.shape[-1]**0.5

    report = check_module(build(ShiftedScores, 3, 10, 6, 0.0, num_heads=2))
    assert report.ok
    assert statuses(report)["masked_scores"] == MATCH  # masked first, as the book does
    assert statuses(report)["scaled_scores"] == NOT_SEEN and statuses(report)["attn_weights"] == MATCH


# ---------------------------------------------------------------------------
# The classic mistakes: caught at the right step, named
# ---------------------------------------------------------------------------
MISTAKEN = [  # class, (d_in, d_out), sentence, first step, slug, diagnosis
    (L.NoScaling, (3, 8), None, "scaled_scores", "no_scaling",
     "the scores are not scaled: divide them by √d_k (√4 = 2, keys.shape[-1] ** 0.5) before "
     "softmax"),
    (L.ScaledByDk, (3, 8), None, "scaled_scores", "scaled_by_d_k",  # masked, then scaled wrong
     "the scores are divided by d_k = 4, not by its square root (√4 = 2): use "
     "keys.shape[-1] ** 0.5"),
    (L.ScaledByDin, (3, 8), None, "scaled_scores", "scaled_by_d_in",  # masked, then scaled wrong
     "the scores are divided by √d_in (√3 = 1.732, the width of the inputs) instead of √d_k "
     "(√4 = 2, the width of the keys): use keys.shape[-1] ** 0.5"),
    (L.ScaledByDout, (3, 8), None, "scaled_scores", "scaled_by_d_out",  # masked, then scaled wrong
     "the scores are divided by √d_out (√8 = 2.828) instead of √head_dim (√4 = 2): each head's "
     "keys are head_dim = d_out / num_heads wide; use keys.shape[-1] ** 0.5 after the split"),
    (L.SoftmaxOverQueries, (3, 8), None, "attn_weights", "softmax_over_queries",
     "softmax over the wrong dim, the queries' axis (dim=0 of an (n, n) matrix, dim=-2 in "
     "general): your weights' columns sum to 1, not their rows; normalise each row over the "
     "keys with dim=-1"),
    (L.SoftmaxOverHeads, (3, 8), None, "attn_weights", "softmax_over_heads",
     "softmax over the wrong dim (dim=1 of (b, num_heads, n, n), the heads): each weight is "
     "normalised across the heads, not across the keys; use dim=-1"),
    (L.SoftmaxOverBatch, (3, 8), None, "attn_weights", "softmax_over_batch",
     "softmax over the wrong dim (dim=0 of (b, n, n), the batch): each weight is normalised "
     "across the sentences of the batch (with one sentence every weight is 1); use dim=-1"),
    (L.MaskAfterSoftmax, (3, 8), None, "attn_weights", "mask_after_softmax",
     "the causal mask is applied after softmax without renormalising: the future weights are "
     "zeroed but each row now sums to less than 1; mask the scores with −∞ before softmax, or "
     "divide each row by its sum afterwards (book §3.5.1)"),
    (L.MaskFilledWithZero, (3, 8), None, "masked_scores", "mask_filled_with_zero",
     "masked_fill with 0 instead of −∞: exp(0) = 1, so the future tokens still get weight; "
     "fill with -torch.inf"),
    (L.DiagonalMasked, (3, 8), None, "masked_scores", "diagonal_masked",
     "the causal mask covers the diagonal too (torch.triu(..., diagonal=0)): no token may "
     "attend to itself, and the first token has no key left (its weights are NaN); use "
     "diagonal=1"),
    (L.MaskNotApplied, (3, 8), None, "masked_scores", "mask_not_applied",
     "the causal mask is never applied: every token also attends to the tokens after it; "
     "masked_fill_ the scores with -torch.inf before softmax"),
    (L.SplitWithView, (3, 8), None, "attn_scores", "split_with_view",
     "the heads are split with .view(b, num_heads, num_tokens, head_dim), which mixes tokens "
     "and heads; use .view(b, num_tokens, num_heads, head_dim) followed by .transpose(1, 2)"),
    (L.WeightsTransposed, (4, 4), "Life is short, eat dessert first", "queries",
     "weights_transposed",
     "W applied transposed: x @ W.T where the book computes x @ W with W of shape (d_in, "
     "d_out); an nn.Linear keeps its weight as (d_out, d_in), so call the layer, "
     "self.W_query(x), rather than using .weight"),
    (L.OutProjNotApplied, (3, 8), None, "output", "out_proj_not_applied",
     "out_proj is defined but never applied: forward returns the concatenated context vectors; "
     "end with context_vec = self.out_proj(context_vec)"),
]


@pytest.mark.parametrize("cls, sizes, sentence, step, slug, diagnosis", MISTAKEN,
                         ids=[case[0].__name__ for case in MISTAKEN])
def test_each_classic_mistake_is_caught_at_its_step_and_named(cls, sizes, sentence, step, slug,
                                                             diagnosis):
    module = build(cls, *sizes, 6, 0.0, num_heads=2)
    report = check_module(module, sentence)
    assert not report.ok
    assert report.first_difference.step == step
    assert report.mistake == slug
    assert report.diagnosis == diagnosis
    states = statuses(report)
    assert states[step] == "differs" and states[COMPARED[-1]] == "differs"
    before = list(states)[:list(states).index(step)]
    assert all(states[s] in (MATCH, NOT_SEEN) for s in before)
    diff = report.first_difference
    assert diff.ours != diff.theirs or math.isnan(diff.theirs)
    assert [diff.row, diff.col] == diff.cells[0]


def test_the_favourite_mistake_softmax_over_dim_0_in_listing_3_1():
    report = check_module(build(L.SelfAttention_v1_dim0, 3, 2))
    assert (report.ok, report.first_difference.step, report.mistake) == (
        False, "attn_weights", "softmax_over_queries")
    diff = report.first_difference
    assert (diff.head, diff.row, diff.col) == (None, 0, 0)  # one head: no head to name
    ours, theirs = torch.tensor(diff.ours_matrix), torch.tensor(diff.theirs_matrix)
    assert torch.allclose(ours.sum(dim=1), torch.ones(6))  # the reference's rows sum to 1
    assert torch.allclose(theirs.sum(dim=0), torch.ones(6))  # theirs: the columns
    assert str(diff) == "attn_weights, row 0 (Your), column 0 (Your): ours 0.1551, yours 0.1618"
    assert statuses(report) == {**dict.fromkeys(("queries", "keys", "values", "attn_scores",
                                                 "scaled_scores"), MATCH),
                                "attn_weights": "differs", "context": "differs"}


def test_an_unnamed_mistake_is_caught_at_its_step_without_a_diagnosis():
    report = check_module(build(L.PositionBias, 3, 8, 6, 0.0, num_heads=2))
    assert not report.ok
    assert report.first_difference.step == "scaled_scores"  # masked, then the bias and scaling
    assert report.mistake is None and report.diagnosis is None
    diff = report.first_difference
    # Column 0 gets a bias of 0: the first differing cell is (1, 1), off by 0.1 / √4
    assert (diff.row, diff.col) == (1, 1)
    assert diff.theirs - diff.ours == pytest.approx(0.1 / 2, abs=1e-5)
    assert "none of the classic mistakes explains it" in report.text()


def test_two_mistakes_at_once_name_the_first_one_seen():
    report = check_module(build(ViewSplitAndViewCombine, 3, 8, 6, 0.0, num_heads=2))
    assert (report.first_difference.step, report.mistake) == ("attn_scores", "split_with_view")


def test_every_batch_item_is_checked():
    batch = torch.stack([JOURNEY, JOURNEY.flip(0)])  # two different sentences
    module = build(L.SameKeysForEveryItem, 3, 4, 6, 0.0, num_heads=2)
    assert check_module(module, inputs=batch[:1]).ok  # a batch of one cannot show it
    report = check_module(module, inputs=batch)
    assert (report.first_difference.step, report.first_difference.batch) == ("keys", 1)
    assert str(report.first_difference).startswith("keys, batch item 1, head 0, row 0 (x1)")
    assert check_module(build(L.MultiHeadAttention, 3, 4, 6, 0.0, num_heads=2),
                        inputs=batch).ok


# ---------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------
def test_dropout_left_on_in_train_mode_is_the_difference_and_eval_mode_passes():
    module = build(L.CausalAttention, 3, 2, 6, 0.5)  # nn.Module starts in train() mode
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)  # the module's own dropout draws from the global RNG
        report = check_module(module)
    assert (report.ok, report.first_difference.step, report.mistake) == (
        False, "context", "dropout_active")
    assert statuses(report)["attn_weights"] == MATCH  # before dropout all is well
    zeroed = sum(row.count(0.0) for row in report.first_difference.theirs_matrix)
    assert report.diagnosis.startswith("dropout is still active: the module is in train() mode "
                                       "with dropout p = 0.5, so ")
    assert report.diagnosis.endswith(
        " of the 42 attention weights were zeroed and the rest scaled by 1/(1 − p) = 2; dropout "
        "masks are random and differ between machines: call .eval() before checking, build it "
        "with dropout=0.0, or pass dropout_seed=1 to compare with dropout on")
    assert zeroed >= 0 and "train() mode with dropout p = 0.5: compared with dropout off" in \
        report.notes[0]
    report = check_module(module.eval())
    assert report.ok and report.notes[0] == "eval() mode: dropout (p = 0.5) is off, and compared off"


@pytest.mark.parametrize("cls, args, kwargs", [
    (L.CausalAttention, (3, 2, 6, 0.5), {}),
    (L.MultiHeadAttention, (3, 10, 6, 0.5), {"num_heads": 2}),
    (L.MultiHeadAttentionWrapper, (3, 5, 6, 0.5), {"num_heads": 2}),  # one dropout per head
])
def test_with_a_dropout_seed_dropout_is_compared_on_with_the_same_masks(cls, args, kwargs):
    module = build(cls, *args, **kwargs)
    first, again = check_module(module, dropout_seed=7), check_module(module, dropout_seed=7)
    assert first.ok and statuses(first)["dropped_weights"] == MATCH
    assert first.to_json() == again.to_json()  # the same on every run (and machine)
    # the masks dropped something: without the seed the output differs
    assert not check_module(module).ok


def test_dropout_applied_even_in_eval_mode_is_named():
    report = check_module(build(L.DropoutAlwaysOn, 3, 8, 6, 0.0, num_heads=2).eval())
    assert report.mistake == "dropout_active" and report.first_difference.step == "context"
    assert report.diagnosis.startswith("dropout is applied even in eval() mode (p = 0.5; "
                                       "F.dropout's training defaults to True), so ")


# ---------------------------------------------------------------------------
# What is read, and what is refused
# ---------------------------------------------------------------------------
def test_a_module_with_other_names_gets_a_message_naming_what_was_expected():
    with pytest.raises(CheckError) as caught:
        check_module(build(L.RenamedAttention, 3, 2))
    assert caught.value.field == "module"
    message = str(caught.value)
    assert message.startswith("the check finds the projections in one of these forms: W_query, "
                              "W_key and W_value (or query/key/value, q_proj/k_proj/v_proj, ")
    for form in ("each an nn.Linear(d_in, d_out), a GPT-2 Conv1D (weight (d_in, d_out), x @ W + b)",
                 "one fused layer of width 3 * d_out", "the annotated transformer's self.linears",
                 "heads, a list of single-head modules",
                 "torch.nn.MultiheadAttention, or a module that holds one"):
        assert form in message
    assert message.endswith(
        "RenamedAttention holds ask.weight (2, 3), match.weight (2, 3), give.weight (2, 3). "
        "For example: self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias), the same for W_key "
        "and W_value, and in forward queries = self.W_query(x).")


def test_a_refusal_names_the_attributes_the_module_really_holds():
    """A query layer by lucidrains' name beside layers the check cannot place: the
    message names to_q as the module spells it, and every parameter, never a W_query
    the module does not have."""
    class OnlyToQ(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.to_q = torch.nn.Linear(3, 4, bias=False)
            self.gate = torch.nn.Linear(3, 5, bias=False)

        def forward(self, x):
            return self.to_q(x)

    with pytest.raises(CheckError) as caught:
        check_module(OnlyToQ())
    message = str(caught.value)
    assert "OnlyToQ has to_q (read as W_query) but no other projection the check can place; " \
           "it holds to_q.weight (4, 3), gate.weight (5, 3). For example" in message
    assert "has W_query" not in message


def test_inputs_that_do_not_fit_are_refused_with_the_sizes():
    module = build(L.SelfAttention_v1, 3, 2)
    with pytest.raises(CheckError, match=r"inputs must have shape \(n_tokens, d_in\) or "
                                         r"\(b, n_tokens, d_in\) with d_in = 3, the rows of "
                                         r"W_query \(got \(6, 4\)\)"):
        check_module(module, inputs=torch.ones(6, 4))
    with pytest.raises(CheckError, match="the sentence has 2 tokens but inputs has 6 rows"):
        check_module(module, "two tokens", inputs=JOURNEY)


def test_an_error_in_forward_comes_back_with_the_learners_own_traceback():
    class Broken(L.SelfAttention_v1):
        def forward(self, x):
            return x @ self.W_key.T  # (6, 3) @ (2, 3)

    with pytest.raises(CheckError) as caught:
        check_module(build(Broken, 3, 2), inputs=JOURNEY)
    error = caught.value
    assert error.field == "forward"
    assert str(error).startswith("Broken.forward raised RuntimeError on inputs of shape (6, 3): ")
    assert "in forward" in error.details and "return x @ self.W_key.T" in error.details
    assert "explorer" not in error.details and "torch/" not in error.details


@pytest.mark.parametrize("batch_first", [True, False])
def test_torch_multihead_attention_passes(batch_first):
    module = randomise(torch.nn.utils.skip_init(torch.nn.MultiheadAttention, 10, 2,
                                                batch_first=batch_first), seed=3).eval()
    report = check_module(module, "the cat sat on the mat")
    assert report.ok
    assert {s for s, status in statuses(report).items() if status == MATCH} == {
        "attn_weights", "output"}  # its attention runs inside one PyTorch function
    x = torch.randn(3, 5, 10, generator=torch.Generator().manual_seed(0))
    assert check_module(module, inputs=x).ok
    assert check_module(module, inputs=x, causal=True).ok  # the check passes it the causal mask
    weights = reference_steps(module, x, causal=True)["attn_weights"]  # (3, 2, 5, 5)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()
    assert (weights[..., ~allowed] == 0).all() and (weights[..., allowed] > 0).all()


# ---------------------------------------------------------------------------
# Cross-checks with PyTorch's own attention
# ---------------------------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(n_heads=st.integers(1, 3), head_dim=st.integers(1, 4), d_in=st.integers(1, 5),
       n_tokens=st.integers(1, 7), batch=st.integers(1, 3), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_book_multihead_attention_passes_and_the_reference_equals_sdpa(
        n_heads, head_dim, d_in, n_tokens, batch, bias, seed):
    d_out = n_heads * head_dim
    module = randomise(build(L.MultiHeadAttention, d_in, d_out, n_tokens, 0.0,
                             num_heads=n_heads, qkv_bias=bias), seed)
    x = torch.randn(batch, n_tokens, d_in, generator=torch.Generator().manual_seed(seed))
    report = check_module(module, inputs=x)
    assert report.ok, report.text()
    steps = reference_steps(module, x)  # one head: no head axis, as compute_trace
    q, k, v = (steps[name] if n_heads > 1 else steps[name][:, None]
               for name in ("queries", "keys", "values"))
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, h, n, hd)
    assert torch.allclose(context.transpose(1, 2).reshape(batch, n_tokens, d_out),
                          steps["context"], atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(module(x), steps["output"], atol=1e-5)


def test_the_reference_of_causal_attention_equals_sdpa_and_multihead_attention():
    module = randomise(build(L.MultiHeadAttention, 4, 4, 6, 0.0, num_heads=2, qkv_bias=True), 9)
    x = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(1))
    steps = reference_steps(module, x)
    mha = torch.nn.utils.skip_init(torch.nn.MultiheadAttention, 4, 2, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight,
                                            module.W_value.weight]))
        mha.in_proj_bias.copy_(torch.cat([module.W_query.bias, module.W_key.bias,
                                          module.W_value.bias]))
        mha.out_proj.load_state_dict(module.out_proj.state_dict())
        output, weights = mha(x, x, x, attn_mask=torch.ones(6, 6).triu(1).bool(),
                              average_attn_weights=False)
    assert torch.allclose(output, steps["output"], atol=1e-6)
    assert torch.allclose(weights, steps["attn_weights"], atol=1e-6)


SPECIAL = st.sampled_from([0.0, 1.0, -1.0, 1e-6, 1e4, math.inf, -math.inf, math.nan])


@settings(max_examples=200, deadline=None)
@given(ours=st.lists(st.one_of(SPECIAL, st.floats(-1e3, 1e3, width=32)), min_size=1,
                     max_size=20),
       nudge=st.lists(st.sampled_from([0.0, 1e-7, 1e-5, 1e-3, 1.0, math.inf, math.nan]),
                      min_size=20, max_size=20))
def test_agreeing_says_what_isclose_with_equal_nan_says(ours, nudge):
    a = torch.tensor(ours)
    b = a + torch.tensor(nudge[:len(ours)])
    expected = torch.isclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)  # rtol·|b|, as ours
    assert torch.equal(agreeing(a, b), expected)
    assert close(a[None], b[None]) == bool(expected.all())


# ---------------------------------------------------------------------------
# The report: JSON, text, HTML
# ---------------------------------------------------------------------------
def test_the_report_round_trips_through_strict_json():
    report = check_module(build(L.MaskFilledWithZero, 3, 8, 6, 0.0, num_heads=2))
    text = report.to_json()
    assert '"-Infinity"' in text  # masked scores in strict JSON
    json.loads(text, parse_constant=lambda name: pytest.fail(f"non-strict JSON: {name}"))
    back = result_from_json(text)
    assert back == report and back.to_json() == text
    assert back.first_difference.ours == -math.inf and back.first_difference.theirs == 0.0
    failure = CheckFailure("timeout", "stopped", "")
    assert result_from_json(failure.to_json()) == failure


def test_the_text_report_is_the_table_the_command_line_prints():
    text = check_module(build(L.SoftmaxOverQueries, 3, 8, 6, 0.0, num_heads=2).eval()).text()
    assert "\n  step           yours  largest difference\n  queries        ✓      0.00e+00\n" in text
    assert "\n  masked_scores  ✓      0.00e+00\n  scaled_scores  ✓      " in text
    assert "\n  attn_weights   ✗      " in text
    assert "\n✗ Differs from the reference computed from your weights at attn_weights.\n" \
           "First difference: attn_weights, head 0, row 0 (Your), column 0 (Your): ours 1.0000, " \
           "yours 0.1668\nDiagnosis: softmax over the wrong dim" in text


def test_the_notebook_html_draws_both_matrices_with_the_differing_cells_outlined():
    report = check_module(build(L.MaskFilledWithZero, 3, 8, 6, 0.0, num_heads=2))
    ours, yours = difference_charts(report)
    diff = report.first_difference
    for chart, matrix in ((ours, diff.ours_matrix), (yours, diff.theirs_matrix)):
        header, (values,) = decode(encode(chart))
        assert torch.equal(torch.from_numpy(values.copy()), torch.tensor(matrix))
        outlines = [s for s in header["figure"]["layout"]["shapes"] if s["xref"] == "x"]
        assert sorted([round(s["y0"] + 0.5), round(s["x0"] + 0.5)] for s in outlines) == \
            sorted(diff.cells) == [[i, j] for i in range(6) for j in range(i + 1, 6)]
    assert ours.figure["layout"]["title"]["text"] == "Ours: Masked scores, head 0 (6×6)"
    html = report._repr_html_()
    assert html.count('class="chart"') == 2 and "window.Plotly" in html or "Plotly" in html
    assert "<code>masked_scores</code>" in html and "masked_fill with 0 instead of −∞" in html
    scope = html.split('id="', 1)[1].split('"', 1)[0]
    assert f'document.getElementById("{scope}").querySelectorAll' in html  # only its own charts
    passing = report_html(check_module(build(L.MultiHeadAttention, 3, 10, 6, 0.0, num_heads=2)))
    assert "<script" not in passing and "✓ Matches the reference" in passing


def test_checking_imports_neither_plotly_nor_streamlit():
    code = ("import sys, explorer.checker.check, explorer.checker.sandbox; "
            "print(sorted(m for m in ('plotly', 'streamlit', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------
LISTING_3_5 = MULTI_HEAD_ATTENTION  # the text the app's check page starts from


def run_cli(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "my_attention.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "explorer", "check", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_command_line_exits_0_1_or_2(tmp_path):
    sizes = ("--d_in", "3", "--d_out", "10", "--num_heads", "2",
             "--sentence", "Your journey starts with one step")
    good = run_cli(tmp_path, LISTING_3_5, "my_attention.py:MultiHeadAttention", *sizes)
    assert good.returncode == 0, good.stderr
    assert "✓ Matches the reference computed from your weights: 9 steps" in good.stdout

    broken = run_cli(tmp_path, LISTING_3_5.replace("dim=-1", "dim=-2"),
                     "my_attention.py:MultiHeadAttention", *sizes)
    assert broken.returncode == 1
    assert "First difference: attn_weights, head 0, row 0 (Your), column 0 (Your): ours " \
           "1.0000, yours " in broken.stdout
    assert "Diagnosis: softmax over the wrong dim, the queries' axis" in broken.stdout

    for source, target, message in [
        ("class A(:\n", "my_attention.py:A",
         "error: my_attention.py does not compile: SyntaxError: invalid syntax (line 1)"),
        (LISTING_3_5, "my_attention.py:MultiHeadAttn",
         "error: my_attention.py defines no nn.Module class named 'MultiHeadAttn'; it defines "
         "MultiHeadAttention"),
        (LISTING_3_5, "my_attention.py", "error: give FILE:CLASS"),
        (LISTING_3_5.replace("assert d_out % num_heads", "assert d_out % 3"),
         "my_attention.py:MultiHeadAttention",
         "error: MultiHeadAttention(d_in=3, d_out=10, context_length=9, dropout=0.0, "
         "num_heads=2, qkv_bias=False) raised AssertionError: d_out must be divisible by "
         "num_heads"),
    ]:
        failed = run_cli(tmp_path, source, target, *sizes)
        assert failed.returncode == 2, (target, failed.stdout, failed.stderr)
        assert failed.stderr.startswith(message), failed.stderr
        assert "explorer/" not in failed.stderr and failed.stdout == ""
    usage = run_cli(tmp_path, LISTING_3_5, "my_attention.py:MultiHeadAttention", "--d_in", "x")
    assert usage.returncode == 2 and "invalid int value: 'x'" in usage.stderr


# ---------------------------------------------------------------------------
# Pasted code in a child process
# ---------------------------------------------------------------------------
@pytest.mark.slow
def test_pasted_code_is_checked_in_a_child_process():
    report = check_source(LISTING_3_5, "MultiHeadAttention", d_out=10, num_heads=2)
    assert isinstance(report, CheckReport) and report.ok
    broken = check_source(LISTING_3_5.replace("dim=-1", "dim=-2"), "MultiHeadAttention",
                          d_out=10, num_heads=2)
    assert (broken.ok, broken.first_difference.step, broken.mistake) == (
        False, "attn_weights", "softmax_over_queries")
    in_process = check_module(build(L.SoftmaxOverQueries, 3, 10, 9, 0.0, num_heads=2),  # 6 + 3
                              interface="app")
    assert broken == dataclasses.replace(in_process, module="MultiHeadAttention")


@pytest.mark.parametrize("source, kind, message, detail", [
    ("class A(:\n    pass\n", "syntax",
     "your_code.py does not compile: SyntaxError: invalid syntax (line 1)", "^"),
    (LISTING_3_5.replace("keys = self.W_key(x)", "keys = self.W_key(x) @ x"),
     "forward", "MultiHeadAttention.forward raised RuntimeError on inputs of shape (2, 6, 3)",
     f'your_code.py", line {LISTING_3_5.splitlines().index("        keys = self.W_key(x)") + 1}'
     ', in forward\n    keys = self.W_key(x) @ x'),
    ("import torch.nn as nn\nclass MultiHeadAttention(nn.Module):\n"
     "    def __init__(self, d_in, d_out):\n        super().__init__()\n        while True:\n"
     "            pass\n", "timeout", "your code ran for more than 15 s and was stopped", ""),
    ("import torch\nblock = torch.ones(2**31)\n", "memory",
     "your code needed more than 1,024 MB of memory and was stopped", "can't allocate memory"),
])
@pytest.mark.slow
def test_pasted_code_that_fails_comes_back_as_a_clear_failure(source, kind, message, detail):
    start = time.monotonic()
    # 15 s: the limit counts the child's start, torch's import included (7-9 s on a
    # loaded 2-core machine), so a smaller one stops correct code before it runs.
    failure = check_source(source, "MultiHeadAttention", d_out=4, num_heads=2, timeout=15)
    assert time.monotonic() - start < 25
    assert isinstance(failure, CheckFailure) and not failure.ok
    assert failure.kind == kind
    assert failure.message.startswith(message), failure.message
    assert detail in failure.details


# ---------------------------------------------------------------------------
# Issue 28: the code learners really write; what the module computes
# ---------------------------------------------------------------------------
def book_twin(module: torch.nn.Module, qkv_bias: bool, num_heads: int = 2) -> torch.nn.Module:
    """The book's MultiHeadAttention holding ``module``'s weights (d_in 3, d_out 10)."""
    twin = build(L.MultiHeadAttention, 3, 10, 6, 0.0, num_heads=num_heads, qkv_bias=qkv_bias)
    return twin


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_separate_biases_added_after_an_einsum_are_part_of_the_projections(qkv_bias):
    module = randomise(build(L.MHAEinsum, 3, 10, 6, 0.0, 2, qkv_bias=qkv_bias), 7)
    twin = book_twin(module, qkv_bias)
    with torch.no_grad():  # the same weights in the book's class: the same output
        for name, bias in (("W_query", "bias_q"), ("W_key", "bias_k"), ("W_value", "bias_v")):
            getattr(twin, name).weight.copy_(getattr(module, name).T)
            if qkv_bias:
                getattr(twin, name).bias.copy_(getattr(module, bias))
        twin.out_proj.load_state_dict(module.out_proj.state_dict())
    batch = torch.stack((JOURNEY, JOURNEY))
    assert torch.allclose(module(batch), twin(batch), atol=1e-5)
    report = check_module(module)
    assert report.ok, report.text()
    assert all(status == MATCH for step, status in statuses(report).items()
               if step != "scaled_scores")
    read = report.settings[2]
    assert ("bias_q added to X·W_query" in read and "bias_v added to X·W_value" in read) \
        == qkv_bias, read


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_a_fused_qkv_linear_and_a_proj_layer_are_read(qkv_bias):
    module = randomise(build(L.MultiHeadAttentionCombinedQKV, 3, 10, 6, 0.0, 2,
                             qkv_bias=qkv_bias), 8)
    report = check_module(module)
    assert report.ok, report.text()
    assert statuses(report) == {**CAUSAL, "output": MATCH}
    assert "rows of the fused qkv = nn.Linear(3, 30" in report.settings[2]
    assert "proj as out_proj" in report.settings[2]
    broken = L.MultiHeadAttentionCombinedQKV(3, 10, 6, 0.0, 2, qkv_bias=qkv_bias)
    broken.load_state_dict(module.state_dict())
    broken.forward = lambda x: module.proj(module.qkv(x)[..., :10])  # no attention at all
    assert not check_module(broken).ok


def test_a_class_wrapping_torch_multihead_attention_is_checked_with_its_own_proj():
    module = randomise(build(L.MHAPyTorchClass, 10, 10, 6, 0.0, 2, qkv_bias=True), 9).eval()
    report = check_module(module)
    assert report.ok, report.text()
    assert statuses(report)["attn_weights"] == MATCH  # each head's weights, recorded
    assert "then proj, composed with out_proj" in report.settings[2]
    unmasked = L.MHAPyTorchClass(10, 10, 6, 0.0, 2, qkv_bias=True).eval()
    unmasked.load_state_dict(module.state_dict())
    unmasked.mask.zero_()  # a buffer of zeros is no mask: not causal, unless you say so
    assert check_module(unmasked).ok
    report = check_module(unmasked, causal=True)
    assert (report.ok, report.mistake) == (False, "mask_not_applied")
    assert report.settings[0].startswith("assumed: causal (as you said (causal=True))")


def test_the_defaults_see_a_missing_scaling_and_warn_when_sizes_hide_it():
    from explorer.checker.sandbox import check_code

    no_scaling = LISTING_3_5.replace(" / keys.shape[-1]**0.5", "")
    report = check_code(no_scaling, "MultiHeadAttention")  # the defaults: d_out 4, 2 heads
    assert (report.ok, report.mistake) == (False, "no_scaling")
    assert check_code(LISTING_3_5, "MultiHeadAttention").ok
    hidden = check_module(build(L.MultiHeadAttention, 3, 2, 6, 0.0, num_heads=2))
    assert not hidden.ok and hidden.warnings[0].startswith(
        "head_dim = 2 / 2 = 1: dividing the scores by √head_dim = √1 changes nothing")
    assert "Warning: head_dim = 2 / 2 = 1" in hidden.text()
    assert hidden.summary().startswith("? Cannot tell at these sizes (d_in 3, d_out 2, "
                                       "num_heads 2, head_dim 1) these mistakes give the "
                                       "reference's own numbers: no_scaling")
    one_token = check_module(build(L.CausalAttention, 3, 4, 6, 0.0), "Hello")
    assert any(w.startswith("one token: ") for w in one_token.warnings)
    assert any(w.startswith("dropout p = 0: ") for w in one_token.warnings)


def test_keys_T_on_the_books_batch_is_named_and_is_no_pass():
    report = check_module(build(L.CausalAttentionKeysT, 3, 4, 6, 0.0))
    assert (report.ok, report.mistake) == (False, "no_batch")
    assert report.summary().startswith("✗ Raises on the book's batch of two")
    assert "torch.stack((inputs, inputs)) of shape (2, 6, 3)" in report.diagnosis
    assert ".T on a tensor of 3 dims, (2, 6, 4), reverses all its axes" in report.diagnosis
    # SelfAttention_v2 writes keys.T too, and the book runs it on one sentence
    v2 = check_module(build(L.SelfAttention_v2, 3, 2))
    assert v2.ok and ".T on a tensor of 3 dims" in v2.notes[0]
    # The book's classes run on the batch: every item checked
    book = check_module(build(L.CausalAttention, 3, 4, 6, 0.0))
    assert book.ok and "(2, 6, 3)" in book.settings[-1]
    assert check_module(build(L.CausalAttention, 3, 4, 6, 0.0),
                        inputs=torch.stack((JOURNEY, JOURNEY))).ok


def test_the_missing_transpose_back_is_named():
    report = check_module(build(L.NoTransposeBack, 3, 4, 6, 0.0, num_heads=2))
    assert (report.ok, report.first_step, report.mistake) == (False, "context",
                                                              "no_transpose_back")
    assert report.diagnosis.startswith("the heads are combined without the transpose back")


def test_dropout_on_the_scores_is_named():
    report = check_module(build(L.DropoutOnScores, 3, 10, 6, 0.5, num_heads=2), dropout_seed=3)
    assert (report.ok, report.mistake) == (False, "dropout_on_scores"), report.text()
    assert report.diagnosis.startswith("dropout is applied to the attention scores")
    assert check_module(build(L.Tweakable, 3, 10, 6, 0.5, num_heads=2), dropout_seed=3).ok


def test_block_size_is_context_length_and_an_unknown_argument_says_what_to_pass():
    from explorer.checker.sandbox import check_code

    report = check_code(L.CAUSAL_ATTENTION_BLOCK_SIZE, "CausalAttention", num_heads=1)
    assert report.ok, report.text()
    unknown = L.CAUSAL_ATTENTION_BLOCK_SIZE.replace("block_size, dropout", "block_size, p_drop")
    with pytest.raises(CheckError) as caught:
        check_code(unknown, "CausalAttention", interface="cli")
    assert str(caught.value).startswith("CausalAttention.__init__ needs p_drop, which the "
                                        "check does not know")
    assert str(caught.value).endswith("Give p_drop a default, or rename it to the one it "
                                      "stands for; then set it with its flag: --d_in, --d_out, "
                                      "--context_length, --dropout, --num_heads or --qkv_bias.")
    misspelt = L.CAUSAL_ATTENTION_BLOCK_SIZE.replace("block_size", "context_len")
    with pytest.raises(CheckError, match=r"needs context_len, which the check does not know "
                                         r"\(did you mean context_len → context_length\?\)"):
        check_code(misspelt, "CausalAttention")


LOOPS_FOREVER = ("import torch.nn as nn\nclass MultiHeadAttention(nn.Module):\n"
                 "    def __init__(self, d_in, d_out):\n        super().__init__()\n"
                 "        while True:\n            pass\n")


def test_the_command_line_stops_an_endless_loop_and_a_huge_allocation_with_exit_2(tmp_path):
    start = time.monotonic()
    looped = run_cli(tmp_path, LOOPS_FOREVER, "my_attention.py:MultiHeadAttention",
                     "--timeout", "3")
    assert time.monotonic() - start < 60  # torch's import and the 3 s, under load
    assert looped.returncode == 2, looped.stderr
    assert looped.stderr.startswith("error: your code ran for more than 3 s and was stopped, "
                                    "with every process it started: does a loop never end? "
                                    "(--timeout S changes the limit)"), looped.stderr
    assert "Traceback" not in looped.stderr
    huge = run_cli(tmp_path, "import torch\nblock = torch.ones(5 * 2**30)\n",
                   "my_attention.py:A")
    assert huge.returncode == 2, huge.stderr
    assert huge.stderr.startswith("error: your code needed more than 1,024 MB of memory and "
                                  "was stopped (--memory_mb MB changes the limit)"), huge.stderr


def running(comm: str) -> bool:
    """Whether a process named ``comm`` (its /proc/PID/comm) runs now."""
    for path in Path("/proc").glob("[0-9]*/comm"):
        try:
            if path.read_text().strip() == comm:
                return True
        except OSError:  # the process ended meanwhile
            pass
    return False


def test_ctrl_c_ends_the_command_line_with_one_line(tmp_path):
    # The learner's code names its process once in the loop: the box (a PID namespace,
    # its folder read-only, its output passed on at the end) leaves the test that sign.
    marker = f"loops{os.getpid()}"[:15]
    (tmp_path / "my_attention.py").write_text(LOOPS_FOREVER.replace(
        "        while True:", "        import ctypes  # PR_SET_NAME (the box's /proc is read-only)\n"
                              f"        ctypes.CDLL(None).prctl(15, {marker.encode()!r}, 0, 0, 0)\n"
                              "        while True:"))
    # A terminal's Ctrl-C: SIGINT handled as by default, even where this test runs in
    # the background (a shell's `&` ignores SIGINT, and a child inherits that).
    child = subprocess.Popen([sys.executable, "-m", "explorer", "check",
                              "my_attention.py:MultiHeadAttention"], cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not running(marker):  # inside the loop (importing torch takes a few seconds)
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.05)
    child.send_signal(2)  # SIGINT, as Ctrl-C
    out, err = child.communicate(timeout=60)
    assert (child.returncode, err, out) == (130, "stopped (Ctrl-C)\n", "")


def test_check_module_stops_an_endless_forward_within_its_timeout():
    class Endless(L.CausalAttention):
        def forward(self, x):
            while True:
                pass

    start = time.monotonic()
    with pytest.raises(CheckError) as caught:
        check_module(build(Endless, 3, 4, 6, 0.0), timeout=1)
    assert time.monotonic() - start < 10
    assert caught.value.field == "timeout"
    assert str(caught.value).endswith("(timeout=… changes the limit)")


def test_keys_T_on_a_batch_given_by_hand_names_the_cause():
    with pytest.raises(CheckError) as caught:
        check_module(build(L.CausalAttentionKeysT, 3, 4, 6, 0.0),
                     inputs=torch.stack((JOURNEY, JOURNEY)))
    assert str(caught.value).endswith(
        "The cause: .T on a tensor of 3 dims, (2, 6, 4), reverses all its axes (to (4, 6, 2)), "
        "not just the last two: write keys.transpose(-2, -1), as the book's CausalAttention "
        "writes keys.transpose(1, 2).")


class ImplicitSoftmax(L.SelfAttention_v2):
    def forward(self, x):
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        scores = queries @ keys.T / keys.shape[-1]**0.5
        return F.softmax(scores) @ values  # PyTorch warns: implicit dim (here 1, right)


def test_pytorch_warnings_from_the_learners_code_point_at_their_line():
    import inspect
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert check_module(build(ImplicitSoftmax, 3, 2)).ok
    implicit = [w for w in caught if "Implicit dimension choice" in str(w.message)]
    lines, first = inspect.getsourcelines(ImplicitSoftmax)
    line = first + next(i for i, text in enumerate(lines) if "F.softmax(scores)" in text)
    assert implicit and {(w.filename, w.lineno) for w in implicit} == {(__file__, line)}


def test_the_command_lines_dropout_advice_names_its_flag(tmp_path):
    run = run_cli(tmp_path, LISTING_3_5, "my_attention.py:MultiHeadAttention",
                  "--dropout", "0.5")
    assert run.returncode == 1, run.stderr
    assert "pass --dropout_seed 1 to compare with dropout on" in run.stdout
    seeded = run_cli(tmp_path, LISTING_3_5, "my_attention.py:MultiHeadAttention",
                     "--dropout", "0.5", "--dropout_seed", "1")
    assert seeded.returncode == 0, seeded.stdout


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_a_fused_layer_read_head_by_head_is_followed(qkv_bias):
    module = randomise(build(L.FusedPerHead, 3, 10, 6, 0.0, 2, qkv_bias=qkv_bias), 10)
    report = check_module(module)
    assert report.ok, report.text()
    assert "head by head (qkv.view(b, n, num_heads, 3 * head_dim))" in report.settings[2]
    broken = L.FusedPerHead(3, 10, 6, 0.0, 2, qkv_bias=qkv_bias)
    broken.load_state_dict(module.state_dict())
    broken.dropout = torch.nn.Identity()
    broken.mask.zero_()  # reads the same, forgets the mask
    assert check_module(broken, causal=True).mistake == "mask_not_applied"


def test_square_parameters_used_as_x_times_w_transposed_are_followed():
    report = check_module(randomise(build(L.SelfAttentionLinearLayout, 3, 3), 11))
    assert report.ok and "used as x @ W.T" in report.settings[2], report.text()


def test_scaled_dot_product_attention_with_is_causal_is_checked_as_causal():
    module = build(L.FusedWithSDPA, 3, 10, 6, 0.0, 2)
    del module.mask  # causal by is_causal=True alone
    report = check_module(module)
    assert report.ok, report.text()
    assert "is_causal=True" in report.settings[0]
    assert statuses(report)["context"] == MATCH


class WeightsNudged(L.SelfAttention_v2):  # softmax of 3 × the scaled scores: no weight agrees
    def forward(self, x):
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        attn_weights = torch.softmax(queries @ keys.T / keys.shape[-1]**0.5 * 3, dim=-1)
        return attn_weights @ values


class OutputNudged(L.Tweakable):  # only what forward returns is off
    def project_out(self, context_vec):
        return super().project_out(context_vec) * 1.01


class ViewSplitAndViewCombine(L.SplitWithView):  # two mistakes: the combine mirrors the split
    def combine(self, context_vec, b, num_tokens):
        return context_vec.contiguous().view(b, num_tokens, self.d_out)


@pytest.mark.parametrize("cls, rule, step", [
    (L.NoScaling, "explained_output", "scaled_scores"),
    (ViewSplitAndViewCombine, "mistake_in_two", "attn_scores"),
    (L.PositionBias, "kindred(agreeing=True)", "scaled_scores"),
    (WeightsNudged, "kindred(agreeing=False)", "attn_weights"),
    (OutputNudged, "last_step", "output"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_each_row_of_the_locating_table_decides_a_case(monkeypatch, cls, rule, step):
    """`check._locate` is a decision table (`check._Where`): each rule, in its
    order, is the one that places a mistake of its kind."""
    decided: list[str] = []

    def spy(name, method):
        def rule_of(self, *args, **kwargs):
            located = method(self, *args, **kwargs)
            label = f"{name}(agreeing={kwargs['agreeing']})" if "agreeing" in kwargs else name
            if located is not None and not decided:
                decided.append(label)
            return located
        return rule_of

    for name in ("explained_output", "mistake_in_two", "kindred", "last_step"):
        monkeypatch.setattr(check._Where, name, spy(name, getattr(check._Where, name)))
    args = (3, 2) if issubclass(cls, L.SelfAttention_v2) else (3, 8, 6, 0.0)
    report = check_module(build(cls, *args, **({} if len(args) == 2 else {"num_heads": 2})))
    assert not report.ok
    assert (decided, report.first_difference.step) == ([rule], step)
