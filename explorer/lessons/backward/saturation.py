"""Why √d_k, from the gradient's side: as the scores grow, the softmax
saturates (one weight near 1, the rest near 0) and its Jacobian
diag(α) − α αᵀ goes to 0, so almost no gradient reaches the scores, the
queries and the keys: they stop learning.

Beside the Experiments page's variance argument (`explorer.lessons.experiments.scaling_curves`:
Var(q·k) = d_k), with the same draws: Vaswani et al. (2017), §3.2.1 ("we
suspect that for large values of d_k, the dot products grow large in
magnitude, pushing the softmax function into regions where it has extremely
small gradients"). float64, one seeded local generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.steps import SATURATED
from explorer.core.trace import Trace
from explorer.lessons.backward.gradients import softmax_gradient
from explorer.lessons.experiments import SCALING_DIMS, SCALING_SAMPLES

SPREADS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
"""The scores' standard deviations of `saturation_curve`."""


def jacobian_norm(weights: Tensor) -> Tensor:
    """‖diag(α) − α αᵀ‖_F of each row's softmax Jacobian, without forming it:
    Σ_j α_j² − 2 Σ_j α_j³ + (Σ_j α_j²)², square-rooted. (..., n) -> (...).

    About √(1/n) for a uniform row of n keys (large n), 0 for a one-hot row.
    """
    squares = (weights ** 2).sum(dim=-1)
    return (squares - 2 * (weights ** 3).sum(dim=-1) + squares ** 2).clamp_min(0).sqrt()


def score_gradient_norm(weights: Tensor, d_weights: Tensor) -> Tensor:
    """‖dL/dω̃_i‖ of each row, at the softmax's input, for the upstream
    gradient dL/dα: the softmax's backward
    (`explorer.lessons.backward.gradients.softmax_gradient`). (..., n) -> (...)."""
    return softmax_gradient(weights, d_weights).norm(dim=-1)


@dataclass(frozen=True)
class GradientScaling:
    """Per d_k in ``dims``, without and with ÷√d_k, means over the rows: the
    softmax Jacobian's size ``jacobian`` / ``jacobian_scaled`` (‖diag(α) −
    α αᵀ‖_F, `jacobian_norm`), the gradient at the softmax's input
    ``gradient`` / ``gradient_scaled`` (‖J·dL/dα‖ for an upstream dL/dα of
    N(0, 1) entries), the largest weight ``max_weight`` / ``max_weight_scaled``,
    and the share of rows saturated, their largest weight at least
    `explorer.core.steps.SATURATED` (``saturated`` / ``saturated_scaled``).

    The scaling's own ÷√d_k, which multiplies dL/dω̃ on its way to ω, is left
    out: it is one constant for every row, which the learning rate absorbs;
    the saturation is not."""

    dims: tuple[int, ...]
    jacobian: tuple[float, ...]
    jacobian_scaled: tuple[float, ...]
    gradient: tuple[float, ...]
    gradient_scaled: tuple[float, ...]
    max_weight: tuple[float, ...]
    max_weight_scaled: tuple[float, ...]
    saturated: tuple[float, ...]
    saturated_scaled: tuple[float, ...]
    n_keys: int


