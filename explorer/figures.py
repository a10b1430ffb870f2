"""Plotly heatmaps and pandas tables of a `Trace`, driven by `explorer.steps.STEPS`.

Every matrix chart in the app comes from `heatmap`. It labels rows and columns
with tokens or dimension indices, prints cell values with ``texttemplate``
(never one annotation per cell) for matrices up to `MAX_TEXT_CELLS` a side,
uses a diverging scale centred at 0 for signed matrices and a fixed [0, 1]
scale for attention weights, and shows -inf / NaN / inf honestly.
"""

from __future__ import annotations

from explorer import literal
import math

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch

from explorer import explain
from explorer.steps import DIMS, MASK, STEPS, TOKENS, WEIGHTS, Axis, Step
from explorer.tokenizer import token_labels
from explorer.trace import Trace

MAX_TEXT_CELLS = 24
"""Cell values are printed when both sides are at most this long."""

SIGNED_SCALE = "RdBu_r"
WEIGHTS_SCALE = "Blues"
MASK_SCALE = [[0.0, "#f4f4f4"], [1.0, "#5b5b5b"]]
HIGHLIGHT_COLOUR = "#f59e0b"
MARK_COLOUR = "#111111"
HEAD_COLOURS = px.colors.qualitative.Dark2
MAX_CLICK_CELLS = 64 * 64
"""Up to this many cells a click on a heatmap explains the cell; above, a picker does."""
CELL_PX = 56  # pixel size of a cell when values are printed
PAGE_PX, CHROME_PX = 1000, 150  # rough widths in pixels: the page, axes + colour bar
MIN_CELL_PX_4DP, MIN_CELL_PX_2DP = 48, 30  # room "-0.1234" and "-0.12" need


def axis_labels(trace: Trace, axis: Axis, size: int) -> list[str]:
    """The tick labels of ``axis``: the (unique) tokens, or ``0 .. size-1``."""
    if axis.labels == DIMS:
        return [str(i) for i in range(size)]
    return token_labels(trace.tokens)


def step_matrix(trace: Trace, name: str, head: int = 0) -> np.ndarray:
    """The step as a 2-D float array: one head of a per-head step, a vector as
    one row, booleans as 0/1."""
    tensor = trace[name]
    if tensor.dim() == 3:
        tensor = tensor[head]
    if tensor.dim() == 1:
        tensor = tensor[None, :]
    return tensor.to(torch.float64).numpy()


