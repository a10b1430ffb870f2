"""Learned attention sinks (gpt-oss): one learned logit per head joins every
row's softmax as an extra column, and is then dropped.

The sink's column takes its share of each row's probability and gives nothing
back (it has no value), so the kept attn_weights sum to 1 − p_sink < 1: a head
can attend to "nothing". Trained models without it grow a sink of their own,
usually the first token (Xiao et al., "Efficient Streaming Language Models with
Attention Sinks", 2023; the Real model page's first-token share); gpt-oss
learns the logit instead.

Recipe: OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card" (2025), its
architecture section (each head has "a learned bias in the denominator of the
softmax"); transformers 5.23,
``models/gpt_oss/modeling_gpt_oss.py`` (``eager_attention_forward``: the sinks
concatenated to the scores, softmax, ``probs[..., :-1]``). Shapes: per-head
tensors are ``(n_heads, n_tokens, width)``; weights are ``(inputs, outputs)``.
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

KEY = "sinks"
ROPE_BASE = modern.DEFAULT_ROPE_BASE
PAIRING = modern.ROTATE_HALF
"""gpt-oss rotates dimension i with i + head_dim/2 (its ``_apply_rotary_emb``
splits each head in halves)."""
TOLERANCE = 1e-4
SOURCE = ("gpt-oss model card (OpenAI, 2025), architecture: a learned bias (the sink) in each "
          "head's softmax denominator; transformers 5.23 models/gpt_oss/modeling_gpt_oss.py "
          "(eager_attention_forward: cat(scores, sinks), softmax, probs[..., :-1])")
TRANSFORMERS = "transformers' GptOssAttention (eager, default RoPE, full attention)"


@dataclass(frozen=True)
class SinkWeights:
    """W_query, W_key, W_value (d_in, n_heads·head_dim); W_O (n_heads·head_dim,
    d_in); ``sinks`` (n_heads,): each head's learned logit."""

    W_query: Tensor
    W_key: Tensor
    W_value: Tensor
    W_O: Tensor
    sinks: Tensor


def check_sizes(config: FrontierConfig, d_in: int) -> None:
    """Raise `ConfigError` unless the heads can run: n_heads ≥ 1, head_dim even
    (RoPE turns pairs), d_in ≥ 1."""
    if config.n_heads < 1:
        raise ConfigError("n_heads", f"n_heads must be at least 1 (got {config.n_heads})")
    if config.head_dim < 2 or config.head_dim % 2:
        raise ConfigError("head_dim", "RoPE turns dimensions in pairs, so head_dim must be even "
                          f"and at least 2 (got {config.head_dim})")
    if d_in < 1:
        raise ConfigError("d_in", f"d_in must be at least 1 (got {d_in})")


def draw_weights(d_in: int, config: FrontierConfig, generator: torch.Generator) -> SinkWeights:
    """Every weight from ``torch.randn`` with ``generator``: projections scaled by
    1/√inputs, the sink logits unscaled (about −2 … 2, as the scores are)."""
    width = config.n_heads * config.head_dim

    def draw(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator) / math.sqrt(shape[0])

    return SinkWeights(draw(d_in, width), draw(d_in, width), draw(d_in, width), draw(width, d_in),
                       torch.randn(config.n_heads, generator=generator))


def with_sink(scores: Tensor, mask: Tensor, sinks: Tensor) -> Tensor:
    """The masked scores (−∞ where the mask hides a key) with each head's sink
    logit as one more column: (h, n, n), (n, n) bool, (h,) -> (h, n, n + 1)."""
    masked = scores.masked_fill(~mask, float("-inf"))
    sink_column = sinks[:, None, None].expand(-1, scores.shape[1], 1)
    return torch.cat((masked, sink_column), dim=-1)


def sink_softmax(logits: Tensor) -> tuple[Tensor, Tensor]:
    """softmax over the keys and the sink together, then the sink dropped:
    (h, n, n + 1) -> attn_weights (h, n, n), whose rows sum to 1 − p_sink, and
    the softmax with the sink's column (h, n, n + 1)."""
    probs = torch.softmax(logits, dim=-1)
    return probs[..., :-1], probs


