"""FlashAttention's backward pass, tile by tile: Dao, "FlashAttention-2"
(2023), Algorithm 2 (one head at a time there; here every head at once).

The forward pass (`explorer.modern.attention.online_softmax_attention`, the
same paper's Algorithm 1) keeps only O and, per query row, the running
maximum m and sum ℓ. The backward pass never holds the n × n weights either:

    D_i = rowsum(dO_i ⊙ O_i)                          (one number per query)
    for each key tile j:   dK_j = 0, dV_j = 0
        for each query tile i:
            S = Q_i K_jᵀ / √d (masked to −∞),  P = exp(S − m_i) / ℓ_i   (recomputed)
            dV_j += Pᵀ dO_i,   dP = dO_i V_jᵀ,   dS = P ⊙ (dP − D_i)
            dQ_i += dS K_j / √d,   dK_j += dSᵀ Q_i / √d

D_i stands in for the softmax backward's rowsum(α ⊙ dα)
(`explorer.lessons.backward.gradients.softmax_gradient`):
rowsum(P ⊙ dP) over the whole row equals dO_i · O_i, which needs no tile.
Shapes: (n_heads, n_tokens, head_dim), masks True = may attend (the modern
page's convention). Torch only; the part of issue 38's backward pass that
builds on this folder's forward (`explorer.lessons.backward` holds the rest).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.config import AttentionConfig, ConfigError
from explorer.lessons.backward.gradients import Gradients
from explorer.modern.attention import (
    attention_scores,
    check_tiles,
    masked_tile,
    online_softmax_attention,
    tile_steps,
)


def row_statistics(queries: Tensor, keys: Tensor, values: Tensor, block_q: int, block_k: int,
                   mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The forward pass's output O (h, n, hv) and what it saves for the
    backward pass: each row's maximum m and sum ℓ (h, n), read off the online
    softmax's last key tile of each query tile. Raises `ConfigError` for tiles
    outside 1 … n_tokens or too many steps (`explorer.modern.attention.check_tiles`)."""
    last = -(-queries.shape[1] // block_k) - 1
    forward = online_softmax_attention(queries, keys, values, block_q, block_k, mask,
                                       record=lambda qi, kj: kj == last,
                                       record_output=lambda qi, kj: False)
    m = torch.cat([step.m_new for step in forward.steps], dim=-1)
    l = torch.cat([step.l for step in forward.steps], dim=-1)
    return forward.context, m, l


def output_dot(d_output: Tensor, output: Tensor) -> Tensor:
    """D = rowsum(dO ⊙ O): (h, n, hv) -> (h, n) (FlashAttention-2, Alg. 2, line 4)."""
    return (d_output * output).sum(dim=-1)


def recomputed_weights(scores: Tensor, m: Tensor, l: Tensor) -> Tensor:
    """P = exp(S − m) / ℓ for one tile of scores (h, bq, bk), from the rows'
    saved m and ℓ (h, bq): the attention weights of the tile, recomputed
    instead of stored (Alg. 2, line 11)."""
    return torch.exp(scores - m[..., None]) / l[..., None]


def tile_score_gradient(weights: Tensor, d_weights: Tensor, D: Tensor) -> Tensor:
    """dS = P ⊙ (dP − D): the softmax backward on a tile, with the saved D_i
    in place of the row's rowsum(P ⊙ dP) (Alg. 2, line 14). (h, bq, bk)."""
    return weights * (d_weights - D[..., None])


@dataclass
class BackwardTile:
    """One (key tile, query tile) step: the query ``rows`` and key ``cols``
    read, and, when recorded, the tile's recomputed weights ``P``, ``dP`` and
    ``dS`` (h, len(rows), len(cols))."""

    k_tile: int
    q_tile: int
    rows: range
    cols: range
    P: Tensor | None = None
    dP: Tensor | None = None
    dS: Tensor | None = None


@dataclass
class FlashBackward:
    """The tiled backward pass's result: ``d_queries``, ``d_keys`` (h, n, d),
    ``d_values`` (h, n, hv); the saved ``m``, ``l`` and ``D`` (h, n); the
    output O (h, n, hv); every tile walked, in order (`BackwardTile`); and
    ``tile_bytes``, the largest (h, bq, bk) float32 matrix held at once, every
    head's together (`tile_bytes_per_head`: one head's), beside
    ``full_scores_bytes`` of the n × n weights never allocated."""

    d_queries: Tensor
    d_keys: Tensor
    d_values: Tensor
    output: Tensor
    m: Tensor
    l: Tensor
    D: Tensor
    tiles: list[BackwardTile]
    tile_bytes: int
    full_scores_bytes: int

    @property
    def n_heads(self) -> int:
        """The heads walked together (the leading axis of dQ)."""
        return self.d_queries.shape[0]

    @property
    def tile_bytes_per_head(self) -> int:
        """One head's share of ``tile_bytes``: a bq × bk float32 tile."""
        return self.tile_bytes // self.n_heads


def flash_backward(queries: Tensor, keys: Tensor, values: Tensor, d_output: Tensor,
                   block_q: int, block_k: int, mask: Tensor | None = None,
                   record: Callable[[int, int], bool] = lambda kj, qi: True) -> FlashBackward:
    """dL/dQ, dL/dK and dL/dV of softmax(Q Kᵀ / √d) V for the upstream dL/dO
    ``d_output``, FlashAttention-2's Algorithm 2, from the forward's m and ℓ
    (`row_statistics`) and D (`output_dot`).

    queries, keys (h, n, d); values, d_output (h, n, hv); mask (n, n) bool,
    True = may attend (`explorer.modern.attention.causal_allowed`). Key tiles in the
    outer loop, query tiles inside, as the paper. ``record(k_tile, q_tile)``
    says which tiles keep their P, dP and dS (every tile keeps its rows and
    columns). Raises `ConfigError` for tiles outside 1 … n_tokens or more than
    `explorer.modern.attention.MAX_TILE_STEPS` steps.
    Equal to ``torch.autograd.grad`` through ``F.scaled_dot_product_attention``.
    """
    n_heads, n_tokens, head_dim = queries.shape
    check_tiles(n_tokens, block_q, block_k)
    output, m, l = row_statistics(queries, keys, values, block_q, block_k, mask)
    D = output_dot(d_output, output)
    scale = 1 / math.sqrt(head_dim)  # the scores' ÷√d, in dQ and dK
    d_queries, d_keys, d_values = (torch.zeros_like(t) for t in (queries, keys, values))
    tiles = []
    for kj, kstart in enumerate(range(0, n_tokens, block_k)):
        cols = range(kstart, min(kstart + block_k, n_tokens))
        k, v = keys[:, cols.start:cols.stop], values[:, cols.start:cols.stop]
        d_k, d_v = torch.zeros_like(k), torch.zeros_like(v)  # accumulated over query tiles
        for qi, qstart in enumerate(range(0, n_tokens, block_q)):
            rows = range(qstart, min(qstart + block_q, n_tokens))
            q, d_o = queries[:, rows.start:rows.stop], d_output[:, rows.start:rows.stop]
            S = attention_scores(q, k)  # Q_i K_jᵀ / √d, (h, bq, bk): one tile
            if mask is not None:
                S = S.masked_fill(~mask[rows.start:rows.stop, cols.start:cols.stop],
                                  float("-inf"))
            P = recomputed_weights(S, m[:, rows.start:rows.stop], l[:, rows.start:rows.stop])
            d_v += P.transpose(-2, -1) @ d_o
            dP = d_o @ v.transpose(-2, -1)
            dS = tile_score_gradient(P, dP, D[:, rows.start:rows.stop])
            d_queries[:, rows.start:rows.stop] += dS @ k * scale
            d_k += dS.transpose(-2, -1) @ q * scale
            kept = record(kj, qi)
            tiles.append(BackwardTile(kj, qi, rows, cols, *((P, dP, dS) if kept else ())))
        d_keys[:, cols.start:cols.stop], d_values[:, cols.start:cols.stop] = d_k, d_v
    return FlashBackward(d_queries, d_keys, d_values, output, m, l, D, tiles,
                         tile_bytes=4 * n_heads * block_q * block_k,
                         full_scores_bytes=4 * n_heads * n_tokens * n_tokens)


def backward_tile_steps(n_tokens: int, block_q: int, block_k: int) -> int:
    """How many (key tile, query tile) steps `flash_backward` walks, as many as the forward's."""
    return tile_steps(n_tokens, block_q, block_k)


def not_shown(config: AttentionConfig) -> tuple[str, str] | None:
    """Why FlashAttention's backward pass is not shown for ``config``, as (the
    setting, the sentence), or None when it is: FlashAttention computes
    softmax(Q Kᵀ / √d_k) V, so scaling off, a normalisation other than the
    softmax, or dropout (FlashAttention regenerates its own dropout mask) is
    another computation. A setting, not a fault: the page says it as a note."""
    c = config
    if c.scale and c.normalization != "sum" and c.dropout == 0:
        return None
    setting = ("scale" if not c.scale else "normalization" if c.normalization == "sum"
               else "dropout")
    return setting, ("FlashAttention's backward pass is shown for softmax(Q Kᵀ / √d_k) V: it "
                     f"needs scale on, a softmax and no dropout (got scale={c.scale}, "
                     f"normalization={c.normalization!r}, dropout={c.dropout:g})")


def masked_tiles(result: FlashBackward) -> list[int]:
    """The steps (0-based, in the order walked) of ``result`` whose tile lies
    wholly above the diagonal (`explorer.modern.attention.masked_tile`): with
    the causal mask their P and dS are 0 and they add nothing; this walk
    goes through every tile, causal FlashAttention skips these."""
    return [i for i, tile in enumerate(result.tiles) if masked_tile(tile.rows, tile.cols)]


def flash_backward_of(gradients: Gradients, block_q: int, block_k: int,
                      record: Callable[[int, int], bool] = lambda kj, qi: True) -> FlashBackward:
    """`flash_backward` on a trace's own heads: its queries, keys and values
    (h, n, ·) and the backward pass's dL/dZ split into heads, the causal mask
    when the config has it. Its d_queries, d_keys and d_values equal the
    hand-derived ``gradients["queries"]``, ``["keys"]`` and ``["values"]``
    (with a head axis). Raises `ConfigError` where FlashAttention computes
    something else than the config: scaling off, a normalisation other than the
    softmax, or dropout (FlashAttention regenerates its own dropout mask)."""
    c = gradients.trace.config
    reason = not_shown(c)
    if reason is not None:
        raise ConfigError(*reason)
    trace = gradients.trace
    q, k, v = (trace[name] if trace[name].dim() == 3 else trace[name][None]
               for name in ("queries", "keys", "values"))
    d_output = att.split_heads(gradients["context"], c.n_heads)
    mask = ~trace["causal_mask"] if c.causal else None  # True = may attend
    return flash_backward(q, k, v, d_output, block_q, block_k, mask, record)
