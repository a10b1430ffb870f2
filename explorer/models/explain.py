"""How one number of a Llama-family layer came to be: any cell of the Real model
page's decoder charts explained as data, as `explorer.lessons.explain` explains
the chapter-3 steps.

`chart_matrix(trace, head_slice, chart)` is the 2-D matrix a chart draws (one
query head's slice of `explorer.models.llama.compute_decoder_trace`'s steps,
`explorer.models.llama.head_slice`; a generated token's row of
`explorer.models.generation.generate`), and `explain_decoder_cell` returns the
`explorer.lessons.explain.Explanation` of one of its cells: the formula, its
terms, how they combine. ``Explanation.result()`` recomputes the cell from its
terms; the tests check it against the chart's value.

The rules are transformers' (``modeling_llama.py``: ``LlamaRMSNorm``,
``apply_rotary_pos_emb``, ``repeat_kv``, ``eager_attention_forward``; QK-norm
from ``modeling_qwen3.py``), as `explorer.models.llama` computes them. The
scores are multiplied by the model's own ``scaling`` (1/√head_dim, Gemma 3:
query_pre_attn_scalar^(−½)), written as the division it is.

Pure torch; imports no transformers (the page's state declares `CHARTS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from explorer.lessons.explain import (
    GIVEN,
    MASKED,
    PRODUCT,
    RATIO,
    SCALED,
    SUM,
    Explanation,
    Term,
    dot_product_terms,
    softmax_terms,
)
from explorer.models.layer_steps import COLUMN, KV_COLUMNS, KV_HEAD, LAYER, LAYER_STEPS, ROW
from explorer.modern.explain import rotation_terms

STEP_CHARTS = tuple(step.name for step in LAYER_STEPS if step.charted)
"""The charts of one layer and one query head, in pipeline order
(`explorer.models.layer_steps`): every step of
`explorer.models.llama.DECODER_STEPS` but the token ids, and the head's own
share of the output (``head_output``). A model draws those its trace holds."""
GENERATION_CHARTS = ("generated_scores", "generated_weights", "generated_rows")
"""The generation's charts: the token picked on the slider's one row of
scaled scores and of weights over the cache, and every generated row at once."""
CHARTS = STEP_CHARTS + GENERATION_CHARTS
"""Every chart the page can explain a cell of (the ``decoder_cell`` entry names them)."""
ROW_VECTORS = tuple(step.name for step in LAYER_STEPS if step.layout == ROW)
"""Vectors drawn as one row (their columns: dimensions)."""
TOKEN_COLUMN = tuple(step.name for step in LAYER_STEPS if step.layout == COLUMN)
"""Vectors drawn as one column (their rows: tokens)."""
FULL_LAYER = tuple(step.name for step in LAYER_STEPS if step.charted and step.cut == LAYER)
"""Charts that every query head shares (the others are the head's, or its K/V head's)."""
KV_CHARTS = tuple(step.name for step in LAYER_STEPS if step.cut in (KV_HEAD, KV_COLUMNS))
"""Charts of the K/V head the query head reads."""


def chart_matrix(trace: Any, head_slice: Any, chart: str, generation: Any = None,
                 generated: int = 0) -> Tensor:
    """The 2-D matrix chart ``chart`` draws: the step of ``head_slice``
    (`explorer.models.llama.HeadSlice`) or of the whole ``trace``; a vector as
    one row (1, d) or, ``rms``, one column (n, 1). The generation's charts:
    ``generated_scores`` / ``generated_weights`` (1, position + 1) of generated
    token ``generated`` (its index in ``generation.generated``) and query head
    ``head_slice.head``; ``generated_rows`` (n_generated, n_tokens), zero right of
    each row's end (`explorer.models.generation.Generation.weights_matrix`).
    Raises ``KeyError`` for a chart this trace or generation does not have."""
    head = head_slice.head
    if chart in GENERATION_CHARTS:
        if generation is None or not generation.generated:
            raise KeyError(f"{chart}: no generated tokens")
        if chart == "generated_rows":
            return generation.weights_matrix()[head]
        token = generation.generated[generated]
        row = token.scaled_scores if chart == "generated_scores" else token.attn_weights
        return row[head][None]
    if chart not in STEP_CHARTS:
        raise KeyError(f"there is no chart {chart!r}")
    steps = head_slice.steps
    tensor = steps[chart] if chart in steps else trace[chart]
    if chart in TOKEN_COLUMN:
        return tensor[:, None]
    return tensor[None] if tensor.dim() == 1 else tensor


@dataclass(frozen=True)
class _Cell:
    """What each chart's rule is given: the trace, the head's slice ``s`` (its
    ``steps``), the cell, the token ``labels``, the generation and the generated
    token shown, and ``at``: `Explanation` with the chart, position and value
    filled in."""

    trace: Any
    s: Any
    chart: str
    row: int
    col: int
    labels: tuple[str, ...]
    generation: Any
    generated: int
    value: float
    at: Callable[..., Explanation]

    @property
    def config(self) -> Any:
        return self.trace.config

    def step(self, name: str) -> Tensor:
        return self.s.steps[name] if name in self.s.steps else self.trace[name]

    def token(self, i: int) -> str:
        return f'"{self.labels[i]}"' if 0 <= i < len(self.labels) else str(i)

    @property
    def h(self) -> int:
        return self.s.head

    @property
    def kv(self) -> int:
        return self.s.kv_head


_ORIGIN = {
    "layer_input": "the residual stream entering the layer, caught from the model's own forward "
                   "pass (LlamaDecoderLayer's hidden_states)",
    "input_norm": "input_layernorm.weight, read from the checkpoint",
    "W_query": "q_proj.weight, transposed, read from the checkpoint",
    "W_key": "k_proj.weight, transposed, read from the checkpoint",
    "W_value": "v_proj.weight, transposed, read from the checkpoint",
    "b_query": "q_proj.bias, read from the checkpoint", "b_key": "k_proj.bias",
    "b_value": "v_proj.bias", "b_out": "o_proj.bias, read from the checkpoint",
    "q_norm": "q_norm.weight (QK-norm), read from the checkpoint",
    "k_norm": "k_norm.weight (QK-norm), read from the checkpoint",
    "W_out": "o_proj.weight, transposed: this head's rows of it",
}
_PROJECTIONS = {"queries": ("Q", "W_query", "b_query"), "keys": ("K", "W_key", "b_key"),
                "values": ("V", "W_value", "b_value")}


def _given(x: _Cell) -> Explanation:
    """A number read from the checkpoint or caught from the model's pass; a head's
    slice of a weight named by its place in the whole matrix (W_query[j, h·e + c])."""
    e = x.config.head_dim
    row, col, note = x.row, x.col, ""
    if x.chart in ("W_query", "b_query", "W_key", "W_value", "b_key", "b_value"):
        head = x.h if x.chart.endswith("query") else x.kv
        col = head * e + x.col
        kind = "query" if x.chart.endswith("query") else "K/V"
        note = f"Column {x.col} of the slice: {kind} head {head}'s columns start at {head * e}."
    elif x.chart == "W_out":
        row = x.h * e + x.row
        note = f"Row {x.row} of the slice: head {x.h}'s rows of W_out start at {x.h * e}."
    name = f"{x.chart}[{col}]" if x.chart in ROW_VECTORS else f"{x.chart}[{row}, {col}]"
    return x.at(name, _ORIGIN.get(x.chart, "given"), GIVEN, (), note=note)


def _rms(x: _Cell) -> Explanation:
    """rms of a token's row: √(mean(x²) + eps)."""
    row = x.trace["layer_input"][x.row].to(torch.float64)
    d, eps = row.shape[0], x.config.rms_eps
    mean = float(row.pow(2).mean())
    return x.at(f"rms[{x.token(x.row)}]", f"√(Σ_j layer_input[{x.token(x.row)}, j]² / {d} + eps)",
                GIVEN, (), note=f"mean of the squares {mean:.6g}, eps {eps:g}: "
                                f"√{mean + eps:.6g} = {math.sqrt(mean + eps):.6g}.")