def format_value(value: float, decimals: int = 4) -> str:
    """A cell's text: 4 decimals, with −∞, +∞ and NaN spelled out."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "−∞" if value < 0 else "+∞"
    return f"{value:.{decimals}f}"


def _colour_args(step: Step, z: np.ndarray) -> dict:
    if step.colour == WEIGHTS:
        return {"color_continuous_scale": WEIGHTS_SCALE, "zmin": 0.0, "zmax": 1.0}
    if step.colour == MASK:
        return {"color_continuous_scale": MASK_SCALE, "zmin": 0.0, "zmax": 1.0}
    finite = z[np.isfinite(z)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    bound = bound or 1.0
    return {"color_continuous_scale": SIGNED_SCALE, "zmin": -bound, "zmax": bound}


def heatmap(trace: Trace, name: str, head: int = 0, highlight_row: int | None = None,
            title: str | None = None, share: int = 1,
            marked_cell: tuple[int, int] | None = None) -> go.Figure:
    """An interactive heatmap of one step of ``trace``.

    ``head`` picks the head of a per-head step (shape ``(n_heads, n, m)``).
    ``highlight_row`` outlines one row (the selected query token) and
    ``marked_cell`` one cell (the one being explained). ``share`` is
    the number of charts drawn side by side in one row of the page: narrower
    charts get smaller text and, where 4 decimals would not fit, 2. Rows and
    columns carry token or dimension labels; hovering shows row, column and the
    value to 4 decimals. Non-finite values are drawn as gaps and labelled
    −∞ / +∞ / NaN. With several heads, the columns of W_query, W_key, W_value
    and the context are outlined per head in the head's colour.
    """
    step = STEPS[name]
    values = step_matrix(trace, name, head)
    if title is None:
        shape = tuple(trace[name].shape[-2:] if trace[name].dim() == 3 else trace[name].shape)
        title = step.title(trace.config, shape)
        if trace[name].dim() == 3:
            title += f", head {head}"
    if step.rows.labels != TOKENS:  # only token rows can be the query's row
        highlight_row = None
    fig = matrix_heatmap(values, axis_labels(trace, step.rows, values.shape[0]),
                         axis_labels(trace, step.cols, values.shape[1]), step, title,
                         highlight_row=highlight_row, share=share)
    if marked_cell is not None and 0 <= marked_cell[0] < values.shape[0] \
            and 0 <= marked_cell[1] < values.shape[1]:
        row, col = marked_cell
        fig.add_shape(type="rect", xref="x", yref="y", x0=col - 0.5, x1=col + 0.5,
                      y0=row - 0.5, y1=row + 0.5, line={"color": MARK_COLOUR, "width": 3})
    if trace.config.n_heads > 1 and step.head_columns:
        outline_heads(fig, trace.config.n_heads, values.shape[1] // trace.config.n_heads)
    if trace[name].dim() == 3:  # one head's matrix: framed in that head's colour
        fig.add_shape(type="rect", xref="paper", yref="paper", x0=0, x1=1, y0=0, y1=1,
                      line={"color": head_colour(head), "width": 3})
    return fig


def matrix_heatmap(values: np.ndarray, row_labels: list[str], col_labels: list[str], step: Step,
                   title: str, highlight_row: int | None = None, share: int = 1) -> go.Figure:
    """The heatmap behind `heatmap`, for any 2-D ``values`` drawn as ``step``."""
    n_rows, n_cols = values.shape
    rows = [literal.plotly(s) for s in row_labels]
    cols = [literal.plotly(s) for s in col_labels]
    z = np.where(np.isfinite(values), values, np.nan)  # Plotly draws NaN as a gap
    if n_rows * n_cols > MAX_CLICK_CELLS:
        z = z.astype(np.float32)  # half the bytes to send; the trace is float32 anyway
    # Print 4 decimals where a cell is wide enough for them, 2 where those fit,
    # none in big matrices or narrow cells; hover always gives 4.
    compact = share > 1
    cell_width = (PAGE_PX / share - CHROME_PX) / n_cols
    decimals = 4 if cell_width >= MIN_CELL_PX_4DP else 2
    show_text = (n_rows <= MAX_TEXT_CELLS and n_cols <= MAX_TEXT_CELLS
                 and cell_width >= MIN_CELL_PX_2DP)
    fig = px.imshow(z, x=cols, y=rows, aspect="auto", **_colour_args(step, values))
    where = (f"{literal.plotly(step.rows.title)}: %{{y}}<br>"
             f"{literal.plotly(step.cols.title)}: %{{x}}<br>")
    if n_rows * n_cols <= MAX_CLICK_CELLS:
        # Cell text and hover from formatted strings, so that −∞ and NaN read as such.
        fmt = np.vectorize(format_value, otypes=[object])
        text, hover = fmt(values, decimals), fmt(values, 4)
        if step.cell_text:  # a mask: print what it means, not 0.0000 / 1.0000
            text = hover = np.where(values > 0.5, step.cell_text[1], step.cell_text[0])
        fig.update_traces(
            text=text, customdata=hover, texttemplate="%{text}" if show_text else None,
            textfont={"size": 10 if compact or max(n_rows, n_cols) > 10 else 12},
            hovertemplate=where + "value: %{customdata}<extra></extra>")
        _make_clickable(fig, rows, cols, hover)
    else:  # big: no per-cell strings (millions of them would be slow to build and send)
        fig.update_traces(hovertemplate=where + "value: %{z:.4f}<extra></extra>")
    if highlight_row is not None and 0 <= highlight_row < n_rows:
        fig.add_shape(type="rect", xref="paper", x0=0, x1=1, yref="y",
                      y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                      line={"color": HIGHLIGHT_COLOUR, "width": 3})
    small = n_rows <= MAX_TEXT_CELLS and n_cols <= MAX_TEXT_CELLS
    cell = CELL_PX if small else max(4, 640 // max(n_rows, n_cols))
    fig.update_layout(
        title={"text": literal.plotly(title), "font": {"size": 15}},
        xaxis={"title": step.cols.title, "type": "category", "side": "bottom", "tickangle": -40
               if step.cols.labels != DIMS else 0},
        yaxis={"title": step.rows.title, "type": "category", "autorange": "reversed"},
        height=min(900, max(220, cell * n_rows + 150)),
        width=None if compact else min(1100, max(320, cell * n_cols + 260)),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        coloraxis_colorbar={"thickness": 8 if compact else 12},
    )
    return fig


def _make_clickable(fig: go.Figure, rows: list[str], cols: list[str], hover: np.ndarray) -> None:
    """Let a click pick a cell. Plotly heatmaps cannot be selected, so an
    invisible scatter trace puts one point at every cell centre (one trace, not
    one annotation per cell); it carries the hover text, and the click selects
    the nearest centre. Its ``point_index`` is ``row * n_cols + col``."""
    xs, ys = np.meshgrid(cols, rows)
    heat = fig.data[0]
    fig.add_trace(go.Scatter(
        x=xs.ravel(), y=ys.ravel(), mode="markers", showlegend=False,
        marker={"size": 12, "opacity": 0, "symbol": "square"},
        selected={"marker": {"opacity": 0}}, unselected={"marker": {"opacity": 0}},
        customdata=np.asarray(hover).ravel(), hovertemplate=heat.hovertemplate))
    heat.hoverinfo = "skip"
    heat.hovertemplate = None
    fig.update_layout(hoverdistance=-1, clickmode="event+select", dragmode=False)


def selected_cell(points: list[dict], n_cols: int) -> tuple[int, int] | None:
    """The (row, col) a click selected, from Streamlit's selection points."""
    for point in reversed(points):
        if point.get("curve_number") == 1 and "point_index" in point:
            return divmod(int(point["point_index"]), n_cols)
    return None


