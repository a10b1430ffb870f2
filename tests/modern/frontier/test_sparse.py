"""DeepSeek sparse attention (`explorer.modern.frontier.sparse`) against
transformers' ``DeepseekV32Attention`` and its indexer with the same weights
(the same top-k keys, the same attn_weights and output, at most k non-zero
weights a row), and against ``F.scaled_dot_product_attention`` with the
selected keys as its boolean mask. Broken variants fail: the lowest-scored
keys kept, causal attention over every key."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.config import ConfigError
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier import mla as mla_module
from explorer.modern.frontier.sparse import (
    at_most_k,
    check_transformers,
    draw_indexer,
    index_scores,
    sparse,
    sparse_attention,
)

DEFAULT = FrontierConfig()
WIDE = FrontierConfig(n_heads=3, rope_dim=4, index_heads=3, index_dim=6, top_k=4)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def trace_of(config: FrontierConfig, n: int = 6, d_in: int = 8, seed: int = 1):
    x = randn(n, d_in, seed=seed + 100)
    g = torch.Generator().manual_seed(seed)
    weights = mla_module.draw_weights(d_in, config, g)
    return x, sparse_attention(x, config, weights, draw_indexer(d_in, config, g))


@pytest.mark.parametrize("config", [DEFAULT, WIDE, replace(DEFAULT, index_heads=1, top_k=1)],
                         ids=["default", "wide", "one-key"])
def test_the_check_agrees(config):
    part = sparse(randn(7, 8), config, torch.Generator().manual_seed(4))
    (check,) = part.checks
    assert check.ok, check.failed
    assert [p.name for p in check.parts] == ["top-k keys", "attn_weights", "output",
                                             "at most k non-zero weights per row"]
    assert check.part("top-k keys").exact


def test_the_same_mla_as_the_mla_part_for_the_same_seed():
    x = randn(6, 8)
    a = sparse(x, DEFAULT, torch.Generator().manual_seed(9))
    b = mla_module.mla(x, DEFAULT, torch.Generator().manual_seed(9))
    assert torch.equal(a.step("attn_scores").values, b.step("attn_scores").values)
    assert torch.equal(a.step("dense_weights").values, b.step("attn_weights").values)


def test_the_lowest_keys_kept_fail_the_check():
    x, t = trace_of(DEFAULT, n=7)
    masked = t.index.masked_fill(~t.dense.causal, float("inf"))
    lowest = masked.topk(DEFAULT.top_k, dim=-1, largest=False).indices
    wrong = torch.zeros_like(t.selected).scatter(-1, lowest, True) & t.dense.causal
    assert not torch.equal(wrong, t.selected)
    weights = torch.softmax(t.dense.attn_scores.masked_fill(~wrong, float("-inf")), dim=-1)
    check = check_transformers(x, DEFAULT, t, selected=wrong, attn_weights=weights)
    assert {"top-k keys", "attn_weights"} <= set(check.failed)


def test_dense_causal_weights_fail_at_most_k():
    x, t = trace_of(DEFAULT, n=7)
    check = check_transformers(x, DEFAULT, t, attn_weights=t.dense.attn_weights)
    assert "at most k non-zero weights per row" in check.failed
    assert at_most_k(t.dense.attn_weights, DEFAULT.top_k) == 7 - DEFAULT.top_k


def test_index_scores_follow_the_papers_sum():
    x, t = trace_of(WIDE)
    q, k, w = t.q_index, t.k_index, t.head_weights  # (n, H, d), (n, d), (n, H)
    by_sum = torch.einsum("th,ths->ts", w, F.relu(torch.einsum("thd,sd->ths", q, k)
                                                   / WIDE.index_dim ** 0.5))
    torch.testing.assert_close(t.index, by_sum, atol=1e-6, rtol=0)


def test_index_keys_match_transformers_layer_norm_and_half_split_rope():
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import apply_rotary_pos_emb
    x, t = trace_of(WIDE)
    r = WIDE.rope_dim
    normed = torch.nn.LayerNorm(WIDE.index_dim, eps=1e-6)(x @ t.indexer.W_Ik).detach()
    angles = torch.arange(6.0)[:, None] * 10_000.0 ** (-torch.arange(0, r, 2) / r)
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    turned, _ = apply_rotary_pos_emb(normed[..., :r], normed[..., :r], cos, sin, unsqueeze_dim=0)
    torch.testing.assert_close(t.k_index, torch.cat((turned[0], normed[..., r:]), -1), atol=1e-6,
                               rtol=0)


def test_everything_kept_is_dense_attention():
    x, t = trace_of(replace(DEFAULT, top_k=6))
    torch.testing.assert_close(t.attn_weights, t.dense.attn_weights, atol=0, rtol=0)
    torch.testing.assert_close(t.output, t.dense.output, atol=0, rtol=0)


def test_steps_have_the_documented_shapes():
    n, d_in, c = 6, 8, WIDE
    part = sparse(randn(n, d_in), c, torch.Generator().manual_seed(0))
    h, hi = c.n_heads, c.index_heads
    expected = {"index_queries": (hi, n, c.index_dim), "index_keys": (n, c.index_dim),
                "index_head_scores": (hi, n, n), "index_head_weights": (n, hi),
                "index_scores": (n, n), "selected_keys": (n, n), "attn_scores": (h, n, n),
                "dense_weights": (h, n, n), "attn_weights": (h, n, n),
                "context": (h, n, c.head_dim), "output": (n, d_in)}
    assert {s.name: tuple(s.values.shape) for s in part.steps} == expected


def test_index_dim_below_rope_dim_raises_config_error():
    with pytest.raises(ConfigError) as error:
        sparse(randn(6, 8), replace(DEFAULT, rope_dim=4, index_dim=2),
               torch.Generator().manual_seed(0))
    assert error.value.field == "index_dim"


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 6), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_each_query_keeps_its_best_k_causal_keys(n, top_k, index_heads, seed):
    config = replace(DEFAULT, top_k=top_k, index_heads=index_heads)
    _, t = trace_of(config, n=n, seed=seed)
    causal = t.dense.causal
    assert not (t.selected & ~causal).any()
    counts = t.selected.sum(-1)
    assert counts.tolist() == [min(top_k, i + 1) for i in range(n)]
    for i in range(n):
        kept, dropped = t.index[i][t.selected[i]], t.index[i][causal[i] & ~t.selected[i]]
        if dropped.numel():
            assert float(kept.min()) >= float(dropped.max())
    assert at_most_k(t.attn_weights, top_k) == 0
    sdpa = F.scaled_dot_product_attention(
        torch.cat((t.dense.q_nope, t.dense.q_rope), -1),
        torch.cat((t.dense.k_nope, t.dense.k_rope.expand(config.n_heads, -1, -1)), -1),
        t.dense.values, attn_mask=t.selected, scale=mla_module.mla_scale(config))
    torch.testing.assert_close(t.context, sdpa, atol=1e-5, rtol=1e-5)
