"""The Modern attention backend (`explorer.modern.attention`) against independent references:
transformers' Llama RoPE and sliding-window mask, the RoFormer paper's complex
form of RoPE, ``F.scaled_dot_product_attention`` (``enable_gqa``, boolean
``attn_mask``), full causal attention, and a tiny random Llama layer.

Each part also has a broken variant shown to fail the same check: interleaved
pairs read as rotate-half, the window off by one, a cache that drops the first
token, an online softmax without its correction factor."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig, LlamaModel
from transformers.masking_utils import sliding_window_causal_mask_function
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern import verify
from explorer.modern.attention import INTERLEAVED, ROTATE_HALF
from explorer.modern.verify import DECODE_TOLERANCE

SETTINGS = settings(max_examples=40, deadline=None)
FLOAT32 = 1e-5


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def largest(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


@st.composite
def heads(draw):
    """Random sizes: (n_heads, n_kv_heads, n_tokens, head_dim, seed), n_kv_heads | n_heads."""
    n_kv = draw(st.integers(1, 4))
    n_heads = n_kv * draw(st.integers(1, 4))
    return (n_heads, n_kv, draw(st.integers(1, 12)), 2 * draw(st.integers(1, 8)),
            draw(st.integers(0, 2**31)))


# ---------------------------------------------------------------------------
# 1. RoPE
# ---------------------------------------------------------------------------
def llama_rope(x: torch.Tensor, base: float, offset: int) -> torch.Tensor:
    """x (h, n, d) rotated by transformers' Llama code."""
    head_dim, n = x.shape[-1], x.shape[-2]
    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    cos, sin = LlamaRotaryEmbedding(config)(x, torch.arange(offset, offset + n)[None])
    rotated, _ = apply_rotary_pos_emb(x[None], x[None], cos, sin)
    return rotated[0]


def roformer_complex(x: torch.Tensor, base: float, offset: int) -> torch.Tensor:
    """RoFormer eq. 34 as complex numbers (the paper's and Meta's reference
    code): pair (x_2i, x_2i+1) is x_2i + i·x_2i+1, multiplied by e^{i·m·θ_i}."""
    head_dim, n = x.shape[-1], x.shape[-2]
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(offset, offset + n, dtype=torch.float64)[:, None] * theta
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)
                              ).flatten(-2).to(torch.float32)


def explorer_rope(x: torch.Tensor, base: float, offset: int, pairing: str) -> torch.Tensor:
    cos, sin = modern.rope_tables(x.shape[-2], x.shape[-1], base, offset, pairing)
    return modern.apply_rope(x, cos, sin, pairing)


def test_the_frequencies_are_base_to_the_minus_2i_over_head_dim():
    # head_dim 4, base 10,000: θ = 10000^0, 10000^(-1/2)
    assert modern.rope_frequencies(4).tolist() == pytest.approx([1.0, 0.01])
    assert modern.rope_frequencies(8, base=16.0).tolist() == pytest.approx([1, 0.5, 0.25, 0.125])
    cos, sin = modern.rope_tables(3, 4)
    assert cos[2].tolist() == pytest.approx([math.cos(2), math.cos(0.02)] * 2)
    assert sin[1, :2].tolist() == pytest.approx([math.sin(1), math.sin(0.01)])


def test_each_pairing_says_which_dimensions_turn_together():
    assert modern.rope_pairs(6, ROTATE_HALF) == [(0, 3), (1, 4), (2, 5)]
    assert modern.rope_pairs(6, INTERLEAVED) == [(0, 1), (2, 3), (4, 5)]


@SETTINGS
@given(heads(), st.sampled_from([10_000.0, 500_000.0, 100.0]), st.integers(0, 3000))
def test_rotate_half_rope_is_transformers_llama_rope(sizes, base, offset):
    n_heads, _, n, head_dim, seed = sizes
    x = randn(n_heads, n, head_dim, seed=seed)
    assert torch.allclose(explorer_rope(x, base, offset, ROTATE_HALF), llama_rope(x, base, offset),
                          atol=FLOAT32, rtol=0)