def sink_probability(scores: Tensor, mask: Tensor, sinks: Tensor) -> Tensor:
    """The sink's share of each row by a second route: e^s / (e^s + Σ_j e^ω_j) =
    σ(s − logsumexp_j ω_j) over the keys the mask keeps. (h, n, n), (n, n)
    bool, (h,) -> (h, n, 1)."""
    lse = scores.masked_fill(~mask, float("-inf")).logsumexp(dim=-1, keepdim=True)
    return torch.sigmoid(sinks[:, None, None] - lse)


@dataclass(frozen=True)
class SinkTrace:
    """Every intermediate, for n tokens and h heads of d = head_dim:
    ``queries``, ``keys`` (h, n, d) rotated; ``values`` (h, n, d);
    ``attn_scores`` (h, n, n) scaled, before the mask; ``causal`` (n, n) bool;
    ``logits`` (h, n, n + 1) masked scores and the sink's column; ``probs``
    (h, n, n + 1); ``attn_weights`` (h, n, n) the sink dropped; ``sink_mass``
    (h, n, 1) = 1 − each row's sum; ``plain_weights`` (h, n, n) the softmax
    without a sink; ``context`` (h, n, d); ``output`` (n, d_in)."""

    weights: SinkWeights
    queries: Tensor
    keys: Tensor
    values: Tensor
    attn_scores: Tensor
    causal: Tensor
    logits: Tensor
    probs: Tensor
    attn_weights: Tensor
    sink_mass: Tensor
    plain_weights: Tensor
    context: Tensor
    output: Tensor


def context_and_output(attn_weights: Tensor, values: Tensor, W_O: Tensor) -> tuple[Tensor, Tensor]:
    """context = attn_weights · values (h, n, d) and the heads side by side through
    o_proj (n, d_in)."""
    context = attn_weights @ values
    n = context.shape[1]
    return context, context.transpose(0, 1).reshape(n, -1) @ W_O


def sink_attention(x: Tensor, config: FrontierConfig, w: SinkWeights) -> SinkTrace:
    """gpt-oss's attention on x (n, d_in): rotated queries and keys, causal
    scores, the sinks' column, softmax, the column dropped (see `SinkTrace`)."""
    n, h = x.shape[0], config.n_heads
    cos, sin = modern.rope_tables(n, config.head_dim, ROPE_BASE, pairing=PAIRING)
    queries = modern.apply_rope(modern.split_heads(x @ w.W_query, h), cos, sin, PAIRING)
    keys = modern.apply_rope(modern.split_heads(x @ w.W_key, h), cos, sin, PAIRING)
    values = modern.split_heads(x @ w.W_value, h)
    scores = modern.attention_scores(queries, keys)                   # (h, n, n)
    causal = modern.causal_allowed(n)
    logits = with_sink(scores, causal, w.sinks)                       # (h, n, n + 1)
    attn_weights, probs = sink_softmax(logits)
    context, output = context_and_output(attn_weights, values, w.W_O)
    return SinkTrace(w, queries, keys, values, scores, causal, logits, probs, attn_weights,
                     1 - attn_weights.sum(-1, keepdim=True),
                     modern.masked_softmax(scores, causal), context, output)


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------
def _agreement(name: str, compared: str, reference: str, ours: Tensor, theirs: Tensor
               ) -> Agreement:
    scale = largest_abs(theirs)
    return Agreement(name, compared, reference, max_abs_diff(ours, theirs),
                     TOLERANCE * max(1.0, scale), n_values=theirs.numel(), scale=scale)


def check_sink_mass(trace: SinkTrace, attn_weights: Tensor | None = None) -> Agreement:
    """What each row of attn_weights misses (1 − its sum) against the sink's
    probability by a second route (`sink_probability`). ``attn_weights``:
    other weights to check (h, n, n) (rows renormalised to 1 fail)."""
    weights = trace.attn_weights if attn_weights is None else attn_weights
    expected = sink_probability(trace.attn_scores, trace.causal, trace.weights.sinks)
    return _agreement("Missing mass = sink probability", "1 − each row's sum of attn_weights",
                      "σ(sink − logsumexp of the row's scores)",
                      1 - weights.sum(-1, keepdim=True), expected)


