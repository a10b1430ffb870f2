"""Gated attention (Qwen3-Next, Qwen3.5): each head's context multiplied by
σ(x W_g) before o_proj.

Recipe: transformers' ``models/qwen3_next/modeling_qwen3_next.py``,
``Qwen3NextAttention.forward``, step for step:

1. ``q_proj`` yields, per head, the query and its gate together:
   ``x @ W_q`` is viewed as (n, n_heads, 2 · head_dim) and split in two halves,
   queries first, gate second (so head h's gate sits in columns
   h·2d + d … h·2d + 2d − 1 of W_q, not after every query).
2. ``q_norm`` and ``k_norm``: RMSNorm over each head's head_dim, scaled by
   (1 + weight) (Qwen3-Next's zero-centred weight), eps 1e-6.
3. Partial RoPE: rotate-half on the first dimensions of each head only
   (``partial_rotary_factor`` 0.25: int(head_dim · 0.25) angles' worth,
   ``inv_freq = 1 / base^(arange(0, dim, 2) / dim)``), the rest pass through.
4. Causal softmax attention, scale head_dim^−½.
5. context · σ(gate), elementwise per head and dimension, then ``o_proj``.

Paper: Qiu et al., "Gated Attention for Large Language Models: Non-linearity,
Sparsity, and Attention-Sink-Free" (2025): the gate "G1" after the scaled
dot-product attention, head-specific and elementwise, is the one Qwen3-Next
ships.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from explorer.core import recipes
from explorer.core.agreement import (
    Agreement,
    largest_abs,
    max_abs_diff,
    of_all,
    relative_tolerance,
)
from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig, Part, Step

KEY = "gated"
PARTIAL_ROTARY_FACTOR = 0.25
"""Qwen3-Next's ``partial_rotary_factor``: RoPE turns only the first quarter of head_dim."""
ROPE_BASE = 10_000.0
RMS_EPS = 1e-6
SOURCE = ("Qwen3-Next: transformers' Qwen3NextAttention (models/qwen3_next/"
          "modeling_qwen3_next.py); Qiu et al., \"Gated Attention for Large Language Models\" "
          "(2025), the G1 gate after SDPA, elementwise per head.")


def rms_norm(x: Tensor, weight: Tensor, eps: float = RMS_EPS) -> Tensor:
    """Qwen3-Next's RMSNorm over the last dimension: x / √(mean(x²) + eps) ·
    (1 + weight). x (…, d), weight (d,)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight)


def partial_rope_tables(n_tokens: int, head_dim: int) -> tuple[Tensor, Tensor]:
    """cos and sin (n_tokens, rotary_dim) for partial RoPE as
    ``Qwen3NextRotaryEmbedding`` builds them: dim = int(head_dim · 0.25),
    inv_freq = 1 / base^(arange(0, dim, 2) / dim), angles repeated after
    themselves (rotate-half). rotary_dim = 2 · len(inv_freq) (0 for
    head_dim < 4)."""
    dim = int(head_dim * PARTIAL_ROTARY_FACTOR)
    inv_freq = 1.0 / (ROPE_BASE ** (torch.arange(0, dim, 2, dtype=torch.float32) / max(dim, 1)))
    angles = torch.arange(n_tokens, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)  # (n, rotary_dim)
    return emb.cos(), emb.sin()


def apply_partial_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the first cos.shape[-1] dimensions of x (…, n, head_dim)
    rotate-half, pass the rest through (transformers' ``apply_rotary_pos_emb``
    in Qwen3-Next)."""
    r = cos.shape[-1]
    turned = modern.apply_rope(x[..., :r], cos, sin) if r else x[..., :0]
    return torch.cat((turned, x[..., r:]), dim=-1)


def draw_weights(d_in: int, config: FrontierConfig,
                 generator: torch.Generator) -> dict[str, Tensor]:
    """The layer's weights, drawn with ``generator`` in this order: ``q_proj``
    (d_in, n_heads · 2 · head_dim: per head its query then its gate),
    ``k_proj``, ``v_proj`` (d_in, n_heads · head_dim), ``o_proj``
    (n_heads · head_dim, d_in), ``q_norm`` and ``k_norm`` (head_dim,), small
    around 0 (the norm scales by 1 + weight)."""
    h, d = config.n_heads, config.head_dim
    draw = (lambda rows, cols: torch.randn(rows, cols, generator=generator) / math.sqrt(rows))
    return {"q_proj": draw(d_in, h * 2 * d), "k_proj": draw(d_in, h * d),
            "v_proj": draw(d_in, h * d), "o_proj": draw(h * d, d_in),
            "q_norm": 0.1 * torch.randn(d, generator=generator),
            "k_norm": 0.1 * torch.randn(d, generator=generator)}


