"""How one number came to be: the terms behind any cell of a trace, as data.

`explain_cell(trace, step, row, col, head)` returns an `Explanation`: the
cell's formula, its terms (each a product of factors) and how they combine
(a sum, a sum divided by √head_dim, a ratio ...). `Explanation.result()`
recomputes the cell from its terms; the tests check that it equals the
trace's value, so the UI can write the numbers out with confidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from explorer.core.literal import format_value
from explorer.core.steps import STEPS, TOKENS
from explorer.core.tokenizer import token_labels

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
            total, divisor, result = quotient_texts(self.total, self.divisor, self.result(),
                                                    decimals)
            return f"(Σ of the terms) / {divisor} = {total} / {divisor} = {result}"
        if self.combine == RATIO:
            numerator, total, result = quotient_texts(self.numerator, self.total,
                                                      self.result(), decimals)
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
            summed, divisor, result = (_bracketed(t) for t in quotient_texts(
                self.total, self.divisor, self.result(), decimals))
            return f"({total}) / {divisor} = {summed} / {divisor} = {result}"
        if self.combine == RATIO:
            parts = " + ".join(_num(t.value, decimals) for t in self.terms)
            numerator, summed, result = (_bracketed(t) for t in quotient_texts(
                self.numerator, self.total, self.result(), decimals))
            return f"{numerator} / ({parts}) = {numerator} / {summed} = {result}"
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


def number(x: float, decimals: int = 4) -> str:
    """A number as the explanations and tables write it: `explorer.core.literal.format_value`
    (the one formatter the cells and report use too), except a nonzero value
    that ``decimals`` decimals would print as 0: that one in scientific
    notation with two digits (``1.9e−6``), so a written number never hides what it is."""
    x = float(x)
    if x != 0 and math.isfinite(x) and abs(x) < 0.5 * 10 ** -decimals:
        mantissa, exponent = f"{x:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}".replace("-", "−")
    return format_value(x, decimals)


def quotient_number(x: float, decimals: int = 4) -> str:
    """A number of a division as written (a / b = c): `number`, except a
    nonzero value below 10^−(decimals − 2) (0.01 at 4 decimals, which `number`
    writes with two significant digits or fewer), written with ``decimals``
    significant digits (``6.400e−5``): a quotient's digits (`quotient_texts`)."""
    x = float(x)
    if x != 0 and math.isfinite(x) and abs(x) < 10.0 ** -(decimals - 2):
        mantissa, exponent = f"{x:.{decimals - 1}e}".split("e")
        return f"{mantissa}e{int(exponent)}".replace("-", "−")
    return number(x, decimals)


def _printed(text: str) -> float:
    """A number as `number` or `quotient_number` wrote it, read back."""
    return float(text.replace("−", "-").replace("∞", "inf"))


def quotient_texts(a: float, b: float, quotient: float, decimals: int = 4
                   ) -> tuple[str, str, str]:
    """a, b and a / b (``quotient``, as computed) written so that the printed
    a divided by the printed b, written as the quotient is, gives the printed
    quotient: the quotient by `quotient_number`, a and b with as many more
    digits as that takes (at most 8 more). Without them, 6.4e−5 written as
    0.0001 made "0.0001 / 1.4142 = 4.5e−5" (issue 51)."""
    result = quotient_number(quotient, decimals)
    if not all(math.isfinite(x) for x in (a, b, quotient)) or b == 0:
        return quotient_number(a, decimals), quotient_number(b, decimals), result
    for more in range(9):
        a_text, b_text = (quotient_number(x, decimals + more) for x in (a, b))
        if quotient_number(_printed(a_text) / _printed(b_text), decimals) == result:
            break
    return a_text, b_text, result


def _bracketed(text: str) -> str:
    """A written number in parentheses when negative: ``0.3374·(−0.1000)``."""
    return f"({text})" if text.startswith("−") and text != "−∞" else text


def _num(x: float, decimals: int) -> str:
    """`number`, in parentheses when negative: ``0.3374·(−0.1000)``."""
    return _bracketed(number(x, decimals))


