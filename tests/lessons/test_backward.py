"""Tests for the backward pass (issue 38): `explorer.lessons.backward` and
`explorer.modern.flash_backward`.

References are never the code under test: ``torch.autograd.grad`` through
the forward pass, PyTorch's own losses (``F.cross_entropy``, ``F.mse_loss``),
``torch.autograd.functional.jacobian`` of ``torch.softmax``,
``F.scaled_dot_product_attention``, ``nn.Linear``'s own initialisation and
updates written out by hand. Each broken variant of a step (monkeypatched in)
is shown to make the autograd comparison fail, so the comparison can fail.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import AttentionConfig, ConfigError, compute_trace
from explorer.core import attention as att
from explorer.core.agreement import Agreement, max_abs_diff
from explorer.lessons.backward import gradients as grad_module
from explorer.lessons.backward.check import check_gradients
from explorer.lessons.backward.gradients import backward, softmax_gradient, softmax_jacobian
from explorer.lessons.backward.loss import (
    IGNORE_INDEX,
    compute_loss,
    next_token_targets,
    unembedding,
)
from explorer.lessons.backward.saturation import (
    gradient_point,
    gradient_scaling_curves,
    jacobian_norm,
    saturation_curve,
)
from explorer.lessons.backward.settings import (
    ADAMW,
    MAX_TRAIN_STEPS,
    MAX_TRAINING_CELLS,
    SGD,
    TARGET,
    LossConfig,
    TrainingConfig,
    parse_setting,
)
from explorer.lessons.backward.terms import SYMBOLS, explain_gradient, formula
from explorer.lessons.backward.training import train
from explorer.modern import flash_backward as flash
from explorer.modern.attention import causal_allowed, tile_steps

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
WORDS = ["Life", "is", "short", "eat", "dessert", "first", "the", "cat", "sat", "on", "the"]
NEXT, TARGET_LOSS = LossConfig(), LossConfig(TARGET)


def divisors(n: int) -> list[int]:
    return [h for h in range(1, n + 1) if n % h == 0]


@st.composite
def configs(draw, **fixed) -> AttentionConfig:
    """A small random config (2..6 tokens, dims 1..8, any heads, mask, dropout,
    scaling, normalisation, out_proj); ``fixed`` overrides. The normalisations
    that can overflow or divide by ~0 get inputs that do not: the naive softmax
    nn.Linear's small weights, the row-sum X and W of U[0, 1) (positive scores)."""
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    normalization = fixed.pop("normalization", None) or draw(
        st.sampled_from(["softmax", "softmax", "naive_softmax", "sum"]))
    init = {"softmax": draw(st.sampled_from(["randn", "rand", "linear"])),
            "naive_softmax": "linear", "sum": "rand"}[normalization]
    fields = dict(
        sentence=" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=6))),
        d_in=draw(st.integers(1, 8)), d_k=d_k, d_v=d_v, seed=draw(st.integers(0, 2**63 - 1)),
        vocab_size=100, embedding="uniform" if normalization == "sum" else "table",
        weight_init=init, scale=draw(st.booleans()), normalization=normalization,
        causal=draw(st.booleans()), dropout=draw(st.sampled_from([0.0, 0.0, 0.3])),
        n_heads=draw(st.sampled_from(divisors(math.gcd(d_k, d_v)))),
        out_proj=draw(st.sampled_from([None, True, False])))
    fields.update(fixed)
    return AttentionConfig(**fields)


def failing(check: Agreement) -> set[str]:
    return set(check.failed)


