"""Property tests: the invariants of attention, over random valid configs.

- the context equals ``torch.nn.functional.scaled_dot_product_attention``;
- attention-weight rows sum to 1, causal weights are 0 above the diagonal;
- a config always gives the same trace, also from 8 threads at once;
- dropout keeps about 1 - p of the weights and scales them by 1 / (1 - p);
- multi-head attention with the output projection equals ``nn.MultiheadAttention``.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from explorer import AttentionConfig, compute_trace

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
TOL = dict(rtol=1e-5, atol=1e-5)

WORDS = ["Life", "is", "short,", "eat", "dessert", "first", "the", "cat", "sat", "on",
         "mat.", "can't", "(why)", "Your", "journey", "starts", "with", "one", "step!"]
SMALL_VOCAB = 100


def divisors(n: int) -> list[int]:
    return [h for h in range(1, n + 1) if n % h == 0]


@st.composite
def configs(draw, **fixed) -> AttentionConfig:
    """A random valid config; ``fixed`` overrides any field."""
    sentence = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12)))
    d_k = draw(st.integers(1, 16))
    d_v = draw(st.integers(1, 16))
    fields = dict(
        sentence=sentence,
        d_in=draw(st.integers(1, 16)),
        d_k=d_k,
        d_v=d_v,
        seed=draw(st.integers(0, 2**63 - 1)),
        vocab_size=SMALL_VOCAB,
        embedding=draw(st.sampled_from(["table", "uniform"])),
        weight_init=draw(st.sampled_from(["randn", "rand", "linear"])),
        scale=draw(st.booleans()),
        causal=draw(st.booleans()),
        n_heads=draw(st.sampled_from(divisors(math.gcd(d_k, d_v)))),
    )
    fields.update(fixed)
    return AttentionConfig(**fields)


def per_head(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(n, d) -> (n_heads, n, d // n_heads), columns cut into consecutive slices."""
    n, d = t.shape
    return t.reshape(n, n_heads, d // n_heads).permute(1, 0, 2)


def with_head_axis(t: torch.Tensor) -> torch.Tensor:
    """Per-head steps carry no head axis when n_heads == 1; give them one."""
    return t if t.dim() == 3 else t.unsqueeze(0)


# ---------------------------------------------------------------------------
# Attention itself
# ---------------------------------------------------------------------------
@SETTINGS
@given(configs())
def test_context_equals_scaled_dot_product_attention(config):
    trace = compute_trace(config)
    h, n = config.n_heads, len(trace.tokens)
    x = trace["embeddings"]
    q = per_head(x @ trace["W_query"], h)  # (h, n, head_dim)
    k = per_head(x @ trace["W_key"], h)
    v = per_head(x @ trace["W_value"], h)  # (h, n, head_dim_v)
    torch.testing.assert_close(with_head_axis(trace["queries"]), q, **TOL)
    torch.testing.assert_close(with_head_axis(trace["keys"]), k, **TOL)
    torch.testing.assert_close(with_head_axis(trace["values"]), v, **TOL)

    scale = 1 / math.sqrt(config.d_k // h) if config.scale else 1.0
    expected = F.scaled_dot_product_attention(
        with_head_axis(trace["queries"]), with_head_axis(trace["keys"]),
        with_head_axis(trace["values"]), is_causal=config.causal, scale=scale)  # (h, n, hd_v)
    expected = expected.transpose(0, 1).reshape(n, config.d_v)  # heads side by side
    torch.testing.assert_close(trace["context"], expected, **TOL)


@SETTINGS
@given(configs())
def test_weight_rows_sum_to_one_and_causal_weights_are_zero_above_diagonal(config):
    trace = compute_trace(config)
    weights = with_head_axis(trace["attn_weights"])  # (h, n, n)
    n = len(trace.tokens)
    assert weights.shape == (config.n_heads, n, n)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(config.n_heads, n), **TOL)
    if config.causal:
        above = torch.ones(n, n, dtype=torch.bool).triu(1)
        assert (weights[:, above] == 0).all()


@SETTINGS
@given(configs(), st.floats(0.0, 0.9), st.one_of(st.none(), st.integers(0, 2**63 - 1)))
def test_same_config_gives_identical_trace(config, dropout, dropout_seed):
    config = config.replace(dropout=dropout, dropout_seed=dropout_seed)
    first, second = compute_trace(config), compute_trace(config)
    assert list(first) == list(second)
    for name in first:
        assert torch.equal(first[name], second[name]), name
    assert first.tokens == second.tokens


@SETTINGS
@given(configs(out_proj=False, n_heads=1))
def test_single_head_without_out_proj_is_the_plain_pipeline(config):
    trace = compute_trace(config)
    x, w_q, w_k, w_v = (trace[s] for s in ("embeddings", "W_query", "W_key", "W_value"))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.T
    scaled = scores / math.sqrt(config.d_k) if config.scale else scores
    if config.causal:
        n = len(trace.tokens)
        scaled = scaled.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scaled, dim=-1)
    expected = {"queries": q, "keys": k, "values": v, "attn_scores": scores,
                "attn_weights": weights, "context": weights @ v}
    for name, tensor in expected.items():
        torch.testing.assert_close(trace[name], tensor, **TOL, msg=name)
    assert not {"W_out", "b_out", "output"} & set(trace)


