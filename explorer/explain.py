"""How one number came to be: the terms behind a cell, as data.

A dot product is a list of `Term` (its factors and their product) whose values
add up to the cell; the tests check this. The UI writes them out so learners
can check them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Term:
    """One summand: ``label`` says what was multiplied, ``factors`` by what."""

    label: str
    factors: tuple[float, ...]
    value: float


def dot_product_terms(a: Tensor, b: Tensor, labels: list[str]) -> tuple[Term, ...]:
    """The products a_c · b_c of a dot product, one `Term` per component.

    a, b: (d,) -> d terms whose values sum to ``a @ b``.
    """
    return tuple(Term(labels[c], (float(a[c]), float(b[c])), float(a[c] * b[c]))
                 for c in range(a.shape[0]))


def written_sum(terms: tuple[Term, ...], decimals: int = 4) -> str:
    """``"0.3374·(-0.1000) + ..."``: the terms as a learner would write them."""
    def num(x: float) -> str:
        return f"{x:.{decimals}f}" if x >= 0 else f"({x:.{decimals}f})"
    return " + ".join("·".join(num(f) for f in t.factors) for t in terms)


def score_terms(trace, query: int, key: int) -> tuple[Term, ...]:
    """ω[query, key] = q_query · k_key, term by term (single head)."""
    dims = [str(c) for c in range(trace["queries"].shape[-1])]
    return dot_product_terms(trace["queries"][query], trace["keys"][key], dims)


def context_terms(trace, query: int) -> list[tuple[float, Tensor]]:
    """z_query = Σ_j α[query, j] · v_j: the (weight, weighted value) pairs.

    Uses the dropped weights when dropout is on. Returns n pairs; the weighted
    values, each (d_v,), sum to the context row."""
    weights = trace["dropped_weights"] if "dropped_weights" in trace else trace["attn_weights"]
    return [(float(weights[query, j]), weights[query, j] * trace["values"][j])
            for j in range(trace.n_tokens)]


def stacked(terms: list[tuple[float, Tensor]]) -> Tensor:
    """The weighted value vectors of `context_terms` as rows, (n, d_v)."""
    return torch.stack([vector for _, vector in terms])