def _normed(x: _Cell) -> Explanation:
    """RMSNorm: x / rms(x) · (offset + w), one product."""
    c = x.config
    if x.chart == "embeddings":
        source, weight, what = x.trace["layer_input"][x.row], x.trace["input_norm"], "layer_input"
        wname = "input_norm"
    else:
        before = "queries" if x.chart == "queries_normed" else "keys"
        source, what = x.step(before)[x.row], before
        weight, wname = x.step("q_norm" if before == "queries" else "k_norm"), (
            "q_norm" if before == "queries" else "k_norm")
    source = source.to(torch.float64)
    inv = 1.0 / math.sqrt(float(source.pow(2).mean()) + c.rms_eps)
    scale = c.norm_offset + float(weight[x.col])
    value = float(source[x.col]) * inv * scale
    w_text = f"({c.norm_offset:g} + {wname}[{x.col}])" if c.norm_offset else f"{wname}[{x.col}]"
    note = ("QK-norm: each head's row is RMS-normalised on its own "
            f"{source.shape[0]} numbers, before RoPE." if x.chart != "embeddings" else
            "RMSNorm (input_layernorm): the row divided by its root mean square, times the weight.")
    return x.at(f"{x.chart}[{x.token(x.row)}, {x.col}]",
                f"{what}[{x.token(x.row)}, {x.col}] / rms · {w_text}", PRODUCT,
                (Term(f"{what} · 1/rms · {wname}", (float(source[x.col]), inv, scale), value),),
                note=note)