def split_query_gate(x: Tensor, w_q: Tensor, n_heads: int) -> tuple[Tensor, Tensor]:
    """Qwen3-Next's q_proj: x (n, d_in) @ W_q (d_in, n_heads · 2d), viewed as
    (n, n_heads, 2d) and halved: queries (n_heads, n, d) and gate scores
    x W_g (n_heads, n, d)."""
    n = x.shape[0]
    both = (x @ w_q).view(n, n_heads, -1)  # (n, h, 2d)
    queries, gate = both.chunk(2, dim=-1)  # (n, h, d) each
    return queries.transpose(0, 1), gate.transpose(0, 1)


def gated_attention(x: Tensor, weights: dict[str, Tensor], n_heads: int,
                    gate_after_o_proj: bool = False) -> dict[str, Tensor]:
    """Every step of Qwen3-Next's gated attention: x (n, d_in) ->
    ``queries``, ``keys`` (n_heads, n, d) after their norm and partial RoPE,
    ``values``, ``gate_scores`` x W_g and ``gate`` σ(x W_g) (n_heads, n, d),
    ``attn_weights`` (n_heads, n, n), ``context`` (n_heads, n, d),
    ``gated_context`` (n_heads, n, d) and ``output`` (n, d_in).

    ``gate_after_o_proj=True`` is the broken variant: o_proj first, then the
    output times σ of the gate scores flattened (possible only when
    d_in = n_heads · head_dim; raises `ConfigError` otherwise)."""
    n = x.shape[0]
    q, gate_scores = split_query_gate(x, weights["q_proj"], n_heads)
    k = modern.split_heads(x @ weights["k_proj"], n_heads)
    v = modern.split_heads(x @ weights["v_proj"], n_heads)
    q, k = rms_norm(q, weights["q_norm"]), rms_norm(k, weights["k_norm"])
    cos, sin = partial_rope_tables(n, q.shape[-1])
    q, k = apply_partial_rope(q, cos, sin), apply_partial_rope(k, cos, sin)
    attention = modern.grouped_query_attention(q, k, v, modern.causal_allowed(n))
    gate = torch.sigmoid(gate_scores)
    flat = (lambda t: t.transpose(0, 1).reshape(n, -1))  # (h, n, d) -> (n, h·d)
    if gate_after_o_proj:
        if weights["o_proj"].shape[1] != flat(gate).shape[1]:
            raise ConfigError("gate", "the gate after o_proj needs d_in = n_heads · head_dim "
                              f"(got {weights['o_proj'].shape[1]} and {flat(gate).shape[1]})")
        gated = attention.context
        output = (flat(attention.context) @ weights["o_proj"]) * flat(gate)
    else:
        gated = attention.context * gate  # (h, n, d)
        output = flat(gated) @ weights["o_proj"]  # (n, d_in)
    return {"queries": q, "keys": k, "values": v, "gate_scores": gate_scores, "gate": gate,
            "attn_weights": attention.attn_weights, "context": attention.context,
            "gated_context": gated, "output": output}


REFERENCE = "transformers' Qwen3NextAttention (eager) on a tiny Qwen3NextConfig, same weights"


def transformers_gated(x: Tensor, weights: dict[str, Tensor],
                       config: FrontierConfig) -> tuple[Tensor, Tensor]:
    """transformers' own ``Qwen3NextAttention`` (eager, causal, partial RoPE
    0.25 from ``Qwen3NextRotaryEmbedding``) with ``weights`` copied in:
    x (n, d_in) -> output (n, d_in), attn_weights (n_heads, n, n)."""
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        Qwen3NextAttention,
        Qwen3NextRotaryEmbedding,
    )
    n, d_in = x.shape
    tiny = Qwen3NextConfig(
        hidden_size=d_in, num_attention_heads=config.n_heads, num_key_value_heads=config.n_heads,
        head_dim=config.head_dim, num_hidden_layers=1, layer_types=["full_attention"],
        max_position_embeddings=max(n, 1), rms_norm_eps=RMS_EPS, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_BASE,
                         "partial_rotary_factor": PARTIAL_ROTARY_FACTOR},
        attn_implementation="eager")
    with recipes.global_rng():  # its init draws; our weights are copied in
        attn = Qwen3NextAttention(tiny, layer_idx=0).eval()
    rotary = Qwen3NextRotaryEmbedding(tiny)
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(attn, name).weight.copy_(weights[name].T)
        attn.q_norm.weight.copy_(weights["q_norm"])
        attn.k_norm.weight.copy_(weights["k_norm"])
        hidden = x[None]  # (1, n, d_in)
        position_embeddings = rotary(hidden, torch.arange(n)[None])
        mask = torch.zeros(1, 1, n, n).masked_fill(~modern.causal_allowed(n), float("-inf"))
        output, attn_weights = attn(hidden, position_embeddings, mask)
    return output[0], attn_weights[0]