def tiny_gpt_oss(x: Tensor, config: FrontierConfig, w: SinkWeights):
    """A ``GptOssAttention`` (layer 0) on a tiny ``GptOssConfig`` built offline,
    ``w`` copied in, and its rotary embedding: hidden_size = d_in, n_heads
    query and K/V heads of head_dim, no biases (gpt-oss has them; here they
    are left out on both sides), default RoPE with base 10,000 (gpt-oss ships
    yarn scaling, which would change cos and sin), full attention (no sliding
    window), eager. Built inside `explorer.core.recipes.global_rng`."""
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding
    c = config
    hf = GptOssConfig(hidden_size=x.shape[1], num_attention_heads=c.n_heads,
                      num_key_value_heads=c.n_heads, head_dim=c.head_dim, num_hidden_layers=1,
                      layer_types=["full_attention"], attention_bias=False,
                      rope_parameters={"rope_type": "default", "rope_theta": ROPE_BASE},
                      vocab_size=16, intermediate_size=8, num_local_experts=2,
                      num_experts_per_tok=1, max_position_embeddings=max(16, x.shape[0]),
                      attn_implementation="eager")
    with recipes.global_rng():  # its init draws; our weights are copied in
        attention, rotary = GptOssAttention(hf, layer_idx=0).eval(), GptOssRotaryEmbedding(hf)
    with torch.no_grad():
        attention.q_proj.weight.copy_(w.W_query.T)
        attention.k_proj.weight.copy_(w.W_key.T)
        attention.v_proj.weight.copy_(w.W_value.T)
        attention.o_proj.weight.copy_(w.W_O.T)
        attention.sinks.copy_(w.sinks)
    return attention, rotary


def check_transformers(x: Tensor, config: FrontierConfig, trace: SinkTrace,
                       attn_weights: Tensor | None = None, output: Tensor | None = None
                       ) -> Agreement:
    """attn_weights and the output against transformers' ``GptOssAttention``
    with the same weights (`tiny_gpt_oss`), each within float32 rounding
    relative to its size. ``attn_weights`` (h, n, n) and ``output`` (n, d_in):
    other results to check in place of the trace's."""
    attention, rotary = tiny_gpt_oss(x, config, trace.weights)
    n = x.shape[0]
    cos, sin = rotary(x[None], torch.arange(n)[None])
    mask = torch.zeros(n, n).masked_fill(~trace.causal, float("-inf"))[None, None]
    with torch.no_grad():
        their_output, their_weights = attention(x[None], (cos, sin), mask)
    ours_w = trace.attn_weights if attn_weights is None else attn_weights
    ours_o = trace.output if output is None else output
    return of_all("transformers' GptOssAttention", "every head's attn_weights (the sink "
                  "dropped) and the output", TRANSFORMERS,
                  [_agreement("attn_weights", "attn_weights", TRANSFORMERS, ours_w,
                              their_weights[0]),
                   _agreement("output", "output", TRANSFORMERS, ours_o, their_output[0])],
                  note="gpt-oss's q/k/v/o biases are left out on both sides; default RoPE "
                       "instead of the released yarn scaling")


# ---------------------------------------------------------------------------
# The part
# ---------------------------------------------------------------------------
def facts(trace: SinkTrace) -> dict[str, str]:
    """Each head's sink logit and its mean share of a row, and the first token's
    mean share of the kept weights (the sink a model grows without one)."""
    n = trace.attn_weights.shape[1]
    found = {}
    for head, logit in enumerate(trace.weights.sinks.tolist()):
        mass = trace.sink_mass[head, :, 0]
        found[f"head {head}: sink logit"] = f"{logit:.3f}"
        found[f"head {head}: sink's share of a row (mean over {n} rows)"] = (
            f"{float(mass.mean()):.3f} (from {float(mass.min()):.3f} to {float(mass.max()):.3f})")
    found["first token's mean share of the kept weights"] = (
        f"{float(trace.attn_weights[..., 0].mean()):.3f}")
    return found


