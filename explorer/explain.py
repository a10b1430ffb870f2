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
from functools import partial

import torch
from torch import Tensor

from explorer.literal import format_value
from explorer.steps import STEPS, TOKENS
from explorer.tokenizer import token_labels

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

    - ``"sum"``: Σ terms (+ ``offset``, a bias, named ``offset_name``: ``b_out[3]``);
    - ``"scaled"``: Σ terms ÷ ``divisor`` (√head_dim);
    - ``"ratio"``: ``numerator`` ÷ Σ terms (a normalisation over the row);
    - ``"product"``: the single term's product (dropout's α·D/(1−p));
    - ``"given"``: no terms: the value was drawn or typed (see ``note``);
    - ``"masked"``: −∞ by the causal mask.

    ``value`` is the cell as the trace holds it; ``position`` says where it is
    (``"row 1, column 0"``, with the head for a per-head step). For ``"given"``
    the formula says where the number came from (`origin`).
    """

    step: str
    cell: str
    formula: str
    combine: str
    terms: tuple[Term, ...]
    value: float
    position: str = ""
    divisor: float = 1.0
    numerator: float = 0.0
    offset: float = 0.0
    note: str = ""
    offset_name: str = ""

    @property
    def total(self) -> float:
        """Σ of the terms' values (without the ``offset``: see `total_text`)."""
        return math.fsum(t.value for t in self.terms)

    def total_text(self, decimals: int = 4) -> str:
        """The line under the terms' table: their sum and how it makes the cell,
        ending with the cell's value, e.g. ``"Σ of the terms + b_out[3] =
        −1.5513 + (−0.0144) = −1.5657"`` (a sum with a bias), ``"(Σ of the
        terms) / 1.4142 = ..."`` (scaled scores) or ``"... / Σ of the terms =
        ..."`` (a normalisation, whose terms are the denominator)."""
        total, result = number(self.total, decimals), number(self.result(), decimals)
        if self.combine == SUM and self.offset_name:
            return (f"Σ of the terms + {self.offset_name} = {total} + "
                    f"{_num(self.offset, decimals)} = {result}")
        if self.combine == SCALED:
            return (f"(Σ of the terms) / {number(self.divisor, decimals)} = {total} / "
                    f"{number(self.divisor, decimals)} = {result}")
        if self.combine == RATIO:
            numerator = number(self.numerator, decimals)
            return (f"Σ of the terms = {total}, the denominator: {numerator} / {total} = "
                    f"{result}")
        return f"Σ of the terms = {total}"

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


number = format_value
"""A number as the explanations write it (`explorer.literal.format_value`, the
one formatter the cells, tables and report use too)."""


def _num(x: float, decimals: int) -> str:
    """`number`, in parentheses when negative: ``0.3374·(−0.1000)``."""
    text = number(x, decimals)
    return f"({text})" if text.startswith("−") and text != "−∞" else text


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



_PROJECTIONS = {"queries": ("Q", "W_query", "b_query"), "keys": ("K", "W_key", "b_key"),
                "values": ("V", "W_value", "b_value")}
_SCORE_SYMBOLS = {"attn_scores": "ω", "scaled_scores": "ω̃", "masked_scores": "ω̂"}


class _Names:
    """How an explanation names cells: by token where an axis is tokens
    (``ω["is", "Life"]``), by number where it is dimensions (``W_query[0, 1]``)."""

    def __init__(self, trace):
        self.labels = token_labels(trace.tokens)

    def token(self, i: int) -> str:
        return f'"{self.labels[i]}"'

    def cell(self, name: str, symbol: str, row: int, col: int) -> str:
        step = STEPS[name]
        r = self.token(row) if step.rows.labels == TOKENS else str(row)
        c = self.token(col) if step.cols.labels == TOKENS else str(col)
        return f"{symbol}[{r}, {c}]"