# ---------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------
def test_next_token_targets_are_the_next_ids_and_the_last_position_is_left_out():
    trace = compute_trace(AttentionConfig())  # ids [0, 4, 5, 2, 1, 3] (tokenizer's docstring)
    assert next_token_targets(trace["token_ids"]).tolist() == [4, 5, 2, 1, 3, IGNORE_INDEX]
    loss = compute_loss(trace)
    assert loss.vocab == ("Life", "dessert", "eat", "first", "is", "short")
    assert loss.logits.shape == (6, 6) and loss.rows_name == "context"
    assert torch.equal(loss.grad_rows[-1], torch.zeros(4))  # no next token, no gradient
    expected = F.cross_entropy(trace["context"] @ loss.unembedding, loss.targets,
                               ignore_index=-100)
    assert loss.value == pytest.approx(float(expected), rel=1e-6)


def test_the_unembedding_is_nn_linear_after_torch_manual_seed():
    with torch.random.fork_rng():  # the global generator, restored after
        torch.manual_seed(123)
        reference = torch.nn.Linear(4, 6, bias=False).weight.T
    assert torch.equal(unembedding(123, 4, 6), reference)


def test_the_target_loss_is_mse_to_another_seeds_draw():
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=4))  # with out_proj
    loss = compute_loss(trace, LossConfig(TARGET, target_seed=7))
    target = torch.randn(6, 4, generator=torch.Generator().manual_seed(7))
    assert loss.rows_name == "output" and torch.equal(loss.targets, target)
    assert loss.value == pytest.approx(float(F.mse_loss(trace["output"], target)), rel=1e-6)
    assert LossConfig(TARGET).seed_of_target(trace.config) == 124  # the config's seed + 1


def test_next_token_loss_needs_two_tokens_and_the_target_loss_does_not():
    trace = compute_trace(AttentionConfig(sentence="alone"))
    with pytest.raises(ConfigError, match="at least 2 tokens.*got 1"):
        compute_loss(trace)
    assert check_gradients(trace, TARGET_LOSS).ok


@pytest.mark.parametrize("name, value, message", [
    ("loss", "mae", "loss must be one of 'next_token', 'target' (got 'mae')"),
    ("optimizer", "adam", "optimizer must be one of 'sgd', 'adamw'"),
    ("learning_rate", "0", "learning_rate must be a number between 1e-06 and 10 (got '0')"),
    ("learning_rate", float("nan"), "learning_rate must be a number"),
    ("train_steps", MAX_TRAIN_STEPS + 1, f"train_steps must be between 1 and {MAX_TRAIN_STEPS}"),
    ("train_steps", "2.5", "train_steps must be a whole number"),
    ("target_seed", -1, "target_seed must be between 0"),
])
def test_a_bad_setting_says_what_is_allowed(name, value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_setting(name, value)
    assert parse_setting("train_steps", "12") == 12 and parse_setting("learning_rate", "0.1") == 0.1


# ---------------------------------------------------------------------------
# Every gradient equals autograd's
# ---------------------------------------------------------------------------
@SETTINGS
@given(config=configs(), target=st.booleans())
def test_every_hand_derived_gradient_equals_autograd(config, target):
    trace = compute_trace(config)
    checks = check_gradients(trace, TARGET_LOSS if target else NEXT)
    assert not failing(checks), [(c.name, c.max_abs_diff, c.scale) for c in checks.parts]
    names = {check.name for check in checks.parts}
    assert {"loss", "context", "values", "attn_weights", "scaled_scores", "attn_scores",
            "queries", "keys", "W_query", "W_key", "W_value", "embeddings"} <= names
    assert ("masked_scores" in names) == config.causal
    assert ("dropped_weights" in names) == (config.dropout > 0)
    assert ({"output", "W_out", "b_out"} <= names) == config.has_out_proj


def test_gradients_have_their_steps_shapes_in_backward_order():
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=6, causal=True, dropout=0.2))
    grads = backward(trace, compute_loss(trace))
    assert list(grads) == ["output", "W_out", "b_out", "context", "values", "dropped_weights",
                           "attn_weights", "masked_scores", "scaled_scores", "attn_scores",
                           "queries", "keys", "W_query", "W_key", "W_value", "embeddings"]
    for name in grads:
        assert grads[name].shape == trace[name].shape, name
    assert torch.allclose(sum(grads.paths.values()), grads["embeddings"])


