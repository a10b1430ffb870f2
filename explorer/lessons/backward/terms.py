"""Click a gradient's cell to see its terms: how one number of the backward
pass came to be, as an `explorer.lessons.explain.Explanation` (the forward
steps' click-to-explain type), e.g.

    dL/dQ["is", 0] = (Σ_j dL/dω̃["is", j] · K["j", 0]) / √head_dim

with the tokens' names. `Explanation.result()` recomputes the cell from its
terms (float64); the tests check it equals the gradient's matrix. Also here:
each gradient's symbol and formula as the page titles them (`SYMBOLS`, `formula`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.steps import STEPS, TOKENS
from explorer.core.tokenizer import token_labels
from explorer.lessons.backward.gradients import Gradients, row_jacobian
from explorer.lessons.backward.loss import IGNORE_INDEX
from explorer.lessons.backward.settings import NEXT_TOKEN
from explorer.lessons.explain import PRODUCT, SCALED, SUM, Explanation, Term, dot_product_terms

SYMBOLS = {
    "output": "dL/dO", "W_out": "dL/dW_out", "b_out": "dL/db_out", "context": "dL/dZ",
    "values": "dL/dV", "dropped_weights": "dL/dα′", "attn_weights": "dL/dα",
    "masked_scores": "dL/dω̂", "scaled_scores": "dL/dω̃", "attn_scores": "dL/dω",
    "queries": "dL/dQ", "keys": "dL/dK", "W_query": "dL/dW_query", "W_key": "dL/dW_key",
    "W_value": "dL/dW_value", "b_query": "dL/db_query", "b_key": "dL/db_key",
    "b_value": "dL/db_value", "embeddings": "dL/dX",
}
"""Each gradient's symbol, by the step it belongs to."""


def _softmax_input(gradients: Gradients) -> str:
    return "masked_scores" if gradients.trace.config.causal else "scaled_scores"


def formula(gradients: Gradients, name: str) -> str:
    """The rule the backward pass computes gradient ``name`` by, for this
    trace's config, e.g. ``"dL/dα = dL/dZ · Vᵀ"``. Raises ``KeyError`` for a
    gradient the trace does not have."""
    c = gradients.trace.config
    gradients[name]  # noqa: B018 - KeyError for a gradient this trace does not have
    mixing = "α′" if "dropped_weights" in gradients else "α"
    upstream = "dL/dω̃ / √head_dim" if c.scale else "dL/dω̃"
    loss = ("dL/dlogits · Uᵀ, dL/dlogits_i = (softmax(logits_i) − onehot(next token)) / N"
            if gradients.loss.kind == NEXT_TOKEN else "2 (O − T) / (n · d)")
    if name == "context" and "output" in gradients:
        loss = "dL/dO · W_outᵀ"
    norm = ("α ⊙ (dL/dα − rowsum(α ⊙ dL/dα)), each row J·dL/dα with J = diag(α) − α αᵀ"
            if c.normalization != "sum" else "(dL/dα − rowsum(α ⊙ dL/dα)) / rowsum(ω̂)")
    rules = {
        "output": loss, "context": loss, "W_out": "Zᵀ · dL/dO", "b_out": "Σ_i dL/dO_i",
        "values": f"{mixing}ᵀ · dL/dZ", "dropped_weights": "dL/dZ · Vᵀ",
        "attn_weights": ("dL/dα′ ⊙ D / (1 − p)" if mixing == "α′" else "dL/dZ · Vᵀ"),
        _softmax_input(gradients): norm,
        "attn_scores": upstream,
        "queries": "dL/dω · K = " + ("(dL/dω̃ · K) / √head_dim" if c.scale else "dL/dω̃ · K"),
        "keys": "dL/dωᵀ · Q = " + ("(dL/dω̃ᵀ · Q) / √head_dim" if c.scale else "dL/dω̃ᵀ · Q"),
        "W_query": "Xᵀ · dL/dQ (heads side by side)", "W_key": "Xᵀ · dL/dK (heads side by side)",
        "W_value": "Xᵀ · dL/dV (heads side by side)", "b_query": "Σ_i dL/dQ_i",
        "b_key": "Σ_i dL/dK_i", "b_value": "Σ_i dL/dV_i",
        "embeddings": "dL/dQ · W_queryᵀ + dL/dK · W_keyᵀ + dL/dV · W_valueᵀ (each summed over "
                      "the heads)",
    }
    if c.causal:
        rules["scaled_scores"] = "dL/dω̂ where kept, 0 where masked"
    return f"{SYMBOLS[name]} = {rules[name]}"