def gradient_scaling_curves(seed: int = 0, n_keys: int = 16, n_queries: int | None = None,
                            dims: tuple[int, ...] = SCALING_DIMS) -> GradientScaling:
    """The softmax's gradient over d_k, without and with ÷√d_k.

    For each d_k: ``n_queries`` rows of ``n_keys`` query–key pairs with N(0, 1)
    entries (as `explorer.lessons.experiments.scaling_curves` draws them), their
    scores q·k (variance d_k), and an upstream gradient dL/dα of N(0, 1)
    entries, from one generator seeded with ``seed``. Unscaled, the rows
    saturate as d_k grows and the gradient vanishes; scaled, it does not.
    ``n_queries`` defaults to enough rows for `SCALING_SAMPLES` pairs.
    """
    n_queries = n_queries or -(-SCALING_SAMPLES // n_keys)
    rng = torch.Generator().manual_seed(seed)
    keys = ("j", "js", "g", "gs", "m", "ms", "f", "fs")
    out: dict[str, list[float]] = {k: [] for k in keys}
    for d_k in dims:
        q = torch.randn(n_queries, n_keys, d_k, generator=rng, dtype=torch.float64)
        k = torch.randn(n_queries, n_keys, d_k, generator=rng, dtype=torch.float64)
        d_weights = torch.randn(n_queries, n_keys, generator=rng, dtype=torch.float64)
        scores = (q * k).sum(dim=-1)  # (n_queries, n_keys): q·k per pair
        for suffix, s in (("", scores), ("s", scores / math.sqrt(d_k))):
            weights = att.softmax(s)
            largest = weights.max(dim=-1).values
            out["j" + suffix].append(float(jacobian_norm(weights).mean()))
            out["g" + suffix].append(float(score_gradient_norm(weights, d_weights).mean()))
            out["m" + suffix].append(float(largest.mean()))
            out["f" + suffix].append(float((largest >= SATURATED).double().mean()))
    return GradientScaling(tuple(dims), *(tuple(out[k]) for k in keys), n_keys)


@dataclass(frozen=True)
class Saturation:
    """Per standard deviation of the scores in ``spreads``, means over the
    rows: the largest weight, the Jacobian's size and ‖dL/dω‖ for an upstream
    dL/dα of N(0, 1) entries."""

    spreads: tuple[float, ...]
    max_weight: tuple[float, ...]
    jacobian: tuple[float, ...]
    gradient: tuple[float, ...]
    n_keys: int


def saturation_curve(seed: int = 0, n_keys: int = 16, n_rows: int | None = None,
                     spreads: tuple[float, ...] = SPREADS) -> Saturation:
    """The softmax's gradient as the scores grow: rows of ``n_keys`` scores
    drawn N(0, s²) for each s in ``spreads`` (one draw of N(0, 1) scores and
    upstream gradients, multiplied by s, from a generator seeded with ``seed``).
    The largest weight climbs to 1 while the gradient falls towards 0."""
    n_rows = n_rows or -(-SCALING_SAMPLES // n_keys)
    rng = torch.Generator().manual_seed(seed)
    unit = torch.randn(n_rows, n_keys, generator=rng, dtype=torch.float64)
    d_weights = torch.randn(n_rows, n_keys, generator=rng, dtype=torch.float64)
    rows = [att.softmax(unit * s) for s in spreads]
    return Saturation(tuple(spreads), tuple(float(w.max(dim=-1).values.mean()) for w in rows),
                      tuple(float(jacobian_norm(w).mean()) for w in rows),
                      tuple(float(score_gradient_norm(w, d_weights).mean()) for w in rows),
                      n_keys)


@dataclass(frozen=True)
class GradientPoint:
    """Where the learner's trace sits: its head_dim, and the mean Jacobian size
    of its softmax rows over the raw scores and over the scores ÷ √head_dim
    (every key: no causal mask, as the curves), and ``n_keys``, its keys per
    query (its tokens), which the curves should use to compare like with like
    (as `explorer.lessons.experiments.ConfigPoint`)."""

    d_k: int
    jacobian: float
    jacobian_scaled: float
    n_keys: int


def gradient_point(trace: Trace) -> GradientPoint:
    """The trace's own softmax Jacobian sizes (`jacobian_norm`, averaged over
    its rows and heads), unscaled and scaled, whatever its ``scale`` setting."""
    scores = trace["attn_scores"].to(torch.float64)
    head_dim = trace.config.head_dim
    return GradientPoint(head_dim, float(jacobian_norm(att.softmax(scores)).mean()),
                         float(jacobian_norm(att.softmax(scores / math.sqrt(head_dim))).mean()),
                         trace.n_tokens)
