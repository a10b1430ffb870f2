"""How one number came to be: the terms behind any cell of a trace, as data.

`explain_cell(trace, step, row, col, head)` returns an `Explanation`: the
cell's formula, its terms (each a product of factors) and how they combine
(a sum, a sum divided by √head_dim, a ratio ...). `Explanation.result()`
recomputes the cell from its terms; the tests check that it equals the
trace's value, so the UI can write the numbers out with confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

SUM, SCALED, RATIO, PRODUCT, GIVEN, MASKED = "sum", "scaled", "ratio", "product", "given", "masked"


@dataclass(frozen=True)
class Term:
    """One summand: ``label`` says what it is, ``factors`` the numbers it came
    from and ``value`` the summand. For products (dot products, α·v) the value
    is the product of the factors; for a softmax denominator the factor is the
    score s and the value its exponential, exp(s − m)."""

    label: str
    factors: tuple[float, ...]
    value: float


@dataclass(frozen=True)
class Explanation:
    """The cell ``cell`` (e.g. ``"Q[1, 0]"``) of a step, explained.

    ``formula``: the symbolic rule, e.g. ``"Σ_j X[1, j] · W_query[j, 0]"``.
    ``combine`` says how ``terms`` make the cell:

    - ``"sum"``: Σ terms (+ ``offset``, the output projection's bias);
    - ``"scaled"``: Σ terms ÷ ``divisor`` (√head_dim);
    - ``"ratio"``: ``numerator`` ÷ Σ terms (a normalisation over the row);
    - ``"product"``: the single term's product (dropout's α·D/(1−p));
    - ``"given"``: no terms: the value was drawn or typed (see ``note``);
    - ``"masked"``: −∞ by the causal mask.

    ``value`` is the cell as the trace holds it.
    """

    step: str
    cell: str
    formula: str
    combine: str
    terms: tuple[Term, ...]
    value: float
    divisor: float = 1.0
    numerator: float = 0.0
    offset: float = 0.0
    note: str = ""

    @property
    def total(self) -> float:
        """Σ of the terms' values."""
        return math.fsum(t.value for t in self.terms)

    def result(self) -> float:
        """The cell recomputed from the terms (float64)."""
        if self.combine == SUM:
            return self.total + self.offset
        if self.combine == SCALED:
            return self.total / self.divisor
        if self.combine == RATIO:
            return _divide(self.numerator, self.total)
        if self.combine == PRODUCT:
            return self.terms[0].value
        if self.combine == MASKED:
            return float("-inf")
        return self.value

    def written(self, decimals: int = 4) -> str:
        """The computation as a learner writes it, e.g.
        ``"0.3374·(−0.1000) + 0.5000·0.2000 = 0.0663"``."""
        total = written_sum(self.terms, decimals)
        if self.combine == SUM:
            if self.offset:
                total += f" + {_num(self.offset, decimals)}"
            return f"{total} = {_num(self.result(), decimals)}"
        if self.combine == SCALED:
            return (f"({total}) / {_num(self.divisor, decimals)} = "
                    f"{_num(self.total, decimals)} / {_num(self.divisor, decimals)} = "
                    f"{_num(self.result(), decimals)}")
        if self.combine == RATIO:
            parts = " + ".join(_num(t.value, decimals) for t in self.terms)
            return (f"{_num(self.numerator, decimals)} / ({parts}) = "
                    f"{_num(self.numerator, decimals)} / {_num(self.total, decimals)} = "
                    f"{_num(self.result(), decimals)}")
        if self.combine == PRODUCT:
            return f"{total} = {_num(self.result(), decimals)}"
        if self.combine == MASKED:
            return "−∞"
        return _num(self.value, decimals)