def head_colour(head: int) -> str:
    """The colour that marks ``head`` in every chart."""
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


def outline_heads(fig: go.Figure, n_heads: int, width: int) -> None:
    """Outline each head's block of ``width`` columns in its colour, labelled on top.
    One shape and one label per head."""
    for h in range(n_heads):
        x0, x1 = h * width - 0.5, (h + 1) * width - 0.5
        fig.add_shape(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1,
                      line={"color": head_colour(h), "width": 3})
        fig.add_annotation(x=(x0 + x1) / 2, y=1.0, xref="x", yref="paper", yanchor="bottom",
                           text=f"head {h}", showarrow=False,
                           font={"color": head_colour(h), "size": 12})
    fig.update_layout(margin={"t": 75})


def head_split(trace: Trace, name: str) -> go.Figure:
    """How one ``(n, d)`` matrix (e.g. Q = X·W_query) is cut into n_heads slices:
    the whole matrix, with each head's columns outlined in its colour."""
    step = STEPS[name]
    values = combine_heads_np(trace[name])
    n_heads = trace.config.n_heads
    title = (f"{step.symbol} = {step.expr(trace.config)} ({values.shape[0]}×{values.shape[1]}),"
             f" {n_heads} heads")
    fig = matrix_heatmap(values, axis_labels(trace, step.rows, values.shape[0]),
                         axis_labels(trace, step.cols, values.shape[1]), step, title, share=3)
    outline_heads(fig, n_heads, values.shape[1] // n_heads)
    return fig


def combine_heads_np(tensor: torch.Tensor) -> np.ndarray:
    """(n_heads, n, hd) -> (n, n_heads·hd) as float64; 2-D input unchanged."""
    if tensor.dim() == 3:
        tensor = tensor.transpose(0, 1).reshape(tensor.shape[1], -1)
    return tensor.to(torch.float64).numpy()


def heads_grid(trace: Trace, name: str = "attn_weights", columns: int = 4) -> go.Figure:
    """Small multiples: one heatmap per head of a per-head (n, n) step, on a
    shared colour scale (Plotly facets, no per-cell annotations)."""
    step = STEPS[name]
    values = trace[name]
    values = (values if values.dim() == 3 else values[None]).to(torch.float64).numpy()
    n_heads, n, _ = values.shape
    labels = [literal.plotly(s) for s in token_labels(trace.tokens)]
    fig = px.imshow(np.where(np.isfinite(values), values, np.nan), x=labels, y=labels,
                    facet_col=0, facet_col_wrap=min(columns, n_heads), aspect="auto",
                    facet_col_spacing=0.04, facet_row_spacing=0.08,
                    **_colour_args(step, values))
    for annotation in fig.layout.annotations:  # "facet_col=1" -> "head 1", in its colour
        head = int(annotation.text.split("=")[-1])
        annotation.text = f"head {head}"
        annotation.font = {"color": head_colour(head), "size": 13}
    fig.update_traces(hovertemplate="query: %{y}<br>key: %{x}<br>weight: %{z:.4f}<extra></extra>")
    if n <= 8:
        fig.update_traces(texttemplate="%{z:.2f}", textfont={"size": 9})
    rows = math.ceil(n_heads / min(columns, n_heads))
    fig.update_layout(height=min(1600, 80 + rows * (60 + max(200, 40 * n))),
                      title={"text": f"{step.label} of every head ({n}×{n} each)",
                             "font": {"size": 15}},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})
    fig.update_xaxes(type="category", tickangle=-40)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def token_table(trace: Trace) -> pd.DataFrame:
    """Tokens and their ids as a table: position, token, id in the sorted vocabulary."""
    return pd.DataFrame({"position": range(trace.n_tokens), "token": trace.tokens,
                         "token id": trace["token_ids"].tolist()}).set_index("position")