def test_masked_positions_get_no_gradient():
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4))
    grads = backward(trace, compute_loss(trace))
    future = trace["causal_mask"]
    for name in ("masked_scores", "scaled_scores", "attn_scores"):
        assert torch.equal(grads[name][:, future], torch.zeros_like(grads[name][:, future]))
    assert grads["attn_scores"][:, ~future].abs().max() > 1e-4  # the kept ones do


def test_the_softmax_jacobian_is_autograds_and_its_product_is_the_softmax_backward():
    scores = torch.tensor([1.0, -0.5, 2.0, 0.25])
    weights = torch.softmax(scores, dim=-1)
    reference = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), scores)
    jac = softmax_jacobian(weights)
    assert torch.allclose(jac, reference, atol=1e-7)
    assert torch.allclose(jac.sum(dim=-1), torch.zeros(4), atol=1e-7)
    upstream = torch.tensor([0.3, -1.0, 0.5, 2.0])
    assert torch.allclose(jac @ upstream, softmax_gradient(weights, upstream), atol=1e-7)


def test_max_abs_diff_counts_a_nan_against_a_number_as_infinite():
    assert max_abs_diff(torch.tensor([1.0, math.nan]), torch.tensor([1.0, math.nan])) == 0
    assert max_abs_diff(torch.tensor([1.0, math.nan]), torch.tensor([1.0, 2.0])) == math.inf
    assert max_abs_diff(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0])) == 0.5


# ---------------------------------------------------------------------------
# Broken variants fail the comparison
# ---------------------------------------------------------------------------
def test_the_softmax_backward_without_the_rowsum_term_fails(monkeypatch):
    trace = compute_trace(AttentionConfig())
    assert not failing(check_gradients(trace))
    monkeypatch.setattr(grad_module, "softmax_gradient", lambda w, dw: w * dw)
    broken = failing(check_gradients(trace))
    assert {"scaled_scores", "attn_scores", "queries", "keys", "W_query", "W_key"} <= broken
    assert not broken & {"loss", "context", "values", "attn_weights", "W_value"}


def test_dq_without_the_one_over_root_dk_fails(monkeypatch):
    trace = compute_trace(AttentionConfig(d_k=8, d_v=4))  # √8: a factor the check must see
    monkeypatch.setattr(grad_module, "scale_gradient", lambda d, head_dim, scale=True: d)
    broken = failing(check_gradients(trace))
    assert {"attn_scores", "queries", "keys", "W_query"} <= broken
    assert "scaled_scores" not in broken  # the gradient before the scaling is still right


def test_gradient_leaking_into_masked_positions_fails(monkeypatch):
    """The backward forgets the mask: the softmax's backward is taken over the
    weights without the mask (as if every key were seen) and the mask step
    passes it all through."""
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4))
    unmasked = att.softmax(trace["scaled_scores"])
    monkeypatch.setattr(grad_module, "normalization_gradient",
                        lambda norm, scores, weights, dw: softmax_gradient(unmasked, dw))
    monkeypatch.setattr(grad_module, "mask_gradient", lambda d, mask: d)
    grads = backward(trace, compute_loss(trace))
    assert grads["attn_scores"][:, trace["causal_mask"]].abs().max() > 1e-3  # the leak
    assert {"attn_scores", "queries", "keys"} <= failing(check_gradients(trace, gradients=grads))


def test_the_heads_gradients_not_summed_back_fail(monkeypatch):
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=4))
    monkeypatch.setattr(grad_module, "input_path",
                        lambda d, w: (d @ att.split_heads(w, d.shape[0]).transpose(-2, -1))[0])
    broken = failing(check_gradients(trace))
    assert broken == {"embeddings"}  # the weights' columns are each one head's: still right


