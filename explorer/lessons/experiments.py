"""The numbers behind the Experiments page: why scale by √d_k, temperature,
softmax's dim and the keepdim trap, permutation symmetry, and comparing two
configurations. Pure torch; every random draw comes from a seeded local
generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.trace import Trace

SCALING_DIMS = tuple(2**i for i in range(11))  # 1 .. 1024
"""The d_k values of the √d_k experiment."""


def row_entropy(weights: Tensor) -> Tensor:
    """Shannon entropy of each row of attention weights, in nats: (..., n) -> (...).

    0 for a one-hot row, log(n) for a uniform row. 0·log 0 counts as 0."""
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(dim=-1)


@dataclass(frozen=True)
class ScalingCurves:
    """Per d_k in ``dims``: the variance of q·k, and the softmax rows' mean
    entropy (nats) and mean largest weight, with and without ÷√d_k."""

    dims: tuple[int, ...]
    variance: tuple[float, ...]
    variance_scaled: tuple[float, ...]
    entropy: tuple[float, ...]
    entropy_scaled: tuple[float, ...]
    max_weight: tuple[float, ...]
    max_weight_scaled: tuple[float, ...]
    n_keys: int


SCALING_SAMPLES = 4096
"""Query–key pairs per d_k in the √d_k experiment, at least."""


def scaling_curves(seed: int = 0, n_keys: int = 16, n_queries: int | None = None,
                   dims: tuple[int, ...] = SCALING_DIMS) -> ScalingCurves:
    """Why attention divides by √d_k (Vaswani et al. 2017, §3.2.1, footnote 4).

    For each d_k, draws ``n_queries`` rows of ``n_keys`` independent query–key
    pairs with N(0, 1) entries (one seeded generator, float32): a fresh key for
    every pair, so the ``n_queries · n_keys`` scores are independent samples
    and their variance estimates Var(q·k) = d_k to a few percent (4,096 samples
    by default) even at d_k = 1. Each row's softmax over its ``n_keys`` scores
    saturates towards one-hot as d_k grows; over the scores ÷ √d_k it does not.
    ``n_queries`` defaults to enough rows for `SCALING_SAMPLES` pairs.
    """
    n_queries = n_queries or -(-SCALING_SAMPLES // n_keys)
    rng = torch.Generator().manual_seed(seed)
    out: dict[str, list[float]] = {k: [] for k in ("v", "vs", "e", "es", "m", "ms")}
    for d_k in dims:
        q = torch.randn(n_queries, n_keys, d_k, generator=rng)
        k = torch.randn(n_queries, n_keys, d_k, generator=rng)
        scores = (q * k).sum(dim=-1).to(torch.float64)  # (n_queries, n_keys): q·k per pair
        scaled = scores / math.sqrt(d_k)
        for suffix, s in (("", scores), ("s", scaled)):
            weights = att.softmax(s)
            out["v" + suffix].append(float(s.var()))
            out["e" + suffix].append(float(row_entropy(weights).mean()))
            out["m" + suffix].append(float(weights.max(dim=-1).values.mean()))
    return ScalingCurves(tuple(dims), tuple(out["v"]), tuple(out["vs"]), tuple(out["e"]),
                         tuple(out["es"]), tuple(out["m"]), tuple(out["ms"]), n_keys)


@dataclass(frozen=True)
class ConfigPoint:
    """Where the learner's own trace sits on the scaling curves."""

    d_k: int
    variance: float
    variance_scaled: float
    entropy: float
    entropy_scaled: float
    max_weight: float
    max_weight_scaled: float
    n_keys: int
    """Keys per query of the sentence (its tokens): the stars' own, whatever
    the curves' ``n_keys``."""


def config_point(trace: Trace) -> ConfigPoint:
    """The current trace's score variance and softmax statistics (per head,
    averaged), unscaled and scaled, whatever its own ``scale`` setting, over
    all of its ``n_tokens`` keys (no causal mask)."""
    scores = trace["attn_scores"].to(torch.float64)
    head_dim = trace.config.head_dim
    raw, scaled = att.softmax(scores), att.softmax(scores / math.sqrt(head_dim))
    variance = float(scores.var()) if scores.numel() > 1 else 0.0
    return ConfigPoint(
        head_dim, variance, variance / head_dim,  # Var(q·k / √d_k) = Var(q·k) / d_k
        float(row_entropy(raw).mean()), float(row_entropy(scaled).mean()),
        float(raw.max(dim=-1).values.mean()), float(scaled.max(dim=-1).values.mean()),
        trace.n_tokens)


