"""How one number of the Modern attention page came to be: any cell of its
charts explained as data, as `explorer.lessons.explain` explains the chapter-3 steps.

`explain_modern_cell(trace, chart, row, col, head, labels)` returns the same
`explorer.lessons.explain.Explanation` (formula, terms, how they combine), so the page
writes it out with the same box, and ``Explanation.result()`` recomputes the
cell from its terms (the tests check it against the chart's value). Each chart
has one rule in `EXPLAINERS`; `CHARTS` names them, and the page's link names a
clicked cell by them (``modern_cell=scores-after:3,1``).

The rules are the page's own recipes (`explorer.modern.attention`): RoPE's turn of a pair
(RoFormer eq. 34; transformers' ``apply_rotary_pos_emb``), the scaled scores of
a query head and the K/V head it reads (GQA), the masked softmax (causal or the
sliding window), the decoded row read from the KV cache, and FlashAttention's
unnormalised output O after a tile (FlashAttention-2, Algorithm 1), whose
corrections fold into one: every term is rescaled to the running maximum m.

Pure torch, no UI.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from explorer.lessons.explain import (
    GIVEN,
    MASKED,
    RATIO,
    SCALED,
    SUM,
    Explanation,
    Term,
    dot_product_terms,
    softmax_terms,
)
from explorer.modern import attention as modern
from explorer.modern.attention import ModernTrace


@dataclass(frozen=True)
class _Cell:
    """What each chart's rule is given: the trace, the query head ``head`` and
    the K/V head ``kv`` it reads, the cell (``row``: a token's position,
    ``col``), the token ``labels`` quoted, and ``at``: `Explanation` with the
    chart, position and value filled in."""

    trace: ModernTrace
    chart: str
    row: int
    col: int
    head: int
    kv: int
    labels: tuple[str, ...]
    at: Callable[..., Explanation]

    @property
    def config(self) -> modern.ModernConfig:
        return self.trace.config

    def token(self, i: int) -> str:
        return f'"{self.labels[i]}"'


def _pair(x: _Cell) -> tuple[int, int, int]:
    """Column ``x.col``'s RoPE pair: (pair index i, the partner dimension, the
    sign of the partner's term: −1 for the first of the pair, as rotate_pairs
    turns (a, b) into (−b, a))."""
    for i, (first, second) in enumerate(modern.rope_pairs(x.config.head_dim,
                                                          x.config.rope_pairing)):
        if x.col in (first, second):
            return (i, second, -1) if x.col == first else (i, first, 1)
    raise IndexError(f"dimension {x.col} is in no pair")


def _angle(x: _Cell, i: int) -> str:
    """``m·θ_i`` written out for the cell's row."""
    m = x.config.rope_offset + x.row
    theta = float(modern.rope_frequencies(x.config.head_dim, x.config.rope_base)[i])
    return f"m·θ_{i} = {m} × {theta:.6g} = {m * theta:.6g} rad"


def _table(x: _Cell) -> Explanation:
    """cos or sin of the angle its position turns pair i by."""
    i, _, _ = _pair(x)
    fn = "cos" if x.chart == "cos" else "sin"
    return x.at(f"{fn}[{x.token(x.row)}, {x.col}]",
                f"{fn}(m·θ_{i}), θ_{i} = base^(−2·{i}/head_dim); {_angle(x, i)}", GIVEN, (),
                note=f"Dimension {x.col} is in pair {i}, which turns by θ_{i} per position.")


def _projection(x: _Cell) -> Explanation:
    """Q of a head before RoPE: X's row times a column of W_query."""
    d = x.config.head_dim
    col = x.head * d + x.col
    terms = dot_product_terms(x.trace.embeddings[x.row], x.trace.W_query[:, col],
                              [f"X[{x.token(x.row)}, {j}]·W_query[{j}, {col}]"
                               for j in range(x.trace.embeddings.shape[1])])
    return x.at(f"Q_{x.head}[{x.token(x.row)}, {x.col}]",
                f"Σ_j X[{x.token(x.row)}, j] · W_query[j, {col}]", SUM, terms,
                note=f"Head {x.head} is columns {x.head * d} … {x.head * d + d - 1} of X·W_query.")