# ---------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.8])
def test_dropout_keeps_about_one_minus_p_over_many_seeds(p):
    base = AttentionConfig(sentence=" ".join(f"t{i}" for i in range(16)), embedding="uniform",
                           d_in=4, d_k=4, d_v=4, n_heads=2, dropout=p)
    kept = total = 0
    masks = set()
    for dropout_seed in range(200):
        trace = compute_trace(base.replace(dropout_seed=dropout_seed))
        mask = trace["dropout_mask"]
        assert mask.shape == (2, 16, 16)
        assert ((mask == 0) | (mask == 1)).all()
        kept += int(mask.sum().item())
        total += mask.numel()
        masks.add(tuple(mask.flatten().tolist()))
    assert abs(kept / total - (1 - p)) < 0.02
    assert len(masks) == 200  # every seed draws its own mask


@SETTINGS
@given(configs(), st.floats(0.01, 0.95), st.integers(0, 2**63 - 1))
def test_dropout_zeroes_dropped_and_scales_kept_weights(config, p, dropout_seed):
    trace = compute_trace(config.replace(dropout=p, dropout_seed=dropout_seed))
    weights, mask, dropped = trace["attn_weights"], trace["dropout_mask"], trace["dropped_weights"]
    assert weights.shape == mask.shape == dropped.shape
    kept = mask == 1
    assert (kept | (mask == 0)).all()
    assert (dropped[~kept] == 0).all()
    torch.testing.assert_close(dropped[kept], weights[kept] / (1 - p), **TOL)
    # The context is built from the dropped weights.
    n = len(trace.tokens)
    ctx = with_head_axis(dropped) @ with_head_axis(trace["values"])
    torch.testing.assert_close(trace["context"], ctx.transpose(0, 1).reshape(n, config.d_v),
                               **TOL)


# ---------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------
@st.composite
def mha_configs(draw) -> AttentionConfig:
    h = draw(st.integers(1, 4))
    e = h * draw(st.integers(1, 4))
    return draw(configs(d_in=e, d_k=e, d_v=e, n_heads=h, out_proj=True, scale=True,
                        normalization="softmax", dropout=0.0))


@SETTINGS
@given(mha_configs())
def test_output_equals_nn_multihead_attention(config):
    trace = compute_trace(config)
    e, h, n = config.d_in, config.n_heads, len(trace.tokens)
    with torch.random.fork_rng():  # the module's own init draws from the global RNG
        mha = nn.MultiheadAttention(e, h, bias=True, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([trace["W_query"].T, trace["W_key"].T,
                                            trace["W_value"].T]))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(trace["W_out"].T)
        mha.out_proj.bias.copy_(trace["b_out"])
        mask = torch.ones(n, n, dtype=torch.bool).triu(1) if config.causal else None
        output, _ = mha(*(trace["embeddings"].unsqueeze(0),) * 3, need_weights=False,
                        attn_mask=mask)
    torch.testing.assert_close(trace["output"], output.squeeze(0), **TOL)


# ---------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------
THREAD_CONFIGS = [
    AttentionConfig(seed=1000 + i, d_in=3 + i % 4, d_k=4, d_v=4, n_heads=1 + i % 2,
                    weight_init=("randn", "rand", "linear")[i % 3], causal=bool(i % 2),
                    dropout=0.25 * (i % 3), sentence="Life is short, eat dessert first")
    for i in range(8)
]


def test_eight_threads_match_a_serial_run():
    assert len({c.seed for c in THREAD_CONFIGS}) == 8
    assert all(c.vocab_size == 50_000 and c.embedding == "table" for c in THREAD_CONFIGS)
    serial = [compute_trace(c) for c in THREAD_CONFIGS]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(4):
            parallel = list(pool.map(compute_trace, THREAD_CONFIGS))
            for expected, got in zip(serial, parallel):
                assert list(got) == list(expected)
                for name in expected:
                    assert torch.equal(got[name], expected[name]), (expected.config.seed, name)