@dataclass(frozen=True)
class _Cell:
    """What each explainer is given: the gradients, the cell (``name``, ``row``,
    ``col``, ``head``), the head's suffix ``h`` and the row's and column's
    names ``r`` and ``k`` (quoted tokens or numbers), and ``at``: `Explanation`
    with the step, cell, position and value filled in."""

    grads: Gradients
    name: str
    row: int
    col: int
    head: int
    h: str
    r: str
    k: str
    labels: list[str]
    at: partial

    @property
    def trace(self):
        return self.grads.trace

    def token(self, i: int) -> str:
        return f'"{self.labels[i]}"'

    def per_head(self, name: str) -> Tensor:
        """Step ``name`` of the trace, head ``head``'s, as float64."""
        return self.trace.head(name, self.head).to(torch.float64)

    def grad(self, name: str) -> Tensor:
        """Gradient ``name``, head ``head``'s, as float64."""
        return self.grads.head(name, self.head).to(torch.float64)

    def side_by_side(self, name: str) -> Tensor:
        """Gradient ``name`` with its heads side by side, (n, n_heads·width), float64."""
        grad = self.grads[name].to(torch.float64)
        return att.combine_heads(grad) if grad.dim() == 3 else grad

    def column(self, width: int) -> tuple[int, int, str]:
        """For a column of a heads-side-by-side matrix (Z, W_query ...): its head,
        its column inside the head and the head's suffix."""
        if self.trace.config.n_heads == 1:
            return 0, self.col, ""
        return self.col // width, self.col % width, f"_{self.col // width}"


def explain_gradient(gradients: Gradients, name: str, row: int, col: int,
                     head: int = 0) -> Explanation:
    """The terms of cell ``(row, col)`` of gradient ``name`` (of head ``head``
    for a per-head step): an `Explanation` whose ``result()`` is the cell.
    Rows and columns are named by their tokens where the step's axis is tokens.
    A bias (one row) has row 0. Raises ``KeyError`` for a gradient the trace
    does not have and ``IndexError`` for a cell outside it."""
    matrix = gradients.head(name, head)
    bias = matrix.dim() == 1
    matrix = matrix[None] if bias else matrix
    if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]):
        raise IndexError(f"{SYMBOLS[name]} has no cell ({row}, {col}); its shape is "
                         f"{tuple(matrix.shape)}")
    trace, step = gradients.trace, STEPS[name]
    labels = token_labels(trace.tokens)
    per_head = trace.config.n_heads > 1 and trace.per_head(name)
    r = f'"{labels[row]}"' if step.rows.labels == TOKENS else str(row)
    k = f'"{labels[col]}"' if step.cols.labels == TOKENS else str(col)
    h = f"_{head}" if per_head else ""
    at = partial(Explanation, name, f"{SYMBOLS[name]}[{k}]" if bias
                 else f"{SYMBOLS[name]}{h}[{r}, {k}]", value=float(matrix[row, col]),
                 position=(f"head {head}, " if per_head else "") + f"row {row}, column {col}")
    cell = _Cell(gradients, name, row, col, head, h, r, k, labels, at)
    return EXPLAINERS[name](cell)