def _projection(x: _Cell) -> Explanation:
    """Q, K or V of the head: X's row times a column of the weight (+ its bias)."""
    letter, weight, bias = _PROJECTIONS[x.chart]
    e = x.config.head_dim
    head = x.kv if x.chart != "queries" else x.h
    full_col = head * e + x.col
    X = x.trace["embeddings"]
    terms = dot_product_terms(X[x.row], x.step(weight)[:, x.col],
                              [f"X[{x.token(x.row)}, {j}]·{weight}[{j}, {full_col}]"
                               for j in range(X.shape[1])])
    has_bias = bias in x.s.steps
    offset = float(x.step(bias)[x.col]) if has_bias else 0.0
    which = f"K/V head {head}" if x.chart != "queries" else f"query head {head}"
    return x.at(f"{letter}_{head}[{x.token(x.row)}, {x.col}]",
                f"Σ_j X[{x.token(x.row)}, j] · {weight}[j, {full_col}]"
                + (f" + {bias}[{full_col}]" if has_bias else ""), SUM, terms,
                offset=offset, offset_name=f"{bias}[{full_col}]" if has_bias else "",
                note=f"{which} is columns {head * e} … {head * e + e - 1} of X·{weight}.")


def _frequency(x: _Cell) -> Explanation:
    """θ_i of pair i: θ^(−2i/e), scaled where the model scales it."""
    c, i = x.config, x.col
    plain = c.rope_theta ** (-2 * i / c.head_dim)
    scaled = "" if c.rope_type == "default" else f"; then {c.rope_type} scaling of the config"
    return x.at(f"θ_{i}", f"rope_theta^(−2·{i}/{c.head_dim}) = {c.rope_theta:g}^(−{2 * i}/"
                          f"{c.head_dim}) = {plain:.6g}{scaled}", GIVEN, (),
                note="Radians per position that pair i turns by: the model's own θ (rope_theta).")


def _pair(x: _Cell) -> tuple[int, int, int]:
    """Column ``x.col``'s RoPE pair in transformers' rotate_half layout: (pair
    i, the partner dimension, the sign of the partner's term)."""
    half = x.config.head_dim // 2
    return (x.col, x.col + half, -1) if x.col < half else (x.col - half, x.col - half, 1)


def _table(x: _Cell) -> Explanation:
    """cos or sin of position · θ_i."""
    i, _, _ = _pair(x)
    theta = float(x.trace["rope_frequencies"][i])
    fn = "cos" if x.chart == "rope_cos" else "sin"
    return x.at(f"{fn}[{x.token(x.row)}, {x.col}]",
                f"{fn}(m·θ_{i}) with m = {x.row}, θ_{i} = {theta:.6g}: {fn}({x.row * theta:.6g})",
                GIVEN, (), note=f"Dimension {x.col} is in pair {i}, turned with dimension "
                                f"{_pair(x)[1]}.")


def _rotated(x: _Cell) -> Explanation:
    """Q or K after RoPE: the number times cos, plus its partner's (signed) times sin."""
    is_key = x.chart == "keys_rope"
    before_name = ("keys" if is_key else "queries") + ("_normed" if x.config.qk_norm else "")
    before = x.step(before_name)[x.row]
    name = f"K_{x.kv}" if is_key else f"Q_{x.h}"
    i, partner, sign = _pair(x)
    cos, sin = float(x.trace["rope_cos"][x.row, x.col]), float(x.trace["rope_sin"][x.row, x.col])
    cell, formula, terms = rotation_terms(name, x.token(x.row), x.col, (i, partner, sign),
                                          before, cos, sin)
    return x.at(cell, formula, SUM, terms, note=f"apply_rotary_pos_emb: q · cos + rotate_half(q) · sin; "
                                 f"dimension {x.col} turns with dimension {partner}, m = {x.row}.")