def steps(trace: SinkTrace, config: FrontierConfig) -> tuple[Step, ...]:
    """Every intermediate as a `Step`, in reading order (see `SinkTrace`)."""
    t = trace
    return (
        Step("queries", "queries (RoPE)", r"q = \mathrm{RoPE}(X W_q)", t.queries, "tokens",
             "dims", "Each head's query, rotated by its position (rotate-half pairs)."),
        Step("keys", "keys (RoPE)", r"k = \mathrm{RoPE}(X W_k)", t.keys, "tokens", "dims",
             "Each head's key, rotated by its position."),
        Step("values", "values", r"v = X W_v", t.values, "tokens", "dims",
             "Each head's value: what a key gives when it is attended."),
        Step("attn_scores", "attn_scores (scaled, before the mask)",
             rf"\omega = q k^\top / \sqrt{{{config.head_dim}}}", t.attn_scores, "tokens", "keys",
             "Query i's score for key j."),
        Step("causal_allowed", "causal mask, allowed keys (1 = may attend)", r"M_{ij} = [\,j \le i\,]",
             t.causal.float(), "tokens", "keys",
             "1 where key j is the query's own token or an earlier one.", signed=False),
        Step("logits_with_sink", "Scores with the sink's column",
             r"[\,\omega + \log M \;|\; s_h\,]", t.logits, "tokens", "dims",
             "The masked scores (−∞ where the mask hides a key) and, as the last column, the "
             "head's learned sink logit s_h, the same in every row."),
        Step("softmax_with_sink", "softmax over keys and sink",
             r"P = \mathrm{softmax}([\,\omega + \log M \;|\; s_h\,])", t.probs, "tokens", "dims",
             "Each row sums to 1 over the keys and the sink; the last column is the sink's "
             "probability.", signed=False),
        Step("attn_weights", "attn_weights (the sink dropped)", r"A = P_{:, :n}", t.attn_weights,
             "tokens", "keys", "The sink's column dropped: each row now sums to less than 1, "
             "and the sink has no value to give.", signed=False),
        Step("sink_probability", "Missing mass = the sink's probability",
             r"1 - \sum_j A_{ij} = \frac{e^{s_h}}{e^{s_h} + \sum_{j \le i} e^{\omega_{ij}}}",
             t.sink_mass, "tokens", "dims",
             "What row i misses: the share the sink took.", signed=False),
        Step("weights_without_sink", "attn_weights without a sink (for contrast)",
             r"\mathrm{softmax}(\omega + \log M)", t.plain_weights, "tokens", "keys",
             "The ordinary softmax: rows sum to 1. With the sink each row is this one times "
             "(1 − the sink's probability).", signed=False),
        Step("context", "context", r"o = A\, v", t.context, "tokens", "dims",
             "Each head's weighted sum of values: smaller where the sink took more."),
        Step("output", "Output (o_proj)", r"u = [o_1; \dots; o_{n_h}]\, W_O", t.output,
             "tokens", "dims", "The heads side by side through o_proj."),
    )


SUMMARY = ("gpt-oss gives every head a learned **sink** logit. It joins each row's softmax as "
           "one more column and is then dropped, so the kept attn_weights sum to **less than "
           "1**: the missing mass is the sink's probability, and a head can attend to nothing. "
           "Models trained without one grow a sink of their own: the first token takes a large "
           "share of many heads' weights (the Real model page's first-token share).")


def sinks(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """The sinks part: weights drawn from ``generator``, every step of
    `sink_attention` on x (n_tokens, d_in), and two checks: the rows' missing
    mass against the sink's probability, and transformers' ``GptOssAttention``.
    Raises `ConfigError` for sizes the heads cannot run (`check_sizes`)."""
    check_sizes(config, x.shape[1])
    trace = sink_attention(x, config, draw_weights(x.shape[1], config, generator))
    return Part(KEY, "Learned attention sinks (gpt-oss)", SUMMARY, SOURCE, steps(trace, config),
                checks=(check_sink_mass(trace), check_transformers(x, config, trace)),
                facts=facts(trace))