def check_against_transformers(name: str, steps: dict[str, Tensor], output: Tensor,
                               attn_weights: Tensor) -> Agreement:
    """Our output and attn_weights against transformers' (`transformers_gated`)."""
    scale = largest_abs(output)
    return of_all(name, "output and attn_weights", REFERENCE, [
        Agreement(f"{name}: output", "output after o_proj", REFERENCE,
                  max_abs_diff(steps["output"], output), relative_tolerance(scale),
                  n_values=output.numel(), scale=scale),
        Agreement(f"{name}: attn_weights", "attn_weights", REFERENCE,
                  max_abs_diff(steps["attn_weights"], attn_weights), relative_tolerance(1.0),
                  n_values=attn_weights.numel(), scale=1.0)])


def gated(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """The gated-attention part: X (n_tokens, d_in) through Qwen3-Next's gated
    attention with weights drawn from ``generator``.

    Steps: ``queries`` (n_heads, n, head_dim) after q_norm and partial RoPE;
    ``gate_scores`` x W_g and ``gate`` σ(x W_g) (n_heads, n, head_dim);
    ``attn_weights`` (n_heads, n, n); ``context`` and ``gated_context``
    (n_heads, n, head_dim); ``output`` (n, d_in). Check: the output and
    attn_weights against transformers' ``Qwen3NextAttention`` with the same
    weights. Raises `ConfigError` for an odd head_dim."""
    modern.check_rope(config.head_dim)
    weights = draw_weights(x.shape[1], config, generator)
    steps = gated_attention(x, weights, config.n_heads)
    theirs, theirs_weights = transformers_gated(x, weights, config)
    rotary_dim = partial_rope_tables(1, config.head_dim)[0].shape[-1]
    shown = (
        Step("queries", "queries after q_norm and partial RoPE",
             r"q = \mathrm{RoPE}_{[:r]}\big(\mathrm{RMSNorm}(x W_q)\big)", steps["queries"],
             "tokens", "dims", f"Head h's query for this token: RMSNorm over head_dim, then only "
             f"the first {rotary_dim} of {config.head_dim} dimensions turned by RoPE."),
        Step("gate_scores", "Gate scores x W_g (the second half of q_proj)", r"x W_g",
             steps["gate_scores"], "tokens", "dims",
             "The gate's logit for this token, head and dimension: q_proj's second half per head."),
        Step("gate", "The gate σ(x W_g)", r"\sigma(x W_g)", steps["gate"], "tokens", "dims",
             "How much of this dimension of the head's context passes (0 = shut, 1 = open).",
             signed=False),
        Step("attn_weights", "attn_weights (causal)",
             r"\mathrm{softmax}\big(q k^\top / \sqrt{d}\big)", steps["attn_weights"],
             "tokens", "keys", "How much this query reads each earlier key.", signed=False),
        Step("context", "context before the gate", r"\text{context} = a V", steps["context"],
             "tokens", "dims", "The head's attention output, before the gate."),
        Step("gated_context", "context · σ(x W_g)", r"\text{context} \odot \sigma(x W_g)",
             steps["gated_context"], "tokens", "dims",
             "The context times its gate, dimension by dimension: what o_proj receives."),
        Step("output", "output = o_proj(gated context)",
             r"\big[\text{context}_h \odot \sigma(x W_g)_h\big]_h W_o", steps["output"],
             "tokens", "dims", "The layer's output for this token, heads concatenated "
             "then projected back to d_in."),
    )
    summary = (
        "Qwen3-Next's full-attention layers multiply each head's context by a gate "
        "σ(x W_g), one number per token, head and dimension, before o_proj. q_proj yields "
        "the query and the gate together (per head: query, then gate). The gate lets a head "
        "output nearly nothing for a token without parking its weight on the first token "
        "(an attention sink). Queries and keys are RMS-normalised per head, and RoPE turns "
        "only the first quarter of each head.")
    facts = {
        "rotated dimensions per head (partial RoPE)": f"{rotary_dim} of {config.head_dim}",
        "mean gate σ(x W_g)": f"{float(steps['gate'].mean()):.3f}",
        "gate values below 0.1": f"{int((steps['gate'] < 0.1).sum())} of {steps['gate'].numel()}",
    }
    checks = (check_against_transformers("gated attention", steps, theirs, theirs_weights),)
    return Part(KEY, "Gated attention (Qwen3-Next)", summary, SOURCE, shown, checks, facts)
