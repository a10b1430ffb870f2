"""DeepSeek sparse attention (DSA, DeepSeek-V3.2): a small "lightning indexer"
scores every earlier key for each query, each query keeps its top-k keys, and
MLA's attention runs over those keys only.

The indexer has a few heads of its own: index query q_I (from MLA's normed
query latent) and one index key k_I per token (shared by its heads), both with
RoPE on their first rope_dim dimensions (rotate-half, not interleaved); its
score for query t and key s is Σ_h w_{t,h} · ReLU(q_{t,h} · k_s) (the paper's
eq. 1), with per-query head weights w = x W_w. The attention itself is the
MLA of `explorer.modern.frontier.mla` (the same weights for the same seed),
its causal mask narrowed to the selected keys.

Recipe: DeepSeek-AI, "DeepSeek-V3.2" (2025), §2.1, eq. (1) (the indexer) and
eq. (2) (attention over the top-k keys); transformers 5.23,
``models/deepseek_v32/modeling_deepseek_v32.py`` (``DeepseekV32Indexer``,
``DeepseekV32Attention``), which computes the indexer in float32 where
DeepSeek's kernels use FP8 and a Hadamard rotation (an orthogonal map, so the
same dot products). Shapes: per-head tensors are ``(heads, n_tokens, width)``;
weights are ``(inputs, outputs)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from explorer.core import recipes
from explorer.core.agreement import Agreement, largest_abs, max_abs_diff, of_all
from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig, Part, Step
from explorer.modern.frontier import mla as mla_module
from explorer.modern.frontier.mla import MLATrace, MLAWeights, merge_heads

KEY = "sparse"
LAYER_NORM_EPS = 1e-6
"""The index key's LayerNorm ε (transformers' ``DeepseekV32Indexer.k_norm``)."""
PAIRING = modern.ROTATE_HALF
"""The indexer rotates dimension i with i + rope_dim/2 (transformers:
"The indexer uses NON-interleaved (half-split) RoPE — unlike the main MLA
attention")."""
TOLERANCE = 1e-4
SOURCE = ("DeepSeek-V3.2 paper (2025), §2.1: the lightning indexer, eq. (1), and attention "
          "over the top-k keys, eq. (2); the attention is DeepSeek-V2's MLA (eqs. 9-19); "
          "transformers 5.23 models/deepseek_v32/modeling_deepseek_v32.py "
          "(DeepseekV32Indexer, DeepseekV32Attention)")
TRANSFORMERS = "transformers' DeepseekV32Attention with its DeepseekV32Indexer (eager)"


@dataclass(frozen=True)
class IndexerWeights:
    """The indexer's own weights: W_Iq (q_lora_rank, index_heads·index_dim),
    from MLA's normed query latent; W_Ik (d_in, index_dim); W_w (d_in,
    index_heads), the per-query head weights. The index key's LayerNorm has
    gain 1 and bias 0 (transformers' initial values)."""

    W_Iq: Tensor
    W_Ik: Tensor
    W_w: Tensor


def check_sizes(config: FrontierConfig, d_in: int) -> None:
    """Raise `ConfigError` unless the indexer can run (and MLA, `mla.check_sizes`):
    top_k ≥ 1, index_heads ≥ 1, index_dim ≥ rope_dim (the indexer rotates its
    first rope_dim dimensions)."""
    mla_module.check_sizes(config, d_in)
    for name in ("top_k", "index_heads"):
        if getattr(config, name) < 1:
            raise ConfigError(name, f"{name} must be at least 1 (got {getattr(config, name)})")
    if config.index_dim < config.rope_dim:
        raise ConfigError("index_dim", "the indexer turns its first rope_dim dimensions, so "
                          f"index_dim must be at least rope_dim = {config.rope_dim} "
                          f"(got {config.index_dim})")


def draw_indexer(d_in: int, config: FrontierConfig, generator: torch.Generator
                 ) -> IndexerWeights:
    """The indexer's weights from ``torch.randn`` with ``generator``, scaled by 1/√inputs."""
    def draw(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator) / math.sqrt(shape[0])

    return IndexerWeights(draw(config.q_lora_rank, config.index_heads * config.index_dim),
                          draw(d_in, config.index_dim), draw(d_in, config.index_heads))


def _rope_front(x: Tensor, cos: Tensor, sin: Tensor, rope_dim: int) -> Tensor:
    """RoPE (rotate-half) on the first ``rope_dim`` dimensions, the rest kept."""
    turned, kept = x.split([rope_dim, x.shape[-1] - rope_dim], dim=-1)
    return torch.cat((modern.apply_rope(turned, cos, sin, PAIRING), kept), dim=-1)


def index_queries_keys(x: Tensor, c_q_norm: Tensor, w: IndexerWeights, config: FrontierConfig
                       ) -> tuple[Tensor, Tensor]:
    """q_I = RMSNorm(c_Q) W_Iq split into index heads, and k_I =
    LayerNorm(x W_Ik), each with RoPE on its first rope_dim dimensions.

    x (n, d_in); c_q_norm (n, q_lora_rank) -> q_I (n, index_heads, index_dim)
    (transformers' layout), k_I (n, index_dim)."""
    n, c = x.shape[0], config
    cos, sin = modern.rope_tables(n, c.rope_dim, mla_module.ROPE_BASE, pairing=PAIRING)
    q = (c_q_norm @ w.W_Iq).view(n, c.index_heads, c.index_dim)
    k = F.layer_norm(x @ w.W_Ik, (c.index_dim,), eps=LAYER_NORM_EPS)
    return _rope_front(q, cos[:, None], sin[:, None], c.rope_dim), _rope_front(k, cos, sin,
                                                                               c.rope_dim)


def index_scores(q_index: Tensor, k_index: Tensor, head_weights: Tensor
                 ) -> tuple[Tensor, Tensor]:
    """The lightning indexer (V3.2 eq. 1): I_ts = Σ_h w_th · ReLU(q_th · k_s /
    √index_dim), the head weights already scaled by index_heads^−½ (as in
    DeepSeek's and transformers' code). Computed in transformers' order.

    q_index (n, H, d_I); k_index (n, d_I); head_weights (n, H) -> per-head
    ReLU scores (n, H, n) and index scores (n, n), before the causal mask."""
    scale = q_index.shape[-1] ** -0.5
    per_head = F.relu((q_index @ k_index.T[None]) * scale)           # (n, H, n)
    return per_head, (head_weights[:, None, :] @ per_head).squeeze(1)  # (n, 1, H) @ (n, H, n)


def top_k_keys(scores: Tensor, causal: Tensor, k: int) -> Tensor:
    """Each query's top-k keys among those the causal mask keeps (all of them
    when fewer than k): (n, n) scores, (n, n) bool -> (n, n) bool, True =
    selected. Ties (equal index scores, e.g. several keys whose ReLUs are all
    0) are broken as ``torch.topk`` breaks them, as transformers does."""
    masked = scores.masked_fill(~causal, float("-inf"))
    chosen = masked.topk(min(k, scores.shape[-1]), dim=-1).indices
    return torch.zeros_like(causal).scatter(-1, chosen, True) & causal


@dataclass(frozen=True)
class SparseTrace:
    """Every intermediate, for n tokens, H index heads of width d_I and h
    attention heads: ``q_index`` (n, H, d_I), ``k_index`` (n, d_I),
    ``head_scores`` (n, H, n) ReLU'd, ``head_weights`` (n, H), ``index``
    (n, n) before the mask, ``selected`` (n, n) bool (causal top-k),
    ``dense`` the MLA trace (its attn_scores, values, weights), and
    ``attn_weights`` (h, n, n), ``context`` (h, n, head_dim), ``output``
    (n, d_in) of attention restricted to the selected keys."""

    indexer: IndexerWeights
    dense: MLATrace
    q_index: Tensor
    k_index: Tensor
    head_scores: Tensor
    head_weights: Tensor
    index: Tensor
    selected: Tensor
    attn_weights: Tensor
    context: Tensor
    output: Tensor


def sparse_attention(x: Tensor, config: FrontierConfig, mla_weights: MLAWeights,
                     indexer: IndexerWeights) -> SparseTrace:
    """The indexer, the top-k keys and MLA restricted to them on x (n, d_in)."""
    dense = mla_module.mla_attention(x, config, mla_weights)
    q_index, k_index = index_queries_keys(x, dense.c_q_norm, indexer, config)
    head_weights = (x @ indexer.W_w) * config.index_heads ** -0.5      # (n, H)
    head_scores, index = index_scores(q_index, k_index, head_weights)
    selected = top_k_keys(index, dense.causal, config.top_k)
    attn_weights = modern.masked_softmax(dense.attn_scores, selected)  # (h, n, n)
    context = attn_weights @ dense.values
    return SparseTrace(indexer, dense, q_index, k_index, head_scores, head_weights, index,
                       selected, attn_weights, context, merge_heads(context) @ mla_weights.W_O)


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------
def _agreement(name: str, ours: Tensor, theirs: Tensor, exact: bool = False) -> Agreement:
    scale = largest_abs(theirs)
    tolerance = 0.0 if exact else TOLERANCE * max(1.0, scale)
    return Agreement(name, name, TRANSFORMERS, max_abs_diff(ours, theirs), tolerance,
                     exact=exact and torch.equal(ours, theirs), n_values=theirs.numel(),
                     scale=scale)


def at_most_k(attn_weights: Tensor, k: int) -> int:
    """How many non-zero weights the fullest row holds beyond k (0 when every
    row has at most k): attn_weights (h, n, n)."""
    return max(0, int((attn_weights != 0).sum(-1).max()) - k) if attn_weights.numel() else 0


def tiny_deepseek_v32(x: Tensor, config: FrontierConfig, trace: SparseTrace):
    """A ``DeepseekV32Attention`` (layer 0) on a tiny ``DeepseekV32Config``
    built offline with the same sizes and weights (MLA's as in
    `explorer.modern.frontier.mla.tiny_deepseek`, the indexer's wq_b, wk,
    weights_proj; k_norm gain 1, bias 0), default RoPE, eager, and its rotary
    embedding. Built inside `explorer.core.recipes.global_rng`."""
    from transformers import DeepseekV32Config
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
        DeepseekV32Attention,
        DeepseekV32RotaryEmbedding,
    )
    c, w, iw = config, trace.dense.weights, trace.indexer
    hf = DeepseekV32Config(hidden_size=x.shape[1], num_attention_heads=c.n_heads,
                           num_key_value_heads=c.n_heads, q_lora_rank=c.q_lora_rank,
                           kv_lora_rank=c.kv_lora_rank, qk_nope_head_dim=c.head_dim,
                           qk_rope_head_dim=c.rope_dim, v_head_dim=c.head_dim,
                           index_topk=c.top_k, index_n_heads=c.index_heads,
                           index_head_dim=c.index_dim,
                           rope_parameters={"rope_type": "default",
                                            "rope_theta": mla_module.ROPE_BASE},
                           num_hidden_layers=1, vocab_size=16, intermediate_size=8,
                           moe_intermediate_size=8, n_routed_experts=2, num_experts_per_tok=1,
                           n_group=1, topk_group=1, max_position_embeddings=max(16, x.shape[0]),
                           attn_implementation="eager")
    with recipes.global_rng():  # its init draws; our weights are copied in
        attention, rotary = DeepseekV32Attention(hf, layer_idx=0).eval(), \
            DeepseekV32RotaryEmbedding(hf)
    kv_b = torch.cat((w.W_UK, w.W_UV), dim=-1)                        # (h, c, 2 d)
    with torch.no_grad():
        attention.q_a_proj.weight.copy_(w.W_DQ.T)
        attention.q_b_proj.weight.copy_(w.W_UQ.T)
        attention.kv_a_proj_with_mqa.weight.copy_(torch.cat((w.W_DKV, w.W_KR), dim=1).T)
        attention.kv_b_proj.weight.copy_(kv_b.permute(0, 2, 1).reshape(-1, c.kv_lora_rank))
        attention.o_proj.weight.copy_(w.W_O.T)
        attention.indexer.wq_b.weight.copy_(iw.W_Iq.T)
        attention.indexer.wk.weight.copy_(iw.W_Ik.T)
        attention.indexer.weights_proj.weight.copy_(iw.W_w.T)
        attention.indexer.k_norm.weight.fill_(1.0)
        attention.indexer.k_norm.bias.zero_()
    return attention, rotary


