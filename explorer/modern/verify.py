"""Each part of the Modern attention page checked against an independent
reference: transformers' Llama code, ``torch.nn.functional.scaled_dot_product_attention``
and full causal attention; and a tiny random Llama layer reproduced by the
explorer's steps.

torch and transformers only (no UI). Only the Modern attention page and the
tests import this module, so the other pages never load transformers' Llama.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from explorer.core import recipes
from explorer.core.agreement import Agreement, max_abs_diff, of_all
from explorer.modern import attention as modern
from explorer.modern.attention import ModernTrace

TOLERANCE = 1e-4
"""Largest difference still shown as agreement (float32 rounding), as on the
multi-head page."""
DECODE_TOLERANCE = 1e-6
"""The bound a decoded row keeps from full causal attention's row. The two are
often not bit-equal (``torch.equal``): one query's (1, d) @ (d, t) product and
its softmax over t keys add in another order than the whole (n, n) matrix's;
measured on 600 random cases: at most 2.4e-7."""


def part_check(part: str, compared: str, reference: str, max_abs_diff: float,
               exact: bool = False, tolerance: float = TOLERANCE) -> Agreement:
    """One part's check as an `Agreement`: what was compared (``compared``),
    with which reference, and the largest absolute difference (``exact``:
    compared with ``torch.equal`` and equal); agreement below ``tolerance``."""
    return Agreement(part, compared, reference, max_abs_diff, tolerance, exact=exact)


def deinterleave(head_dim: int) -> Tensor:
    """The permutation that puts the interleaved pairs (2i, 2i + 1) at (i, i +
    head_dim/2): even dimensions first, then odd ones. Interleaved RoPE is
    rotate-half RoPE on dimensions in this order."""
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


def transformers_rope(queries: Tensor, keys: Tensor, base: float, offset: int,
                      pairing: str) -> tuple[Tensor, Tensor]:
    """Q and K rotated by transformers' Llama code: ``LlamaRotaryEmbedding``'s
    cos and sin for positions offset … offset + n − 1, then
    ``apply_rotary_pos_emb``. An interleaved pairing is read through
    `deinterleave` (and put back), so the reference stays transformers' own
    rotate-half. queries (n_heads, n, head_dim), keys (n_kv_heads, n, head_dim)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    head_dim, n = queries.shape[-1], queries.shape[-2]
    config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": base},
                         max_position_embeddings=offset + n)
    rotary = LlamaRotaryEmbedding(config)
    positions = torch.arange(offset, offset + n)[None, :]
    cos, sin = rotary(queries, positions)  # (1, n, head_dim)
    order = deinterleave(head_dim) if pairing == modern.INTERLEAVED else torch.arange(head_dim)
    back = torch.argsort(order)
    q, _ = apply_rotary_pos_emb(queries[None, ..., order], queries[None, ..., order], cos, sin)
    k, _ = apply_rotary_pos_emb(keys[None, ..., order], keys[None, ..., order], cos, sin)
    return q[0][..., back], k[0][..., back]


def check_rope(trace: ModernTrace) -> Agreement:
    """RoPE against transformers' ``apply_rotary_pos_emb`` with ``LlamaRotaryEmbedding``."""
    c = trace.config
    q, k = transformers_rope(trace.queries, trace.keys, c.rope_base, c.rope_offset,
                             c.rope_pairing)
    return part_check("RoPE", "rotated Q and K",
                      "transformers' apply_rotary_pos_emb with LlamaRotaryEmbedding",
                      max(max_abs_diff(q, trace.queries_rope), max_abs_diff(k, trace.keys_rope)))


SDPA_CAUSAL = "F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)"


def _sdpa(trace: ModernTrace, mask: Tensor | None = None) -> Tensor:
    """SDPA of the rotated Q and K and of V (K/V heads grouped by ``enable_gqa``),
    causal unless a boolean ``mask`` is given."""
    return F.scaled_dot_product_attention(trace.queries_rope, trace.keys_rope, trace.values,
                                          attn_mask=mask, is_causal=mask is None, enable_gqa=True)


def check_gqa(trace: ModernTrace) -> Agreement:
    """Causal grouped-query attention against SDPA with ``enable_gqa=True``."""
    return part_check("Grouped-query attention", "context", SDPA_CAUSAL,
                      max_abs_diff(_sdpa(trace), trace.causal.context))


def check_window(trace: ModernTrace) -> Agreement:
    """The sliding window against SDPA with the same boolean ``attn_mask``."""
    return part_check("Sliding window", "context",
                      "F.scaled_dot_product_attention(q, k, v, attn_mask=window_mask, "
                      "enable_gqa=True)", max_abs_diff(_sdpa(trace, trace.window_mask),
                                                       trace.windowed.context))