@SETTINGS
@given(heads(), st.integers(0, 50))
def test_interleaved_rope_is_roformer_eq_34_in_complex_form(sizes, offset):
    n_heads, _, n, head_dim, seed = sizes
    x = randn(n_heads, n, head_dim, seed=seed)
    assert largest(explorer_rope(x, 10_000.0, offset, INTERLEAVED),
                   roformer_complex(x, 10_000.0, offset)) < 1e-4


def test_interleaved_pairs_read_as_rotate_half_fail_the_check():
    x = randn(2, 6, 8)
    cos, sin = modern.rope_tables(6, 8, pairing=INTERLEAVED)
    broken = modern.apply_rope(x, cos, sin, ROTATE_HALF)  # interleaved tables, halves turned
    assert largest(broken, roformer_complex(x, 10_000.0, 0)) > 0.1
    # and the page's check against transformers sees it too
    q, _ = verify.transformers_rope(x, x, 10_000.0, 0, INTERLEAVED)
    assert largest(broken, q) > 0.1


@SETTINGS
@given(heads(), st.integers(1, 5000), st.sampled_from(modern.ROPE_PAIRINGS))
def test_scores_depend_only_on_the_distance_m_minus_n(sizes, offset, pairing):
    n_heads, _, n, head_dim, seed = sizes
    q, k = randn(n_heads, n, head_dim, seed=seed), randn(n_heads, n, head_dim, seed=seed + 1)

    def scores(at: int) -> torch.Tensor:
        return modern.attention_scores(explorer_rope(q, 10_000.0, at, pairing),
                                       explorer_rope(k, 10_000.0, at, pairing))
    # float32 angles of positions up to ~5,000 round to ~1e-4 rad
    assert largest(scores(offset), scores(0)) < 5e-3 * max(1.0, float(scores(0).abs().max()))


def test_rope_changes_the_scores_but_not_position_zero():
    q, k = randn(1, 5, 4), randn(1, 5, 4, seed=1)
    before = modern.attention_scores(q, k)
    after = modern.attention_scores(explorer_rope(q, 1e4, 0, ROTATE_HALF),
                                    explorer_rope(k, 1e4, 0, ROTATE_HALF))
    assert after[0, 0, 0] == pytest.approx(float(before[0, 0, 0]), abs=1e-6)  # both unturned
    assert largest(after, before) > 0.01


# ---------------------------------------------------------------------------
# 2. Grouped-query attention
# ---------------------------------------------------------------------------
@SETTINGS
@given(heads(), st.booleans())
def test_grouped_query_attention_is_sdpa_with_enable_gqa(sizes, causal):
    n_heads, n_kv, n, head_dim, seed = sizes
    q = randn(n_heads, n, head_dim, seed=seed)
    k, v = randn(n_kv, n, head_dim, seed=seed + 1), randn(n_kv, n, head_dim + 1, seed=seed + 2)
    mine = modern.grouped_query_attention(q, k, v, modern.causal_allowed(n) if causal else None)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert largest(mine.context, reference) < FLOAT32


def test_neighbouring_query_heads_share_a_kv_head():
    assert modern.kv_head_of(8, 2) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert modern.kv_head_of(4, 1) == [0, 0, 0, 0]  # multi-query
    assert modern.kv_head_of(3, 3) == [0, 1, 2]     # multi-head
    k = torch.arange(2.0)[:, None, None].expand(2, 3, 4)
    assert modern.repeat_kv(k, 6)[:, 0, 0].tolist() == [0, 0, 0, 1, 1, 1]


def test_kv_heads_in_the_wrong_order_fail_the_check():
    q, k, v = randn(4, 5, 4), randn(2, 5, 4, seed=1), randn(2, 5, 4, seed=2)
    broken = modern.grouped_query_attention(q, k.repeat(2, 1, 1)[[0, 1, 0, 1]], v.repeat(2, 1, 1)
                                            [[0, 1, 0, 1]])  # heads 0, 1 of K tiled, not grouped
    assert largest(broken.context, F.scaled_dot_product_attention(q, k, v, enable_gqa=True)) > 0.01