def check_transformers(x: Tensor, config: FrontierConfig, trace: SparseTrace,
                       selected: Tensor | None = None, attn_weights: Tensor | None = None,
                       output: Tensor | None = None) -> Agreement:
    """Against ``DeepseekV32Attention`` with the same weights (`tiny_deepseek_v32`):
    the selected keys (its indexer's top-k indices, caught by a forward hook,
    kept where the causal mask allows: the same set, bit for bit), every head's
    attn_weights and the output (float32 rounding), and at most top_k non-zero
    weights in every row, ours and transformers'. ``selected`` (n, n) bool,
    ``attn_weights`` (h, n, n), ``output`` (n, d_in): other results to check."""
    attention, rotary = tiny_deepseek_v32(x, config, trace)
    n, causal = x.shape[0], trace.dense.causal
    cos, sin = rotary(x[None], torch.arange(n)[None])
    mask = torch.zeros(n, n).masked_fill(~causal, float("-inf"))[None, None]
    caught = {}
    hook = attention.indexer.register_forward_hook(
        lambda module, args, result: caught.update(indices=result))
    try:
        with torch.no_grad():
            their_output, their_weights = attention(x[None], (cos, sin), mask)
    finally:
        hook.remove()
    their_selected = torch.zeros(n, n, dtype=torch.bool).scatter(
        -1, caught["indices"][0].long(), True) & causal
    ours_s = trace.selected if selected is None else selected
    ours_w = trace.attn_weights if attn_weights is None else attn_weights
    ours_o = trace.output if output is None else output
    k = config.top_k
    fullest = max(at_most_k(ours_w, k), at_most_k(their_weights[0], k))
    return of_all("transformers' DeepSeek-V3.2 attention", "the top-k keys each query keeps, "
                  "every head's attn_weights, the output, and at most k non-zero weights a row",
                  TRANSFORMERS,
                  [_agreement("top-k keys", ours_s.float(), their_selected.float(), exact=True),
                   _agreement("attn_weights", ours_w, their_weights[0]),
                   _agreement("output", ours_o, their_output[0]),
                   Agreement("at most k non-zero weights per row",
                             f"non-zero attn_weights per row beyond k = {k}",
                             "k (the indexer's index_topk)", float(fullest), 0.0,
                             n_values=2 * ours_w.shape[0] * n)],
                  note="the indexer runs in float32, as transformers computes it; DeepSeek's "
                       "kernels use FP8 and a Hadamard rotation (the same dot products, up to "
                       "FP8 rounding), which no float32 check can match exactly; ties between "
                       "equal index scores are broken by torch.topk on both sides")