def _score(x: _Cell) -> Explanation:
    """A score of the query head with the K/V head it reads; scaled: × scaling."""
    q, k = x.step("queries_rope")[x.row], x.step("keys_rope")[x.col]
    terms = dot_product_terms(q, k, [f"q′[{d}]·k′[{d}]" for d in range(q.shape[0])])
    cell = f"S_{x.h}[{x.token(x.row)}, {x.token(x.col)}]"
    formula = f"q′_{x.h}[{x.token(x.row)}] · k′_{x.kv}[{x.token(x.col)}]"
    note = f"Query head {x.h} reads K/V head {x.kv} (repeat_kv), shared with query heads " \
           f"{', '.join(map(str, x.s.sharing))}."
    if x.chart == "attn_scores":
        return x.at(cell, formula, SUM, terms, note=note)
    scaling = x.config.scaling
    if x.chart == "masked_scores" and bool(x.trace["causal_mask"][x.row, x.col]):
        return x.at(cell, "−∞ (masked)", MASKED, (), note=_mask_rule(x))
    return x.at(cell, f"{formula} × scaling, scaling = {scaling:.6g} (the model's own)",
                SCALED, terms, divisor=1.0 / scaling, note=note)


def _mask_rule(x: _Cell) -> str:
    w = x.config.window
    if w is None:
        return f"Causal: key {x.col} is seen by query {x.row} when {x.col} ≤ {x.row}."
    return (f"Sliding window of {w} keys: key {x.col} is seen by query {x.row} when "
            f"{x.row} − {w} < {x.col} ≤ {x.row}.")


def _mask(x: _Cell) -> Explanation:
    seen = not bool(x.trace["causal_mask"][x.row, x.col])  # True = hidden
    return x.at(f"mask[{x.token(x.row)}, {x.token(x.col)}]", "seen" if seen else "hidden",
                GIVEN, (), note=_mask_rule(x))


def _softmax_of(x: _Cell, scores: Tensor, cell: str) -> Explanation:
    terms, m = softmax_terms(scores, [f"key {x.token(j)}" for j in range(scores.shape[0])])
    return x.at(cell, "exp(s − m) / Σ_j exp(s_j − m), m = the row's max (−∞: masked, 0)",
                RATIO, terms, numerator=terms[x.col].value, note=f"m = {m:.4f}.")


def _weights(x: _Cell) -> Explanation:
    scores = x.step("masked_scores")[x.row]
    return _softmax_of(x, scores, f"α_{x.h}[{x.token(x.row)}, {x.token(x.col)}]")


def _context(x: _Cell) -> Explanation:
    """A·V: the head's weights of the row times a column of its K/V head's values."""
    a, v = x.step("attn_weights")[x.row], x.step("values")[:, x.col]
    terms = dot_product_terms(a, v, [f"α[{x.token(x.row)}, {x.token(j)}]·V_{x.kv}[{x.token(j)}, "
                                     f"{x.col}]" for j in range(a.shape[0])])
    return x.at(f"context_{x.h}[{x.token(x.row)}, {x.col}]",
                f"Σ_j α_{x.h}[{x.token(x.row)}, j] · V_{x.kv}[j, {x.col}]", SUM, terms)


def _head_output(x: _Cell) -> Explanation:
    """The head's share of o_proj: its context row times its rows of W_out."""
    e = x.config.head_dim
    ctx, w = x.step("context")[x.row], x.step("W_out")[:, x.col]
    terms = dot_product_terms(ctx, w, [f"context[{c}]·W_out[{x.h * e + c}, {x.col}]"
                                       for c in range(ctx.shape[0])])
    return x.at(f"head_output_{x.h}[{x.token(x.row)}, {x.col}]",
                f"Σ_c context_{x.h}[{x.token(x.row)}, c] · W_out[{x.h * e} + c, {x.col}]", SUM,
                terms, note="This head's share of o_proj's output; the heads' shares add up to "
                            "the output (with b_out).")