def _divide(a: float, b: float) -> float:
    """a / b as float32 tensors divide: ±inf for a nonzero over 0, NaN for 0/0 or inf/inf."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)
    return a / b if not (math.isinf(a) and math.isinf(b)) else math.nan


def _num(x: float, decimals: int) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "−∞" if x < 0 else "+∞"
    text = f"{x:.{decimals}e}" if abs(x) >= 1e6 else f"{x:.{decimals}f}"
    return f"({text.replace('-', '−')})" if x < 0 else text


def dot_product_terms(a: Tensor, b: Tensor, labels: list[str]) -> tuple[Term, ...]:
    """The products a_c · b_c of a dot product, one `Term` per component.

    a, b: (d,) -> d terms whose values sum to ``a @ b``.
    """
    a, b = a.to(torch.float64), b.to(torch.float64)
    return tuple(Term(labels[c], (float(a[c]), float(b[c])), float(a[c] * b[c]))
                 for c in range(a.shape[0]))


def written_sum(terms: tuple[Term, ...], decimals: int = 4) -> str:
    """``"0.3374·(−0.1000) + ..."``: the terms as a learner would write them."""
    return " + ".join("·".join(_num(f, decimals) for f in t.factors) for t in terms)


def _head(tensor: Tensor, head: int) -> Tensor:
    return tensor[head] if tensor.dim() == 3 else tensor


_PROJECTIONS = {"queries": ("Q", "W_query"), "keys": ("K", "W_key"), "values": ("V", "W_value")}
_DRAWN = {
    "embeddings": "X is the input: looked up in the embedding table, drawn uniformly or typed in "
                  "(see the embedding setting).",
    "W_query": "A trainable weight, drawn by the weight_init recipe (or typed in).",
    "W_key": "A trainable weight, drawn by the weight_init recipe (or typed in).",
    "W_value": "A trainable weight, drawn by the weight_init recipe (or typed in).",
    "W_out": "out_proj.weight, transposed: drawn like nn.Linear(d_v, d_v)'s default init.",
    "b_out": "out_proj.bias: drawn like nn.Linear(d_v, d_v)'s default init.",
    "causal_mask": "1 (masked) where the key comes after the query: j > i.",
    "dropout_mask": "Drawn Bernoulli(1 − p) from the dropout generator: 1 = kept.",
}


def explain_cell(trace, name: str, row: int, col: int, head: int = 0) -> Explanation:
    """Explain cell ``(row, col)`` of step ``name`` (of head ``head`` for a
    per-head step). Raises ``KeyError`` for a step not in the trace and
    ``IndexError`` for a cell outside it."""
    c = trace.config
    matrix = _head(trace[name], head)
    if matrix.dim() == 1:
        matrix = matrix[None]
    if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]):
        raise IndexError(f"{name} has no cell ({row}, {col}); its shape is {tuple(matrix.shape)}")
    value = float(matrix[row, col])
    h = f"_{head}" if c.n_heads > 1 and trace[name].dim() == 3 else ""

    if name in _PROJECTIONS:
        letter, weight = _PROJECTIONS[name]
        width = matrix.shape[1]
        global_col = head * width + col if c.n_heads > 1 else col
        x, w = trace["embeddings"][row], trace[weight][:, global_col]
        terms = dot_product_terms(x, w, [f"X[{row}, {j}]·{weight}[{j}, {global_col}]"
                                         for j in range(c.d_in)])
        return Explanation(name, f"{letter}{h}[{row}, {col}]",
                           f"Σ_j X[{row}, j] · {weight}[j, {global_col}]", SUM, terms, value)

    if name in ("attn_scores", "scaled_scores", "masked_scores"):
        if name == "masked_scores" and col > row:
            return Explanation(name, f"ω̂{h}[{row}, {col}]", "−∞ (masked)", MASKED, (), value,
                               note=f"Key {col} comes after query {row}: masked to −∞, so its "
                                    "weight will be exactly 0.")
        q, k = _head(trace["queries"], head)[row], _head(trace["keys"], head)[col]
        terms = dot_product_terms(q, k, [f"q{h}[{row}, {i}]·k{h}[{col}, {i}]"
                                         for i in range(q.shape[0])])
        formula = f"q{h}_{row} · k{h}_{col} = Σ_c Q{h}[{row}, c] · K{h}[{col}, c]"
        if name == "attn_scores" or not c.scale:
            return Explanation(name, f"ω{h}[{row}, {col}]", formula, SUM, terms, value)
        symbol = "ω̂" if name == "masked_scores" else "ω̃"
        return Explanation(name, f"{symbol}{h}[{row}, {col}]", f"({formula}) / √{c.head_dim}",
                           SCALED, terms, value, divisor=math.sqrt(c.head_dim))

    if name == "attn_weights":
        source = "masked_scores" if c.causal else "scaled_scores"
        scores = _head(trace[source], head)[row].to(torch.float64)
        labels = [f"k={k}" for k in range(scores.shape[0])]
        if c.normalization == "sum":
            shown = torch.nan_to_num(scores, neginf=0.0)
            terms = tuple(Term(labels[k], (float(shown[k]),), float(shown[k]))
                          for k in range(len(labels)))
            return Explanation(name, f"α{h}[{row}, {col}]",
                               f"s[{row}, {col}] / Σ_k s[{row}, k]", RATIO, terms, value,
                               numerator=float(shown[col]))
        shift = float(scores.max()) if c.normalization == "softmax" else 0.0
        # exp in the trace's float32, so that an overflow (naive softmax) shows as inf
        exps = torch.exp((scores - shift).to(torch.float32)).to(torch.float64)
        terms = tuple(Term(labels[k], (float(scores[k]),), float(exps[k]))
                      for k in range(len(labels)))
        formula = (f"exp(s[{row}, {col}] − m) / Σ_k exp(s[{row}, k] − m), m = row max"
                   if c.normalization == "softmax" else
                   f"exp(s[{row}, {col}]) / Σ_k exp(s[{row}, k])")
        return Explanation(name, f"α{h}[{row}, {col}]", formula, RATIO, terms, value,
                           numerator=float(exps[col]),
                           note=f"m = {shift:.4f}" if c.normalization == "softmax" else "")

    if name == "dropped_weights":
        alpha = float(_head(trace["attn_weights"], head)[row, col])
        kept = float(_head(trace["dropout_mask"], head)[row, col])
        factor = 1.0 / (1.0 - c.dropout)
        term = Term("α·D/(1−p)", (alpha, kept, factor), alpha * kept * factor)
        return Explanation(name, f"α′{h}[{row}, {col}]", "α · D / (1 − p)", PRODUCT, (term,),
                           value)

    if name == "context":
        width = c.head_dim_v
        head_of_col, local = (col // width, col % width) if c.n_heads > 1 else (0, col)
        hh = f"_{head_of_col}" if c.n_heads > 1 else ""
        weights = trace["dropped_weights"] if "dropped_weights" in trace else trace["attn_weights"]
        a = _head(weights, head_of_col)[row].to(torch.float64)
        v = _head(trace["values"], head_of_col)[:, local].to(torch.float64)
        terms = tuple(Term(f"α{hh}[{row}, {j}]·v{hh}[{j}, {local}]", (float(a[j]), float(v[j])),
                           float(a[j] * v[j])) for j in range(a.shape[0]))
        return Explanation(name, f"Z[{row}, {col}]", f"Σ_j α{hh}[{row}, j] · V{hh}[j, {local}]",
                           SUM, terms, value,
                           note=f"Column {col} comes from head {head_of_col}." if hh else "")

    if name == "output":
        z, w = trace["context"][row], trace["W_out"][:, col]
        terms = dot_product_terms(z, w, [f"Z[{row}, {j}]·W_out[{j}, {col}]"
                                         for j in range(z.shape[0])])
        return Explanation(name, f"O[{row}, {col}]", f"Σ_j Z[{row}, j] · W_out[j, {col}] + "
                           f"b_out[{col}]", SUM, terms, value,
                           offset=float(trace["b_out"][col]))

    return Explanation(name, f"{name}[{row}, {col}]", "given", GIVEN, (), value,
                       note=_DRAWN.get(name, ""))


def score_terms(trace, query: int, key: int) -> tuple[Term, ...]:
    """ω[query, key] = q_query · k_key, term by term (single head)."""
    return explain_cell(trace, "attn_scores", query, key).terms


def context_terms(trace, query: int) -> list[tuple[float, Tensor]]:
    """z_query = Σ_j α[query, j] · v_j: the (weight, weighted value) pairs.

    Uses the dropped weights when dropout is on. Single head. Returns n pairs;
    the weighted values, each (d_v,), sum to the context row."""
    weights = trace["dropped_weights"] if "dropped_weights" in trace else trace["attn_weights"]
    return [(float(weights[query, j]), weights[query, j] * trace["values"][j])
            for j in range(trace.n_tokens)]


def stacked(terms: list[tuple[float, Tensor]]) -> Tensor:
    """The weighted value vectors of `context_terms` as rows, (n, d_v)."""
    return torch.stack([vector for _, vector in terms])