# ---------------------------------------------------------------------------
# Click a gradient cell
# ---------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs(), target=st.booleans(), data=st.data())
def test_every_gradient_cells_terms_recompute_it(config, target, data):
    trace = compute_trace(config)
    grads = backward(trace, compute_loss(trace, TARGET_LOSS if target else NEXT))
    for name in grads:
        assert formula(grads, name).startswith(SYMBOLS[name] + " = ")
        head = data.draw(st.integers(0, config.n_heads - 1)) if grads[name].dim() == 3 else 0
        matrix = grads.head(name, head)
        matrix = matrix[None] if matrix.dim() == 1 else matrix
        row = data.draw(st.integers(0, matrix.shape[0] - 1))
        col = data.draw(st.integers(0, matrix.shape[1] - 1))
        explained = explain_gradient(grads, name, row, col, head)
        assert explained.result() == pytest.approx(float(matrix[row, col]), rel=1e-4,
                                                   abs=1e-6), (name, row, col, head)


def test_a_query_gradient_cell_is_the_issues_sum_over_keys():
    """dL/dq_i,c = Σ_j dL/dω̃_ij · k_j,c / √d_k, with the tokens' names."""
    trace = compute_trace(AttentionConfig())
    grads = backward(trace, compute_loss(trace))
    explained = explain_gradient(grads, "queries", 1, 0)
    assert explained.cell == 'dL/dQ["is", 0]'
    assert explained.formula == '(Σ_j dL/dω̃["is", j] · K[j, 0]) / √2'
    assert explained.divisor == pytest.approx(math.sqrt(2))
    assert [t.label for t in explained.terms][:2] == ['dL/dω̃["is", "Life"]·K["Life", 0]',
                                                      'dL/dω̃["is", "is"]·K["is", 0]']
    for j, term in enumerate(explained.terms):
        assert term.factors == pytest.approx((float(grads["scaled_scores"][1, j]),
                                              float(trace["keys"][j, 0])))
    with pytest.raises(IndexError):
        explain_gradient(grads, "queries", 6, 0)


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer, rate", [(SGD, 0.5), (ADAMW, 0.05)])
def test_training_is_reproducible_and_its_loss_falls_on_the_default_sentence(optimizer, rate):
    trace = compute_trace(AttentionConfig())
    training = TrainingConfig(optimizer, rate, 30)
    run, again = train(trace, NEXT, training), train(trace, NEXT, training)
    assert run.losses == again.losses and torch.equal(run.attn_weights, again.attn_weights)
    assert len(run.losses) == 31 and run.attn_weights.shape == (31, 1, 6, 6)
    assert run.losses[0] == compute_loss(trace).value
    assert torch.equal(run.attn_weights[0, 0], trace["attn_weights"])
    assert run.losses[-1] < 0.7 * run.losses[0] and run.diverged_at is None
    other = train(compute_trace(AttentionConfig(seed=5)), NEXT, training)
    assert other.losses[0] != run.losses[0]


def test_one_sgd_step_is_w_minus_lr_times_the_hand_derived_gradient():
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=4, dropout=0.2))
    grads = backward(trace, compute_loss(trace, TARGET_LOSS))  # the trace's own dropout mask
    run = train(trace, TARGET_LOSS, TrainingConfig(SGD, 0.1, 1))
    for name in ("W_query", "W_key", "W_value", "W_out", "b_out"):
        assert torch.allclose(run.parameters[name], trace[name] - 0.1 * grads[name], atol=1e-6)


def test_adamws_first_step_moves_each_weight_by_the_learning_rate():
    """AdamW's first update is lr · g / (|g| + ε) (m̂ = g, v̂ = g²) after the decay
    W·(1 − lr·0.1): every weight with a gradient moves by lr, against its sign."""
    trace = compute_trace(AttentionConfig())
    grads = backward(trace, compute_loss(trace))
    run = train(trace, NEXT, TrainingConfig(ADAMW, 0.01, 1))
    w, g = trace["W_query"], grads["W_query"]
    expected = w * (1 - 0.01 * 0.1) - 0.01 * g / (g.abs() + 1e-8)
    assert torch.allclose(run.parameters["W_query"], expected, atol=1e-6)