def _loss_rows(x: _Cell) -> Explanation:
    """dL/dO (or dL/dZ without out_proj): from the loss."""
    loss, i, c = x.grads.loss, x.row, x.col
    if loss.kind != NEXT_TOKEN:
        n, d = loss.rows.shape
        diff = float(loss.rows[i, c].double() - loss.targets[i, c].double())
        symbol = "O" if loss.rows_name == "output" else "Z"
        return x.at(f"2 · ({symbol}[{x.r}, {c}] − T[{x.r}, {c}]) / (n·d)", PRODUCT,
                    (Term(f"({symbol} − T)·2/(n·d)", (diff, 2 / (n * d)), diff * 2 / (n * d)),))
    d_logits = loss.grad_logits[i].to(torch.float64)
    u = loss.unembedding[c].to(torch.float64)
    terms = dot_product_terms(d_logits, u, [f'dL/dlogits[{x.r}, "{v}"]·U[{c}, "{v}"]'
                                            for v in loss.vocab])
    last = i == loss.rows.shape[0] - 1
    kept = int((loss.targets != IGNORE_INDEX).sum())
    note = ("The last position has no next token: it is left out of the loss, so its "
            "gradient is 0." if last else
            f"dL/dlogits[{x.r}, v] = (p_v − 1) / {kept} for the next token "
            f"(\"{x.labels[i + 1]}\") and p_v / {kept} for every other v, with p = "
            f"softmax(logits[{x.r}]) and {kept} the positions that have a next token.")
    return x.at(f"Σ_v dL/dlogits[{x.r}, v] · U[{c}, v]", SUM, terms, note=note)


def _out_weight(x: _Cell) -> Explanation:
    """dL/dW_out[a, b] = Σ_i Z[i, a] · dL/dO[i, b]."""
    z, d_o = x.per_head("context")[:, x.row], x.grad("output")[:, x.col]
    terms = dot_product_terms(z, d_o, [f"Z[{x.token(i)}, {x.row}]·dL/dO[{x.token(i)}, {x.col}]"
                                       for i in range(z.shape[0])])
    return x.at(f"Σ_i Z[i, {x.row}] · dL/dO[i, {x.col}]", SUM, terms)


def _column_sum(upstream: str) -> Callable[[_Cell], Explanation]:
    """dL/db[c] = Σ_i d(upstream)[i, c] (a bias is added to every row)."""
    def explain(x: _Cell) -> Explanation:
        column = x.side_by_side(upstream)[:, x.col]
        terms = tuple(Term(f"{SYMBOLS[upstream]}[{x.token(i)}, {x.col}]", (float(v),), float(v))
                      for i, v in enumerate(column))
        return x.at(f"Σ_i {SYMBOLS[upstream]}[i, {x.col}]", SUM, terms)
    return explain


def _context(x: _Cell) -> Explanation:
    """dL/dZ[i, a] = Σ_b dL/dO[i, b] · W_out[a, b] (without out_proj: the loss's)."""
    if "output" not in x.grads:
        return _loss_rows(x)
    d_o, w = x.grad("output")[x.row], x.trace["W_out"][x.col].to(torch.float64)
    terms = dot_product_terms(d_o, w, [f"dL/dO[{x.r}, {b}]·W_out[{x.col}, {b}]"
                                       for b in range(d_o.shape[0])])
    return x.at(f"Σ_b dL/dO[{x.r}, b] · W_out[{x.col}, b]", SUM, terms)


def _head_context(x: _Cell) -> Tensor:
    """This head's columns of dL/dZ, (n, hv), float64."""
    width = x.trace.config.head_dim_v
    return x.grads["context"].to(torch.float64)[:, x.head * width:(x.head + 1) * width]


def _mixing(x: _Cell) -> tuple[str, Tensor]:
    """The weights Z was mixed with: α′ after dropout, else α (this head's)."""
    name = "dropped_weights" if "dropped_weights" in x.trace else "attn_weights"
    return ("α′" if name == "dropped_weights" else "α") + x.h, x.per_head(name)


def _values(x: _Cell) -> Explanation:
    """dL/dV[j, c] = Σ_i α′[i, j] · dL/dZ[i, c]."""
    symbol, weights = _mixing(x)
    d_z = _head_context(x)
    terms = dot_product_terms(weights[:, x.row], d_z[:, x.col],
                              [f"{symbol}[{x.token(i)}, {x.r}]·dL/dZ{x.h}[{x.token(i)}, {x.col}]"
                               for i in range(d_z.shape[0])])
    return x.at(f"Σ_i {symbol}[i, {x.r}] · dL/dZ{x.h}[i, {x.col}]", SUM, terms)