def check_decoding(trace: ModernTrace) -> Agreement:
    """Every decoded row against the row of full causal attention: bit-equal
    (``torch.equal``) or within `DECODE_TOLERANCE`."""
    assembled = modern.decoded_weights(trace.decoding, trace.n_tokens)
    exact = torch.equal(assembled, trace.causal.attn_weights)
    return part_check("KV cache", "decoded attention weights, row by row",
                      "the rows of full causal attention",
                      max_abs_diff(assembled, trace.causal.attn_weights), exact=exact,
                      tolerance=DECODE_TOLERANCE)


def check_flash(trace: ModernTrace) -> Agreement:
    """The online softmax's O against SDPA (causal, grouped-query)."""
    return part_check("Online softmax", "final O", SDPA_CAUSAL,
                      max_abs_diff(_sdpa(trace), trace.flash.context))


def checks(trace: ModernTrace) -> dict[str, Agreement]:
    """Every part's check, by part name."""
    found = [check_rope(trace), check_gqa(trace), check_window(trace), check_decoding(trace),
             check_flash(trace)]
    return {c.name: c for c in found}


# ---------------------------------------------------------------------------
# A Llama-style layer
# ---------------------------------------------------------------------------
def tiny_llama(hidden_size: int, n_heads: int, n_kv_heads: int, head_dim: int, base: float,
               seed: int, n_layers: int = 2):
    """A randomly initialised ``LlamaModel`` (no download): eager attention,
    grouped-query heads, RoPE with ``base``; weights drawn after
    ``torch.random.fork_rng`` seeded with ``seed`` (transformers' init reads the
    global generator; the fork leaves it as it was)."""
    from transformers import LlamaConfig, LlamaModel
    config = LlamaConfig(hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=n_layers, num_attention_heads=n_heads,
                         num_key_value_heads=n_kv_heads, head_dim=head_dim, vocab_size=64,
                         max_position_embeddings=2048,
                         rope_parameters={"rope_type": "default", "rope_theta": base},
                         attn_implementation="eager")
    with recipes.global_rng(seed):  # transformers draws its init from the global RNG
        model = LlamaModel(config).eval()
    return model


def llama_layer_check(model, embeddings: Tensor) -> Agreement:
    """Run ``model`` on ``embeddings`` (n, hidden) as ``inputs_embeds`` with
    ``output_attentions=True``, catch what its layer-0 attention reads (the
    RMS-normed hidden states), and recompute that attention with the
    explorer's steps: X·W_qᵀ split into heads, `explorer.modern.attention.apply_rope`
    (rotate-half, positions 0 …), `explorer.modern.attention.grouped_query_attention`
    with the causal mask, concatenated heads through o_proj. Two parts, each
    within `TOLERANCE`: every head's (n_heads, n, n) weights against
    ``output_attentions``, and the (n, hidden) output against the attention
    module's."""
    attention = model.layers[0].self_attn
    seen = {}
    hook = attention.register_forward_pre_hook(
        lambda module, args, kwargs: seen.update(x=kwargs.get("hidden_states", args[0] if args
                                                               else None)), with_kwargs=True)
    out = {}
    hook_out = attention.register_forward_hook(lambda module, args, result: out.update(o=result[0]))
    try:
        with torch.no_grad():
            result = model(inputs_embeds=embeddings[None], output_attentions=True)
    finally:
        hook.remove()
        hook_out.remove()
    x = seen["x"][0]  # (n, hidden)
    c = model.config
    n = x.shape[0]
    with torch.no_grad():
        queries = modern.split_heads(x @ attention.q_proj.weight.T, c.num_attention_heads)
        keys = modern.split_heads(x @ attention.k_proj.weight.T, c.num_key_value_heads)
        values = modern.split_heads(x @ attention.v_proj.weight.T, c.num_key_value_heads)
        cos, sin = modern.rope_tables(n, c.head_dim, c.rope_parameters["rope_theta"])
        mine = modern.grouped_query_attention(modern.apply_rope(queries, cos, sin),
                                              modern.apply_rope(keys, cos, sin), values,
                                              modern.causal_allowed(n))
        output = mine.context.transpose(0, 1).reshape(n, -1) @ attention.o_proj.weight.T
    return of_all("A Llama layer", "attention weights and output", "transformers' LlamaModel",
                  [part_check("attention weights", "every head's attention weights",
                              "output_attentions=True", max_abs_diff(result.attentions[0][0],
                                                                     mine.attn_weights)),
                   part_check("output", "attention output", "the attention module's output",
                              max_abs_diff(out["o"][0], output))])