def test_training_is_bounded():
    with pytest.raises(ConfigError, match=f"between 1 and {MAX_TRAIN_STEPS}"):
        TrainingConfig(steps=MAX_TRAIN_STEPS + 1)
    with pytest.raises(ConfigError, match=r"train_steps \+ 1\) × n_heads × n_tokens² must be"):
        TrainingConfig(steps=100).check_size(n_heads=16, n_tokens=512)
    TrainingConfig(steps=(MAX_TRAINING_CELLS // 512 ** 2) - 1).check_size(1, 512)


# ---------------------------------------------------------------------------
# Why √d_k, from the gradient's side
# ---------------------------------------------------------------------------
def test_the_jacobian_norm_is_the_frobenius_norm_of_the_jacobian():
    weights = torch.softmax(torch.tensor([[0.1, 2.0, -1.0], [5.0, 0.0, 0.0]],
                                         dtype=torch.float64), dim=-1)
    explicit = torch.stack([softmax_jacobian(row).norm() for row in weights])
    assert torch.allclose(jacobian_norm(weights), explicit)
    assert float(jacobian_norm(torch.tensor([1.0, 0.0, 0.0]))) == 0.0  # one-hot: nothing back


def test_without_the_scaling_the_softmax_gradient_vanishes_as_d_k_grows():
    curves = gradient_scaling_curves(seed=0)
    assert curves.dims[0] == 1 and curves.dims[-1] == 1024
    assert curves.jacobian[-1] < 0.3 * curves.jacobian[0]
    assert curves.gradient[-1] < 0.3 * curves.gradient[0]
    assert curves.saturated[-1] > 0.5 and max(curves.saturated_scaled) == 0.0
    for scaled in (curves.jacobian_scaled, curves.gradient_scaled):
        assert max(scaled) < 1.25 * min(scaled)
    saturation = saturation_curve(seed=0)
    assert list(saturation.max_weight) == sorted(saturation.max_weight)
    assert saturation.gradient[-1] < 0.25 * max(saturation.gradient)
    point = gradient_point(compute_trace(AttentionConfig(d_k=64)))
    assert point.jacobian < point.jacobian_scaled


# ---------------------------------------------------------------------------
# FlashAttention's backward pass
# ---------------------------------------------------------------------------
def _sdpa_gradients(q, k, v, d_output, causal):
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    return torch.autograd.grad(out, leaves, grad_outputs=d_output)


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 3), n=st.integers(1, 9), d=st.integers(1, 6), dv=st.integers(1, 5),
       causal=st.booleans(), seed=st.integers(0, 2**32), data=st.data())
def test_flash_backward_equals_autograd_through_sdpa(h, n, d, dv, causal, seed, data):
    block_q, block_k = data.draw(st.integers(1, n)), data.draw(st.integers(1, n))
    rng = torch.Generator().manual_seed(seed)
    q, k = torch.randn(h, n, d, generator=rng), torch.randn(h, n, d, generator=rng)
    v, d_o = torch.randn(h, n, dv, generator=rng), torch.randn(h, n, dv, generator=rng)
    result = flash.flash_backward(q, k, v, d_o, block_q, block_k,
                                  causal_allowed(n) if causal else None)
    for ours, reference in zip((result.d_queries, result.d_keys, result.d_values),
                               _sdpa_gradients(q, k, v, d_o, causal)):
        assert torch.allclose(ours, reference, atol=2e-5, rtol=1e-4)
    assert len(result.tiles) == tile_steps(n, block_q, block_k)
    n_q = -(-n // block_q)
    assert [(t.k_tile, t.q_tile) for t in result.tiles] == [
        divmod(i, n_q) for i in range(len(result.tiles))]  # key tiles outside, query tiles in
    full = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d) + (
        torch.where(causal_allowed(n), 0.0, -math.inf) if causal else 0.0), dim=-1)
    d_p = d_o @ v.transpose(-2, -1)
    assert torch.allclose(result.D, (full * d_p).sum(dim=-1), atol=1e-5)  # D = rowsum(P ⊙ dP)
    assert result.tile_bytes == 4 * h * block_q * block_k