def query_table(trace: Trace, query: int) -> pd.DataFrame:
    """Query ``query``'s attention, key by key: the dot product written out, the
    score, the scaled score and the weight. Single-head traces."""
    labels = token_labels(trace.tokens)
    rows = []
    for j in range(trace.n_tokens):
        terms = explain.score_terms(trace, query, j)
        row = {"key": labels[j],
               "dot product q·k": f"{explain.written_sum(terms)} = {sum(t.value for t in terms):.4f}",
               "score ω": float(trace["attn_scores"][query, j])}
        if trace.config.scale:
            row["scaled ω̃"] = float(trace["scaled_scores"][query, j])
        row["weight α"] = float(trace["attn_weights"][query, j])
        rows.append(row)
    return pd.DataFrame(rows).set_index("key")


def context_table(trace: Trace, query: int) -> pd.DataFrame:
    """z_query = Σ_j α_qj · v_j as a table: one weighted value vector per key and
    their sum in the last row. Single-head traces."""
    terms = explain.context_terms(trace, query)
    labels = token_labels(trace.tokens)
    vector = "x" if trace.config.weight_init == "identity" else "v"
    frame = pd.DataFrame(explain.stacked(terms).to(torch.float64).numpy(),
                         index=[f"α={w:.4f} × {vector}[{labels[j]}]"
                                for j, (w, _) in enumerate(terms)],
                         columns=[f"dim {c}" for c in range(trace["context"].shape[1])])
    frame.loc[f"z = Σ (context of {labels[query]})"] = trace["context"][query].to(torch.float64).numpy()
    return frame


def normalization_table(traces: dict[str, Trace], query: int) -> pd.DataFrame:
    """One query's weights under each normalisation (seed 001's comparison):
    one row per normalisation name in ``traces``, one column per key, and the
    row sum."""
    first = next(iter(traces.values()))
    labels = token_labels(first.tokens)
    frame = pd.DataFrame({name: trace["attn_weights"][query].to(torch.float64).numpy()
                          for name, trace in traces.items()}, index=labels).T
    frame["row sum"] = frame.sum(axis=1)
    return frame


def terms_table(exp: explain.Explanation) -> pd.DataFrame:
    """An explanation's terms, one row each, labelled as in the formula: the
    factors and their product, or for a normalisation the score and its term.
    Their sum is said under the table, not in a row of its own."""
    width = max(len(t.factors) for t in exp.terms)
    rows = {t.label: {**{f"factor {i + 1}": f for i, f in enumerate(t.factors)},
                      "product": t.value} for t in exp.terms}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    if width == 1:
        frame = frame.rename(columns={"factor 1": "score", "product": "exp(score − m)"
                                      if exp.formula.startswith("exp(") and "− m" in exp.formula
                                      else "exp(score)" if exp.formula.startswith("exp(")
                                      else "term"})
    return frame