# ---------------------------------------------------------------------------
# The part
# ---------------------------------------------------------------------------
def facts(trace: SparseTrace, config: FrontierConfig) -> dict[str, str]:
    """How many keys each query keeps against causal attention's, and the
    ties the selection had to break."""
    causal = trace.dense.causal
    n = causal.shape[0]
    kept, full = int(trace.selected.sum()), int(causal.sum())
    masked = trace.index.masked_fill(~causal, float("-inf"))
    ties = 0
    for row in range(n):
        allowed = masked[row][causal[row]]
        if allowed.numel() > config.top_k:
            ordered = allowed.sort(descending=True).values
            ties += int(ordered[config.top_k - 1] == ordered[config.top_k])
    return {"keys kept, all queries": f"{kept} of the {full} causal ones (top_k = {config.top_k})",
            "a query's cost": f"at most {config.top_k} keys, however long the text "
                              f"(causal attention: all {n} for the last token)",
            "rows where a tie decided the k-th key": str(ties)}


def steps(trace: SparseTrace, config: FrontierConfig) -> tuple[Step, ...]:
    """Every intermediate as a `Step`, in reading order (see `SparseTrace`)."""
    t = trace
    return (
        Step("index_queries", "Index queries q_I",
             r"q^I = \mathrm{RoPE}_{:r}(\mathrm{RMSNorm}(c_Q)\, W_{Iq})", t.q_index.transpose(0, 1),
             "tokens", "dims", "Each index head's query, from MLA's normed query latent, its "
             "first rope_dim numbers rotated (rotate-half pairs)."),
        Step("index_keys", "Index keys k_I (shared by the index heads)",
             r"k^I = \mathrm{RoPE}_{:r}(\mathrm{LayerNorm}(X W_{Ik}))", t.k_index, "tokens",
             "dims", "One small key per token for every index head."),
        Step("index_head_scores", "ReLU(q_I · k_I) per index head",
             rf"\mathrm{{ReLU}}(q^I_{{t,h}} \cdot k^I_s / \sqrt{{{config.index_dim}}})",
             t.head_scores.transpose(0, 1), "tokens", "keys",
             "Each index head's opinion of key s for query t; negative ones are cut to 0."),
        Step("index_head_weights", "Index head weights w",
             rf"w_{{t,h}} = (X W_w)_{{t,h}} / \sqrt{{{config.index_heads}}}", t.head_weights,
             "tokens", "dims", "How much query t trusts each index head (may be negative)."),
        Step("index_scores", "Index scores I (before the mask)",
             r"I_{t,s} = \sum_h w_{t,h}\, \mathrm{ReLU}(q^I_{t,h} \cdot k^I_s)", t.index,
             "tokens", "keys", "The lightning indexer's score for key s (eq. 1): the head "
             "scores weighted and summed."),
        Step("selected_keys", "Top-k keys each query keeps (1 = kept)",
             rf"S_t = \mathrm{{top}}\text{{-}}{config.top_k}\,\{{I_{{t,s}} : s \le t\}}",
             t.selected.float(), "tokens", "keys",
             "1 where key s is among the top_k causal keys of query t by index score.",
             signed=False),
        Step("attn_scores", "attn_scores (MLA, scaled, before the mask)",
             r"\omega = (q^C {k^C}^\top + q^R {k^R}^\top) / \sqrt{d + r}", t.dense.attn_scores,
             "tokens", "keys", "The same MLA scores as the MLA part."),
        Step("dense_weights", "attn_weights over every causal key (for contrast)",
             r"\mathrm{softmax}(\omega + \log M)", t.dense.attn_weights, "tokens", "keys",
             "Causal MLA without the indexer.", signed=False),
        Step("attn_weights", "attn_weights over the kept keys",
             r"A = \mathrm{softmax}(\omega + \log S)", t.attn_weights, "tokens", "keys",
             "Softmax over the selected keys only (eq. 2): at most top_k non-zero weights a row.",
             signed=False),
        Step("context", "context", r"o = A\, v", t.context, "tokens", "dims",
             "Each head's weighted average of the kept keys' values."),
        Step("output", "Output (o_proj)", r"u = [o_1; \dots; o_{n_h}]\, W_O", t.output,
             "tokens", "dims", "The heads side by side through o_proj."),
    )


SUMMARY = ("DeepSeek-V3.2's sparse attention adds a small **lightning indexer**: a few cheap "
           "heads with ReLU score every earlier key for each query, and each query keeps only "
           "its **top-k** keys. MLA's attention then runs over those keys, so a query's cost "
           "stops growing with the text (the indexer still looks at every key, but with far "
           "fewer and smaller heads).")


def sparse(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """The sparse part: MLA's weights drawn from ``generator`` (the same as the
    MLA part's for the same seed), then the indexer's; every step of
    `sparse_attention` on x (n_tokens, d_in); the check against transformers'
    DeepSeek-V3.2 attention. Raises `ConfigError` for sizes it cannot run
    (`check_sizes`)."""
    check_sizes(config, x.shape[1])
    mla_weights = mla_module.draw_weights(x.shape[1], config, generator)
    trace = sparse_attention(x, config, mla_weights,
                             draw_indexer(x.shape[1], config, generator))
    return Part(KEY, "DeepSeek sparse attention (V3.2)", SUMMARY, SOURCE, steps(trace, config),
                checks=(check_transformers(x, config, trace),), facts=facts(trace, config))