def with_temperature(scores: Tensor, temperature: float) -> Tensor:
    """softmax(scores / T) row-wise: T < 1 sharpens, T > 1 flattens.
    Raises ``ValueError`` unless T > 0."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (got {temperature})")
    return att.softmax(scores / temperature)


def softmax_naive_no_keepdim(x: Tensor, dim: int) -> Tensor:
    """Seed 001's ``softmax_naive``: ``exp(x) / exp(x).sum(dim=dim)`` *without*
    ``keepdim=True``.

    The sum has shape (n,) and broadcasts along the last axis, so element
    (i, j) is divided by sums[j] for either dim: column j is divided by one
    number. With dim=0 the columns sum to 1; with dim=1 nothing sums to 1 unless
    x is symmetric, where row sums equal column sums and both calls agree.
    x: (n, n) -> (n, n).
    """
    exps = x.exp()
    return exps / exps.sum(dim=dim)


@dataclass(frozen=True)
class KeepdimTrap:
    """The naive softmax over dim 0 and dim 1 (no keepdim), the correct row
    softmax, and their row and column sums."""

    naive_dim0: Tensor
    naive_dim1: Tensor
    correct: Tensor
    symmetric: bool

    @property
    def dims_agree(self) -> bool:
        return bool(torch.allclose(self.naive_dim0, self.naive_dim1, atol=1e-6))

    @property
    def difference(self) -> Tensor:
        """naive(dim=0) − correct row softmax."""
        return self.naive_dim0 - self.correct


def keepdim_trap(scores: Tensor) -> KeepdimTrap:
    """Seed 001's question on ``scores`` (n, n): why did dim=0 and dim=1 agree?"""
    scores = scores.to(torch.float64)
    return KeepdimTrap(softmax_naive_no_keepdim(scores, 0), softmax_naive_no_keepdim(scores, 1),
                       att.softmax(scores), bool(torch.allclose(scores, scores.T, atol=1e-9)))


def sinusoidal_positions(n_tokens: int, d_model: int) -> Tensor:
    """Sinusoidal positional encodings (Vaswani et al. 2017, §3.5):
    PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).
    Shape (n_tokens, d_model)."""
    pos = torch.arange(n_tokens, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / 10000 ** (two_i / d_model)  # (n, ceil(d/2))
    pe = torch.zeros(n_tokens, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(torch.float32)


MAX_SHUFFLES = 1_000_000
"""The most shuffles the permutation experiment counts (its ``shuffles``
entry, the seed of its shuffle); the next click starts again at 1. Far inside
what ``torch.Generator.manual_seed`` takes (0 to 2**64 − 1)."""


def permutation(n_tokens: int, seed: int) -> list[int]:
    """A seeded shuffle of the token positions (``torch.randperm`` on a local
    generator): a list of ``n_tokens`` positions. Raises `ConfigError` for a
    seed outside 1 to `MAX_SHUFFLES`."""
    if not (isinstance(seed, int) and 1 <= seed <= MAX_SHUFFLES):
        raise ConfigError("shuffles", f"shuffles must be between 1 and {MAX_SHUFFLES:,} "
                                      f"(got {seed!r:.40})")
    return torch.randperm(n_tokens, generator=torch.Generator().manual_seed(seed)).tolist()


def frozen(trace: Trace, positions: bool = False) -> AttentionConfig:
    """``trace``'s config with its X and weights written in as "given", so that
    reordering the tokens reorders nothing else. ``positions`` adds sinusoidal
    positional encodings to X (by position, so they do not move with a token)."""
    x = trace["embeddings"]
    if positions:
        x = x + sinusoidal_positions(*x.shape)
    return trace.config.replace(
        embedding="given", embeddings=x, weight_init="given",
        W_query=trace["W_query"], W_key=trace["W_key"], W_value=trace["W_value"])


def permuted(trace: Trace, order: list[int], positions: bool = False) -> AttentionConfig:
    """The same tokens in ``order`` (new position p holds old token order[p]),
    with the same embeddings and weights; with ``positions``, positional
    encodings are added by the new positions."""
    x = trace["embeddings"][order]
    if positions:
        x = x + sinusoidal_positions(*x.shape)
    base = frozen(trace)
    return base.replace(sentence=" ".join(trace.tokens[i] for i in order), embeddings=x)


NOISE = 1e-6
"""A difference smaller than this, relative to the values compared, is float
rounding noise."""


def without_noise(diff: Tensor, *compared: Tensor) -> Tensor:
    """``diff`` with float rounding noise set to exactly 0: entries below
    `NOISE` times the largest finite |value| of ``compared``. So a difference
    heatmap is blank where the numbers agree, not strong red and blue."""
    finite = [t[torch.isfinite(t)].abs().max() for t in compared if torch.isfinite(t).any()]
    scale = float(max(finite)) if finite else 0.0
    return torch.where(diff.abs() < NOISE * scale, torch.zeros_like(diff), diff)


def difference(a: Trace, b: Trace, name: str) -> Tensor:
    """b[name] − a[name] for two traces of the same shapes, rounding noise
    removed (`without_noise`). Raises ``ValueError`` when the shapes differ."""
    if a[name].shape != b[name].shape:
        raise ValueError(f"{name} has shape {tuple(a[name].shape)} in one configuration and "
                         f"{tuple(b[name].shape)} in the other")
    before, after = a[name].to(torch.float64), b[name].to(torch.float64)
    return without_noise(after - before, before, after)