def _rotated(x: _Cell) -> Explanation:
    """Q or K after RoPE: the number times cos, plus its partner's (signed) times sin."""
    is_key = x.chart == "k-shared"
    before = (x.trace.keys[x.kv] if is_key else x.trace.queries[x.head])[x.row]
    name = f"K_{x.kv}" if is_key else f"Q_{x.head}"
    i, partner, sign = _pair(x)
    cos, sin = float(x.trace.cos[x.row, x.col]), float(x.trace.sin[x.row, x.col])
    cell, formula, terms = rotation_terms(name, x.token(x.row), x.col, (i, partner, sign),
                                          before, cos, sin)
    return x.at(cell, formula, SUM, terms,
                note=f"Dimension {x.col} turns with dimension {partner} (pair {i}); {_angle(x, i)}.")


def rotation_terms(name: str, token: str, col: int, pair: tuple[int, int, int], before: Tensor,
                   cos: float, sin: float) -> tuple[str, str, tuple[Term, Term]]:
    """The cell, formula and two terms of one number after RoPE: ``name[token, col]``
    of ``before`` (one row, (head_dim,)) times ``cos``, plus its partner's, signed by
    the rotation, times ``sin``. ``pair``: (pair index i, partner dimension, sign ±1).
    RoFormer's eq. 34, as transformers' ``q · cos + rotate_half(q) · sin``; also the
    Real model page's (`explorer.models.explain`)."""
    i, partner, sign = pair
    at = f"[{token}, "
    terms = (Term(f"{name}{at}{col}]·cos(m·θ_{i})", (float(before[col]), cos),
                  float(before[col]) * cos),
             Term(f"{'−' if sign < 0 else ''}{name}{at}{partner}]·sin(m·θ_{i})",
                  (sign * float(before[partner]), sin), sign * float(before[partner]) * sin))
    op = "−" if sign < 0 else "+"
    return (f"{name}′{at}{col}]",
            f"{name}{at}{col}] · cos(m·θ_{i}) {op} {name}{at}{partner}] · sin(m·θ_{i})", terms)


def _score(x: _Cell) -> Explanation:
    """A score of a query head and the K/V head it reads, ÷ √head_dim; with RoPE
    the rotated ones; on the tile chart −∞ above the diagonal (masked)."""
    rope = x.chart != "scores-before"
    prime = "′" if rope else ""
    cell = f"S{prime}_{x.head}[{x.token(x.row)}, {x.token(x.col)}]"
    if x.chart == "tile" and x.col > x.row:
        return x.at(cell, "−∞ (masked)", MASKED, (),
                    note=f"Key {x.token(x.col)} comes after query {x.token(x.row)}: causal.")
    queries = x.trace.queries_rope if rope else x.trace.queries
    keys = x.trace.keys_rope if rope else x.trace.keys
    q, k = queries[x.head, x.row], keys[x.kv, x.col]
    terms = dot_product_terms(q, k, [f"q{prime}[{d}]·k{prime}[{d}]" for d in range(q.shape[0])])
    m, n = x.config.rope_offset + x.row, x.config.rope_offset + x.col
    note = (f"q′ turned for position m = {m}, k′ for n = {n}: they meet at m − n = {m - n}, so "
            "any offset gives the same number." if rope else "")
    return x.at(cell, f"q{prime}_{x.head}[{x.token(x.row)}] · k{prime}_{x.kv}[{x.token(x.col)}]"
                f" / √{x.config.head_dim}, K/V head {x.kv}", SCALED, terms,
                divisor=math.sqrt(x.config.head_dim), note=note)


def _masked_weights(x: _Cell) -> Explanation:
    """A weight of the causal or windowed attention: softmax over the keys the
    query sees (the others −∞, weight 0)."""
    window = x.chart == "window-weights"
    seen = (x.trace.window_mask if window else modern.causal_allowed(x.trace.n_tokens))[x.row]
    scores = x.trace.scores_rope[x.head, x.row].masked_fill(~seen, float("-inf"))
    return _softmax(x, scores, "the keys outside the window" if window else
                    "the keys after the query")


