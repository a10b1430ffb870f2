"""Multi-head latent attention (`explorer.modern.frontier.mla`) against
independent references: transformers' ``DeepseekV3Attention`` with the same
weights, ``F.scaled_dot_product_attention`` on the expanded keys and values,
and the absorbed form against the expanded one. Broken variants fail: W_UK
folded into the queries without its transpose, rotate-half pairs where
DeepSeek rotates interleaved ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier import mla as mla_module
from explorer.modern.frontier.mla import (
    absorbed_attention,
    check_absorbed,
    check_transformers,
    draw_weights,
    merge_heads,
    mla,
    mla_attention,
)

DEFAULT = FrontierConfig()
WIDE = FrontierConfig(n_heads=3, head_dim=3, rope_dim=4, kv_lora_rank=5, q_lora_rank=7)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def trace_of(config: FrontierConfig, n: int = 6, d_in: int = 8, seed: int = 1):
    x = randn(n, d_in)
    return x, mla_attention(x, config, draw_weights(d_in, config,
                                                    torch.Generator().manual_seed(seed)))


@pytest.mark.parametrize("config", [DEFAULT, WIDE], ids=["default", "wide"])
def test_every_check_agrees(config):
    part = mla(randn(6, 8), config, torch.Generator().manual_seed(3))
    assert [c.ok for c in part.checks] == [True, True, True]
    assert [p.name for p in part.checks[0].parts] == ["attn_scores", "output"]
    hf = part.checks[2]
    assert [p.name for p in hf.parts] == ["q_rope", "k_rope", "attn_weights", "output"]
    assert all(c.max_abs_diff < 1e-5 for c in part.checks)


def test_decoding_reads_only_the_latent_cache():
    x, t = trace_of(WIDE)
    decoded = mla_module.decode_from_latent_cache(t, WIDE)
    torch.testing.assert_close(decoded, t.output, atol=1e-5, rtol=0)
    # a cache that lost its first token's latent no longer reproduces the later rows
    from dataclasses import replace as swap
    lost = swap(t, c_kv_norm=torch.cat((torch.zeros_like(t.c_kv_norm[:1]), t.c_kv_norm[1:])))
    assert not mla_module.check_decoding(lost, WIDE).ok


def test_the_part_leaves_the_global_generator_alone():
    before = torch.random.get_rng_state()
    mla(randn(6, 8), DEFAULT, torch.Generator().manual_seed(3))
    assert torch.equal(before, torch.random.get_rng_state())


def test_same_seed_same_numbers_other_seed_other_numbers():
    x = randn(6, 8)
    a, b, c = (mla(x, DEFAULT, torch.Generator().manual_seed(s)) for s in (5, 5, 6))
    assert torch.equal(a.step("output").values, b.step("output").values)
    assert not torch.equal(a.step("output").values, c.step("output").values)


def test_steps_have_the_documented_shapes():
    n, d_in, c = 6, 8, WIDE
    part = mla(randn(n, d_in), c, torch.Generator().manual_seed(0))
    h, d, r, lat, q_lat = c.n_heads, c.head_dim, c.rope_dim, c.kv_lora_rank, c.q_lora_rank
    expected = {"query_latent": (n, q_lat), "query_latent_norm": (n, q_lat),
                "q_nope": (h, n, d), "q_rope": (h, n, r), "kv_latent": (n, lat),
                "kv_latent_norm": (n, lat), "k_rope": (n, r), "k_nope": (h, n, d),
                "values": (h, n, d), "attn_scores": (h, n, n), "causal_allowed": (n, n),
                "attn_weights": (h, n, n), "context": (h, n, d), "output": (n, d_in),
                "q_absorbed": (h, n, lat), "absorbed_scores": (h, n, n),
                "latent_context": (h, n, lat), "absorbed_output": (n, d_in)}
    assert {s.name: tuple(s.values.shape) for s in part.steps} == expected
    assert len({s.name for s in part.steps}) == len(part.steps)
    weights = part.step("attn_weights").values
    torch.testing.assert_close(weights.sum(-1), torch.ones(h, n))
    assert (weights.triu(1) == 0).all()


def test_expanded_form_equals_sdpa_on_the_concatenated_keys():
    x, t = trace_of(WIDE)
    h = WIDE.n_heads
    q = torch.cat((t.q_nope, t.q_rope), dim=-1)
    k = torch.cat((t.k_nope, t.k_rope.expand(h, -1, -1)), dim=-1)
    sdpa = F.scaled_dot_product_attention(q, k, t.values, is_causal=True,
                                          scale=(WIDE.head_dim + WIDE.rope_dim) ** -0.5)
    torch.testing.assert_close(t.context, sdpa, atol=1e-6, rtol=0)


def test_rms_norm_matches_transformers():
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RMSNorm
    x = randn(6, 5) * 3
    torch.testing.assert_close(mla_module.rms_norm(x), DeepseekV3RMSNorm(5)(x).detach(),
                               atol=1e-6, rtol=0)


def test_absorbed_form_without_the_transpose_fails_its_check():
    x, t = trace_of(DEFAULT)  # head_dim == kv_lora_rank: the wrong product still fits
    w = t.weights
    _, scores, _, context = absorbed_attention(t.q_nope, t.q_rope, t.c_kv_norm, t.k_rope,
                                          w.W_UK.transpose(-1, -2), w.W_UV, t.causal,
                                          mla_module.mla_scale(DEFAULT))
    broken = check_absorbed(t, scores, merge_heads(context) @ w.W_O)
    assert broken.failed == ["attn_scores", "output"] and broken.max_abs_diff > 1e-2
    assert check_absorbed(t).ok


def test_rotate_half_pairs_fail_the_transformers_check(monkeypatch):
    monkeypatch.setattr(mla_module, "PAIRING", modern.ROTATE_HALF)
    x, t = trace_of(WIDE)  # rope_dim 4: the two pairings differ
    check = check_transformers(x, WIDE, t)
    assert not check.ok
    assert {"q_rope", "k_rope"} <= set(check.failed)


def test_cache_facts_count_latent_and_rope_key_against_every_heads_keys_and_values():
    facts = mla_module.cache_facts(DEFAULT)
    # 4 + 2 cached numbers; 2 heads × (4 + 2 key + 4 value) = 20 expanded numbers
    assert facts["MLA cache per token and layer (c_KV + k_rope)"].startswith(
        "4 + 2 = 6 numbers: 24 bytes in float32, 12 in bfloat16")
    assert "= 20 numbers: 80 bytes in float32, 40 in bfloat16" in facts[
        "expanded keys and values per token and layer"]
    # DeepSeek-V3: 512 + 64 = 576 numbers; 128 × (192 + 128) = 40,960 numbers
    assert facts["DeepSeek-V3, per token and layer (bfloat16)"] == (
        "MLA 576 numbers = 1,152 bytes; expanded 40,960 numbers = 81,920 bytes (71× more)")


def test_transformers_caches_the_latents_not_the_heads():
    """transformers' cache grows by c_KV (kv_lora_rank) and k_rope (rope_dim) per token."""
    from transformers import DynamicCache
    x, t = trace_of(DEFAULT)
    attention, rotary = mla_module.tiny_deepseek(x, DEFAULT, t.weights)
    cache = DynamicCache(config=attention.config)
    cos, sin = rotary(x[None], torch.arange(6)[None])
    mask = torch.zeros(6, 6).masked_fill(~t.causal, float("-inf"))[None, None]
    with torch.no_grad():
        attention(x[None], (cos, sin), mask, past_key_values=cache)
    keys, values = cache.layers[0].keys, cache.layers[0].values
    assert tuple(keys.shape) == (1, 1, 6, DEFAULT.kv_lora_rank)
    assert tuple(values.shape) == (1, 1, 6, DEFAULT.rope_dim)


@pytest.mark.parametrize("field,value", [("rope_dim", 3), ("rope_dim", 0), ("kv_lora_rank", 0),
                                         ("n_heads", 0)])
def test_sizes_mla_cannot_run_raise_config_error(field, value):
    from dataclasses import replace
    with pytest.raises(ConfigError) as error:
        mla(randn(6, 8), replace(DEFAULT, **{field: value}), torch.Generator().manual_seed(0))
    assert error.value.field == field


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.sampled_from([2, 4, 6]), st.integers(1, 6),
       st.integers(1, 7), st.integers(0, 2**31 - 1))
def test_absorbed_equals_expanded_for_any_sizes(n_heads, head_dim, rope_dim, kv_lora_rank, n,
                                                seed):
    config = FrontierConfig(n_heads=n_heads, head_dim=head_dim, rope_dim=rope_dim,
                            kv_lora_rank=kv_lora_rank)
    x, t = trace_of(config, n=n, d_in=5, seed=seed)
    torch.testing.assert_close(t.absorbed_scores, t.attn_scores, atol=1e-5, rtol=1e-5)
    assert check_absorbed(t).ok