def dot_product_terms(a: Tensor, b: Tensor, labels: list[str]) -> tuple[Term, ...]:
    """The products a_c · b_c of a dot product, one `Term` per component.

    a, b: (d,) -> d terms whose values sum to ``a @ b``.
    """
    a, b = a.to(torch.float64), b.to(torch.float64)
    return tuple(Term(labels[c], (float(a[c]), float(b[c])), float(a[c] * b[c]))
                 for c in range(a.shape[0]))


def softmax_terms(scores: Tensor, labels: list[str], shift: bool = True
                  ) -> tuple[tuple[Term, ...], float]:
    """The denominator of a softmax over one row of ``scores`` (n,), one `Term`
    per key: its score (−∞ where masked) and exp(score − m), m the row's
    maximum when ``shift`` (the stable softmax), else 0 (the naive one). The
    exponentials are taken in float32, as the trace takes them, so an overflow
    shows as inf. Returns the terms and m; the weight of key j is
    ``terms[j].value / Σ values``."""
    scores = scores.to(torch.float64)
    m = float(scores.max()) if shift else 0.0
    exps = torch.exp((scores - m).to(torch.float32)).to(torch.float64)
    return tuple(Term(labels[j], (float(scores[j]),), float(exps[j]))
                 for j in range(scores.shape[0])), m


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


@dataclass(frozen=True)
class _Cell:
    """What every step's explainer is given: the cell (``name``, ``row``,
    ``col``, ``head``), its ``value``, the head's suffix ``h`` (``"_1"`` for a
    per-head step of several heads, else ``""``), the row's and column's names
    ``q`` and ``k`` (tokens or numbers) and ``at``, `Explanation` with the
    step, position and value filled in."""

    trace: Any
    name: str
    row: int
    col: int
    head: int
    value: float
    h: str
    q: str
    k: str
    names: _Names
    at: Callable[..., Explanation]

    @property
    def config(self):
        return self.trace.config


def explain_cell(trace, name: str, row: int, col: int, head: int = 0) -> Explanation:
    """Explain cell ``(row, col)`` of step ``name`` (of head ``head`` for a
    per-head step). Cells are named by their tokens (``ω["is", "Life"]``), with
    the position in ``Explanation.position``; the notation is the steps' own
    (`explorer.core.steps.STEPS`: ω, ω̃, ω̂, α, α′, Z). Each step's rule is one
    function of `EXPLAINERS`; a step without one was drawn, typed or read
    (`origin`). Raises ``KeyError`` for a step not in the trace and
    ``IndexError`` for a cell outside it."""
    c = trace.config
    matrix = trace.head(name, head)
    if matrix.dim() == 1:
        matrix = matrix[None]
    if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]):
        raise IndexError(f"{name} has no cell ({row}, {col}); its shape is {tuple(matrix.shape)}")
    value = float(matrix[row, col])
    per_head = c.n_heads > 1 and trace.per_head(name)
    names, step = _Names(trace), STEPS[name]
    cell = _Cell(
        trace, name, row, col, head, value, h=f"_{head}" if per_head else "",
        q=names.token(row) if step.rows.labels == TOKENS else str(row),
        k=names.token(col) if step.cols.labels == TOKENS else str(col), names=names,
        at=partial(Explanation, name, value=value, position=(
            f"head {head}, " if per_head else "") + f"row {row}, column {col}"))
    return EXPLAINERS.get(name, _given)(cell)


def _projection(x: _Cell) -> Explanation:
    """Q, K or V: X's row times a column of the weight (+ its bias)."""
    c = x.config
    letter, weight, bias = _PROJECTIONS[x.name]
    width = x.trace.head(x.name, x.head).shape[-1]
    global_col = x.head * width + x.col if c.n_heads > 1 else x.col
    terms = dot_product_terms(x.trace["embeddings"][x.row], x.trace[weight][:, global_col],
                              [f"X[{x.q}, {j}]·{weight}[{j}, {global_col}]"
                               for j in range(c.d_in)])
    offset = float(x.trace[bias][global_col]) if bias in x.trace else 0.0
    offset_name = f"{bias}[{global_col}]" if bias in x.trace else ""
    plus = f" + {offset_name}" if offset_name else ""
    return x.at(x.names.cell(x.name, f"{letter}{x.h}", x.row, x.col),
                f"Σ_j X[{x.q}, j] · {weight}[j, {global_col}]{plus}", SUM, terms,
                offset=offset, offset_name=offset_name)