def _decoded(x: _Cell) -> Explanation:
    """A weight of the row decoded at position ``x.row``: softmax over the
    cached keys 0 … row (the prefill's rows: causal attention of the prefill)."""
    c, decoding = x.config, x.trace.decoding
    if x.row < c.prefill:
        scores = decoding.prefill.attn_scores[x.head, x.row, :x.row + 1]
    else:
        scores = decoding.steps[x.row - c.prefill].attn_scores[x.head]
    return _softmax(x, scores, None)


def _softmax(x: _Cell, scores: Tensor, hidden: str | None) -> Explanation:
    """The weight as a softmax over the row ``scores`` (−∞ where ``hidden``)."""
    terms, m = softmax_terms(scores, [f"key {x.token(j)}" for j in range(scores.shape[0])])
    q, k = x.token(x.row), x.token(x.col)
    return x.at(f"α_{x.head}[{q}, {k}]",
                f"exp(S′[{q}, {k}] − m) / Σ_j exp(S′[{q}, j] − m), m = the row's max", RATIO,
                terms, numerator=terms[x.col].value,
                note=f"m = {m:.4f}" + (f"; masked to −∞ (weight 0): {hidden}." if hidden else "."))


def _tile_output(x: _Cell) -> Explanation:
    """O after the shown tile (not yet divided by ℓ): Σ over the keys read so far
    of exp(S − m′)·V, m′ the running maximum after this tile; the corrections
    exp(m_old − m_new) of the earlier tiles have rescaled their terms to m′."""
    step = shown_tile(x.trace)
    r = x.row - step.rows.start
    m = float(step.m_new[x.head, r])
    read = range(0, min(step.cols.stop, x.row + 1))  # the causal keys of tiles 0 … this one
    scores = x.trace.scores_rope[x.head, x.row, read.start:read.stop].to(torch.float64)
    weights = torch.exp((scores - m).to(torch.float32)).to(torch.float64)
    v = x.trace.values[x.kv, read.start:read.stop, x.col].to(torch.float64)
    terms = tuple(Term(f"exp(S′[{x.token(x.row)}, {x.token(j)}] − m′)·V[{x.token(j)}, {x.col}]",
                       (float(weights[j]), float(v[j])), float(weights[j] * v[j]))
                  for j in read)
    return x.at(f"O_{x.head}[{x.token(x.row)}, {x.col}]",
                f"Σ_j exp(S′[{x.token(x.row)}, j] − m′) · V_{x.kv}[j, {x.col}] over keys "
                f"0 … {read.stop - 1}", SUM, terms,
                note=f"m′ = {m:.4f}, the row's running maximum after key tile {step.k_tile}; "
                     "each earlier tile's terms were rescaled to it by exp(m_old − m_new).")


WINDOW_CHARTS = {"mask-window": modern.WINDOW_KEYS, "mask-window-earlier": modern.WINDOW_EARLIER}
"""The window's two charts and the convention each draws."""


def _mask(x: _Cell) -> Explanation:
    """Whether the query sees the key: causal j ≤ i; the window i − w < j ≤ i
    (w keys) or, Mistral's count, i − w ≤ j ≤ i (the query and w earlier)."""
    i, j, w = x.row, x.col, x.config.window
    rule = {"mask-window": f"{i} − {w} < {j} ≤ {i}",
            "mask-window-earlier": f"{i} − {w} ≤ {j} ≤ {i}"}.get(x.chart, f"{j} ≤ {i}")
    seen = bool(chart_matrix(x.trace, x.chart, x.head)[i, j])
    return x.at(f"mask[{x.token(i)}, {x.token(j)}]",
                f"{'seen' if seen else 'hidden'}: {rule} is {'true' if seen else 'false'}",
                GIVEN, ())


def shown_tile(trace: ModernTrace) -> modern.TileStep:
    """The tile step whose O the trace kept (the page's ``tile``; the first when
    the trace kept every one)."""
    return next(s for s in trace.flash.steps if s.O is not None)


def chart_rows(trace: ModernTrace, chart: str, position: int = 0) -> list[int] | None:
    """The token position of each row the page's ``chart`` shows, where they are
    not all the tokens (None): the decoded row shows token ``position`` alone
    (and only its cached keys 0 … position: `chart_columns`), the tile output
    the shown tile's query rows."""
    if chart == "decode-row":
        return [position]
    if chart == "tile-output":
        return list(shown_tile(trace).rows)
    return None