def test_flash_backward_without_d_fails(monkeypatch):
    rng = torch.Generator().manual_seed(1)
    q, k, v, d_o = (torch.randn(2, 6, 4, generator=rng) for _ in range(4))
    monkeypatch.setattr(flash, "tile_score_gradient", lambda p, d_p, D: p * d_p)
    result = flash.flash_backward(q, k, v, d_o, 2, 3, causal_allowed(6))
    d_q, d_k, d_v = _sdpa_gradients(q, k, v, d_o, True)
    assert (result.d_queries - d_q).abs().max() > 1e-2
    assert (result.d_keys - d_k).abs().max() > 1e-2
    assert torch.allclose(result.d_values, d_v, atol=1e-5)  # dV needs no D


def test_flash_backward_of_a_trace_equals_its_hand_derived_gradients():
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=6))
    grads = backward(trace, compute_loss(trace))
    result = flash.flash_backward_of(grads, 4, 2)
    for ours, name in ((result.d_queries, "queries"), (result.d_keys, "keys"),
                       (result.d_values, "values")):
        assert torch.allclose(ours, grads[name], atol=1e-6), name
    with pytest.raises(ConfigError, match="dropout"):
        plain = compute_trace(AttentionConfig(dropout=0.1))
        flash.flash_backward_of(backward(plain, compute_loss(plain)), 2, 2)
    with pytest.raises(ConfigError, match="block_q must be between 1 and the 6 tokens"):
        flash.flash_backward_of(grads, 7, 2)


def test_the_biases_gradients_equal_autograd_and_their_cells_are_column_sums():
    """A trace with Q, K and V biases (as a real model's layer has them), built
    by the training's forward pass from the default trace's weights."""
    from explorer.lessons.backward.training import forward
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=6, causal=True))
    rng = torch.Generator().manual_seed(3)
    parameters = {name: trace[name] for name in ("W_query", "W_key", "W_value", "W_out", "b_out")}
    parameters |= {"b_query": torch.randn(4, generator=rng), "b_key": torch.randn(4, generator=rng),
                   "b_value": torch.randn(6, generator=rng)}
    biased = forward(trace, parameters, None)
    checks = check_gradients(biased)
    assert {"b_query", "b_key", "b_value"} <= {c.name for c in checks.parts}
    assert not failing(checks)
    grads = backward(biased, compute_loss(biased))
    assert torch.allclose(grads["b_query"], att.combine_heads(grads["queries"]).sum(dim=0))
    explained = explain_gradient(grads, "b_value", 0, 5)
    assert explained.cell == "dL/db_value[5]" and len(explained.terms) == 6
    assert explained.result() == pytest.approx(float(grads["b_value"][5]), rel=1e-5)


@pytest.mark.parametrize("normalization", ["softmax", "sum"])
def test_a_rows_jacobian_is_autograds_with_the_masked_keys_zero(normalization):
    from explorer.lessons.backward.gradients import row_jacobian
    config = AttentionConfig(causal=True, normalization=normalization, embedding="uniform",
                             weight_init="rand", n_heads=2, d_k=4, d_v=4)
    trace = compute_trace(config)
    norm = att.NORMALIZERS[normalization]
    reference = torch.autograd.functional.jacobian(
        lambda s: norm(s[None])[0], trace.head("masked_scores", 1)[3])
    reference = torch.nan_to_num(reference)  # d(−∞) columns: 0 (autograd gives 0 or NaN)
    assert torch.allclose(row_jacobian(trace, 3, head=1), reference, atol=1e-6)
    assert torch.equal(row_jacobian(trace, 3, head=1)[:, 4:], torch.zeros(6, 2))


