"""Figures of the backward pass (issue 38): every gradient as a heatmap, the
softmax's Jacobian of one row, the logits and their targets, the autograd
check as a table, the training run, why √d_k from the gradient's side, and
FlashAttention's backward tiles.

Built as `explorer.render.figures` builds the forward's: heatmaps are
`explorer.render.payload.Chart` s from `figures.matrix_chart` (matrices as
float32 blocks, cell text chosen by the browser), line charts Plotly figures
in the series colours (`figures.figure_chart` makes them charts). A
gradient's sign is its meaning (which way the loss falls), so every gradient
is drawn on the diverging scale centred at 0, shared by the gradients of
steps that share a scale in the forward pass (`explorer.core.steps.scale_group`:
dL/dω and dL/dω̃ on one scale show the ÷√d_k). Visitor text (tokens) reaches
Plotly only through `figures.matrix_chart`, which escapes it
(`explorer.core.literal.plotly`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.core.agreement import Agreement
from explorer.core.steps import SIGNED, STEPS, TOKEN_ROWS, TOKENS, WEIGHTS, Axis, Step, scale_group
from explorer.core.tokenizer import token_labels
from explorer.core.trace import Trace
from explorer.lessons.backward.gradients import Gradients, row_jacobian
from explorer.lessons.backward.loss import IGNORE_INDEX, Loss
from explorer.lessons.backward.saturation import GradientPoint, GradientScaling, Saturation
from explorer.lessons.backward.settings import OPTIMIZER_LABELS
from explorer.lessons.backward.terms import SYMBOLS
from explorer.lessons.backward.training import TrainingRun
from explorer.modern.flash_backward import FlashBackward
from explorer.render import figures
from explorer.render.payload import Chart


def _gradient_step(name: str) -> Step:
    """Step ``name`` drawn as a gradient: its axes, on the signed scale, no mask words."""
    return dataclasses.replace(STEPS[name], colour=SIGNED, cell_text=None)


def _matrix(tensor) -> np.ndarray:
    """A gradient as a 2-D float32 array (a bias as one row)."""
    values = tensor.detach().numpy().astype(np.float32, copy=False)
    return values[None, :] if values.ndim == 1 else values


def _centred(*matrices: np.ndarray) -> tuple[float, float]:
    """±the largest finite |value| of ``matrices`` (±1 when there is none or it is 0)."""
    finite = [np.abs(m[np.isfinite(m)]).max() for m in matrices if np.isfinite(m).any()]
    bound = float(max(finite)) if finite and max(finite) > 0 else 1.0
    return -bound, bound


def gradient_range(gradients: Gradients, name: str, head: int = 0) -> tuple[float, float]:
    """The colour range of dL/d(``name``): centred at 0, ± the largest |value|
    of the gradients of its `explorer.core.steps.scale_group` (of this head)."""
    group = [other for other in scale_group(name) if other in gradients]
    return _centred(*(_matrix(gradients.head(other, head)) for other in group))


def gradient_title(gradients: Gradients, name: str, head: int = 0) -> str:
    """``"dL/dQ: gradient of the queries (6×2), head 1"``."""
    shape = "×".join(str(s) for s in gradients.head(name, head).shape)
    suffix = f", head {head}" if gradients.per_head(name) else ""
    return f"{SYMBOLS[name]}: gradient of the {STEPS[name].label.lower()} ({shape}){suffix}"


def gradient_chart(gradients: Gradients, name: str, head: int = 0,
                   marked_cell: tuple[int, int] | None = None, title: str | None = None,
                   colorbar: bool = True, columns: int = 1) -> Chart:
    """The heatmap of dL/d(``name``) (head ``head``'s of a per-head step), with
    the axes of step ``name`` (tokens or dimensions), on `gradient_range`.
    With several heads, the columns of dL/dW_query, dL/dW_key, dL/dW_value and
    dL/dZ are outlined per head (where the heads' gradients meet), and a
    per-head chart is framed in its head's colour, as the forward's charts.
    ``marked_cell`` outlines the explained cell. Raises ``KeyError`` for a
    gradient the trace does not have."""
    step = _gradient_step(name)
    values = _matrix(gradients.head(name, head))
    per_head = gradients.per_head(name)
    chart = figures.matrix_chart(
        values, figures.axis_labels(gradients, step.rows, values.shape[0]),
        figures.axis_labels(gradients, step.cols, values.shape[1]), step,
        title or gradient_title(gradients, name, head),
        zrange=gradient_range(gradients, name, head), marked_cell=marked_cell,
        colorbar=colorbar, columns=columns, decimals=showing_decimals(values),
        filename=figures.chart_filename(gradients, f"grad_{name}", head if per_head else None))
    n_heads = gradients.config.n_heads
    if n_heads > 1 and step.head_columns and not per_head:
        figures.outline_heads(chart.figure["layout"], n_heads, values.shape[1] // n_heads)
    if per_head:
        chart.figure["layout"]["shapes"].append(
            {"type": "rect", "name": "frame", "xref": "paper", "yref": "paper", "x0": 0,
             "x1": 1, "y0": 0, "y1": 1,
             "line": {"color": figures.head_colour(head), "width": 3}})
    return chart


CELL_DECIMALS = (4, 2)
"""The decimals a heatmap's cells may print, most first (`figures.matrix_chart`'s default)."""


def showing_decimals(values: np.ndarray, allowed: tuple[int, ...] = CELL_DECIMALS
                     ) -> tuple[int, ...]:
    """The cell decimals of ``allowed`` (most first) that write the largest
    finite |value| of ``values`` as a nonzero number; if none does, the fewest
    that do (at most 8): a Jacobian whose largest entry is 5e-4 is not drawn as
    0.00 everywhere (issue 51). The browser prints the first that fits its
    cells, or no number at all."""
    finite = np.abs(values[np.isfinite(values)])
    largest = float(finite.max()) if finite.size else 0.0
    if largest == 0.0:
        return allowed
    needed = next((d for d in range(9) if float(f"{largest:.{d}f}") != 0.0), 8)
    return tuple(d for d in allowed if d >= needed) or (needed,)


JACOBIAN_STEP = Step("jacobian", "Softmax Jacobian", "J", lambda c: "diag(α) − α αᵀ",
                     lambda c: r"J = \operatorname{diag}(\alpha) - \alpha \alpha^\top",
                     Axis("weight α_j (key)", TOKENS), Axis("score ω̃_k (key)", TOKENS))
"""How a row's Jacobian is drawn: J[j, k] = ∂α_j/∂ω̃_k, keys on both axes, signed."""


def jacobian_chart(trace: Trace, row: int, head: int = 0, columns: int = 1) -> Chart:
    """The Jacobian of query ``row``'s weights with respect to its scores
    (`explorer.lessons.backward.gradients.row_jacobian`), (n, n), on a scale
    centred at 0: the diagonal α_j(1 − α_j) positive, the rest −α_j α_k; all
    near 0 for a saturated row."""
    values = _matrix(row_jacobian(trace, row, head))
    labels = token_labels(trace.tokens)
    rule = ("diag(α) − α αᵀ" if trace.config.normalization != "sum"
            else "(δ_jk − α_j) / row sum")
    head_text = f", head {head}" if trace.config.n_heads > 1 else ""
    title = (f"∂α/∂ω̃ of query “{labels[row]}”{head_text}: {rule} "
             f"({values.shape[0]}×{values.shape[1]})")
    return figures.matrix_chart(values, labels, labels, JACOBIAN_STEP, title,
                                zrange=_centred(values), columns=columns,
                                decimals=showing_decimals(values),
                                filename=figures.chart_filename(trace, f"jacobian_row{row}",
                                                                head if head_text else None))


LOGITS_STEP = Step("logits", "Logits", "logits", lambda c: "O·U", lambda c: r"O\,U",
                   TOKEN_ROWS, Axis("next token (vocabulary)", TOKENS))
"""How the logits are drawn: a row per position, a column per vocabulary token."""


def logits_chart(trace: Trace, loss: Loss, gradient: bool = False, columns: int = 1) -> Chart:
    """The next-token loss's logits O·U (or, with ``gradient``, dL/dlogits),
    (n, V): a row per position, a column per token of the vocabulary, each
    position's target (its next token) outlined; the last position has none.
    Raises ``ValueError`` for a loss without logits (the squared distance)."""
    if loss.logits is None:
        raise ValueError("the squared-distance loss has no logits; only next-token "
                         "prediction does")
    values = _matrix(loss.grad_logits if gradient else loss.logits)
    targets = [(i, int(t)) for i, t in enumerate(loss.targets) if int(t) != IGNORE_INDEX]
    name = "dL/dlogits" if gradient else "logits = O·U"
    title = f"{name} ({values.shape[0]}×{values.shape[1]}), the next token outlined"
    return figures.matrix_chart(values, token_labels(trace.tokens), list(loss.vocab),
                                LOGITS_STEP, title, zrange=_centred(values),
                                marked_cells=targets, columns=columns,
                                filename=figures.chart_filename(
                                    trace, "grad_logits" if gradient else "logits"))


def check_table(check: Agreement) -> pd.DataFrame:
    """One row per part of `explorer.lessons.backward.check.check_gradients`
    (the loss first): its symbol, the largest |hand-derived − autograd|, the
    largest |autograd value| and whether they agree."""
    return pd.DataFrame(
        {"gradient": [SYMBOLS.get(part.name, "L") for part in check.parts],
         "max |hand − autograd|": [part.max_abs_diff for part in check.parts],
         "largest |value|": [part.scale for part in check.parts],
         "agree": [part.symbol for part in check.parts]})


def loss_curve_figure(run: TrainingRun) -> go.Figure:
    """The loss at every step of a training run (step 0: before any update),
    with the optimiser and learning rate in the title."""
    training = run.training
    fig = go.Figure()
    fig.add_scatter(x=list(range(len(run.losses))), y=list(run.losses), mode="lines+markers",
                    name="loss", hovertemplate="step %{x}<br>loss %{y:.4f}<extra></extra>")
    fig.update_layout(title={"text": f"Loss over {training.steps} steps of "
                                     f"{OPTIMIZER_LABELS[training.optimizer]} (lr = "
                                     f"{training.learning_rate:g})"},
                      xaxis_title="step", yaxis_title="loss")
    figures._plain_layout(fig, 360, legend=False)  # the line charts' one layout
    return fig


def training_weights_chart(trace: Trace, run: TrainingRun, step: int, head: int = 0,
                           columns: int = 1) -> Chart:
    """The attention weights (head ``head``) after ``step`` steps of ``run``,
    drawn as the forward's weights (a fixed [0, 1] scale, so that steps compare).
    Raises ``IndexError`` for a step outside 0 … steps."""
    if not 0 <= step < run.attn_weights.shape[0]:
        raise IndexError(f"the run has steps 0 to {run.attn_weights.shape[0] - 1} (got {step})")
    values = run.attn_weights[step, head].numpy().astype(np.float64)
    head_text = f", head {head}" if trace.config.n_heads > 1 else ""
    finite = values[np.isfinite(values)]  # a diverged run's weights may all be NaN
    top = max(1.0, float(finite.max())) if finite.size else 1.0
    return figures.labelled_chart(values, trace, "attn_weights",
                                  f"Attention weights after {step} steps{head_text} "
                                  f"(loss {run.losses[step]:.4f})", columns=columns,
                                  zrange=(0.0, top))


_MEASURES = {
    "jacobian": ("mean ‖diag(α) − α αᵀ‖", "jacobian", "Without scaling, the softmax passes "
                                                      "less gradient as d_k grows"),
    "gradient": ("mean ‖dL/dω̃‖ (dL/dα ~ N(0, 1))", "gradient",
                 "Without scaling, the gradient reaching the scores vanishes"),
    "saturated": ("share of rows with a weight ≥ 0.99", "saturated",
                  "Without scaling, more and more rows saturate"),
}
"""The measures of `gradient_scaling_figure`: axis title, field, title."""


def gradient_scaling_figure(curves: GradientScaling, point: GradientPoint | None = None,
                            measure: str = "jacobian") -> go.Figure:
    """A measure of the softmax's gradient over d_k (log axis), without and
    with ÷√d_k: ``"jacobian"``, ``"gradient"`` or ``"saturated"`` (`_MEASURES`).
    ``point`` marks the learner's own config (its Jacobian size). Raises
    ``KeyError`` for another measure."""
    label, field, title = _MEASURES[measure]
    fig = go.Figure()
    for name, values in (("softmax(q·k)", getattr(curves, field)),
                         ("softmax(q·k / √d_k)", getattr(curves, f"{field}_scaled"))):
        fig.add_scatter(x=list(curves.dims), y=list(values), mode="lines+markers", name=name)
    if point is not None and measure == "jacobian":
        for name, value, colour in (("your sentence: q·k", point.jacobian,
                                     figures.YOUR_POINT_COLOURS[0]),
                                    ("your sentence: q·k / √d_k", point.jacobian_scaled,
                                     figures.YOUR_POINT_COLOURS[1])):
            fig.add_scatter(x=[point.d_k], y=[value], mode="markers", name=name,
                            marker={"size": 14, "symbol": "star", "color": colour})
    fig.update_layout(title={"text": title}, xaxis_title="d_k", yaxis_title=label)
    figures._plain_layout(fig, 400)
    fig.update_layout(xaxis=figures._log2_axis(curves.dims))
    return fig


def saturation_figure(saturation: Saturation) -> go.Figure:
    """As the scores' spread grows (log axis): the largest weight climbs to 1
    and the gradient through the softmax falls towards 0."""
    fig = go.Figure()
    for name, values in (("mean largest weight", saturation.max_weight),
                         ("mean ‖diag(α) − α αᵀ‖", saturation.jacobian),
                         ("mean ‖dL/dω̃‖", saturation.gradient)):
        fig.add_scatter(x=list(saturation.spreads), y=list(values), mode="lines+markers",
                        name=name)
    fig.update_layout(title={"text": f"The softmax saturates and its gradient vanishes "
                                     f"({saturation.n_keys} keys)"},
                      xaxis_title="standard deviation of the scores", yaxis_title="")
    figures._plain_layout(fig, 400)
    fig.update_layout(xaxis=figures._log2_axis(saturation.spreads))
    return fig


TILES_STEP = Step("tiles", "Tiles", "tile", lambda c: "", lambda c: "",
                  Axis("query (row)", TOKENS), Axis("key (column)", TOKENS))
"""How the backward's tile order is drawn: the (n, n) positions, each coloured by the
step that reads it."""


def flash_tiles_chart(result: FlashBackward, tokens: list[str], upto: int | None = None,
                      columns: int = 1) -> Chart:
    """Which (query, key) cells each step of the tiled backward pass reads: an
    (n, n) grid whose cell holds the number of the step (1, 2, …: key tiles
    outside, query tiles inside) that reads it, the steps after ``upto`` left
    blank and the tile of step ``upto`` outlined. The n × n weights are never
    held by the pass; this grid only says where its tiles lie."""
    n = len(tokens)
    order = np.full((n, n), np.nan, dtype=np.float32)
    last = len(result.tiles) - 1 if upto is None else upto
    for index, tile in enumerate(result.tiles[:last + 1]):
        order[tile.rows.start:tile.rows.stop, tile.cols.start:tile.cols.stop] = index + 1
    labels = token_labels(tokens)
    chart = figures.matrix_chart(order, labels, labels, TILES_STEP,
                                 f"FlashAttention's backward: {last + 1} of {len(result.tiles)} "
                                 "tiles walked", zrange=(0.0, float(len(result.tiles))),
                                 columns=columns, filename=f"flash_backward_tiles_{n}",
                                 decimals=(0,))
    if 0 <= last < len(result.tiles):
        tile = result.tiles[last]
        chart.figure["layout"]["shapes"].append(
            {"type": "rect", "name": "tile", "xref": "x", "yref": "y",
             "x0": tile.cols.start - 0.5, "x1": tile.cols.stop - 0.5,
             "y0": tile.rows.start - 0.5, "y1": tile.rows.stop - 0.5,
             "line": {"color": figures.HIGHLIGHT_COLOUR, "width": 3}})
    return chart


TILE_MATRICES = {"P": "P = exp(S − m) / ℓ, recomputed", "dP": "dP = dO·Vᵀ",
                 "dS": "dS = P ⊙ (dP − D)"}
"""The matrices a recorded tile keeps, with their rule (FlashAttention-2, Alg. 2)."""


def flash_tile_chart(result: FlashBackward, tokens: list[str], index: int, which: str = "dS",
                     head: int = 0, columns: int = 1) -> Chart:
    """One tile's ``which`` (``"P"``, ``"dP"`` or ``"dS"``, `TILE_MATRICES`) of
    step ``index`` of the tiled backward pass, head ``head``: its query tokens
    as rows, its key tokens as columns. Raises ``ValueError`` for a tile whose
    matrices were not recorded, ``KeyError`` for another ``which``."""
    rule, tile = TILE_MATRICES[which], result.tiles[index]
    matrix = getattr(tile, which)
    if matrix is None:
        raise ValueError(f"step {index}'s tile was not recorded (flash_backward's record)")
    values = _matrix(matrix[head])
    labels = token_labels(tokens)
    step = TILES_STEP if which != "P" else dataclasses.replace(TILES_STEP, colour=WEIGHTS)
    zrange = (0.0, 1.0) if which == "P" else _centred(values)
    return figures.matrix_chart(
        values, labels[tile.rows.start:tile.rows.stop], labels[tile.cols.start:tile.cols.stop],
        step, f"{rule}: key tile {tile.k_tile}, query tile {tile.q_tile}, head {head}",
        zrange=zrange, columns=columns,
        filename=f"flash_backward_{which}_{index}_head{head}")


def _d(symbol: str) -> str:
    """∂L/∂symbol in LaTeX."""
    return rf"\frac{{\partial L}}{{\partial {symbol}}}"


def gradient_latex(gradients: Gradients, name: str) -> str:
    """The rule of gradient ``name`` for this trace's config, in LaTeX (the
    page's `st.latex` above its chart); the same rules as
    `explorer.lessons.backward.terms.formula` writes in text. Raises ``KeyError``
    for a gradient the trace does not have."""
    c = gradients.trace.config
    gradients[name]  # noqa: B018 - KeyError for a gradient this trace does not have
    root = r"\sqrt{d_k}" if c.n_heads == 1 else r"\sqrt{\mathrm{head\_dim}}"
    rows = "O" if "output" in gradients else "Z"
    d_rows, d_z, d_v, d_q, d_k = _d(rows), _d("Z"), _d("V"), _d("Q"), _d("K")
    d_alpha, d_dropped = _d(r"\alpha"), _d(r"\alpha'")
    d_omega, d_scaled, d_masked = _d(r"\omega"), _d(r"\tilde\omega"), _d(r"\hat\omega")
    d_logits, d_logit = _d(r"\,\mathrm{logits}"), _d(r"\,\mathrm{logits}_i")
    if gradients.loss.kind == "next_token":
        loss = (rf"\begin{{aligned}}{d_rows} &= {d_logits}\,U^\top \\ {d_logit} &= "
                r"\frac{\mathrm{softmax}(\mathrm{logits}_i) - \mathrm{onehot}(t_i)}{N}"
                r"\end{aligned}")
    else:
        loss = rf"{d_rows} = \frac{{2\,({rows} - T)}}{{n\,d}}"
    mixing = r"\alpha'" if "dropped_weights" in gradients else r"\alpha"
    softmax_input = "masked_scores" if c.causal else "scaled_scores"
    omega_in, d_in = (r"\hat\omega", d_masked) if c.causal else (r"\tilde\omega", d_scaled)
    if c.normalization == "sum":
        norm = (rf"{d_in} = \frac{{{d_alpha} - \mathrm{{rowsum}}(\alpha \odot {d_alpha})}}"
                rf"{{\mathrm{{rowsum}}({omega_in})}}")
    else:
        norm = (rf"\begin{{aligned}}{d_in} &= \alpha \odot \big({d_alpha} - r\big) \\ "
                rf"r &= \mathrm{{rowsum}}\big(\alpha \odot {d_alpha}\big)\end{{aligned}}")
    rules = {
        "output": loss,
        "context": loss if rows == "Z" else rf"{d_z} = {_d('O')}\,W_{{out}}^\top",
        "W_out": rf"{_d('W_{out}')} = Z^\top {_d('O')}",
        "b_out": rf"{_d('b_{out}')} = \sum_i {_d('O_i')}",
        "values": rf"{d_v} = {mixing}^\top {d_z}",
        "dropped_weights": rf"{d_dropped} = {d_z}\,V^\top",
        "attn_weights": (rf"{d_alpha} = {d_dropped} \odot \frac{{D}}{{1 - p}}"
                         if "dropped_weights" in gradients else rf"{d_alpha} = {d_z}\,V^\top"),
        softmax_input: norm,
        "attn_scores": rf"{d_omega} = {d_scaled} / {root}" if c.scale else
                       rf"{d_omega} = {d_scaled}",
        "queries": rf"{d_q} = {d_omega}\,K",
        "keys": rf"{d_k} = \Big({d_omega}\Big)^\top Q",
        "embeddings": (rf"\begin{{aligned}}{_d('X')} &= {d_q}\,W_{{query}}^\top + {d_k}\,"
                       rf"W_{{key}}^\top \\ &\quad + {d_v}\,W_{{value}}^\top\end{{aligned}}"),
    }
    if c.causal:
        rules["scaled_scores"] = rf"{d_scaled} = {d_masked} \odot (1 - M)"
    for letter, weight in (("Q", "query"), ("K", "key"), ("V", "value")):
        rules[f"W_{weight}"] = rf"{_d('W_{' + weight + '}')} = X^\top {_d(letter)}"
        rules[f"b_{weight}"] = rf"{_d('b_{' + weight + '}')} = \sum_i {_d(letter + '_i')}"
    return rules[name]


def flash_rows_table(result: FlashBackward, tokens: list[str], head: int = 0) -> pd.DataFrame:
    """What the tiled backward pass keeps per query row (head ``head``): the
    forward's row maximum m and sum ℓ, and D = rowsum(dO ⊙ O)."""
    return pd.DataFrame({"query": token_labels(tokens),
                         "m (row max)": result.m[head].double().numpy(),
                         "ℓ (row sum)": result.l[head].double().numpy(),
                         "D = rowsum(dO ⊙ O)": result.D[head].double().numpy()})