def chart_columns(chart: str, position: int = 0) -> int | None:
    """How many columns the page's ``chart`` shows where it is not all of them
    (None): the decoded row of token ``position`` shows the keys in the cache
    when it is read, 0 … position."""
    return position + 1 if chart == "decode-row" else None


def chart_matrix(trace: ModernTrace, chart: str, head: int) -> Tensor:
    """The matrix of the page's ``chart`` (`CHARTS`) for query head ``head``, one
    row per token (`chart_rows` says which of them the chart shows): (n, head_dim)
    for cos, sin, Q, K and O; (n, n) for scores, weights and masks (the masks as
    1.0 = seen, the tile's masked scores −∞). The tile output's rows outside its
    tile are NaN."""
    c = trace.config
    kv = modern.kv_head_of(c.n_heads, c.n_kv_heads)[head]
    if chart == "decode-row":
        return modern.decoded_weights(trace.decoding, trace.n_tokens, head)
    if chart == "tile-output":
        step = shown_tile(trace)
        full = torch.full((trace.n_tokens, step.O.shape[-1]), float("nan"))
        full[step.rows.start:step.rows.stop] = step.O[head]
        return full
    if chart in WINDOW_CHARTS:
        return (trace.window_mask if chart == "mask-window" else trace.window_mask_earlier).float()
    if chart in ("mask-causal", "tile"):
        causal = modern.causal_allowed(trace.n_tokens)
        return causal.float() if chart == "mask-causal" else \
            trace.scores_rope[head].masked_fill(~causal, float("-inf"))
    return {"cos": trace.cos, "sin": trace.sin, "q-before": trace.queries[head],
            "q-after": trace.queries_rope[head], "k-shared": trace.keys_rope[kv],
            "scores-before": trace.scores_no_rope[head], "scores-after": trace.scores_rope[head],
            "gqa-weights": trace.causal.attn_weights[head],
            "window-weights": trace.windowed.attn_weights[head]}[chart]


EXPLAINERS: dict[str, Callable[[_Cell], Explanation]] = {
    "cos": _table, "sin": _table, "q-before": _projection, "q-after": _rotated,
    "k-shared": _rotated, "scores-before": _score, "scores-after": _score,
    "gqa-weights": _masked_weights, "window-weights": _masked_weights, "mask-causal": _mask,
    "mask-window": _mask, "mask-window-earlier": _mask, "decode-row": _decoded, "tile": _score, "tile-output": _tile_output,
}
"""Each chart of the page (its key, as `explorer.ui.modern` draws it) and its rule."""
CHARTS = tuple(EXPLAINERS)


def explain_modern_cell(trace: ModernTrace, chart: str, row: int, col: int, head: int,
                        labels: list[str] | tuple[str, ...]) -> Explanation:
    """Explain cell ``(row, col)`` of the page's chart ``chart`` (`CHARTS`) for
    query head ``head``; ``row`` is the token's position (also on the decoded
    row's and the tile output's charts, whose rows are one token or one tile);
    ``labels``: the token labels. Raises ``KeyError`` for an unknown chart and
    ``IndexError`` for a head or cell outside it (on the tile output, outside the
    tile's rows; on the decoded row, a key not yet in the cache)."""
    c = trace.config
    explainer = EXPLAINERS[chart]
    if not 0 <= head < c.n_heads:
        raise IndexError(f"there is no query head {head}; the page has {c.n_heads}")
    kv = modern.kv_head_of(c.n_heads, c.n_kv_heads)[head]
    matrix = chart_matrix(trace, chart, head)
    if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]) or (
            chart == "tile-output" and row not in shown_tile(trace).rows) or (
            col >= (chart_columns(chart, row) or matrix.shape[1])):
        raise IndexError(f"{chart} has no cell ({row}, {col}); its shape is "
                         f"{tuple(matrix.shape)}")
    per_head = chart not in ("cos", "sin", "mask-causal", *WINDOW_CHARTS)
    where = f"K/V head {kv}, " if chart == "k-shared" else f"head {head}, " if per_head else ""
    return explainer(_Cell(trace, chart, row, col, head, kv, tuple(labels), partial(
        Explanation, chart, value=float(matrix[row, col]),
        position=f"{where}row {row}, column {col}")))