def _weights_from_context(x: _Cell) -> Explanation:
    """dL/dα′[i, j] (or dL/dα without dropout) = Σ_c dL/dZ[i, c] · V[j, c]."""
    d_z, v = _head_context(x)[x.row], x.per_head("values")[x.col]
    terms = dot_product_terms(d_z, v, [f"dL/dZ{x.h}[{x.r}, {c}]·V{x.h}[{x.k}, {c}]"
                                       for c in range(v.shape[0])])
    return x.at(f"Σ_c dL/dZ{x.h}[{x.r}, c] · V{x.h}[{x.k}, c]", SUM, terms)


def _attn_weights(x: _Cell) -> Explanation:
    """dL/dα = dL/dα′ · D / (1 − p) with dropout, else from the context."""
    p = x.trace.config.dropout
    if "dropped_weights" not in x.grads:
        return _weights_from_context(x)
    upstream = float(x.grad("dropped_weights")[x.row, x.col])
    kept = float(x.per_head("dropout_mask")[x.row, x.col])
    term = Term("dL/dα′·D/(1−p)", (upstream, kept, 1 / (1 - p)), upstream * kept / (1 - p))
    return x.at(f"dL/dα′{x.h}[{x.r}, {x.k}] · D{x.h}[{x.r}, {x.k}] / (1 − p)", PRODUCT, (term,))


def _normalization(x: _Cell) -> Explanation:
    """dL/dω̃[i, j] = Σ_k J[k, j] · dL/dα[i, k], J = ∂α/∂ω̃ of the row
    (`explorer.lessons.backward.gradients.row_jacobian`: softmax
    diag(α) − α αᵀ; sum (δ_kj − α_k) / S)."""
    jac = row_jacobian(x.trace, x.row, x.head).to(torch.float64)
    d_weights = x.grad("attn_weights")[x.row]
    rule = ("J = diag(α) − α αᵀ of the row" if x.trace.config.normalization != "sum" else
            "J[k, j] = (δ_kj − α_k) / Σ_k ω̂_k")
    labels = [x.token(j) for j in range(jac.shape[0])]
    terms = dot_product_terms(jac[:, x.col], d_weights,
                              [f"J[{key}, {x.k}]·dL/dα{x.h}[{x.r}, {key}]" for key in labels])
    return x.at(f"Σ_k J[k, {x.k}] · dL/dα{x.h}[{x.r}, k], {rule}", SUM, terms)


def _unmasked(x: _Cell) -> Explanation:
    """dL/dω̃ (causal): dL/dω̂ where the key is kept, 0 where it is masked."""
    if x.name != "scaled_scores" or not x.trace.config.causal:
        return _normalization(x)
    kept = 0.0 if bool(x.trace["causal_mask"][x.row, x.col]) else 1.0
    upstream = float(x.grad("masked_scores")[x.row, x.col])
    note = (f"Key {x.k} comes after query {x.r}: its score was masked to −∞, so it has no "
            "effect on the loss and gets no gradient." if not kept else "")
    return x.at(f"dL/dω̂{x.h}[{x.r}, {x.k}] · (1 if kept else 0)", PRODUCT,
                (Term("dL/dω̂·kept", (upstream, kept), upstream * kept),), note=note)


def _scores(x: _Cell) -> Explanation:
    """dL/dω = dL/dω̃ / √head_dim."""
    c = x.trace.config
    upstream = float(x.grad("scaled_scores")[x.row, x.col])
    term = (Term(f"dL/dω̃{x.h}[{x.r}, {x.k}]", (upstream,), upstream),)
    if not c.scale:
        return x.at(f"dL/dω̃{x.h}[{x.r}, {x.k}] (scaling off)", SUM, term)
    return x.at(f"dL/dω̃{x.h}[{x.r}, {x.k}] / √{c.head_dim}", SCALED, term,
                divisor=math.sqrt(c.head_dim))