def _output(x: _Cell) -> Explanation:
    """o_proj: every head's context side by side times a column of W_out (+ b_out)."""
    ctx, w = x.trace["context"][x.row], x.trace["W_out"][:, x.col]
    terms = dot_product_terms(ctx, w, [f"context[{x.token(x.row)}, {c}]·W_out[{c}, {x.col}]"
                                       for c in range(ctx.shape[0])])
    has_bias = "b_out" in x.trace
    return x.at(f"output[{x.token(x.row)}, {x.col}]",
                f"Σ_c context[{x.token(x.row)}, c] · W_out[c, {x.col}]"
                + (f" + b_out[{x.col}]" if has_bias else ""), SUM, terms,
                offset=float(x.trace["b_out"][x.col]) if has_bias else 0.0,
                offset_name=f"b_out[{x.col}]" if has_bias else "")


def _generated(x: _Cell) -> Explanation:
    """A generated token's row: its scaled score (read from the cache) or its
    weight, the softmax of its row over the cached keys."""
    index = x.generated if x.chart != "generated_rows" else x.row
    token = x.generation.generated[index]
    scores = token.scaled_scores[x.h].masked_fill(~token.mask, float("-inf"))
    if x.col > token.position:
        return x.at(f"α_{x.h}[{token.position}, {x.col}]", "0: not in the cache yet", GIVEN, (),
                    note=f"Token {x.col} comes after token {token.position}: when it was "
                         "generated, the cache held tokens 0 … its own only.")
    name = f"“{token.token}” at position {token.position}"
    if x.chart == "generated_scores":
        return x.at(f"S_{x.h}[{token.position}, {x.token(x.col)}]",
                    "q′ of the new token · k′ of the cached key × scaling", GIVEN, (),
                    note=f"The new token {name} is fed alone: its one query reads the "
                         f"{int(token.mask.sum())} keys it may see in the cache (K/V head "
                         f"{x.kv}).")
    return _softmax_of(x, scores, f"α_{x.h}[{token.position}, {x.token(x.col)}]")


EXPLAINERS: dict[str, Callable[[_Cell], Explanation]] = {
    "rms": _rms, "embeddings": _normed, "queries_normed": _normed, "keys_normed": _normed,
    "queries": _projection, "keys": _projection, "values": _projection,
    "rope_frequencies": _frequency, "rope_cos": _table, "rope_sin": _table,
    "queries_rope": _rotated, "keys_rope": _rotated,
    "attn_scores": _score, "scaled_scores": _score, "masked_scores": _score,
    "causal_mask": _mask, "attn_weights": _weights, "context": _context,
    "head_output": _head_output, "output": _output,
    "generated_scores": _generated, "generated_weights": _generated,
    "generated_rows": _generated,
}
"""Each chart's rule; the others (weights, the layer's input) are given (`_given`)."""


def explain_decoder_cell(trace: Any, head_slice: Any, chart: str, row: int, col: int,
                         labels: list[str] | tuple[str, ...], generation: Any = None,
                         generated: int = 0) -> Explanation:
    """Explain cell ``(row, col)`` of chart ``chart`` (`CHARTS`, as
    `chart_matrix` lays it out) of query head ``head_slice.head``; ``labels``:
    the token labels (the prompt's and the generated ones). Raises ``KeyError``
    for a chart the trace or generation does not have and ``IndexError`` for a
    cell outside it."""
    matrix = chart_matrix(trace, head_slice, chart, generation, generated)
    if not (0 <= row < matrix.shape[0] and 0 <= col < matrix.shape[1]):
        raise IndexError(f"{chart} has no cell ({row}, {col}); its shape is "
                         f"{tuple(matrix.shape)}")
    r, c = (0, col) if chart in ROW_VECTORS else (row, 0) if chart in TOKEN_COLUMN else (row, col)
    where = ("" if chart in FULL_LAYER else f"K/V head {head_slice.kv_head}, "
             if chart in KV_CHARTS else f"head {head_slice.head}, ")
    value = float(matrix[row, col])
    cell = _Cell(trace, head_slice, chart, r if chart not in TOKEN_COLUMN else row,
                 c, tuple(labels), generation, generated, value,
                 partial(Explanation, chart, value=value,
                         position=f"{where}row {row}, column {col}"))
    return EXPLAINERS.get(chart, _given)(cell)
