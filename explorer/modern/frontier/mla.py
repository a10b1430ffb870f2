"""Multi-head latent attention (MLA, DeepSeek-V2/V3), expanded and absorbed.

Every token's keys and values come from one small latent c_KV (kv_lora_rank
numbers) plus one RoPE key k_rope (rope_dim numbers) shared by all heads; the
cache holds only those. The *expanded* form (transformers'
``DeepseekV3Attention``) up-projects c_KV to every head's k_nope and values and
runs ordinary attention; the *absorbed* form (DeepSeek's own inference code)
folds W_UK into the queries and W_UV into the output, so attention runs over
c_KV itself. Both give the same numbers; this module computes both and checks
them against each other and against transformers.

Recipe: DeepSeek-AI, "DeepSeek-V2" (2024), §2.1.2-2.1.3, eqs. (9)-(19), with
the RMSNorm DeepSeek's code applies to both latents (``q_a_layernorm``,
``kv_a_layernorm``) and its interleaved RoPE; transformers 5.23,
``models/deepseek_v3/modeling_deepseek_v3.py`` (``DeepseekV3Attention``).
Shapes: per-head tensors are ``(n_heads, n_tokens, width)``; weights are
``(inputs, outputs)`` so that a projection is ``x @ W``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core import recipes
from explorer.core.agreement import Agreement, largest_abs, max_abs_diff, of_all
from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig, Part, Step
from explorer.modern.verify import deinterleave

KEY = "mla"
RMS_EPS = 1e-6
"""RMSNorm's ε, transformers' ``DeepseekV3RMSNorm`` default (the latents' norms)."""
ROPE_BASE = modern.DEFAULT_ROPE_BASE
PAIRING = modern.INTERLEAVED
"""DeepSeek rotates the pairs (2i, 2i + 1) (its ``apply_rotary_emb`` reads
them as complex numbers; transformers' ``rope_interleave=True``)."""
TOLERANCE = 1e-4
SOURCE = ("DeepSeek-V2 paper (2024), §2.1, eqs. (9)-(19), with DeepSeek's RMSNorm on both "
          "latents and interleaved RoPE; absorbed form: DeepSeek-V3's inference/model.py "
          "(attn_impl \"absorb\"); transformers 5.23 models/deepseek_v3/modeling_deepseek_v3.py "
          "(DeepseekV3Attention)")
DEEPSEEK_V3 = {"n_heads": 128, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
               "v_head_dim": 128, "kv_lora_rank": 512, "n_layers": 61}
"""DeepSeek-V3's sizes, from its config.json (num_attention_heads,
qk_nope_head_dim, qk_rope_head_dim, v_head_dim, kv_lora_rank, num_hidden_layers)."""


@dataclass(frozen=True)
class MLAWeights:
    """MLA's weights, each ``(inputs, outputs)``: W_DQ (d_in, q_lora_rank);
    W_UQ (q_lora_rank, n_heads·(head_dim + rope_dim)), each head's columns its
    nope part then its rope part (transformers' ``q_b_proj`` layout); W_DKV
    (d_in, kv_lora_rank); W_KR (d_in, rope_dim); W_UK and W_UV (n_heads,
    kv_lora_rank, head_dim), one up-projection per head; W_O (n_heads·head_dim,
    d_in). The RMSNorms' gains are 1 (transformers' initial value)."""

    W_DQ: Tensor
    W_UQ: Tensor
    W_DKV: Tensor
    W_KR: Tensor
    W_UK: Tensor
    W_UV: Tensor
    W_O: Tensor


def check_sizes(config: FrontierConfig, d_in: int) -> None:
    """Raise `ConfigError` unless MLA can run: every width at least 1, rope_dim even."""
    for name in ("n_heads", "head_dim", "kv_lora_rank", "q_lora_rank"):
        value = getattr(config, name)
        if value < 1:
            raise ConfigError(name, f"{name} must be at least 1 (got {value})")
    if config.rope_dim < 2 or config.rope_dim % 2:
        raise ConfigError("rope_dim", "RoPE turns dimensions in pairs, so rope_dim must be even "
                          f"and at least 2 (got {config.rope_dim})")
    if d_in < 1:
        raise ConfigError("d_in", f"d_in must be at least 1 (got {d_in})")


def draw_weights(d_in: int, config: FrontierConfig, generator: torch.Generator) -> MLAWeights:
    """Every weight from ``torch.randn`` with ``generator``, scaled by 1/√inputs
    (so that the scores stay readable), in the order of `MLAWeights`."""
    c = config

    def draw(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator) / math.sqrt(shape[-2])

    return MLAWeights(W_DQ=draw(d_in, c.q_lora_rank),
                      W_UQ=draw(c.q_lora_rank, c.n_heads * (c.head_dim + c.rope_dim)),
                      W_DKV=draw(d_in, c.kv_lora_rank), W_KR=draw(d_in, c.rope_dim),
                      W_UK=draw(c.n_heads, c.kv_lora_rank, c.head_dim),
                      W_UV=draw(c.n_heads, c.kv_lora_rank, c.head_dim),
                      W_O=draw(c.n_heads * c.head_dim, d_in))


def rms_norm(x: Tensor, eps: float = RMS_EPS) -> Tensor:
    """x / √(mean(x²) + ε) over the last dimension (gain 1): transformers'
    ``DeepseekV3RMSNorm``. Shape kept."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def mla_scale(config: FrontierConfig) -> float:
    """(head_dim + rope_dim)^−½: a query·key product spans both parts (eq. 18)."""
    return (config.head_dim + config.rope_dim) ** -0.5


@dataclass(frozen=True)
class MLATrace:
    """Every intermediate of `mla_attention`, shapes for n tokens, h heads, d =
    head_dim, r = rope_dim, c = kv_lora_rank, c' = q_lora_rank:
    ``c_q`` and ``c_q_norm`` (n, c'); ``q_nope`` (h, n, d); ``q_rope`` (h, n, r)
    rotated; ``c_kv`` and ``c_kv_norm`` (n, c); ``k_rope`` (n, r) rotated,
    shared by the heads; ``k_nope`` and ``values`` (h, n, d); ``attn_scores``
    (h, n, n) scaled, before the mask; ``causal`` (n, n) bool, True = may
    attend; ``attn_weights`` (h, n, n); ``context`` (h, n, d); ``output``
    (n, d_in); the absorbed form: ``q_absorbed`` (h, n, c), ``absorbed_scores``
    (h, n, n), ``latent_context`` (h, n, c), ``absorbed_context`` (h, n, d),
    ``absorbed_output`` (n, d_in)."""

    weights: MLAWeights
    c_q: Tensor
    c_q_norm: Tensor
    q_nope: Tensor
    q_rope: Tensor
    c_kv: Tensor
    c_kv_norm: Tensor
    k_rope: Tensor
    k_nope: Tensor
    values: Tensor
    attn_scores: Tensor
    causal: Tensor
    attn_weights: Tensor
    context: Tensor
    output: Tensor
    q_absorbed: Tensor
    absorbed_scores: Tensor
    latent_context: Tensor
    absorbed_context: Tensor
    absorbed_output: Tensor


def queries(x: Tensor, w: MLAWeights, config: FrontierConfig) -> tuple[Tensor, Tensor, Tensor,
                                                                         Tensor]:
    """c_Q = x W_DQ (eq. 12), its RMSNorm, and q = RMSNorm(c_Q) W_UQ split per
    head into q_nope (eq. 13) and q_rope, rotated (eq. 14).

    x (n, d_in) -> c_q, c_q_norm (n, q_lora_rank); q_nope (h, n, head_dim);
    q_rope (h, n, rope_dim), interleaved RoPE at positions 0 … n − 1."""
    c_q = x @ w.W_DQ                                                  # (n, c')
    c_q_norm = rms_norm(c_q)
    q = modern.split_heads(c_q_norm @ w.W_UQ, config.n_heads)         # (h, n, d + r)
    q_nope, q_pass = q.split([config.head_dim, config.rope_dim], dim=-1)
    cos, sin = modern.rope_tables(x.shape[0], config.rope_dim, ROPE_BASE, pairing=PAIRING)
    return c_q, c_q_norm, q_nope, modern.apply_rope(q_pass, cos, sin, PAIRING)


def kv_latent(x: Tensor, w: MLAWeights, config: FrontierConfig) -> tuple[Tensor, Tensor, Tensor]:
    """The cached part: c_KV = x W_DKV (eq. 9), its RMSNorm, and the decoupled
    key k_rope = RoPE(x W_KR) (eq. 16), one for all heads.

    x (n, d_in) -> c_kv, c_kv_norm (n, kv_lora_rank); k_rope (n, rope_dim)."""
    c_kv = x @ w.W_DKV                                                # (n, c)
    cos, sin = modern.rope_tables(x.shape[0], config.rope_dim, ROPE_BASE, pairing=PAIRING)
    return c_kv, rms_norm(c_kv), modern.apply_rope(x @ w.W_KR, cos, sin, PAIRING)


def up_project(c_kv_norm: Tensor, W_UK: Tensor, W_UV: Tensor) -> tuple[Tensor, Tensor]:
    """Every head's k_nope = c_KV W_UK (eq. 10) and values = c_KV W_UV (eq. 11).

    c_kv_norm (n, c); W_UK, W_UV (h, c, d) -> (h, n, d) each."""
    return c_kv_norm @ W_UK, c_kv_norm @ W_UV


def expanded_scores(q_nope: Tensor, q_rope: Tensor, k_nope: Tensor, k_rope: Tensor,
                    scale: float) -> Tensor:
    """(q_nope·k_nope + q_rope·k_rope) × scale (eqs. 15, 17, 18): the rope key is
    the same for every head. (h, n, d), (h, n, r), (h, n, d), (n, r) -> (h, n, n)."""
    return (q_nope @ k_nope.transpose(-1, -2) + q_rope @ k_rope.T) * scale


def absorbed_attention(q_nope: Tensor, q_rope: Tensor, c_kv_norm: Tensor, k_rope: Tensor,
                       W_UK: Tensor, W_UV: Tensor, causal: Tensor,
                       scale: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Attention over the latent itself: q_nope·k_nope = q_nope·(c_KV W_UK)ᵀ =
    (q_nope W_UKᵀ)·c_KV, so W_UK is folded into the queries; the weights then
    average c_KV, and W_UV is applied after (weights·c_KV·W_UV = weights·values).

    q_nope (h, n, d); q_rope (h, n, r); c_kv_norm (n, c); k_rope (n, r); W_UK,
    W_UV (h, c, d); causal (n, n) bool -> q_absorbed (h, n, c), scores (h, n, n),
    latent_context (h, n, c), context (h, n, d). Source: DeepSeek-V3's
    inference/model.py, ``MLA.forward`` with ``attn_impl == "absorb"``."""
    q_absorbed = q_nope @ W_UK.transpose(-1, -2)                     # (h, n, d) @ (h, d, c)
    scores = (q_absorbed @ c_kv_norm.T + q_rope @ k_rope.T) * scale  # (h, n, n)
    weights = modern.masked_softmax(scores, causal)
    latent_context = weights @ c_kv_norm                              # (h, n, c)
    return q_absorbed, scores, latent_context, latent_context @ W_UV  # (h, n, d)


def merge_heads(context: Tensor) -> Tensor:
    """(h, n, d) -> (n, h·d): the heads side by side, as o_proj reads them."""
    return context.transpose(0, 1).reshape(context.shape[1], -1)


def mla_attention(x: Tensor, config: FrontierConfig, weights: MLAWeights) -> MLATrace:
    """Run MLA on x (n, d_in) both ways (see `MLATrace` for every shape)."""
    c_q, c_q_norm, q_nope, q_rope = queries(x, weights, config)
    c_kv, c_kv_norm, k_rope = kv_latent(x, weights, config)
    k_nope, values = up_project(c_kv_norm, weights.W_UK, weights.W_UV)
    scale = mla_scale(config)
    scores = expanded_scores(q_nope, q_rope, k_nope, k_rope, scale)
    causal = modern.causal_allowed(x.shape[0])
    attn_weights = modern.masked_softmax(scores, causal)
    context = attn_weights @ values                                   # (h, n, d)
    q_abs, abs_scores, latent_context, abs_context = absorbed_attention(
        q_nope, q_rope, c_kv_norm, k_rope, weights.W_UK, weights.W_UV, causal, scale)
    return MLATrace(weights, c_q, c_q_norm, q_nope, q_rope, c_kv, c_kv_norm, k_rope, k_nope,
                    values, scores, causal, attn_weights, context,
                    merge_heads(context) @ weights.W_O, q_abs, abs_scores, latent_context,
                    abs_context, merge_heads(abs_context) @ weights.W_O)


# ---------------------------------------------------------------------------
# The cache per token and layer
# ---------------------------------------------------------------------------
def mla_cache_numbers(kv_lora_rank: int, rope_dim: int) -> int:
    """Numbers MLA caches per token and layer: c_KV and k_rope (kv_lora_rank + rope_dim)."""
    return kv_lora_rank + rope_dim


def full_kv_numbers(n_heads: int, qk_head_dim: int, v_head_dim: int) -> int:
    """Numbers the expanded keys and values hold per token and layer: each head's
    key (nope + rope) and value: n_heads·(qk_head_dim + v_head_dim)."""
    return n_heads * (qk_head_dim + v_head_dim)


def cache_facts(config: FrontierConfig) -> dict[str, str]:
    """The cache per token and layer, in numbers and bytes (float32 here, bfloat16
    as the models store it), for these sizes and for DeepSeek-V3's."""
    c, v3 = config, DEEPSEEK_V3
    mla = mla_cache_numbers(c.kv_lora_rank, c.rope_dim)
    full = full_kv_numbers(c.n_heads, c.head_dim + c.rope_dim, c.head_dim)
    v3_mla = mla_cache_numbers(v3["kv_lora_rank"], v3["qk_rope_head_dim"])
    v3_full = full_kv_numbers(v3["n_heads"], v3["qk_nope_head_dim"] + v3["qk_rope_head_dim"],
                              v3["v_head_dim"])
    f32, bf16 = modern.BYTES_PER_VALUE["float32"], modern.BYTES_PER_VALUE["bfloat16"]
    return {
        "MLA cache per token and layer (c_KV + k_rope)":
            f"{c.kv_lora_rank} + {c.rope_dim} = {mla} numbers: {mla * f32} bytes in float32, "
            f"{mla * bf16} in bfloat16",
        "expanded keys and values per token and layer":
            f"{c.n_heads} heads × ({c.head_dim} + {c.rope_dim} key + {c.head_dim} value) = "
            f"{full} numbers: {full * f32} bytes in float32, {full * bf16} in bfloat16",
        "compression": f"{full / mla:.1f}× fewer numbers",
        "what transformers caches": "the latents too: c_KV as the layer's keys and k_rope as "
                                    "its values (one head each), up-projected again at every "
                                    "step; DeepSeek's absorbed code never up-projects them",
        "DeepSeek-V3, per token and layer (bfloat16)":
            f"MLA {v3_mla} numbers = {v3_mla * bf16:,} bytes; expanded {v3_full:,} numbers = "
            f"{v3_full * bf16:,} bytes ({v3_full / v3_mla:.0f}× more)",
        "DeepSeek-V3, per token, all layers (bfloat16)":
            f"MLA {v3_mla * bf16 * v3['n_layers']:,} bytes; expanded "
            f"{v3_full * bf16 * v3['n_layers']:,} bytes",
    }


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------
TRANSFORMERS = "transformers' DeepseekV3Attention (eager, rope_interleave=True)"


def _agreement(name: str, reference: str, ours: Tensor, theirs: Tensor) -> Agreement:
    """``name`` against ``reference``, within float32 rounding relative to its size."""
    scale = largest_abs(theirs)
    return Agreement(name, name, reference, max_abs_diff(ours, theirs),
                     TOLERANCE * max(1.0, scale), n_values=theirs.numel(), scale=scale)


def check_absorbed(trace: MLATrace, absorbed_scores: Tensor | None = None,
                   absorbed_output: Tensor | None = None) -> Agreement:
    """The absorbed form against the expanded one: its attn_scores over c_KV
    (h, n, n) and its output (n, d_in), each within float32 rounding relative
    to its size. ``absorbed_scores``, ``absorbed_output``: other absorbed
    results to check (a broken one fails)."""
    scores = trace.absorbed_scores if absorbed_scores is None else absorbed_scores
    output = trace.absorbed_output if absorbed_output is None else absorbed_output
    expanded = "the expanded form (k_nope and values up-projected per head)"
    return of_all("Absorbed = expanded", "attn_scores and the attention output", expanded,
                  [_agreement("attn_scores", expanded, scores, trace.attn_scores),
                   _agreement("output", expanded, output, trace.output)])


def decode_from_latent_cache(trace: MLATrace, config: FrontierConfig) -> Tensor:
    """Decode token by token reading only the cache: at step t the cache holds
    c_KV and k_rope of tokens 0 … t (kv_lora_rank + rope_dim numbers a token),
    and the absorbed form attends token t's query over it; no per-head key or
    value is ever formed. -> the outputs, (n, d_in), row t from step t."""
    w, n = trace.weights, trace.c_kv_norm.shape[0]
    rows = []
    for t in range(n):
        c_kv, k_rope = trace.c_kv_norm[: t + 1], trace.k_rope[: t + 1]  # the cache after step t
        everything = torch.ones(1, t + 1, dtype=torch.bool)  # the cache holds only the past
        *_, context = absorbed_attention(trace.q_nope[:, t: t + 1], trace.q_rope[:, t: t + 1],
                                         c_kv, k_rope, w.W_UK, w.W_UV, everything,
                                         mla_scale(config))
        rows.append(merge_heads(context) @ w.W_O)                        # (1, d_in)
    return torch.cat(rows) if rows else trace.output.clone()


def check_decoding(trace: MLATrace, config: FrontierConfig) -> Agreement:
    """Decoding from the latent cache (`decode_from_latent_cache`) against the
    full pass's output, within float32 rounding relative to its size."""
    return of_all("Decoding from the latent cache", "the output, one token at a time",
                  "the full (expanded) pass",
                  [_agreement("output", "the full (expanded) pass",
                              decode_from_latent_cache(trace, config), trace.output)],
                  note="each step reads only c_KV and k_rope of the tokens so far")


def tiny_deepseek(x: Tensor, config: FrontierConfig, w: MLAWeights):
    """A ``DeepseekV3Attention`` (layer 0) on a tiny ``DeepseekV3Config`` built
    offline with MLA's sizes and ``w`` copied in, and its rotary embedding:
    hidden_size = d_in, q_lora_rank, kv_lora_rank, qk_nope_head_dim = head_dim,
    qk_rope_head_dim = rope_dim, v_head_dim = head_dim, default RoPE (no yarn
    scaling, so the scale is (nope + rope)^−½), rope_interleave=True, eager.
    Built inside `explorer.core.recipes.global_rng`: its own initialisation leaves the
    global generator as it was."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention,
        DeepseekV3RotaryEmbedding,
    )
    c = config
    hf = DeepseekV3Config(hidden_size=x.shape[1], num_attention_heads=c.n_heads,
                          num_key_value_heads=c.n_heads, q_lora_rank=c.q_lora_rank,
                          kv_lora_rank=c.kv_lora_rank, qk_nope_head_dim=c.head_dim,
                          qk_rope_head_dim=c.rope_dim, v_head_dim=c.head_dim,
                          rope_parameters={"rope_type": "default", "rope_theta": ROPE_BASE},
                          rope_interleave=True, attention_bias=False, num_hidden_layers=1,
                          vocab_size=16, intermediate_size=8, moe_intermediate_size=8,
                          n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1,
                          max_position_embeddings=max(16, x.shape[0]),
                          attn_implementation="eager")
    with recipes.global_rng():  # its init draws; our weights are copied in
        attention, rotary = DeepseekV3Attention(hf, layer_idx=0).eval(), DeepseekV3RotaryEmbedding(hf)
    n_heads, width = c.n_heads, c.head_dim
    kv_b = torch.cat((w.W_UK, w.W_UV), dim=-1)                        # (h, c, d + d)
    with torch.no_grad():
        attention.q_a_proj.weight.copy_(w.W_DQ.T)
        attention.q_b_proj.weight.copy_(w.W_UQ.T)
        attention.kv_a_proj_with_mqa.weight.copy_(torch.cat((w.W_DKV, w.W_KR), dim=1).T)
        attention.kv_b_proj.weight.copy_(kv_b.permute(0, 2, 1).reshape(n_heads * 2 * width, -1))
        attention.o_proj.weight.copy_(w.W_O.T)
    return attention, rotary


def check_transformers(x: Tensor, config: FrontierConfig, trace: MLATrace) -> Agreement:
    """The expanded form against transformers' ``DeepseekV3Attention`` with the
    same weights (`tiny_deepseek`): the rotated q_rope and k_rope against
    ``apply_rotary_pos_emb_interleave`` (its output lays each rotated pair out
    de-interleaved, the first numbers of every pair then the second ones, so it
    is put back in place before comparing; the dot products are the same either
    way), every head's attn_weights, and the output. Each within float32
    rounding relative to its size."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        apply_rotary_pos_emb_interleave,
    )
    attention, rotary = tiny_deepseek(x, config, trace.weights)
    n = x.shape[0]
    positions = torch.arange(n)[None]
    cos, sin = rotary(x[None], positions)
    mask = torch.zeros(n, n).masked_fill(~trace.causal, float("-inf"))[None, None]
    with torch.no_grad():
        output, weights = attention(x[None], (cos, sin), mask)
        c_q_norm = attention.q_a_layernorm(attention.q_a_proj(x[None]))
        q = attention.q_b_proj(c_q_norm).view(1, n, config.n_heads, -1).transpose(1, 2)
        q_pass = q[..., config.head_dim:]
        k_pass = attention.kv_a_proj_with_mqa(x[None])[..., config.kv_lora_rank:][:, None]
        q_rot, k_rot = apply_rotary_pos_emb_interleave(q_pass, k_pass, cos, sin)
    back = torch.argsort(deinterleave(config.rope_dim))  # transformers' layout -> interleaved
    parts = [_agreement(name, TRANSFORMERS, ours, theirs) for name, ours, theirs in (
        ("q_rope", trace.q_rope, q_rot[0][..., back]),
        ("k_rope", trace.k_rope, k_rot[0, 0][..., back]),
        ("attn_weights", trace.attn_weights, weights[0]),
        ("output", trace.output, output[0]))]
    return of_all("transformers' DeepseekV3Attention", "rotated q_rope and k_rope, every head's "
                  "attn_weights and the output", TRANSFORMERS, parts,
                  note="transformers' interleaved RoPE returns each head's rope dimensions "
                       "de-interleaved (the pairs' first numbers, then their second ones); "
                       "they are put back in DeepSeek's interleaved order before comparing")


# ---------------------------------------------------------------------------
# The part
# ---------------------------------------------------------------------------
def steps(trace: MLATrace, config: FrontierConfig) -> tuple[Step, ...]:
    """Every intermediate as a `Step`, in reading order (see `MLATrace`)."""
    t, c = trace, config
    scale = f"({c.head_dim} + {c.rope_dim})^{{-1/2}}"
    return (
        Step("query_latent", "Query latent c_Q", r"c_Q = X W_{DQ}", t.c_q, "tokens", "dims",
             "Each token's query compressed to q_lora_rank numbers (eq. 12)."),
        Step("query_latent_norm", "RMSNorm(c_Q)", r"\mathrm{RMSNorm}(c_Q) = c_Q / "
             r"\sqrt{\mathrm{mean}(c_Q^2) + \epsilon}", t.c_q_norm, "tokens", "dims",
             "The query latent divided by its root mean square (DeepSeek's q_a_layernorm)."),
        Step("q_nope", "Queries, position-free part q_nope",
             r"q^C = \mathrm{RMSNorm}(c_Q)\, W_{UQ}", t.q_nope, "tokens", "dims",
             "Each head's query without position (eq. 13): head_dim numbers."),
        Step("q_rope", "Queries, RoPE part q_rope",
             r"q^R = \mathrm{RoPE}(\mathrm{RMSNorm}(c_Q)\, W_{QR})", t.q_rope, "tokens", "dims",
             "Each head's rope_dim query numbers, rotated by the token's position in "
             "interleaved pairs (2i, 2i+1) (eq. 14)."),
        Step("kv_latent", "KV latent c_KV", r"c_{KV} = X W_{DKV}", t.c_kv, "tokens", "dims",
             "Each token's keys and values for every head, compressed to kv_lora_rank "
             "numbers (eq. 9): this is what the cache keeps."),
        Step("kv_latent_norm", "RMSNorm(c_KV)", r"\mathrm{RMSNorm}(c_{KV})", t.c_kv_norm,
             "tokens", "dims", "The KV latent divided by its root mean square "
             "(DeepSeek's kv_a_layernorm)."),
        Step("k_rope", "Decoupled RoPE key k_rope (shared by all heads)",
             r"k^R = \mathrm{RoPE}(X W_{KR})", t.k_rope, "tokens", "dims",
             "One rope_dim key per token for every head (eq. 16), rotated by its position "
             "in interleaved pairs; cached beside c_KV."),
        Step("k_nope", "Keys, position-free part k_nope", r"k^C = \mathrm{RMSNorm}(c_{KV})\, "
             r"W_{UK}", t.k_nope, "tokens", "dims",
             "Each head's key up-projected from the latent (eq. 10)."),
        Step("values", "Values", r"v = \mathrm{RMSNorm}(c_{KV})\, W_{UV}", t.values, "tokens",
             "dims", "Each head's value up-projected from the latent (eq. 11)."),
        Step("attn_scores", "attn_scores (scaled, before the mask)",
             rf"\omega = (q^C {{k^C}}^\top + q^R {{k^R}}^\top) \cdot {scale}", t.attn_scores,
             "tokens", "keys", "Query i's score for key j: the nope parts' dot product plus "
             "the rope parts', times (head_dim + rope_dim)^(-1/2) (eq. 18)."),
        Step("causal_allowed", "causal mask, allowed keys (1 = may attend)", r"M_{ij} = [\,j \le i\,]",
             t.causal.float(), "tokens", "keys",
             "1 where key j is the query's own token or an earlier one.", signed=False),
        Step("attn_weights", "attn_weights", r"A = \mathrm{softmax}(\omega + \log M)",
             t.attn_weights, "tokens", "keys",
             "How much query i takes from key j: each row sums to 1.", signed=False),
        Step("context", "context", r"o = A\, v", t.context, "tokens", "dims",
             "Each head's weighted average of the values."),
        Step("output", "Output (o_proj)", r"u = [o_1; \dots; o_{n_h}]\, W_O", t.output,
             "tokens", "dims", "The heads side by side through o_proj (eq. 19)."),
        Step("q_absorbed", "Absorbed queries q_nope W_UKᵀ", r"\tilde q = q^C W_{UK}^\top",
             t.q_absorbed, "tokens", "dims",
             "W_UK folded into the queries: each head's query now lives in the latent's "
             "kv_lora_rank dimensions, so keys need no up-projection."),
        Step("absorbed_scores", "attn_scores over c_KV itself",
             rf"\omega = (\tilde q\, c_{{KV}}^\top + q^R {{k^R}}^\top) \cdot {scale}",
             t.absorbed_scores, "tokens", "keys",
             "The same scores, computed from the cached latent directly."),
        Step("latent_context", "Weights × c_KV", r"A\, c_{KV}", t.latent_context, "tokens",
             "dims", "Each head's weighted average of the latents, before W_UV."),
        Step("absorbed_output", "Absorbed output", r"u = [A c_{KV} W_{UV}]_{heads}\, W_O",
             t.absorbed_output, "tokens", "dims",
             "W_UV applied after the average, then o_proj: equal to the expanded output."),
    )


SUMMARY = ("Multi-head latent attention caches one small latent **c_KV** per token and one "
           "RoPE key **k_rope** shared by all heads, instead of every head's keys and values. "
           "The expanded form (transformers) up-projects the latent to each head's keys and "
           "values; the absorbed form (DeepSeek's inference code) folds W_UK into the queries "
           "and applies W_UV after the weighted average, so attention runs over c_KV itself. "
           "Both give the same output.")


def mla(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """The MLA part: weights drawn from ``generator``, every step of `mla_attention`
    on x (n_tokens, d_in), the cache facts, and three checks: absorbed =
    expanded, decoding token by token from the latent cache = the full pass,
    and the expanded form against transformers' ``DeepseekV3Attention``.
    Raises `ConfigError` for sizes MLA cannot run (`check_sizes`)."""
    check_sizes(config, x.shape[1])
    weights = draw_weights(x.shape[1], config, generator)
    trace = mla_attention(x, config, weights)
    return Part(KEY, "Multi-head latent attention (DeepSeek-V2/V3)", SUMMARY, SOURCE,
                steps(trace, config),
                checks=(check_absorbed(trace), check_decoding(trace, config),
                        check_transformers(x, config, trace)),
                facts=cache_facts(config))