def explain_cell(trace, name: str, row: int, col: int, head: int = 0) -> Explanation:
    """Explain cell ``(row, col)`` of step ``name`` (of head ``head`` for a
    per-head step). Cells are named by their tokens (``ω["is", "Life"]``), with
    the position in ``Explanation.position``; the notation is the steps' own
    (`explorer.steps.STEPS`: ω, ω̃, ω̂, α, α′, Z). Raises ``KeyError`` for a step
    not in the trace and ``IndexError`` for a cell outside it."""
    c = trace.config
    matrix = trace.head(name, head)
    if matrix.dim() == 1:
        matrix = matrix[None]
    if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]):
        raise IndexError(f"{name} has no cell ({row}, {col}); its shape is {tuple(matrix.shape)}")
    value = float(matrix[row, col])
    per_head = c.n_heads > 1 and trace.per_head(name)
    h = f"_{head}" if per_head else ""
    names = _Names(trace)
    at = partial(Explanation, name, position=(f"head {head}, " if per_head else "")
                 + f"row {row}, column {col}", value=value)
    step = STEPS[name]
    q = names.token(row) if step.rows.labels == TOKENS else str(row)
    k = names.token(col) if step.cols.labels == TOKENS else str(col)

    if name in _PROJECTIONS:
        letter, weight, bias = _PROJECTIONS[name]
        global_col = head * matrix.shape[1] + col if c.n_heads > 1 else col
        x, w = trace["embeddings"][row], trace[weight][:, global_col]
        terms = dot_product_terms(x, w, [f"X[{q}, {j}]·{weight}[{j}, {global_col}]"
                                         for j in range(c.d_in)])
        offset = float(trace[bias][global_col]) if bias in trace else 0.0
        offset_name = f"{bias}[{global_col}]" if bias in trace else ""
        plus = f" + {offset_name}" if offset_name else ""
        return at(names.cell(name, f"{letter}{h}", row, col),
                  f"Σ_j X[{q}, j] · {weight}[j, {global_col}]{plus}", SUM, terms,
                  offset=offset, offset_name=offset_name)

    if name in _SCORE_SYMBOLS:
        cell = names.cell(name, f"{_SCORE_SYMBOLS[name]}{h}", row, col)
        if name == "masked_scores" and col > row:
            weight = float(trace.head("attn_weights", head)[row, col])
            then = ("so its weight is exactly 0" if weight == 0 else
                    f"yet its weight is {number(weight)}, not 0: the row's kept scores sum to 0, "
                    "and 0 / 0 is NaN")
            return at(cell, "−∞ (masked)", MASKED, (),
                      note=f"Key {k} (position {col}) comes after query {q} (position {row}): "
                           f"masked to −∞, {then}.")
        qv, kv = trace.head("queries", head)[row], trace.head("keys", head)[col]
        terms = dot_product_terms(qv, kv, [f"Q{h}[{q}, {i}]·K{h}[{k}, {i}]"
                                           for i in range(qv.shape[0])])
        formula = f"q{h}[{q}] · k{h}[{k}] = Σ_i Q{h}[{q}, i] · K{h}[{k}, i]"
        if name == "attn_scores" or not c.scale:
            return at(cell, formula, SUM, terms)
        return at(cell, f"({formula}) / √{c.head_dim}", SCALED, terms,
                  divisor=math.sqrt(c.head_dim))

    if name == "attn_weights":
        source = "masked_scores" if c.causal else "scaled_scores"
        s = _SCORE_SYMBOLS[source if c.scale or c.causal else "attn_scores"] + h
        scores = trace.head(source, head)[row].to(torch.float64)
        labels = [f"key {names.token(j)}" for j in range(scores.shape[0])]
        cell = names.cell(name, f"α{h}", row, col)
        if c.normalization == "sum":
            kept = torch.nan_to_num(scores, neginf=0.0)
            terms = tuple(Term(labels[j], (float(kept[j]),), float(kept[j]))
                          for j in range(len(labels)))
            return at(cell, f"{s}[{q}, {k}] / Σ_j {s}[{q}, j]", RATIO, terms,
                      numerator=float(kept[col]))
        shift = float(scores.max()) if c.normalization == "softmax" else 0.0
        # exp in the trace's float32, so that an overflow (naive softmax) shows as inf
        exps = torch.exp((scores - shift).to(torch.float32)).to(torch.float64)
        terms = tuple(Term(labels[j], (float(scores[j]),), float(exps[j]))
                      for j in range(len(labels)))
        formula = (f"exp({s}[{q}, {k}] − m) / Σ_j exp({s}[{q}, j] − m), m = the row's max"
                   if c.normalization == "softmax" else
                   f"exp({s}[{q}, {k}]) / Σ_j exp({s}[{q}, j])")
        return at(cell, formula, RATIO, terms, numerator=float(exps[col]),
                  note=f"m = {shift:.4f}" if c.normalization == "softmax" else "")

    if name == "dropped_weights":
        alpha = float(trace.head("attn_weights", head)[row, col])
        kept = float(trace.head("dropout_mask", head)[row, col])
        factor = 1.0 / (1.0 - c.dropout)
        term = Term("α·D/(1−p)", (alpha, kept, factor), alpha * kept * factor)
        return at(names.cell(name, f"α′{h}", row, col),
                  f"α{h}[{q}, {k}] · D{h}[{q}, {k}] / (1 − p)", PRODUCT, (term,))

    if name == "context":
        width = c.head_dim_v
        head_of_col, local = (col // width, col % width) if c.n_heads > 1 else (0, col)
        hh = f"_{head_of_col}" if c.n_heads > 1 else ""
        weights = "dropped_weights" if "dropped_weights" in trace else "attn_weights"
        a = trace.head(weights, head_of_col)[row].to(torch.float64)
        v = trace.head("values", head_of_col)[:, local].to(torch.float64)
        alpha = "α′" if "dropped_weights" in trace else "α"
        terms = tuple(Term(f"{alpha}{hh}[{q}, {names.token(j)}]·V{hh}[{names.token(j)}, {local}]",
                           (float(a[j]), float(v[j])), float(a[j] * v[j]))
                      for j in range(a.shape[0]))
        return at(names.cell(name, "Z", row, col),
                  f"Σ_j {alpha}{hh}[{q}, j] · V{hh}[j, {local}]", SUM, terms,
                  note=f"Column {col} comes from head {head_of_col}." if hh else "")

    if name == "output":
        z, w = trace["context"][row], trace["W_out"][:, col]
        terms = dot_product_terms(z, w, [f"Z[{q}, {j}]·W_out[{j}, {col}]"
                                         for j in range(z.shape[0])])
        return at(names.cell(name, "O", row, col),
                  f"Σ_j Z[{q}, j] · W_out[j, {col}] + b_out[{col}]", SUM, terms,
                  offset=float(trace["b_out"][col]), offset_name=f"b_out[{col}]")

    symbol = STEPS[name].symbol + (h if STEPS[name].per_head else "")
    return at(names.cell(name, symbol, row, col), origin(trace, name, row, col, value),
              GIVEN, ())


def origin(trace, name: str, row: int, col: int, value: float) -> str:
    """Where a drawn, typed or model number came from, naming the generator,
    the seed and the reference code (a learner can draw the same number)."""
    c = trace.config
    labels = token_labels(trace.tokens)
    recipe = getattr(c, "weight_init", "")
    if recipe == "model":
        if name == "embeddings":
            return c.input_note
        return "the model's trained parameter, read from its checkpoint"
    generator = f"torch.Generator().manual_seed({c.seed})"
    if name == "embeddings":
        if c.embedding == "given":
            return "typed in: the X table at the top of the page"
        if c.embedding == "uniform":
            return (f"drawn by torch.rand({trace.n_tokens}, {c.d_in}) from {generator}, the "
                    f"same number as torch.manual_seed({c.seed}); torch.rand({trace.n_tokens}, "
                    f"{c.d_in})")
        token_id = int(trace["token_ids"][row])
        return (f"row {token_id} of the embedding table (token \"{labels[row]}\" has id "
                f"{token_id}): nn.Embedding({c.vocab_size}, {c.d_in}) drawn by torch.randn from "
                f"{generator}, the same number as torch.manual_seed({c.seed}) followed by "
                f"nn.Embedding({c.vocab_size}, {c.d_in})")
    if name in ("W_query", "W_key", "W_value"):
        shape = f"({c.d_in}, {c.d_v if name == 'W_value' else c.d_k})"
        earlier = ["the embedding table"] if c.embedding == "table" else (
            ["the embeddings"] if c.embedding == "uniform" else [])
        earlier += ["W_query", "W_key"][: ("W_query", "W_key", "W_value").index(name)]
        after = f", after {' and '.join(earlier)}" if earlier else ""
        if recipe in ("randn", "rand"):
            return (f"drawn by torch.{recipe}{shape} from {generator}{after}: the same "
                    f"number as torch.manual_seed({c.seed}) and the book's code")
        if recipe == "linear":
            return (f"nn.Linear's default initialisation (uniform within ±1/√{c.d_in}), "
                    f"drawn from {generator}{after}, transposed to {shape}")
        if recipe == "identity":
            return "W = I: 1 on the diagonal and 0 elsewhere, so the projection changes nothing"
        return f"typed in: the {name} table at the top of the page"
    if name in ("W_out", "b_out"):
        return (f"nn.Linear({c.d_v}, {c.d_v})'s default initialisation (weight, then bias), "
                f"drawn from {generator} after W_value"
                + ("; W_out is the weight transposed" if name == "W_out" else ""))
    if name == "causal_mask":
        where = "after" if col > row else "at or before"
        return (f"{'masked (−∞)' if value else 'kept (0)'}: key \"{labels[col]}\" comes "
                f"{where} query \"{labels[row]}\"")
    if name == "dropout_mask":
        return (f"{'kept' if value else 'dropped'}: drawn Bernoulli(1 − {c.dropout:g}) from "
                f"torch.Generator().manual_seed({c.mask_seed}), as torch.manual_seed("
                f"{c.mask_seed}) then nn.Dropout({c.dropout:g}) does")
    return "given"


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
