"""Scaled dot-product attention, one function per step, written out by hand.

This is what learners come to see, so it reads like chapter 3 of "Build a Large
Language Model (From Scratch)" and Vaswani et al. (2017), eq. 1:

    Attention(Q, K, V) = softmax(Q Kᵀ / sqrt(d_k)) V

Every function works on a single sequence. Leading axes are allowed
everywhere (a head axis ``(n_heads, n, ...)``, a batch axis before it): the
matrix products broadcast over them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def project(x: Tensor, weight: Tensor) -> Tensor:
    """Queries, keys or values: ``X @ W``.

    x: (n_tokens, d_in); weight: (d_in, d_out) -> (n_tokens, d_out).
    """
    return x @ weight  # (n, d_in) @ (d_in, d_out) -> (n, d_out)


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """Cut the columns into ``n_heads`` equal slices, one per head.

    x: (..., n_tokens, d) -> (..., n_heads, n_tokens, d // n_heads). Head h holds
    columns ``h*head_dim : (h+1)*head_dim``, as ``.view(b, n, n_heads, head_dim)
    .transpose(1, 2)`` in the book's ``MultiHeadAttention`` (any leading axes,
    such as its batch axis b, are kept).
    """
    *lead, n_tokens, d = x.shape
    return x.view(*lead, n_tokens, n_heads, d // n_heads).transpose(-3, -2)


def combine_heads(x: Tensor) -> Tensor:
    """Concatenate the heads side by side:
    (..., n_heads, n_tokens, hd) -> (..., n_tokens, n_heads*hd)."""
    *lead, n_heads, n_tokens, head_dim = x.shape
    return x.transpose(-3, -2).reshape(*lead, n_tokens, n_heads * head_dim)


def attention_scores(queries: Tensor, keys: Tensor) -> Tensor:
    """Unnormalised attention scores, omega = Q Kᵀ.

    queries: (..., n_tokens, d_k); keys: (..., n_tokens, d_k) -> (..., n_tokens, n_tokens).
    Row i holds query i's dot product with every key (query = row, key = column).
    """
    return queries @ keys.transpose(-2, -1)  # (n, d_k) @ (d_k, n) -> (n, n)


def scale_scores(scores: Tensor, head_dim: int, scale: bool = True) -> Tensor:
    """Divide the scores by sqrt(head_dim) (``scale=False`` returns them unchanged).

    Keeps the variance of q·k near 1 whatever the width, so that the softmax
    does not saturate. scores: (..., n, n) -> (..., n, n).
    """
    return scores / math.sqrt(head_dim) if scale else scores.clone()


def causal_mask(n_tokens: int) -> Tensor:
    """The causal mask: True where key j lies in query i's future (j > i).

    Shape (n_tokens, n_tokens), bool; True strictly above the diagonal.
    """
    return torch.triu(torch.ones(n_tokens, n_tokens, dtype=torch.bool), diagonal=1)


def apply_mask(scores: Tensor, mask: Tensor) -> Tensor:
    """Set masked scores to -inf, so that softmax gives them weight 0.

    scores: (..., n, n); mask: (n, n) bool -> (..., n, n).
    """
    return scores.masked_fill(mask, float("-inf"))


def softmax(scores: Tensor) -> Tensor:
    """Row-wise softmax, made numerically stable by subtracting each row's max.

    softmax(x)_j = exp(x_j - m) / Σ_k exp(x_k - m), with m = max_k x_k; the shift
    cancels in the ratio but keeps exp() from overflowing.
    scores: (..., n, n) -> weights (..., n, n), each row summing to 1.
    """
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=-1, keepdim=True)


def naive_softmax(scores: Tensor) -> Tensor:
    """``exp(x) / exp(x).sum(dim=-1, keepdim=True)``, with no max shift.

    exp overflows float32 to inf once a score passes about 88.7, and inf/inf is
    NaN. That is kept, not hidden: it is why `softmax` subtracts the row max.
    scores: (..., n, n) -> (..., n, n).
    """
    exps = scores.exp()
    return exps / exps.sum(dim=-1, keepdim=True)


def sum_normalize(scores: Tensor) -> Tensor:
    """Divide each row by its sum, as ``001_c475e8729ba8e095.txt`` cell 14 does.

    Masked (-inf) scores count as 0. Rows sum to 1, but negative scores give
    negative "weights", and a row whose scores sum to 0 divides by zero (±inf,
    or NaN for 0/0): reasons attention uses softmax instead.
    scores: (..., n, n) -> (..., n, n).
    """
    scores = scores.masked_fill(scores == float("-inf"), 0.0)
    return scores / scores.sum(dim=-1, keepdim=True)


NORMALIZERS = {"softmax": softmax, "naive_softmax": naive_softmax, "sum": sum_normalize}
"""Attention normalisations by `AttentionConfig.normalization` name."""


def apply_dropout(weights: Tensor, keep_mask: Tensor, p: float) -> Tensor:
    """Inverted dropout: zero the dropped weights and scale the kept ones by 1/(1-p).

    weights, keep_mask: (..., n, n) -> (..., n, n). Same as ``nn.Dropout(p)`` in
    training mode given the same mask (see `explorer.core.recipes.dropout_mask`).
    """
    return weights * (keep_mask / (1.0 - p))


def context_vectors(weights: Tensor, values: Tensor) -> Tensor:
    """Context vectors: each row is the weighted sum of the value vectors, Z = A V.

    weights: (..., n, n); values: (..., n, d_v) -> (..., n, d_v).
    """
    return weights @ values  # (n, n) @ (n, d_v) -> (n, d_v)


def output_projection(context: Tensor, w_out: Tensor, b_out: Tensor) -> Tensor:
    """The output projection ``out_proj``: context @ W_out + b_out.

    context: (n, d_v); w_out: (d_v, d_v) (``nn.Linear.weight`` transposed);
    b_out: (d_v,) -> (n, d_v).
    """
    return context @ w_out + b_out


def mask_after_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """The textbook's second route to causal weights (book §3.5.1): softmax over
    all keys first, then zero the future and renormalise each row.

    Equal to softmax of the -inf-masked scores, because the masked terms simply
    drop out of the softmax's denominator. scores: (..., n, n); mask: (n, n) -> (..., n, n).
    """
    weights = softmax(scores).masked_fill(mask, 0.0)
    return weights / weights.sum(dim=-1, keepdim=True)