# ---------------------------------------------------------------------------
# Issue 51: what the walk found on the Backward pass page
# ---------------------------------------------------------------------------
PAGE_DEFAULT = AttentionConfig(causal=True, n_heads=2, d_k=4)
"""The Backward pass page's defaults (explorer.ui.state's entries)."""


@pytest.mark.parametrize("loss_config", [NEXT, LossConfig(TARGET, 9)])
def test_the_gradients_json_says_its_loss_and_the_loss_can_be_computed_again_from_it(
        loss_config):
    import json

    trace = compute_trace(PAGE_DEFAULT)
    saved = json.loads(backward(trace, compute_loss(trace, loss_config)).to_json())
    loss = saved["loss"]
    assert loss["kind"] == loss_config.loss and loss["reads"] == "output"
    # From the file alone: its config, its loss's seed, PyTorch's own loss
    again = compute_trace(AttentionConfig(**saved["config"]))
    rows = again[loss["reads"]]
    if loss_config.loss == TARGET:
        assert loss["target_seed"] == 9 and loss["unembedding_seed"] is None
        target = torch.randn(*rows.shape, generator=torch.Generator().manual_seed(9))
        expected = F.mse_loss(rows, target)
    else:
        assert loss["target_seed"] is None and loss["unembedding_seed"] == trace.config.seed
        with torch.random.fork_rng():
            torch.manual_seed(loss["unembedding_seed"])  # the book's Listing 4.7
            out_head = torch.nn.Linear(rows.shape[1], len(loss["vocab"]), bias=False)
        ids = torch.tensor([loss["vocab"].index(t) for t in saved["tokens"]])
        targets = torch.cat([ids[1:], torch.tensor([-100])])
        expected = F.cross_entropy(out_head(rows), targets, ignore_index=-100)
    assert loss["value"] == pytest.approx(float(expected.detach()), rel=1e-6)
    assert str(loss["unembedding_seed"] or loss["target_seed"]) in loss["recipe"]


def test_a_run_whose_loss_blows_up_is_said_to_diverge_and_a_learning_one_is_not():
    trace = compute_trace(PAGE_DEFAULT)
    learning = train(trace, NEXT, TrainingConfig())
    assert learning.diverged_at is None and learning.losses[-1] < learning.losses[0]
    # The walk's run: the old defaults (head_dim 1), SGD at lr = 10: finite all along
    walked = train(compute_trace(AttentionConfig(causal=True, n_heads=2)), NEXT,
                   TrainingConfig(SGD, 10.0))
    assert all(math.isfinite(x) for x in walked.losses)
    assert walked.largest_loss == pytest.approx(4.9e35, rel=0.05)  # the walk's number
    assert walked.diverged_at is not None
    # On the page's defaults it becomes inf at last; it diverged long before
    blown = train(trace, NEXT, TrainingConfig(SGD, 10.0))
    step = blown.diverged_at
    first_inf = next(i for i, x in enumerate(blown.losses) if not math.isfinite(x))
    assert step is not None and step < first_inf
    assert blown.losses[step] > 10 * blown.losses[0]
    assert all(x <= 10 * blown.losses[0] for x in blown.losses[:step])


def test_the_page_defaults_head_dim_makes_the_scaling_show():
    trace = compute_trace(PAGE_DEFAULT)
    assert PAGE_DEFAULT.head_dim == 2
    grads = backward(trace, compute_loss(trace))
    torch.testing.assert_close(grads["attn_scores"], grads["scaled_scores"] / math.sqrt(2))
    assert not torch.equal(grads["attn_scores"], grads["scaled_scores"])