def test_cache_bytes_per_token_of_named_models():
    # Llama 3 8B: 32 layers × 8 K/V heads × 128, key and value, bfloat16: 128 KiB per token
    assert modern.kv_cache_bytes_per_token(32, 8, 128) == 128 * 1024
    assert modern.kv_cache_bytes_per_token(32, 32, 128) == 512 * 1024  # Llama 2 7B
    assert modern.kv_cache_bytes_per_token(1, 1, 4, bytes_per_value=4) == 32


# ---------------------------------------------------------------------------
# 3. Sliding window
# ---------------------------------------------------------------------------
def transformers_window(n: int, window: int) -> torch.Tensor:
    allowed = sliding_window_causal_mask_function(window)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return allowed(torch.tensor(0), torch.tensor(0), i, j).expand(n, n)


def test_the_window_counts_the_token_itself():
    # w = 2: each query sees itself and the one token before it
    assert modern.sliding_window_mask(4, 2).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0],
                                                               [0, 1, 1, 0], [0, 0, 1, 1]]
    assert torch.equal(modern.sliding_window_mask(5, 1), torch.eye(5, dtype=torch.bool))
    assert torch.equal(modern.sliding_window_mask(5, 5), modern.causal_allowed(5))


@pytest.mark.parametrize("n", [1, 4, 9])
@pytest.mark.parametrize("window", [1, 2, 3, 8, 20])
def test_the_window_is_transformers_sliding_window_mask(n, window):
    assert torch.equal(modern.sliding_window_mask(n, window), transformers_window(n, window))


def test_a_window_off_by_one_fails_the_check():
    broken = modern.sliding_window_mask(6, 3 + 1)  # "3 previous tokens" read as 3 + itself
    assert not torch.equal(broken, transformers_window(6, 3))
    q, k, v = randn(2, 6, 4), randn(1, 6, 4, seed=1), randn(1, 6, 4, seed=2)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=transformers_window(6, 3),
                                               enable_gqa=True)
    assert largest(modern.grouped_query_attention(q, k, v, broken).context, reference) > 0.01


@SETTINGS
@given(heads(), st.integers(1, 14))
def test_windowed_attention_is_sdpa_with_the_boolean_mask(sizes, window):
    n_heads, n_kv, n, head_dim, seed = sizes
    q, k, v = (randn(h, n, head_dim, seed=seed + i) for i, h in enumerate((n_heads, n_kv, n_kv)))
    mask = modern.sliding_window_mask(n, window)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=transformers_window(n, window),
                                               enable_gqa=True)
    assert largest(modern.grouped_query_attention(q, k, v, mask).context, reference) < FLOAT32


# ---------------------------------------------------------------------------
# 4. KV cache
# ---------------------------------------------------------------------------
@SETTINGS
@given(heads(), st.data())
def test_every_decoded_row_is_the_row_of_full_causal_attention(sizes, data):
    n_heads, n_kv, n, head_dim, seed = sizes
    prefill = data.draw(st.integers(0, n))
    q, k, v = (randn(h, n, head_dim, seed=seed + i) for i, h in enumerate((n_heads, n_kv, n_kv)))
    full = modern.grouped_query_attention(q, k, v, modern.causal_allowed(n))
    decoding = modern.decode(q, k, v, prefill)
    # not always bit-equal: a row adds in another order than the whole matrix
    assert largest(modern.decoded_weights(decoding, n), full.attn_weights) < DECODE_TOLERANCE
    for step in decoding.steps:
        assert step.cache_len == step.position + 1
        assert largest(step.context, full.context[:, step.position]) < FLOAT32
    assert decoding.cache_lengths == list(range(prefill, n + 1))
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    rows = torch.stack([s.context for s in decoding.steps], 1) if decoding.steps else None
    if rows is not None:
        assert largest(rows, reference[:, prefill:]) < FLOAT32


class ForgetfulCache(modern.KVCache):
    """A broken cache: it reads every token but the first."""

    def read(self):
        return self.keys[:, 1:], self.values[:, 1:]


