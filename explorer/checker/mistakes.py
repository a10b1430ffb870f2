"""The classic mistakes of chapter 3, each computed from the learner's own weights.

A learner's attention differs from the book's; which mistake explains it? Each
`Mistake` is the reference pipeline (`explorer.core.trace.attention_steps`) with one
step function of `explorer.core.attention` swapped for its classic wrong version:
softmax over the wrong dim, no scaling, a mask filled with 0 ... `mistaken_steps`
runs it on the same X and weights, and `explorer.checker.check` matches its steps with
the learner's tensors, as it does the reference's. The one that explains the
learner's output names the mistake (`Mistake.diagnosis`).

Dropout left on is the one mistake that cannot be computed ahead (its mask is
random): `dropout_keep_mask` recognises it in the learner's tensors instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.trace import attention_steps


@dataclass(frozen=True)
class Sizes:
    """What the mistakes depend on: ``d_in``, ``d_k`` (all heads), ``head_dim``
    (one head's d_k), ``n_heads``, ``n_tokens``, ``causal``, ``out_proj`` (the
    module has one), ``square`` (some W is (d_in, d_in), so that W.T fits where
    W does); ``dropout`` and ``keep_mask`` (b, n_heads, n, n): the dropout
    compared on (0.0 and None when it is compared off)."""

    d_in: int
    d_k: int
    head_dim: int
    n_heads: int
    n_tokens: int
    causal: bool
    out_proj: bool
    square: bool
    dropout: float = 0.0
    keep_mask: Tensor | None = field(default=None, compare=False)


def _sqrt(value: int) -> str:
    """``√2 = 1.414``."""
    return f"√{value} = {math.sqrt(value):.4g}"


_USE_SQRT_D_K = "use keys.shape[-1] ** 0.5"


@dataclass(frozen=True)
class Mistake:
    """One classic mistake: ``slug`` names it; ``diagnosis(sizes)`` says what
    went wrong and how to fix it; ``swaps(sizes)`` gives the step functions of
    `explorer.core.attention` it replaces (by name); ``applies(sizes)``: whether it
    can happen here (no mask mistakes without a mask); ``skips``: steps the
    mistaken code never computes."""

    slug: str
    diagnosis: Callable[[Sizes], str]
    swaps: Callable[[Sizes], dict[str, Callable]]
    applies: Callable[[Sizes], bool] = lambda sizes: True
    skips: tuple[str, ...] = ()


def _softmax_over(dim: int) -> dict[str, dict]:
    return {"NORMALIZERS": {"softmax": lambda scores: torch.softmax(scores, dim=dim)}}


def _divided_by_root_of(width: Callable[[Sizes], int]) -> Callable[[Sizes], dict]:
    """The swap of a scaling by √width(sizes) for the book's √head_dim."""
    return lambda s: {"scale_scores": lambda scores, head_dim, scale:
                      scores / math.sqrt(width(s))}


