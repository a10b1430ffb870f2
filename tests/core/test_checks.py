"""The checks the pages show can fail: the worked examples' ✓, the PyTorch
cross-checks (both routes) and the book's second causal route."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import AttentionConfig, compute_trace
from explorer.core import attention as att
from explorer.core.trace import Trace
from explorer.core.verify import against_pytorch, mha_applies, with_multihead_attention, with_sdpa
from explorer.lessons.presets import PRESETS, check


def perturbed(trace: Trace, **changes: torch.Tensor) -> Trace:
    """``trace`` with some steps replaced (everything else shared)."""
    return Trace(trace.config, trace.tokens, {**dict(trace), **changes})


@pytest.mark.parametrize("slug", list(PRESETS))
def test_every_example_matches_its_source_and_a_nudge_of_one_printed_unit_fails(slug):
    preset = PRESETS[slug]
    trace = compute_trace(preset.config)
    assert check(preset, trace).ok
    reference = next(r for r in preset.references if not r.changes)
    nudged = trace[reference.step].clone()
    target = nudged[reference.row] if reference.row is not None else nudged
    target.view(-1)[0] += 10.0 ** -reference.decimals  # one unit in the printed place
    result = check(preset, perturbed(trace, **{reference.step: nudged}))
    assert not result.ok
    assert result.where.startswith(reference.step)
    assert result.max_abs_diff >= 0.5 * 10.0 ** -reference.decimals


def test_a_nan_in_the_trace_is_an_infinite_difference():
    preset = PRESETS["journey"]
    trace = compute_trace(preset.config)
    broken = trace["attn_weights"].clone()
    broken[2, 3] = math.nan
    result = check(preset, perturbed(trace, attn_weights=broken))
    assert not result.ok and result.max_abs_diff == math.inf


MHA_CONFIG = AttentionConfig(d_in=4, d_k=4, d_v=4, n_heads=2, causal=True, seed=3)
SDPA_CONFIG = AttentionConfig(d_in=3, d_k=4, d_v=6, n_heads=2, causal=True, seed=3)


def test_multihead_attention_route_agrees_and_catches_a_wrong_weight():
    trace = compute_trace(MHA_CONFIG)
    assert mha_applies(trace) and against_pytorch(trace).reference.startswith(
        "torch.nn.MultiheadAttention")
    assert with_multihead_attention(trace).max_abs_diff < 1e-5
    # MHA rebuilds Q from W_query: a changed W_query leaves our (stored) weights behind.
    wrong = perturbed(trace, W_query=trace["W_query"] + 0.5)
    assert with_multihead_attention(wrong).max_abs_diff > 1e-2


def test_sdpa_route_agrees_and_catches_wrong_weights():
    trace = compute_trace(SDPA_CONFIG)
    assert not mha_applies(trace)  # d_in ≠ d_k: nn.MultiheadAttention cannot hold it
    result = against_pytorch(trace)
    assert result.reference.startswith("torch.nn.functional.scaled_dot_product_attention")
    assert result.compared == "output" and result.max_abs_diff < 1e-5
    weights = trace["attn_weights"].clone()
    weights[0, 2] = weights[0, 2].flip(-1)  # a row in the wrong order: still sums to 1
    context = att.combine_heads(att.context_vectors(weights, trace["values"]))
    output = att.output_projection(context, trace["W_out"], trace["b_out"])  # what follows
    wrong = perturbed(trace, attn_weights=weights, context=context, output=output)
    assert with_sdpa(wrong).max_abs_diff > 1e-3


def test_no_pytorch_check_for_a_normalisation_pytorch_does_not_have():
    assert against_pytorch(compute_trace(AttentionConfig(normalization="sum"))) is None


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), seed=st.integers(0, 1000), spread=st.floats(0.1, 5.0))
def test_second_causal_route_equals_masking_before_the_softmax(n, seed, spread):
    # Book §3.5.1: softmax over every key, zero the future, renormalise.
    scores = torch.randn(n, n, generator=torch.Generator().manual_seed(seed)) * spread
    mask = att.causal_mask(n)
    direct = att.softmax(att.apply_mask(scores, mask))
    torch.testing.assert_close(att.mask_after_softmax(scores, mask), direct, rtol=1e-5,
                               atol=1e-6)


def test_second_causal_route_loses_a_row_when_a_future_score_dominates():
    # Row 0 keeps only key 0, whose exp(0 − 200) underflows float32 to 0: 0 / 0.
    scores = torch.tensor([[0.0, 200.0], [1.0, 2.0]])
    mask = att.causal_mask(2)
    rerouted = att.mask_after_softmax(scores, mask)
    assert torch.isnan(rerouted[0]).all()
    assert torch.equal(att.softmax(att.apply_mask(scores, mask))[0], torch.tensor([1.0, 0.0]))


def test_the_chapters_running_example_equals_the_books_self_attention_v1():
    # Book §3.4.2, Listing 3.1, run here: torch.manual_seed(123); SelfAttention_v1(3, 2).
    # No seed notebook prints it, so the class itself is the reference.
    preset = PRESETS["self-attention-v1"]
    trace = compute_trace(preset.config)

    class SelfAttentionV1(torch.nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.W_query = torch.nn.Parameter(torch.rand(d_in, d_out))
            self.W_key = torch.nn.Parameter(torch.rand(d_in, d_out))
            self.W_value = torch.nn.Parameter(torch.rand(d_in, d_out))

        def forward(self, x):
            keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
            attn_scores = queries @ keys.T
            attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
            return attn_weights @ values

    inputs = torch.tensor(preset.config.embeddings.tolist())
    with torch.random.fork_rng():
        torch.manual_seed(123)
        module = SelfAttentionV1(3, 2)
        with torch.no_grad():
            context = module(inputs)
    for name in ("W_query", "W_key", "W_value"):
        assert torch.equal(trace[name], getattr(module, name).detach()), name
    torch.testing.assert_close(trace["context"], context, rtol=0, atol=1e-6)