def _score(x: _Cell) -> Explanation:
    """ω, ω̃ or ω̂: a query's dot product with a key (÷ √head_dim once scaled;
    −∞ above the diagonal once masked)."""
    c, trace, h = x.config, x.trace, x.h
    cell = x.names.cell(x.name, f"{_SCORE_SYMBOLS[x.name]}{h}", x.row, x.col)
    if x.name == "masked_scores" and x.col > x.row:
        weight = float(trace.head("attn_weights", x.head)[x.row, x.col])
        then = ("so its weight is exactly 0" if weight == 0 else
                f"yet its weight is {number(weight)}, not 0: the row's kept scores sum to 0, "
                "and 0 / 0 is NaN")
        return x.at(cell, "−∞ (masked)", MASKED, (),
                    note=f"Key {x.k} (position {x.col}) comes after query {x.q} (position "
                         f"{x.row}): masked to −∞, {then}.")
    qv, kv = trace.head("queries", x.head)[x.row], trace.head("keys", x.head)[x.col]
    (Q, K), (q, k) = (("X", "X"), ("x", "x")) if _no_weights(c) else (("Q", "K"), ("q", "k"))
    terms = dot_product_terms(qv, kv, [f"{Q}{h}[{x.q}, {i}]·{K}{h}[{x.k}, {i}]"
                                       for i in range(qv.shape[0])])
    formula = f"{q}{h}[{x.q}] · {k}{h}[{x.k}] = Σ_i {Q}{h}[{x.q}, i] · {K}{h}[{x.k}, i]"
    note = NO_WEIGHTS_NOTE if _no_weights(c) else ""
    if x.name == "attn_scores" or not c.scale:
        return x.at(cell, formula, SUM, terms, note=note)
    return x.at(cell, f"({formula}) / √{c.head_dim}", SCALED, terms,
                divisor=math.sqrt(c.head_dim), note=note)


NO_WEIGHTS_NOTE = ("No trainable weights here: every token's embedding x is its own query, "
                   "key and value, so the scores are X·Xᵀ.")
"""What an explanation adds where Q = K = V = X (the Simplified page's recipe)."""


def _no_weights(config) -> bool:
    """Q = K = V = X: the explanations name X, not Q, K and V (`explorer.core.steps`' rule)."""
    return config.weight_init == "identity"


def _weights(x: _Cell) -> Explanation:
    """α: the cell's share of its row, by softmax (stable or naive) or by the sum."""
    c, q, k = x.config, x.q, x.k
    source = "masked_scores" if c.causal else "scaled_scores"
    s = _SCORE_SYMBOLS[source if c.scale or c.causal else "attn_scores"] + x.h
    scores = x.trace.head(source, x.head)[x.row].to(torch.float64)
    labels = [f"key {x.names.token(j)}" for j in range(scores.shape[0])]
    cell = x.names.cell(x.name, f"α{x.h}", x.row, x.col)
    if c.normalization == "sum":
        kept = torch.nan_to_num(scores, neginf=0.0)
        terms = tuple(Term(labels[j], (float(kept[j]),), float(kept[j]))
                      for j in range(len(labels)))
        return x.at(cell, f"{s}[{q}, {k}] / Σ_j {s}[{q}, j]", RATIO, terms,
                    numerator=float(kept[x.col]))
    stable = c.normalization == "softmax"
    terms, shift = softmax_terms(scores, labels, shift=stable)
    formula = (f"exp({s}[{q}, {k}] − m) / Σ_j exp({s}[{q}, j] − m), m = the row's max"
               if stable else f"exp({s}[{q}, {k}]) / Σ_j exp({s}[{q}, j])")
    return x.at(cell, formula, RATIO, terms, numerator=terms[x.col].value,
                note=f"m = {shift:.4f}" if stable else "")