def _query_or_key(x: _Cell) -> Explanation:
    """dL/dq_i,c = Σ_j dL/dω̃_ij · k_j,c / √head_dim (keys: Σ_i dL/dω̃_ij · q_i,c / √head_dim)."""
    c = x.trace.config
    d_scaled = x.grad("scaled_scores")
    if x.name == "queries":
        upstream, other, letter = d_scaled[x.row], x.per_head("keys")[:, x.col], "K"
        labels = [f"dL/dω̃{x.h}[{x.r}, {x.token(j)}]·K{x.h}[{x.token(j)}, {x.col}]"
                  for j in range(other.shape[0])]
        rule = f"Σ_j dL/dω̃{x.h}[{x.r}, j] · K{x.h}[j, {x.col}]"
    else:
        upstream, other, letter = d_scaled[:, x.row], x.per_head("queries")[:, x.col], "Q"
        labels = [f"dL/dω̃{x.h}[{x.token(i)}, {x.r}]·Q{x.h}[{x.token(i)}, {x.col}]"
                  for i in range(other.shape[0])]
        rule = f"Σ_i dL/dω̃{x.h}[i, {x.r}] · Q{x.h}[i, {x.col}]"
    terms = dot_product_terms(upstream, other, labels)
    if not c.scale:
        return x.at(rule + " (scaling off)", SUM, terms)
    return x.at(f"({rule}) / √{c.head_dim}", SCALED, terms, divisor=math.sqrt(c.head_dim),
                note=f"dL/dω̃ is the gradient at the scaled scores; ÷√{c.head_dim} is the "
                     f"scaling's own derivative, dL/dω = dL/dω̃ / √{c.head_dim}.")


def _projection_weight(step: str) -> Callable[[_Cell], Explanation]:
    """dL/dW[a, col] = Σ_i X[i, a] · dL/dQ[i, col], col in its head's block."""
    def explain(x: _Cell) -> Explanation:
        d = x.grads[step].to(torch.float64)
        width = d.shape[-1]
        head, local, hh = x.column(width)
        upstream = (d[head] if d.dim() == 3 else d)[:, local]
        symbol = SYMBOLS[step]
        terms = dot_product_terms(
            x.trace["embeddings"][:, x.row].to(torch.float64), upstream,
            [f"X[{x.token(i)}, {x.row}]·{symbol}{hh}[{x.token(i)}, {local}]"
             for i in range(upstream.shape[0])])
        note = (f"Column {x.col} belongs to head {head} (its column {local}): only that "
                "head's gradient reaches it." if hh else "")
        return x.at(f"Σ_i X[i, {x.row}] · {symbol}{hh}[i, {local}]", SUM, terms, note=note)
    return explain


def _embeddings(x: _Cell) -> Explanation:
    """dL/dX[i, a] = Σ_c dL/dQ[i, c] W_query[a, c] + the same through K and V."""
    terms: list[Term] = []
    for step, weight in (("queries", "W_query"), ("keys", "W_key"), ("values", "W_value")):
        d, w = x.side_by_side(step)[x.row], x.trace[weight][x.col].to(torch.float64)
        terms += dot_product_terms(d, w, [f"{SYMBOLS[step]}[{x.r}, {c}]·{weight}[{x.col}, {c}]"
                                          for c in range(w.shape[0])])
    return x.at(f"Σ_c dL/dQ[{x.r}, c] · W_query[{x.col}, c] + Σ_c dL/dK[{x.r}, c] · "
                f"W_key[{x.col}, c] + Σ_c dL/dV[{x.r}, c] · W_value[{x.col}, c]", SUM,
                tuple(terms), note="X feeds the queries, the keys and the values: its gradient "
                                   "is the sum of the three paths, over every head.")


EXPLAINERS = {
    "output": _loss_rows, "W_out": _out_weight, "b_out": _column_sum("output"),
    "context": _context, "values": _values, "dropped_weights": _weights_from_context,
    "attn_weights": _attn_weights, "masked_scores": _normalization,
    "scaled_scores": _unmasked, "attn_scores": _scores, "queries": _query_or_key,
    "keys": _query_or_key, "W_query": _projection_weight("queries"),
    "W_key": _projection_weight("keys"), "W_value": _projection_weight("values"),
    "b_query": _column_sum("queries"), "b_key": _column_sum("keys"),
    "b_value": _column_sum("values"), "embeddings": _embeddings,
}
"""Each gradient's rule, by the step it belongs to."""
