"""Learned attention sinks (`explorer.modern.frontier.sinks`) against
transformers' ``GptOssAttention`` with the same weights, and the rows' missing
mass against the sink's probability computed by a second route. Broken
variants fail: the sink left in the row sum (rows renormalised to 1), the
sink's column kept."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.config import ConfigError
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier.sinks import (
    SinkWeights,
    check_sink_mass,
    check_transformers,
    context_and_output,
    draw_weights,
    sink_attention,
    sinks,
)

DEFAULT = FrontierConfig()
WIDE = FrontierConfig(n_heads=3, head_dim=6)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def trace_of(config: FrontierConfig, n: int = 6, d_in: int = 8, seed: int = 1):
    x = randn(n, d_in)
    return x, sink_attention(x, config, draw_weights(d_in, config,
                                                     torch.Generator().manual_seed(seed)))


@pytest.mark.parametrize("config", [DEFAULT, WIDE], ids=["default", "wide"])
def test_every_check_agrees(config):
    part = sinks(randn(6, 8), config, torch.Generator().manual_seed(2))
    assert [c.ok for c in part.checks] == [True, True]
    assert all(c.max_abs_diff < 1e-5 for c in part.checks)
    assert [p.name for p in part.checks[1].parts] == ["attn_weights", "output"]


def test_rows_sum_to_less_than_one():
    part = sinks(randn(6, 8), DEFAULT, torch.Generator().manual_seed(2))
    sums = part.step("attn_weights").values.sum(-1)
    assert (sums < 1).all() and (sums > 0).all()
    torch.testing.assert_close(part.step("softmax_with_sink").values.sum(-1),
                               torch.ones_like(sums))


def test_the_sink_left_in_the_row_sum_fails_both_checks():
    x, t = trace_of(DEFAULT)
    renormalised = t.attn_weights / t.attn_weights.sum(-1, keepdim=True)  # rows sum to 1 again
    _, output = context_and_output(renormalised, t.values, t.weights.W_O)
    assert not check_sink_mass(t, renormalised).ok
    broken = check_transformers(x, DEFAULT, t, renormalised, output)
    assert not broken.ok and broken.failed == ["attn_weights", "output"]
    assert broken.max_abs_diff > 1e-2


def test_the_sinks_column_kept_fails():
    x, t = trace_of(DEFAULT)
    assert not check_transformers(x, DEFAULT, t, attn_weights=t.probs).ok


def test_steps_have_the_documented_shapes():
    n, d_in, c = 6, 8, WIDE
    part = sinks(randn(n, d_in), c, torch.Generator().manual_seed(0))
    h, d = c.n_heads, c.head_dim
    expected = {"queries": (h, n, d), "keys": (h, n, d), "values": (h, n, d),
                "attn_scores": (h, n, n), "causal_allowed": (n, n),
                "logits_with_sink": (h, n, n + 1), "softmax_with_sink": (h, n, n + 1),
                "attn_weights": (h, n, n), "sink_probability": (h, n, 1),
                "weights_without_sink": (h, n, n), "context": (h, n, d), "output": (n, d_in)}
    assert {s.name: tuple(s.values.shape) for s in part.steps} == expected


def test_extreme_sinks_take_nothing_or_everything():
    x, t = trace_of(DEFAULT)
    w = t.weights
    quiet = sink_attention(x, DEFAULT, SinkWeights(w.W_query, w.W_key, w.W_value, w.W_O,
                                                   torch.tensor([-40.0, -40.0])))
    loud = sink_attention(x, DEFAULT, SinkWeights(w.W_query, w.W_key, w.W_value, w.W_O,
                                                  torch.tensor([40.0, 40.0])))
    torch.testing.assert_close(quiet.attn_weights, quiet.plain_weights)
    assert float(loud.attn_weights.max()) < 1e-12


def test_the_part_leaves_the_global_generator_alone():
    before = torch.random.get_rng_state()
    sinks(randn(6, 8), DEFAULT, torch.Generator().manual_seed(3))
    assert torch.equal(before, torch.random.get_rng_state())


def test_odd_head_dim_raises_config_error():
    with pytest.raises(ConfigError) as error:
        sinks(randn(6, 8), replace(DEFAULT, head_dim=3), torch.Generator().manual_seed(0))
    assert error.value.field == "head_dim"


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.sampled_from([2, 4, 6]), st.integers(1, 8), st.integers(1, 9),
       st.integers(0, 2**31 - 1))
def test_rows_sum_to_one_minus_the_sink_probability(n_heads, head_dim, n, d_in, seed):
    config = FrontierConfig(n_heads=n_heads, head_dim=head_dim)
    _, t = trace_of(config, n=n, d_in=d_in, seed=seed)
    sink = t.probs[..., -1]                                   # (h, n)
    torch.testing.assert_close(t.attn_weights.sum(-1), 1 - sink, atol=1e-6, rtol=0)
    # the sink takes the same share from every key of a row
    torch.testing.assert_close(t.attn_weights, t.plain_weights * (1 - sink)[..., None],
                               atol=1e-6, rtol=0)
    assert check_sink_mass(t).ok