def _dropped(x: _Cell) -> Explanation:
    """α′: the weight times the dropout mask, scaled up by 1/(1 − p)."""
    c = x.config
    alpha = float(x.trace.head("attn_weights", x.head)[x.row, x.col])
    kept = float(x.trace.head("dropout_mask", x.head)[x.row, x.col])
    factor = 1.0 / (1.0 - c.dropout)
    term = Term("α·D/(1−p)", (alpha, kept, factor), alpha * kept * factor)
    return x.at(x.names.cell(x.name, f"α′{x.h}", x.row, x.col),
                f"α{x.h}[{x.q}, {x.k}] · D{x.h}[{x.q}, {x.k}] / (1 − p)", PRODUCT, (term,))


def _context(x: _Cell) -> Explanation:
    """Z: the row's weights times a column of V (of the head the column belongs to)."""
    c, trace, names = x.config, x.trace, x.names
    width = c.head_dim_v
    head_of_col, local = (x.col // width, x.col % width) if c.n_heads > 1 else (0, x.col)
    hh = f"_{head_of_col}" if c.n_heads > 1 else ""
    dropped = "dropped_weights" in trace
    a = trace.head("dropped_weights" if dropped else "attn_weights", head_of_col)[x.row]
    v = trace.head("values", head_of_col)[:, local]
    a, v = a.to(torch.float64), v.to(torch.float64)
    alpha = "α′" if dropped else "α"
    V = "X" if _no_weights(c) else "V"
    terms = tuple(Term(f"{alpha}{hh}[{x.q}, {names.token(j)}]·{V}{hh}[{names.token(j)}, {local}]",
                       (float(a[j]), float(v[j])), float(a[j] * v[j]))
                  for j in range(a.shape[0]))
    return x.at(names.cell(x.name, "Z", x.row, x.col),
                f"Σ_j {alpha}{hh}[{x.q}, j] · {V}{hh}[j, {local}]", SUM, terms,
                note=f"Column {x.col} comes from head {head_of_col}." if hh else
                NO_WEIGHTS_NOTE.replace("the scores are X·Xᵀ", "the values are X")
                if _no_weights(c) else "")


def _output(x: _Cell) -> Explanation:
    """O: the context row times a column of W_out, plus b_out."""
    z, w = x.trace["context"][x.row], x.trace["W_out"][:, x.col]
    terms = dot_product_terms(z, w, [f"Z[{x.q}, {j}]·W_out[{j}, {x.col}]"
                                     for j in range(z.shape[0])])
    return x.at(x.names.cell(x.name, "O", x.row, x.col),
                f"Σ_j Z[{x.q}, j] · W_out[j, {x.col}] + b_out[{x.col}]", SUM, terms,
                offset=float(x.trace["b_out"][x.col]), offset_name=f"b_out[{x.col}]")


def _given(x: _Cell) -> Explanation:
    """A number that was drawn, typed or read: where it came from (`origin`)."""
    step = STEPS[x.name]
    symbol = step.symbol + (x.h if step.per_head else "")
    return x.at(x.names.cell(x.name, symbol, x.row, x.col),
                origin(x.trace, x.name, x.row, x.col, x.value), GIVEN, ())


EXPLAINERS: dict[str, Callable[[_Cell], Explanation]] = {
    "queries": _projection, "keys": _projection, "values": _projection,
    "attn_scores": _score, "scaled_scores": _score, "masked_scores": _score,
    "attn_weights": _weights, "dropped_weights": _dropped, "context": _context,
    "output": _output,
}
"""Each computed step's rule (`explorer.core.steps.STEPS` names); any other step's
cells were given (`_given`)."""


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
                    f"number as torch.manual_seed({c.seed}) followed by these draws in this "
                    "order")
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