def _split_with_view(x: Tensor, n_heads: int) -> Tensor:
    """(..., n, d) -> (..., n_heads, n, d // n_heads) by ``.view`` alone: the
    rows of head 0 are the first n·head_dim numbers of X·W, whatever token they
    belong to."""
    *lead, n_tokens, d = x.shape
    return x.reshape(*lead, n_heads, n_tokens, d // n_heads)


def _transposed_if_square(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ W.T`` where W is square (a non-square W.T would not fit)."""
    return x @ (weight.T if weight.shape[0] == weight.shape[1] else weight)


def _combine_without_transpose(x: Tensor) -> Tensor:
    """(..., n_heads, n, head_dim) -> (..., n, d) by ``.view`` alone: row i of
    the result holds numbers of several tokens of one head."""
    *lead, n_heads, n_tokens, head_dim = x.shape
    return x.reshape(*lead, n_tokens, n_heads * head_dim)


def _dropout_on_scores(sizes: Sizes) -> dict[str, object]:
    """Dropout on the (masked, scaled) scores just before softmax, with the
    keep-mask compared on, and none on the weights."""
    def normalise(scores: Tensor) -> Tensor:
        return att.softmax(att.apply_dropout(scores, sizes.keep_mask, sizes.dropout))
    return {"NORMALIZERS": {"softmax": normalise},
            "apply_dropout": lambda weights, keep_mask, p: weights}


def _mask_after_softmax(n_tokens: int) -> dict[str, object]:
    """No mask before softmax; after it, the future weights set to 0 and the
    rows left as they are (book §3.5.1 without its renormalisation)."""
    future = att.causal_mask(n_tokens)
    return {"apply_mask": lambda scores, mask: scores,
            "NORMALIZERS": {"softmax": lambda scores: att.softmax(scores).masked_fill(future, 0.0)}}


# The order is the precedence: the first mistake that explains the output is named.
MISTAKES: dict[str, Mistake] = {m.slug: m for m in [
    Mistake("no_scaling",
            lambda s: f"the scores are not scaled: divide them by √d_k ({_sqrt(s.head_dim)}, "
                      f"keys.shape[-1] ** 0.5) before softmax",
            lambda s: {"scale_scores": lambda scores, head_dim, scale: scores.clone()}),
    Mistake("scaled_by_d_k",
            lambda s: f"the scores are divided by d_k = {s.head_dim}, not by its square root "
                      f"({_sqrt(s.head_dim)}): {_USE_SQRT_D_K}",
            lambda s: {"scale_scores": lambda scores, head_dim, scale: scores / head_dim}),
    Mistake("scaled_by_d_in",
            lambda s: f"the scores are divided by √d_in ({_sqrt(s.d_in)}, the width of the "
                      f"inputs) instead of √d_k ({_sqrt(s.head_dim)}, the width of the keys): "
                      f"{_USE_SQRT_D_K}",
            _divided_by_root_of(lambda s: s.d_in), applies=lambda s: s.d_in != s.head_dim),
    Mistake("scaled_by_d_out",
            lambda s: f"the scores are divided by √d_out ({_sqrt(s.d_k)}) instead of "
                      f"√head_dim ({_sqrt(s.head_dim)}): each head's keys are head_dim = "
                      f"d_out / num_heads wide; {_USE_SQRT_D_K} after the split",
            _divided_by_root_of(lambda s: s.d_k),
            applies=lambda s: s.n_heads > 1 and s.d_k != s.d_in),
    Mistake("scaled_by_num_heads",
            lambda s: f"the scores are divided by √num_heads ({_sqrt(s.n_heads)}, "
                      f"keys.shape[1] of (b, num_heads, n, head_dim)) instead of √head_dim "
                      f"({_sqrt(s.head_dim)}): {_USE_SQRT_D_K}",
            _divided_by_root_of(lambda s: s.n_heads), applies=lambda s: s.n_heads > 1),
    Mistake("softmax_before_scaling",
            lambda s: f"softmax is taken before the scaling: the weights are divided by √d_k "
                      f"({_sqrt(s.head_dim)}) after softmax, so no row sums to 1; divide the "
                      "scores, then take softmax",
            lambda s: {"scale_scores": lambda scores, head_dim, scale: scores.clone(),
                       "NORMALIZERS": {"softmax": lambda scores: att.softmax(scores)
                                       / math.sqrt(s.head_dim)}},
            applies=lambda s: s.head_dim > 1),
    Mistake("softmax_over_queries",
            lambda s: "softmax over the wrong dim, the queries' axis (dim=0 of an (n, n) "
                      "matrix, dim=-2 in general): your weights' columns sum to 1, not their "
                      "rows; normalise each row over the keys with dim=-1",
            lambda s: _softmax_over(-2)),
    Mistake("softmax_over_heads",
            lambda s: "softmax over the wrong dim (dim=1 of (b, num_heads, n, n), the heads): "
                      "each weight is normalised across the heads, not across the keys; "
                      "use dim=-1",
            lambda s: _softmax_over(-3), applies=lambda s: s.n_heads > 1),
    Mistake("softmax_over_batch",
            lambda s: "softmax over the wrong dim (dim=0 of (b, n, n), the batch): each weight "
                      "is normalised across the sentences of the batch (with one sentence every "
                      "weight is 1); use dim=-1",
            lambda s: _softmax_over(0)),
    Mistake("mask_after_softmax",
            lambda s: "the causal mask is applied after softmax without renormalising: the "
                      "future weights are zeroed but each row now sums to less than 1; mask the "
                      "scores with −∞ before softmax, or divide each row by its sum afterwards "
                      "(book §3.5.1)",
            lambda s: _mask_after_softmax(s.n_tokens),
            applies=lambda s: s.causal, skips=("masked_scores",)),
    Mistake("mask_filled_with_zero",
            lambda s: "masked_fill with 0 instead of −∞: exp(0) = 1, so the future tokens "
                      "still get weight; fill with -torch.inf",
            lambda s: {"apply_mask": lambda scores, mask: scores.masked_fill(mask, 0.0)},
            applies=lambda s: s.causal),
    Mistake("diagonal_masked",
            lambda s: "the causal mask covers the diagonal too (torch.triu(..., diagonal=0)): "
                      "no token may attend to itself, and the first token has no key left (its "
                      "weights are NaN); use diagonal=1",
            lambda s: {"causal_mask": lambda n: torch.triu(
                torch.ones(n, n, dtype=torch.bool), diagonal=0)},
            applies=lambda s: s.causal),
    Mistake("mask_not_applied",
            lambda s: "the causal mask is never applied: every token also attends to the "
                      "tokens after it; masked_fill_ the scores with -torch.inf before softmax",
            lambda s: {"apply_mask": lambda scores, mask: scores},
            applies=lambda s: s.causal),
    Mistake("mask_reversed",
            lambda s: "the mask hides the past instead of the future (torch.tril where the "
                      "book has torch.triu(..., diagonal=1), or a mask of what may be seen "
                      "filled where it is True): each token attends to itself and the tokens "
                      "after it; mask the cells above the diagonal",
            lambda s: {"causal_mask": lambda n: torch.tril(
                torch.ones(n, n, dtype=torch.bool), diagonal=-1)},
            applies=lambda s: s.causal),
    Mistake("mask_added",
            lambda s: "the 0/1 mask is added to the scores instead of filling them with −∞: "
                      "the future tokens get a score 1 higher, not a weight of 0; use "
                      "attn_scores.masked_fill(mask.bool(), -torch.inf)",
            lambda s: {"apply_mask": lambda scores, mask: scores + mask.to(scores.dtype)},
            applies=lambda s: s.causal),
    Mistake("split_with_view",
            lambda s: "the heads are split with .view(b, num_heads, num_tokens, head_dim), which "
                      "mixes tokens and heads; use .view(b, num_tokens, num_heads, head_dim) "
                      "followed by .transpose(1, 2)",
            lambda s: {"split_heads": _split_with_view}, applies=lambda s: s.n_heads > 1),
    Mistake("no_transpose_back",
            lambda s: "the heads are combined without the transpose back: .view(b, num_tokens, "
                      "d_out) straight after attn_weights @ values, shape (b, num_heads, "
                      "num_tokens, head_dim), mixes tokens and heads; use (attn_weights @ "
                      "values).transpose(1, 2).contiguous().view(b, num_tokens, d_out)",
            lambda s: {"combine_heads": _combine_without_transpose},
            applies=lambda s: s.n_heads > 1),
    Mistake("dropout_on_scores",
            lambda s: "dropout is applied to the attention scores, before softmax: a dropped "
                      "score becomes 0, not a zero weight, and each row still sums to 1; apply "
                      "self.dropout to the attention weights, after softmax",
            _dropout_on_scores, applies=lambda s: s.dropout > 0 and s.keep_mask is not None),
    Mistake("weights_transposed",
            lambda s: "W applied transposed: x @ W.T where the book computes x @ W with W of "
                      "shape (d_in, d_out); an nn.Linear keeps its weight as (d_out, d_in), so "
                      "call the layer, self.W_query(x), rather than using .weight",
            lambda s: {"project": _transposed_if_square}, applies=lambda s: s.square),
    Mistake("out_proj_not_applied",
            lambda s: "out_proj is defined but never applied: forward returns the concatenated "
                      "context vectors; end with context_vec = self.out_proj(context_vec)",
            lambda s: {"output_projection": lambda context, w_out, b_out: context},
            applies=lambda s: s.out_proj),
]}
"""Every classic mistake that can be computed ahead, by slug, in order of precedence."""


def pipeline_steps(x: Tensor, weights: dict, *, ops=att, mask_first: bool = False,
                   **pipeline) -> dict[str, Tensor]:
    """`explorer.core.trace.attention_steps` with the step functions of ``ops``,
    in either order of mask and scale.

    ``mask_first=False``: scale, then mask (Vaswani et al.'s eq. 1 as nanoGPT
    writes it): ``scaled_scores`` = scores / √head_dim, ``masked_scores`` =
    those masked. ``mask_first=True`` (the book's order, Listings 3.3-3.5:
    ``masked_fill_`` on the scores, then ``softmax(attn_scores / √d_k)``):
    ``masked_scores`` = the scores masked, unscaled, and ``scaled_scores`` =
    those scaled; every later step follows from them, so a mask that is not −∞
    (a 0/1 mask added) gives that order's numbers. Without a causal mask the
    two orders are one."""
    if not (mask_first and pipeline.get("causal")):
        return attention_steps(x, weights, ops=ops, **pipeline)
    n, base = x.shape[-2], ops
    ops = SimpleNamespace(**{**(vars(base) if not isinstance(base, SimpleNamespace)
                                else base.__dict__)})
    ops.scale_scores = lambda scores, head_dim, scale=True: base.scale_scores(
        base.apply_mask(scores, base.causal_mask(n)), head_dim, scale)
    ops.apply_mask = lambda scores, mask: scores
    steps = attention_steps(x, weights, ops=ops, **pipeline)
    steps["masked_scores"] = base.apply_mask(steps["attn_scores"], base.causal_mask(n))
    return steps


def mistaken_steps(mistake: Mistake, sizes: Sizes, x: Tensor, weights: dict, *,
                   mask_first: bool = False, **pipeline) -> dict[str, Tensor]:
    """`pipeline_steps` on X (..., n, d_in) and ``weights`` with ``mistake``'s
    step functions swapped in, in the order of mask and scale ``mask_first``
    says; ``pipeline``: its other arguments (n_heads, causal, ...). The steps
    the mistaken code never computes (``mistake.skips``) are left out."""
    ops = SimpleNamespace(**{**vars(att), **mistake.swaps(sizes)})
    steps = pipeline_steps(x, weights, ops=ops, mask_first=mask_first, **pipeline)
    return {name: t for name, t in steps.items() if name not in mistake.skips}


DROPOUT_ACTIVE = "dropout_active"
"""The slug of dropout left on (recognised by `dropout_keep_mask`)."""


def dropout_diagnosis(p: float, dropped: int, total: int, training: bool,
                      seed_advice: str = "dropout_seed=…") -> str:
    """What to say when the learner's weights went through dropout of rate ``p``;
    ``seed_advice``: how to pass a dropout seed where the check runs
    (``--dropout_seed 1`` on the command line)."""
    kept_scale = f"1/(1 − p) = {1 / (1 - p):.4g}"
    what = (f"dropout is still active: the module is in train() mode with dropout p = {p:.4g}"
            if training else f"dropout is applied even in eval() mode (p = {p:.4g}; "
                             "F.dropout's training defaults to True)")
    fix = (f"call .eval() before checking, build it with dropout=0.0, or pass {seed_advice} to "
           "compare with dropout on" if training else
           "use self.dropout = nn.Dropout(p), which follows train() and eval()")
    return (f"{what}, so {dropped} of the {total} attention weights were zeroed and the rest "
            f"scaled by {kept_scale}; dropout masks are random and differ between machines: "
            f"{fix}")


def dropout_keep_mask(weights: Tensor, dropped: Tensor, atol: float = 1e-5
                      ) -> tuple[Tensor, float] | None:
    """Whether ``dropped`` is ``weights`` after inverted dropout, whatever its mask.

    weights, dropped: the same shape (…, n, n). Dropout zeroes some weights and
    scales the rest by 1/(1 − p); so every entry of ``dropped`` is 0 or
    ``weights`` times one common factor s > 1 (or some were zeroed). Returns
    (keep-mask of 0s and 1s, p = 1 − 1/s), or None when ``dropped`` is no
    dropout of ``weights``.
    """
    if dropped.shape != weights.shape:
        return None
    first_rows = dropped[..., :2, :]  # a quick no: dropped weights are finite and >= 0
    if not bool(torch.isfinite(first_rows).all()) or bool((first_rows < 0).any()):
        return None
    if not bool(torch.isfinite(weights).all()) or bool(((dropped != 0) & (weights == 0)).any()):
        return None
    kept = (dropped.abs() > atol) & (weights.abs() > atol)
    if not kept.any():
        return None
    scale = float((dropped[kept] / weights[kept]).median())
    keep = (dropped.abs() > atol) | (weights.abs() <= atol)
    zeroed = bool(((~keep) & (weights.abs() > atol)).any())
    unchanged = not zeroed and abs(scale - 1) <= 1e-4
    if scale < 1 - 1e-4 or unchanged:  # dropout only scales up; or no dropout at all
        return None
    explained = torch.where(keep.bool(), weights * scale, torch.zeros_like(weights))
    if not torch.allclose(explained, dropped, rtol=1e-4, atol=atol):
        return None
    return keep.to(torch.float32), 1 - 1 / scale