def test_a_cache_that_drops_the_first_token_fails_the_check():
    q, k, v = randn(2, 6, 4), randn(2, 6, 4, seed=1), randn(2, 6, 4, seed=2)
    full = modern.grouped_query_attention(q, k, v, modern.causal_allowed(6))
    broken = modern.decode(q, k, v, 2, cache=ForgetfulCache.empty(2, 4, 4))
    rows = torch.stack([s.context for s in broken.steps], 1)
    assert largest(rows, full.context[:, 2:]) > 0.01
    assert largest(modern.decoded_weights(broken, 6), full.attn_weights) > 0.01


# ---------------------------------------------------------------------------
# 5. Online softmax
# ---------------------------------------------------------------------------
@SETTINGS
@given(heads(), st.data(), st.booleans())
def test_the_online_softmax_is_sdpa(sizes, data, causal):
    n_heads, _, n, head_dim, seed = sizes
    block_q, block_k = data.draw(st.integers(1, n)), data.draw(st.integers(1, n))
    q, k, v = (randn(n_heads, n, head_dim, seed=seed + i) * 3 for i in range(3))
    mask = modern.causal_allowed(n) if causal else None
    flash = modern.online_softmax_attention(q, k, v, block_q, block_k, mask)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert largest(flash.context, reference) < 1e-4
    assert len(flash.steps) == math.ceil(n / block_q) * math.ceil(n / block_k)
    # each query tile's last step holds softmax's max and denominator
    scores = modern.attention_scores(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    last = [s for s in flash.steps if s.k_tile == math.ceil(n / block_k) - 1]
    for step in last:
        rows = slice(step.rows.start, step.rows.stop)
        m = scores[:, rows].amax(-1)
        assert torch.allclose(step.m_new, m, atol=1e-5, rtol=1e-6)  # tiles round on their own
        assert torch.allclose(step.l, torch.exp(scores[:, rows] - m[..., None]).sum(-1),
                              atol=1e-4, rtol=1e-5)


def test_the_correction_rescales_by_exp_of_the_old_minus_the_new_max():
    old, new = torch.tensor([1.0, float("-inf"), float("-inf")]), torch.tensor([3.0, 2.0,
                                                                               float("-inf")])
    assert modern.correction_factor(old, new).tolist() == pytest.approx([math.exp(-2), 0, 1])


def test_an_online_softmax_without_the_correction_fails_the_check(monkeypatch):
    q, k, v = randn(1, 8, 4) * 3, randn(1, 8, 4, seed=1) * 3, randn(1, 8, 4, seed=2)
    reference = F.scaled_dot_product_attention(q, k, v)
    good = modern.online_softmax_attention(q, k, v, 4, 2).context
    monkeypatch.setattr(modern, "correction_factor", lambda m_old, m_new: torch.ones_like(m_new))
    broken = modern.online_softmax_attention(q, k, v, 4, 2).context
    assert largest(good, reference) < 1e-5
    assert largest(broken, reference) > 0.01


def test_the_page_keeps_one_tile_output():
    trace = modern.modern_attention(randn(6, 4), modern.ModernConfig(block_q=2, block_k=2), 0,
                                    tile=(1, 1))
    assert [(s.q_tile, s.k_tile, s.O is not None) for s in trace.flash.steps] == [
        (1, 0, False), (1, 1, True)]  # key tile 2 (keys 4, 5) is after queries 2, 3: skipped
    assert trace.flash.full_scores_bytes == 4 * 4 * 36 and trace.flash.tile_bytes == 4 * 4 * 4


# ---------------------------------------------------------------------------
# Limits
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("change, field, words", [
    ({"n_kv_heads": 3}, "n_kv_heads", "n_kv_heads must divide n_heads = 4: one of 1, 2, 4"),
    ({"head_dim": 5}, "head_dim", "head_dim must be even"),
    ({"window": 0}, "window", "window must be at least 1"),
    ({"block_q": 0}, "block_q", "block_q must be between 1 and the 6 tokens"),
    ({"block_k": 7}, "block_k", "block_k must be between 1 and the 6 tokens"),
    ({"prefill": 7}, "prefill", "prefill must be between 0 and the 6 tokens"),
    ({"rope_base": 1.0}, "rope_base", "rope_base must be between 2"),
    ({"rope_pairing": "halves"}, "rope_pairing", "rope_pairing must be one of"),
    ({"n_heads": 17, "n_kv_heads": 1}, "n_heads", "n_heads must be between 1 and 16"),
])
def test_invalid_sizes_say_what_is_allowed(change, field, words):
    with pytest.raises(ConfigError, match=words) as raised:
        modern.modern_attention(randn(6, 4), modern.ModernConfig(**change), 0)
    assert raised.value.field == field


# ---------------------------------------------------------------------------
# The page's checks, and a tiny random Llama layer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("pairing", modern.ROPE_PAIRINGS)
def test_every_check_of_the_page_agrees(pairing):
    config = modern.ModernConfig(n_heads=6, n_kv_heads=2, head_dim=4, rope_pairing=pairing,
                                 rope_offset=12, window=2, prefill=3, block_q=3, block_k=2)
    found = verify.checks(modern.modern_attention(randn(7, 5), config, 3))
    assert list(found) == ["RoPE", "Grouped-query attention", "Sliding window", "KV cache",
                           "Online softmax"]
    assert all(c.ok for c in found.values()), found
    assert found["KV cache"].max_abs_diff < DECODE_TOLERANCE


def layer_zero(model, x):
    """What layer 0's attention reads and its weights (output_attentions)."""
    seen = {}
    attention = model.layers[0].self_attn
    hook = attention.register_forward_pre_hook(
        lambda module, args, kwargs: seen.update(x=kwargs["hidden_states"][0]), with_kwargs=True)
    with torch.no_grad():
        out = model(inputs_embeds=x[None], output_attentions=True)
    hook.remove()
    return seen["x"], out.attentions[0][0]


@pytest.mark.parametrize("n_heads, n_kv_heads, head_dim", [(4, 2, 8), (6, 1, 4), (2, 2, 6)])
def test_a_tiny_random_llama_layer_is_the_explorers_rope_and_grouped_query_steps(
        n_heads, n_kv_heads, head_dim):
    torch.manual_seed(0)  # transformers initialises from the global generator
    config = LlamaConfig(hidden_size=24, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
                         head_dim=head_dim, vocab_size=10, attn_implementation="eager",
                         rope_parameters={"rope_type": "default", "rope_theta": 500_000.0})
    model = LlamaModel(config).eval()
    x, theirs = layer_zero(model, randn(9, 24))
    attention = model.layers[0].self_attn

    def mine(pairing: str) -> torch.Tensor:
        with torch.no_grad():
            q = modern.split_heads(x @ attention.q_proj.weight.T, n_heads)
            k = modern.split_heads(x @ attention.k_proj.weight.T, n_kv_heads)
            v = modern.split_heads(x @ attention.v_proj.weight.T, n_kv_heads)
            cos, sin = modern.rope_tables(9, head_dim, 500_000.0, pairing=pairing)
            return modern.grouped_query_attention(
                modern.apply_rope(q, cos, sin, pairing), modern.apply_rope(k, cos, sin, pairing),
                v, modern.causal_allowed(9)).attn_weights
    assert theirs.shape == (n_heads, 9, 9)
    for head in range(n_heads):
        assert largest(mine(ROTATE_HALF)[head], theirs[head]) < FLOAT32, head
    assert largest(mine(INTERLEAVED), theirs) > 1e-3  # the other pairing is another model
    # the page's own check of its example layer
    check = verify.llama_layer_check(verify.tiny_llama(24, n_heads, n_kv_heads, head_dim,
                                                       10_000.0, 1), randn(5, 24))
    assert check.ok and [part.name for part in check.parts] == ["attention weights", "output"]
    assert all(part.max_abs_diff < FLOAT32 for part in check.parts)


# ---------------------------------------------------------------------------
# Issue 40: the window's two counts, the cached row, the tiles walked
# ---------------------------------------------------------------------------
def mistral_window(n: int, window: int) -> torch.Tensor:
    """Mistral's reference code (mistral-src, one_file_ref.py): ones, tril, then
    ``torch.triu(mask, diagonal=-sliding_window)``: the query and w earlier tokens."""
    return torch.triu(torch.ones(n, n).tril(), diagonal=-window).bool()


@pytest.mark.parametrize("n", [1, 5, 9])
@pytest.mark.parametrize("window", [1, 2, 3, 8])
def test_both_counts_of_the_window_are_their_references(n, window):
    assert torch.equal(modern.sliding_window_mask(n, window), transformers_window(n, window))
    earlier = modern.sliding_window_mask(n, window, modern.WINDOW_EARLIER)
    assert torch.equal(earlier, mistral_window(n, window))
    # Mistral's w is transformers' w + 1: one more key left of each diagonal
    assert torch.equal(earlier, transformers_window(n, window + 1))
    trace = modern.modern_attention(randn(6, 4), modern.ModernConfig(window=3), 0)
    assert torch.equal(trace.window_mask_earlier, mistral_window(6, 3))


def flash_causal_tiles(n: int, block_q: int, block_k: int) -> list[tuple[int, int]]:
    """FlashAttention-2's causal loop bound, written from its kernel's rule: query
    block i reads key blocks j while j·block_k ≤ the block's last query."""
    tiles = []
    for i in range(math.ceil(n / block_q)):
        last_query = min((i + 1) * block_q, n) - 1
        tiles += [(i, j) for j in range(math.ceil(n / block_k)) if j * block_k <= last_query]
    return tiles


@SETTINGS
@given(heads(), st.data())
def test_the_walk_skips_the_tiles_causal_flash_attention_skips(sizes, data):
    n_heads, _, n, head_dim, seed = sizes
    block_q, block_k = data.draw(st.integers(1, n)), data.draw(st.integers(1, n))
    q, k, v = (randn(n_heads, n, head_dim, seed=seed + i) * 3 for i in range(3))
    mask = modern.causal_allowed(n)
    flash = modern.online_softmax_attention(q, k, v, block_q, block_k, mask,
                                            skip_masked_tiles=True)
    walked = [(s.q_tile, s.k_tile) for s in flash.steps]
    assert walked == modern.causal_tiles(n, block_q, block_k) == flash_causal_tiles(n, block_q,
                                                                                     block_k)
    # every tile skipped is masked whole; every tile walked has a key it reads
    for qi in range(math.ceil(n / block_q)):
        for kj in range(math.ceil(n / block_k)):
            seen = mask[qi * block_q:(qi + 1) * block_q, kj * block_k:(kj + 1) * block_k].any()
            assert bool(seen) == ((qi, kj) in walked)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert largest(flash.context, reference) < 1e-4


def test_the_page_walks_six_of_nine_tiles_at_the_defaults():
    trace = modern.modern_attention(randn(6, 4), modern.ModernConfig(), 0, tile=(2, 2))
    assert trace.n_tile_steps == 6 and modern.tile_steps(6, 2, 2) == 9
    assert [trace.tile_of(s) for s in range(6)] == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1),
                                                    (2, 2)]
    assert [(s.q_tile, s.k_tile) for s in trace.flash.steps] == [(2, 0), (2, 1), (2, 2)]
    with pytest.raises(ConfigError, match="key tile 2 is not walked"):
        modern.modern_attention(randn(6, 4), modern.ModernConfig(), 0, tile=(0, 2))
    # long sentences: T(T + 1)/2 of T² tiles, about half
    assert len(modern.causal_tiles(512, 32, 32)) / modern.tile_steps(512, 32, 32) == 17 / 32


def test_the_decoded_row_shows_only_the_keys_in_the_cache():
    from explorer.render.modern.figures import chart_of

    trace = modern.modern_attention(randn(6, 4), modern.ModernConfig(prefill=2), 0)
    labels = [f"t{i}" for i in range(6)]
    for position in range(6):
        drawn = chart_of(trace, "decode-row", 1, labels, position=position)
        spec = drawn.figure["data"][0]
        assert spec["x"] == labels[:position + 1]  # keys 0 … position, no later one
        row = drawn.matrices[0]
        assert row.shape == (1, position + 1)
        assert torch.allclose(torch.from_numpy(row[0]).float(),
                              trace.causal.attn_weights[1, position, :position + 1], atol=1e-6)
        if position >= 2:  # decoded: the cache then held position + 1 keys
            assert trace.decoding.steps[position - 2].cache_len == position + 1