# ---------------------------------------------------------------------------
# Experiments
# ---------------------------------------------------------------------------
def _curve_frame(dims, series: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    return pd.DataFrame([{"d_k": d, "curve": name, "value": v}
                         for name, values in series.items() for d, v in zip(dims, values)])


def _log2_axis(values) -> dict:
    """A log axis labelled at the powers of two in ``values`` (1, 2, 4 ... 1024),
    not Plotly's crowded default minor labels."""
    return {"type": "log", "tickvals": list(values), "ticktext": [f"{v:g}" for v in values]}


def scaling_variance_figure(curves, point) -> go.Figure:
    """Variance of q·k against d_k (log–log): the estimate from random pairs
    beside the exact values (d_k, and 1 after ÷√d_k). ``point`` (an
    `experiments.ConfigPoint`) marks the learner's own config."""
    frame = _curve_frame(curves.dims, {"q·k (sampled)": curves.variance,
                                       "q·k / √d_k (sampled)": curves.variance_scaled})
    fig = px.line(frame, x="d_k", y="value", color="curve", markers=True,
                  labels={"value": "variance"},
                  title="Variance of the scores grows with d_k")
    for name, exact in (("exact: Var(q·k) = d_k", list(curves.dims)),
                        ("exact: Var(q·k / √d_k) = 1", [1.0] * len(curves.dims))):
        fig.add_scatter(x=list(curves.dims), y=exact, mode="lines", name=name,
                        line={"dash": "dot", "color": "#555555", "width": 1})
    fig.add_scatter(x=[point.d_k], y=[max(point.variance, 1e-3)], mode="markers",
                    marker={"size": 14, "symbol": "star", "color": HIGHLIGHT_COLOUR},
                    name="your scores (unscaled)")
    fig.update_layout(height=400, margin={"t": 50, "b": 10, "l": 10, "r": 10},
                      xaxis=_log2_axis(curves.dims),
                      yaxis=_log2_axis((0.25, 1, 4, 16, 64, 256, 1024)), **_LEGEND_BELOW)
    return fig


_LEGEND_BELOW = {"legend": {"orientation": "h", "y": -0.25, "x": 0, "title": None}}


def scaling_softmax_figure(curves, point, measure: str = "entropy") -> go.Figure:
    """Mean softmax-row entropy (nats) or mean largest weight against d_k, with
    and without scaling; the learner's config marked on both curves."""
    raw, scaled = ((curves.entropy, curves.entropy_scaled) if measure == "entropy"
                   else (curves.max_weight, curves.max_weight_scaled))
    frame = _curve_frame(curves.dims, {"softmax(q·k)": raw, "softmax(q·k / √d_k)": scaled})
    label = "mean row entropy (nats)" if measure == "entropy" else "mean largest weight"
    fig = px.line(frame, x="d_k", y="value", color="curve", markers=True,
                  labels={"value": label},
                  title=("Without scaling, softmax rows collapse to one-hot" if measure ==
                         "entropy" else "Without scaling, one key takes all the weight"))
    mine = ((point.entropy, point.entropy_scaled) if measure == "entropy"
            else (point.max_weight, point.max_weight_scaled))
    fig.add_scatter(x=[point.d_k, point.d_k], y=list(mine), mode="markers",
                    marker={"size": 14, "symbol": "star", "color": HIGHLIGHT_COLOUR},
                    name="your config (unscaled, scaled)")
    if measure == "entropy":
        fig.add_hline(y=math.log(curves.n_keys), line_dash="dot",
                      annotation_text=f"uniform over {curves.n_keys} keys: log {curves.n_keys}")
    fig.update_layout(height=420, margin={"t": 50, "b": 10, "l": 10, "r": 10},
                      xaxis=_log2_axis(curves.dims), **_LEGEND_BELOW)
    return fig


def row_bars(values, labels: list[str], title: str, y_label: str) -> go.Figure:
    """One bar per row (e.g. each query's entropy)."""
    fig = px.bar(x=[literal.plotly(s) for s in labels], y=list(values), title=title,
                 labels={"x": "query (row)", "y": y_label})
    fig.update_layout(height=320, margin={"t": 50, "b": 10, "l": 10, "r": 10})
    fig.update_xaxes(type="category")
    return fig


def labelled_heatmap(values, trace: Trace, like: str, title: str, share: int = 1) -> go.Figure:
    """Any (n, n) or (n, d) matrix drawn like step ``like`` (labels, colours)."""
    step = STEPS[like]
    values = np.asarray(torch.as_tensor(values).to(torch.float64))
    return matrix_heatmap(values, axis_labels(trace, step.rows, values.shape[0]),
                          axis_labels(trace, step.cols, values.shape[1]), step, title,
                          share=share)


def sums_table(matrices: dict[str, torch.Tensor]) -> pd.DataFrame:
    """Row sums and column sums of each matrix, side by side."""
    frame = {}
    for name, m in matrices.items():
        frame[f"{name}: row sums"] = m.sum(dim=1).to(torch.float64).numpy()
        frame[f"{name}: column sums"] = m.sum(dim=0).to(torch.float64).numpy()
    return pd.DataFrame(frame)