def _quotient(written: str) -> tuple[float, float, str]:
    """The printed a and b of a written line ending "… = a / b = c", and c's text
    (with an ASCII minus)."""
    def plain(text: str) -> str:
        return text.strip().strip("()").replace("\u2212", "-")
    *_, ratio, result = written.split(" = ")
    a, b = ratio.split(" / ")
    return float(plain(a)), float(plain(b)), plain(result)


def _as_written(value: float, like: str) -> str:
    """``value`` rounded to the digits of ``like`` ("0.0205", "-9.569e-3")."""
    if "e" in like:
        mantissa, exponent = like.split("e")
        digits = len(mantissa.split(".")[1])
        m, e = f"{value:.{digits}e}".split("e")
        return f"{m}e{int(e)}"
    return f"{value:.{len(like.split('.')[1])}f}".replace("-0.0000", "0.0000")


@pytest.mark.parametrize("config", [AttentionConfig(d_k=2), AttentionConfig(causal=True, n_heads=2),
                                    PAGE_DEFAULT, AttentionConfig(causal=True, d_k=4, seed=3)])
def test_a_written_gradient_quotient_checks_as_printed(config):
    """A dQ cell printed "0.0001 / 1.4142 = 4.5e−5" (issue 51): every dQ and dK
    cell's printed sum divided by the printed √head_dim gives the printed result."""
    trace = compute_trace(config)
    grads = backward(trace, compute_loss(trace))
    small = 0
    for name in ("queries", "keys"):
        for head in range(config.n_heads):
            for row in range(trace.n_tokens):
                for col in range(config.head_dim):
                    e = explain_gradient(grads, name, row, col, head=head)
                    a, b, c = _quotient(e.written())
                    assert b == pytest.approx(math.sqrt(config.head_dim), abs=1e-4)
                    assert _as_written(a / b, c) == c, e.written()
                    assert float(c) == pytest.approx(e.value, rel=1e-3, abs=5e-5)
                    small += 0 < abs(float(c)) < 1e-2
    assert small  # some cells are small enough for four decimals to hide them


def test_flash_backward_says_which_tiles_are_wholly_masked_and_its_bytes_per_head():
    trace = compute_trace(PAGE_DEFAULT)
    result = flash.flash_backward_of(backward(trace, compute_loss(trace)), 2, 2)
    masked = flash.masked_tiles(result)
    # independently: the tiles whose recomputed P is 0 in every cell, every head
    assert masked == [i for i, t in enumerate(result.tiles) if not t.P.any()] == [3, 6, 7]
    assert len(result.tiles) - len(masked) == 6  # what causal FlashAttention walks
    assert result.tile_bytes_per_head == 4 * 2 * 2 == 16 and result.tile_bytes == 32
    plain = compute_trace(AttentionConfig(n_heads=2, d_k=4))
    unmasked = flash.flash_backward_of(backward(plain, compute_loss(plain)), 2, 2)
    assert len(unmasked.tiles) == 9  # the same walk without the mask: none all-zero
    assert all(t.P.all() for t in unmasked.tiles)


@pytest.mark.parametrize("changes, setting", [({"dropout": 0.1}, "dropout"),
                                              ({"scale": False}, "scale"),
                                              ({"normalization": "sum"}, "normalization")])
def test_flash_backward_is_not_shown_for_another_computation(changes, setting):
    config = AttentionConfig(causal=True, n_heads=2, d_k=4, **changes)
    found = flash.not_shown(config)
    assert found is not None and found[0] == setting and "needs scale on" in found[1]
    assert flash.not_shown(PAGE_DEFAULT) is None
    trace = compute_trace(config)
    with pytest.raises(ConfigError, match="needs scale on"):
        flash.flash_backward_of(backward(trace, compute_loss(trace)), 2, 2)


def test_the_gradient_point_counts_the_sentences_keys():
    trace = compute_trace(PAGE_DEFAULT)
    point = gradient_point(trace)
    assert point.n_keys == trace.n_tokens == 6 and point.d_k == 2
