"""Plotly figures and pandas tables of a `Trace`, driven by `explorer.core.steps.STEPS`.

Every matrix chart comes from `heatmap_chart` (or `matrix_chart` for any
matrix): a Plotly figure built as a plain dict, whose matrices travel as
float32 blocks (`explorer.render.payload.Chart`) and whose cell text the browser
chooses from the real cell size (``explorer/render/chart/chart.js``). `heatmap` gives the
same figure as a ``plotly.graph_objects.Figure`` with ``z`` filled in, for
notebooks and exports. Colours:

- signed matrices on a diverging scale centred at 0 (ColorBrewer RdBu,
  colour-blind safe), shared by related steps (`explorer.core.steps.SHARED_SCALES`),
  so that the scaled scores look smaller than the raw ones; where every value
  of such a group is ≥ 0 (X from torch.rand, the book's hand-picked vectors),
  on its positive half from 0, white to red, so the whole scale is used and red
  still means positive;
- attention weights on [0, 1] (ColorBrewer Blues), higher where a weight is
  (dropout); weights below 0 (``normalization="sum"``) on the signed scale;
- masks as two categories with words, no colour bar;
- heads, and the series of line and bar charts (`SERIES_TEMPLATE`, never the
  active default template), in the Okabe–Ito colours.

Rows and columns carry token labels (`explorer.core.tokenizer.token_labels`) or
dimension numbers; all visitor text passes through `explorer.core.literal.plotly`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly
import plotly.express as px
import plotly.graph_objects as go
import torch

from explorer.core import literal
from explorer.core.literal import format_value
from explorer.core.steps import DIMS, MASK, STEPS, TOKENS, WEIGHTS, Axis, Step, scale_group
from explorer.core.tokenizer import token_labels
from explorer.core.trace import Trace
from explorer.lessons import explain
from explorer.render.payload import Chart

PLOTLY_MIN_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
"""The installed ``plotly`` package's full Plotly.js, which the report and notebooks
inline (the app serves the partial bundle of the same version, `explorer.ui.component.PLOTLY_JS`)."""
SIGNED_SCALE = plotly.colors.get_colorscale("RdBu_r")  # ColorBrewer, negative blue
POSITIVE_SCALE = [[round(2 * (at - 0.5), 6), colour] for at, colour in SIGNED_SCALE if at >= 0.5]
"""The positive half of `SIGNED_SCALE`, from 0 (white) up: for matrices with no negative value."""
WEIGHTS_SCALE = plotly.colors.get_colorscale("Blues")
MASK_SCALE = [[0.0, "#f2f2f2"], [0.5, "#f2f2f2"], [0.5, "#4d4d4d"], [1.0, "#4d4d4d"]]
HIGHLIGHT_COLOUR = "#E69F00"
MARK_COLOUR = "#000000"
HEAD_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")
"""Okabe–Ito, the colour-blind-safe qualitative palette (yellow left out: too pale)."""
MAX_CELL_PX, MIN_HEIGHT_PX, MAX_HEIGHT_PX = 56, 200, 900
FIXED_MARGIN_SIDE = 64
"""Above this many rows or columns a heatmap's margins are fixed, not measured."""


def axis_labels(trace: Trace, axis: Axis, size: int) -> list[str]:
    """The tick labels of ``axis``: the token labels, or ``0 .. size-1``."""
    if axis.labels == DIMS:
        return [str(i) for i in range(size)]
    return token_labels(trace.tokens)


def step_matrix(trace: Trace, name: str, head: int = 0, head_slice: bool = False,
                dtype=np.float64) -> np.ndarray:
    """The step as a 2-D float array: one head of a per-head step, a vector as
    one row, booleans as 0/1. ``head_slice``: only head ``head``'s columns
    (`head_columns`), e.g. (d_model, head_dim) of a real model's W_query.
    ``dtype=np.float32`` gives the trace's own numbers without a copy (charts)."""
    tensor = trace.head(name, head)
    if tensor.dim() == 1:
        tensor = tensor[None, :]
    if head_slice:
        columns = head_columns(trace, name, head)
        tensor = tensor[:, columns.start:columns.stop]
    return tensor.numpy().astype(dtype, copy=False)


def head_columns(trace: Trace, name: str, head: int) -> range:
    """The columns of step ``name`` that belong to head ``head``: ``h·w`` to
    ``(h+1)·w − 1`` with w = width / n_heads, for a step whose columns fall into
    one block per head (`explorer.core.steps.Step.head_columns`: W_query, b_query,
    the context ...) when there are several heads; every column otherwise."""
    width, n_heads = trace[name].shape[-1], trace.config.n_heads
    if not STEPS[name].head_columns or n_heads == 1 or trace[name].dim() == 3:
        return range(width)
    per_head = width // n_heads
    return range(head * per_head, (head + 1) * per_head)


def _bound(*matrices: np.ndarray) -> float:
    """The largest finite |value| of ``matrices`` (1 when there is none or it is 0)."""
    finite = [np.abs(m[np.isfinite(m)]).max() for m in matrices if np.isfinite(m).any()]
    return float(max(finite)) if finite and max(finite) > 0 else 1.0


def _signed_range(*matrices: np.ndarray) -> tuple[float, float]:
    """A signed scale's (zmin, zmax): ±the largest finite |value|, or from 0 when
    no finite value of any of ``matrices`` is negative (`POSITIVE_SCALE`)."""
    bound = _bound(*matrices)
    negative = any((m[np.isfinite(m)] < 0).any() for m in matrices)
    return (-bound if negative else 0.0), bound


def colour_range(trace: Trace, name: str, head: int = 0,
                 head_slice: bool = False) -> tuple[float, float]:
    """The (zmin, zmax) of a step's colour scale: `shared_range` of the step
    alone for weights and masks, else of every step in its
    `explorer.core.steps.scale_group` (of this head; of its columns with
    ``head_slice``): one rule for the whole group, so its charts agree."""
    step = STEPS[name]
    alone = step.colour in (WEIGHTS, MASK) or name == "dropped_weights"
    group = [name] if alone else [other for other in scale_group(name) if other in trace]
    return shared_range(step, *(step_matrix(trace, other, head, head_slice, np.float32)
                                for other in group))


def shared_range(step: Step, *matrices: np.ndarray) -> tuple[float, float]:
    """One colour range for ``matrices`` drawn as ``step``: [0, 1] for masks;
    for weights from 0 to 1 (higher after dropout, or ``normalization="sum"``),
    and centred at 0 like a signed step's when one is negative (``"sum"``
    makes weights of −1.01); else ±the largest finite |value| of them all,
    centred at 0, or from 0 when none of them holds a negative value
    (`_signed_range`)."""
    if step.colour == MASK:
        return 0.0, 1.0
    low, high = _signed_range(*matrices)
    if (step.colour == WEIGHTS or step.name == "dropped_weights") and low == 0:
        return 0.0, max(1.0, high)
    return low, high


def _colours(step: Step, zrange: tuple[float, float], colorbar: bool) -> dict:
    """The colour scale of ``step`` over ``zrange``: any range below 0 (weights
    too) on the diverging `SIGNED_SCALE`; from 0, a signed step on
    `POSITIVE_SCALE` and weights on `WEIGHTS_SCALE`."""
    signed = SIGNED_SCALE if zrange[0] < 0 else POSITIVE_SCALE
    scale = {WEIGHTS: WEIGHTS_SCALE, MASK: MASK_SCALE}.get(step.colour, signed)
    if step.name == "dropped_weights":
        scale = WEIGHTS_SCALE
    if zrange[0] < 0 and step.colour != MASK:
        scale = SIGNED_SCALE
    return {"colorscale": scale, "zmin": zrange[0], "zmax": zrange[1],
            "showscale": colorbar and step.colour != MASK,
            "colorbar": {"thickness": 10, "len": 0.9, "y": 0, "yanchor": "bottom",
                         "outlinewidth": 0}}


AXIS_TITLE_CHAR_PX = 7
"""About the width of one character of an axis title, px."""
TITLE_REACH_PX = 60
"""How far a vertical axis title may reach past its plot area (both ends together,
centred on it) before it runs into the chart's title above: the top margin, less
the title's line."""
THINNED_SUFFIX = ", every 10th"
"""The longest words chart.js adds to an axis title when it draws every k-th label only
(`explorer/render/chart/axes.js`'s ``withTicks``)."""


def title_min_height(rows_title: str, vertical: int) -> int:
    """The least chart height (px) whose plot area (the height less ``vertical``,
    the margins) holds the vertical axis title ``rows_title``, with the words
    thinned labels add (`THINNED_SUFFIX`), without it running into the chart's
    title: at least `MIN_HEIGHT_PX`. (At 390 px, "generated token (row), every
    2nd" ran into its title on a chart of 8 rows, issue 51.)"""
    if not rows_title:
        return MIN_HEIGHT_PX
    reach = AXIS_TITLE_CHAR_PX * len(rows_title + THINNED_SUFFIX) - TITLE_REACH_PX
    return max(MIN_HEIGHT_PX, vertical + reach)


def _label_width_px(labels: list[str]) -> int:
    return 7 * max((len(s) for s in labels), default=1) + 24


def matrix_chart(values: np.ndarray, row_labels: list[str], col_labels: list[str], step: Step,
                 title: str, *, zrange: tuple[float, float] | None = None,
                 highlight_row: int | None = None, marked_cell: tuple[int, int] | None = None,
                 marked_cells: Sequence[Sequence[int]] = (), colorbar: bool = True,
                 columns: int = 1, filename: str = "matrix",
                 decimals: Sequence[int] | None = None) -> Chart:
    """A heatmap of any 2-D ``values`` drawn as ``step`` (axes, colours, text).

    ``zrange`` fixes the colour scale (default: `colour_range`'s rule on
    ``values`` alone; a range from 0 draws on `POSITIVE_SCALE`). ``highlight_row``
    outlines a row (the query token), ``marked_cell`` a cell (the one being
    explained) and ``marked_cells`` more (the cells that differ,
    `explorer.render.check_view`). ``columns`` is how many
    charts share the page's row (narrower charts: smaller title). Non-finite
    values are gaps labelled −∞ / +∞ / NaN. Hover gives the row, the column and
    the value to 4 decimals. ``decimals``: the cell texts the browser may
    print, most first (default 4, else 2; chart.js prints the first that fits).
    """
    n_rows, n_cols = values.shape
    if zrange is None:
        zrange = shared_range(step, values)
    where = (f"{literal.plotly(step.rows.title)}: %{{y}}<br>"
             f"{literal.plotly(step.cols.title)}: %{{x}}<br>")
    trace = {"type": "heatmap", "x": [literal.plotly(s) for s in col_labels],
             "y": [literal.plotly(s) for s in row_labels], "xgap": 0, "ygap": 0,
             "hoverongaps": True, **_colours(step, zrange, colorbar),
             "matrix": {"block": 0, "rows": n_rows, "cols": n_cols, "hover": where,
                        "words": list(step.cell_text) if step.cell_text else None,
                        **({"decimals": list(decimals)} if decimals else {})}}
    shapes = _marks(n_rows, n_cols, highlight_row, marked_cell, marked_cells)
    layout, size = _matrix_layout(step, title, columns, shapes, row_labels, col_labels,
                                  values.shape)
    return Chart({"data": [trace], "layout": layout}, [values.astype(np.float32, copy=False)],
                 filename=filename, size=size, columns=columns)


def _marks(n_rows: int, n_cols: int, highlight_row: int | None,
           marked_cell: tuple[int, int] | None, marked_cells: Sequence[Sequence[int]]
           ) -> list[dict]:
    """The outlines of `matrix_chart`: the query's row, the explained cell (named
    "cell"), the other marked cells; those outside the matrix left out."""
    shapes = []
    if highlight_row is not None and 0 <= highlight_row < n_rows:
        shapes.append(query_shape(highlight_row))
    for i, (row, col) in enumerate(([marked_cell] if marked_cell is not None else [])
                                   + list(marked_cells)):
        if 0 <= row < n_rows and 0 <= col < n_cols:
            shapes.append(cell_shape(row, col, "cell" if i == 0 and marked_cell else None))
    return shapes


def _matrix_layout(step: Step, title: str, columns: int, shapes: list[dict],
                   row_labels: list[str], col_labels: list[str], shape: tuple[int, int]
                   ) -> tuple[dict, dict]:
    """`matrix_chart`'s layout (title, category axes, margins: measured by
    Plotly up to `FIXED_MARGIN_SIDE` rows or columns, set here beyond) and the
    size rule chart.js sizes it by (cells up to `MAX_CELL_PX`, room for labels
    and a colour bar)."""
    n_rows, n_cols = shape
    tokens_on_x = step.cols.labels == TOKENS
    layout: dict[str, Any] = {
        "title": {"text": literal.plotly(title), "x": 0, "xanchor": "left",
                  "font": {"size": 15 if columns == 1 else 13}},
        # standoff: air between an axis title and its tick labels (they touched on a phone)
        "xaxis": {"title": {"text": step.cols.title, "standoff": 8}, "type": "category",
                  "side": "bottom",
                  "tickangle": -40 if tokens_on_x else 0, "automargin": True},
        "yaxis": {"title": {"text": step.rows.title, "standoff": 10}, "type": "category",
                  "autorange": "reversed", "automargin": True},
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        "shapes": shapes, "dragmode": False, "hovermode": "closest",
        "plot_bgcolor": "#ffffff",
    }
    # Every chart keeps room for a colour bar, so that neighbours on one scale (only
    # the last shows its bar) get the same cell size and height.
    chrome = _label_width_px(row_labels) + (70 if step.colour != MASK else 20)
    vertical = 70 + (_label_width_px(col_labels) // 2 if tokens_on_x else 40)
    if max(n_rows, n_cols) > FIXED_MARGIN_SIDE:
        # Margins set here, not measured by Plotly, which would draw a big matrix twice.
        for axis in ("xaxis", "yaxis"):
            layout[axis]["automargin"] = False
        layout["margin"] = {"l": _label_width_px(row_labels) + 40, "r": 80, "t": 50,
                            "b": vertical - 20, "autoexpand": False}
    size = {"rows": n_rows, "cols": n_cols, "max_cell": MAX_CELL_PX, "chrome": chrome,
            "vertical": vertical, "min_height": title_min_height(step.rows.title, vertical),
            "max_height": MAX_HEIGHT_PX}
    return layout, size


MARK_STYLES = {"query": {"color": HIGHLIGHT_COLOUR, "width": 3},
               "cell": {"color": MARK_COLOUR, "width": 3}}
"""How the query token's row and the explained cell are outlined. chart.js
draws the same outlines when the learner picks another query or cell
(``markShapes``), from these styles, which travel in each chart's ``marks``."""


def query_shape(row: int) -> dict[str, Any]:
    """The outline of the query token's row (named "query")."""
    return {"type": "rect", "name": "query", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
            "y0": row - 0.5, "y1": row + 0.5, "line": MARK_STYLES["query"]}


def cell_shape(row: int, col: int, name: str | None = "cell") -> dict[str, Any]:
    """The outline of a cell (named "cell" for the explained one)."""
    shape = {"type": "rect", "xref": "x", "yref": "y", "x0": col - 0.5, "x1": col + 0.5,
             "y0": row - 0.5, "y1": row + 0.5, "line": MARK_STYLES["cell"]}
    return {"name": name, **shape} if name else shape


def _slug(text: str, limit: int = 40) -> str:
    """``life-is-short``: a file-name piece of a visitor's sentence."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "sentence"


def chart_filename(trace: Trace, name: str, head: int | None = None) -> str:
    """Image file names say the step and the sentence: ``attn_weights_life-is-short``
    (with ``_head1`` for a head of a per-head step)."""
    sentence = getattr(trace.config, "sentence", None) or " ".join(trace.tokens)
    suffix = f"_head{head}" if head is not None else ""
    return f"{name}{suffix}_{_slug(sentence)}"


HEADS_IN_BROWSER_BYTES = 2 * 2**20
"""A per-head chart carries every head's matrix (so that the page switches heads
by itself) while they take at most this many float32 bytes together."""


def heatmap_chart(trace: Trace, name: str, head: int = 0, highlight_row: int | None = None,
                  marked_cell: tuple[int, int] | None = None, title: str | None = None,
                  colorbar: bool = True, columns: int = 1, head_slice: bool = False,
                  every_head: bool = False, follows_view: bool = True) -> Chart:
    """The heatmap of one step of ``trace`` (head ``head`` of a per-head step),
    on its shared colour scale, titled with its name, formula and shape (and
    the head). With several heads the columns of W_query, W_key, W_value and the
    context are outlined per head, and a per-head chart is framed in its head's
    colour. ``head_slice`` draws only head ``head``'s columns of such a step
    (`head_columns`), labelled with their numbers in the whole matrix and framed
    in the head's colour; ``marked_cell`` and clicks are then in the slice's
    own (row, column). ``every_head``: a per-head chart (or a head slice) also
    carries the other heads' variants (`Chart.heads`) while they fit in
    `HEADS_IN_BROWSER_BYTES`. The chart's `Chart.marks` say how the browser
    outlines another query or cell; ``follows_view=False`` leaves them out, for
    a chart of another trace than the page's (it then keeps its own outlines
    whatever the learner picks). See `matrix_chart` for the rest."""
    step = STEPS[name]
    values = step_matrix(trace, name, head, head_slice, np.float32)
    per_head = trace.per_head(name)
    sliced = head_slice and len(head_columns(trace, name, head)) < trace[name].shape[-1]
    given_title = title
    if title is None:
        title = step.title(trace.config, values.shape)
        if per_head or sliced:  # a slice's column numbers are on its axis
            title += f", head {head}"
    col_labels = ([str(c) for c in head_columns(trace, name, head)] if sliced
                  else axis_labels(trace, step.cols, values.shape[1]))
    chart = matrix_chart(values, axis_labels(trace, step.rows, values.shape[0]), col_labels,
                         step, title, zrange=colour_range(trace, name, head, head_slice),
                         highlight_row=highlight_row if step.rows.labels == TOKENS else None,
                         marked_cell=marked_cell, colorbar=colorbar, columns=columns,
                         filename=chart_filename(trace, name,
                                                 head if per_head or sliced else None))
    if sliced:  # column numbers run into the hundreds: fewer ticks keep them apart
        chart.figure["layout"]["xaxis"]["nticks"] = 8
    if trace.config.n_heads > 1 and step.head_columns and not sliced:
        outline_heads(chart.figure["layout"], trace.config.n_heads,
                      values.shape[1] // trace.config.n_heads)
    if per_head or sliced:  # one head's numbers: framed in its colour
        chart.figure["layout"]["shapes"].append(
            {"type": "rect", "name": "frame", "xref": "paper", "yref": "paper", "x0": 0,
             "x1": 1, "y0": 0, "y1": 1, "line": {"color": head_colour(head), "width": 3}})
    shown = head_columns(trace, name, head) if head_slice else range(values.shape[1])
    if follows_view:
        chart.marks = {"step": name, "head": head, "perHead": per_head,
                       "queryRows": step.rows.labels == TOKENS, "colOffset": shown.start,
                       "rows": values.shape[0], "cols": values.shape[1],
                       "styles": MARK_STYLES}
    heads = trace.config.n_heads
    if every_head and (per_head or sliced) and heads * values.nbytes <= HEADS_IN_BROWSER_BYTES:
        _add_head_variants(chart, trace, name, head, given_title, colorbar, columns, head_slice)
    return chart


def _add_head_variants(chart: Chart, trace: Trace, name: str, head: int, title: str | None,
                       colorbar: bool, columns: int, head_slice: bool) -> None:
    """Every head's variant of ``chart`` (`Chart.heads`): its matrix (a block of
    the chart), title, colour range, frame colour, first column and, for a head
    slice, column labels; chart.js draws the one the page's view names."""
    variants = []
    for h in range(trace.config.n_heads):
        other = chart if h == head else heatmap_chart(trace, name, h, title=title,
                                                      colorbar=colorbar, columns=columns,
                                                      head_slice=head_slice)
        if h != head:
            chart.matrices.append(other.matrices[0])
        spec, marks = other.figure["data"][0], other.marks or {}
        variants.append({"block": 0 if h == head else len(chart.matrices) - 1,
                         "title": other.figure["layout"]["title"]["text"],
                         "zmin": spec["zmin"], "zmax": spec["zmax"],
                         "colorscale": spec["colorscale"], "frame": head_colour(h),
                         "colOffset": marks["colOffset"], "filename": other.filename,
                         "x": spec["x"] if head_slice else None})
    chart.heads = variants
    chart._hashes = None


def to_figure(chart: Chart) -> go.Figure:
    """A `Chart` as a ``go.Figure`` with ``z`` filled in (non-finite values as
    gaps, 4-decimal hover), for notebooks and tests."""
    data = []
    for spec in chart.figure["data"]:
        spec = dict(spec)
        matrix = spec.pop("matrix", None)
        if matrix is not None:
            values = chart.matrices[matrix["block"]].astype(np.float64)
            spec["z"] = np.where(np.isfinite(values), values, np.nan)
            spec["customdata"] = np.vectorize(format_value, otypes=[object])(values)
            spec["hovertemplate"] = matrix["hover"] + "value: %{customdata}<extra></extra>"
        data.append(spec)
    return go.Figure(data=data, layout=chart.figure["layout"])


def heatmap(trace: Trace, name: str, head: int = 0, **options) -> go.Figure:
    """`heatmap_chart` as a ``plotly.graph_objects.Figure`` (``z`` filled in)."""
    return to_figure(heatmap_chart(trace, name, head, **options))


def head_colour(head: int) -> str:
    """The colour that marks ``head`` in every chart."""
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


def outline_heads(layout: dict, n_heads: int, width: int) -> None:
    """Outline each head's block of ``width`` columns in its colour, labelled
    on top: one shape and one label per head."""
    for h in range(n_heads):
        x0, x1 = h * width - 0.5, (h + 1) * width - 0.5
        layout["shapes"].append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0,
                                 "x1": x1, "y0": 0, "y1": 1,
                                 "line": {"color": head_colour(h), "width": 3}})
        layout.setdefault("annotations", []).append(
            {"x": (x0 + x1) / 2, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom",
             "text": f"head {h}", "showarrow": False,
             "font": {"color": head_colour(h), "size": 12}})
    layout["margin"]["t"] = 75


def head_split_chart(trace: Trace, name: str) -> Chart:
    """How one ``(n, d)`` matrix (e.g. Q = X·W_query) is cut into n_heads slices:
    the whole matrix, with each head's columns outlined in its colour."""
    step = STEPS[name]
    values = combine_heads_np(trace[name])
    n_heads = trace.config.n_heads
    title = (f"{step.symbol} = {step.expr(trace.config)} ({values.shape[0]}×{values.shape[1]}),"
             f" {n_heads} heads")
    chart = matrix_chart(values, axis_labels(trace, step.rows, values.shape[0]),
                         axis_labels(trace, step.cols, values.shape[1]), step, title,
                         columns=3, filename=chart_filename(trace, f"{name}_split"))
    outline_heads(chart.figure["layout"], n_heads, values.shape[1] // n_heads)
    return chart


def head_split_caption(trace: Trace) -> str:
    """What the split pictures (`head_split_chart`) show, in the trace's numbers."""
    c = trace.config

    def columns(n: int) -> str:
        return f"{n} column" + ("" if n == 1 else "s")

    return (f"Q = X·W_query is one {trace.n_tokens}×{c.d_k} matrix. Head h takes its own "
            f"{columns(c.head_dim)} (head_dim = d_k / n_heads = {c.d_k} / {c.n_heads}), and so "
            f"do K and V ({columns(c.head_dim_v)} of V each). Each head then runs attention on "
            "its slices alone; the colours mark the heads in every chart below.")


def second_route_chart(trace: Trace, route, head: int = 0) -> Chart:
    """Head ``head``'s weights by the book's second causal route (``route``, an
    `explorer.core.verify.SecondRoute` of ``trace``), drawn like the attention weights."""
    values = route.weights[head] if route.weights.dim() == 3 else route.weights
    n = trace.n_tokens
    heads = f", head {head}" if trace.config.n_heads > 1 else ""
    return labelled_chart(values, trace, "attn_weights",
                          f"softmax(ω̃), future zeroed, rows renormalised ({n}×{n}){heads}")


def combine_heads_np(tensor: torch.Tensor) -> np.ndarray:
    """(n_heads, n, hd) -> (n, n_heads·hd) as float64; 2-D input unchanged."""
    if tensor.dim() == 3:
        tensor = tensor.transpose(0, 1).reshape(tensor.shape[1], -1)
    return tensor.to(torch.float64).numpy()


def grid_domains(count: int, columns: int, gap: float = 0.04) -> list[tuple[tuple, tuple]]:
    """``count`` (x, y) paper domains laid out ``columns`` wide, top to bottom.
    The gaps shrink with the number of rows, so any number of heads fits
    (Plotly's own facet spacing refuses 14 rows or more)."""
    columns = min(columns, count)
    rows = math.ceil(count / columns)
    x_gap, y_gap = gap, min(gap * 2, 0.3 / rows)
    width = (1 - x_gap * (columns - 1)) / columns
    height = (1 - y_gap * (rows - 1)) / rows
    out = []
    for i in range(count):
        r, c = divmod(i, columns)
        x0 = c * (width + x_gap)
        y1 = 1 - r * (height + y_gap)
        out.append(((x0, x0 + width), (y1 - height, y1)))
    return out


GRID_LABELLED_UP_TO = 12
"""A grid of heads labels each small heatmap's tokens up to this many tokens."""
GRID_CELL_PX, GRID_PANEL_PX = 22, 60
"""The narrowest a grid's panel may be: `GRID_CELL_PX` per token when its tokens
are labelled (rotated labels closer than that run into each other), and
`GRID_PANEL_PX` in any case (its title, "head 10")."""
GRID_GAP = 0.04
"""The gap between a grid's panels, as a fraction of its width (`grid_domains`)."""


def _heads_grid_layout(n_heads: int, columns: int, n: int, labels: list[str],
                       titles: list[str] | None) -> tuple[dict, dict]:
    """The axes, panel titles and size of `heads_grid_chart` laid out ``columns``
    panels wide: token labels (up to `GRID_LABELLED_UP_TO` tokens) on the first
    column's y axes and the last row's x axes, panels as square as the width
    allows (each at most ``40 · n`` px, 160 to 320)."""
    labelled = n <= GRID_LABELLED_UP_TO
    layout: dict = {"annotations": []}
    for h, ((x0, x1), (y0, y1)) in enumerate(grid_domains(n_heads, columns, GRID_GAP)):
        suffix = "" if h == 0 else str(h + 1)
        layout[f"xaxis{suffix}"] = {"domain": [x0, x1], "type": "category", "anchor": f"y{suffix}",
                                    "showticklabels": labelled and h + columns >= n_heads,
                                    "tickangle": -40, "automargin": True}
        layout[f"yaxis{suffix}"] = {"domain": [y0, y1], "type": "category", "anchor": f"x{suffix}",
                                    "autorange": "reversed", "automargin": True,
                                    "showticklabels": labelled and h % columns == 0}
        layout["annotations"].append(
            {"x": (x0 + x1) / 2, "y": y1, "xref": "paper", "yref": "paper",
             "yanchor": "bottom", "showarrow": False,
             "text": titles[h] if titles else f"head {h}",
             "font": {"color": head_colour(h), "size": 13}})
    rows = math.ceil(n_heads / columns)
    chrome = (_label_width_px(labels) if labelled else 0) + 130  # margins, colour bar, toolbar
    size = {"rows": rows * 10, "cols": columns * 10, "max_cell": max(16, min(4 * n, 32)),
            "chrome": chrome, "vertical": 90 + 30 * rows, "min_height": 200, "max_height": 2400}
    return layout, size


def _grid_width_px(columns: int, n: int, chrome: int) -> int:
    """The chart width below which ``columns`` panels would be narrower than the
    narrowest readable panel (`GRID_CELL_PX`, `GRID_PANEL_PX`)."""
    panel = max(GRID_PANEL_PX, GRID_CELL_PX * n if n <= GRID_LABELLED_UP_TO else 0)
    return math.ceil(columns * panel / (1 - GRID_GAP * (columns - 1))) + chrome


def heads_grid_chart(trace: Trace, name: str = "attn_weights", columns: int = 4,
                     titles: list[str] | None = None) -> Chart:
    """Small multiples: one heatmap per head of a per-head (n, n) step, on one
    colour scale, each titled with its head in the head's colour. Clicking a
    head's heatmap reports that head (the click's ``trace``).

    Up to ``columns`` panels a row; a narrower chart (a phone) gets fewer, so
    that no panel is narrower than its labels need: the chart's
    ``size["narrower"]`` lists, widest first, the layout and size for each
    smaller number of columns with the width ``below`` which it applies
    (``explorer/render/chart/chart.js`` picks by the chart's real width)."""
    step = STEPS[name]
    step_values = trace[name]
    values = (step_values if step_values.dim() == 3 else step_values[None]
              ).to(torch.float64).numpy()
    n_heads, n, _ = values.shape
    labels = [literal.plotly(s) for s in token_labels(trace.tokens)]
    zrange = (colour_range(trace, name) if step.colour != WEIGHTS
              else shared_range(step, *values))  # every head's weights on one scale
    cols = min(columns, n_heads)
    grid, size = _heads_grid_layout(n_heads, cols, n, labels, titles)
    layout: dict = {"title": {"text": f"{step.label} of every head ({n}×{n} each)",
                              "x": 0, "xanchor": "left", "font": {"size": 15}},
                    "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
                    "dragmode": False, "shapes": [], **grid}
    size["narrower"] = []
    for fewer in range(cols - 1, 0, -1):
        layout_fewer, size_fewer = _heads_grid_layout(n_heads, fewer, n, labels, titles)
        size["narrower"].append({"below": _grid_width_px(fewer + 1, n, size_fewer["chrome"]),
                                 "layout": layout_fewer, "size": size_fewer})
    data = []
    for h in range(n_heads):
        suffix = "" if h == 0 else str(h + 1)
        data.append({"type": "heatmap", "x": labels, "y": labels, "xaxis": f"x{suffix}",
                     "yaxis": f"y{suffix}", **_colours(step, zrange, h == 0),
                     "matrix": {"block": h, "rows": n, "cols": n, "decimals": [2],
                                "hover": f"head {h}<br>query: %{{y}}<br>key: %{{x}}<br>",
                                "words": None}})
    return Chart({"data": data, "layout": layout}, [v.astype(np.float32) for v in values],
                 filename=chart_filename(trace, f"{name}_all_heads"), size=size)


def token_table(trace: Trace) -> pd.DataFrame:
    """Tokens and their ids as a table: position, token, id in the sorted vocabulary."""
    return pd.DataFrame({"position": range(trace.n_tokens), "token": trace.tokens,
                         "token id": trace["token_ids"].tolist()}).set_index("position")


MAX_WRITTEN_TERMS = 8
"""A dot product is written out term by term up to this many terms."""
MAX_TABLE_KEYS = 16
"""Per-query tables list every key up to this many; beyond, the heaviest ones."""


def _shown_keys(weights: torch.Tensor) -> list[int]:
    """Every key for a short sentence, else the `MAX_TABLE_KEYS` with the largest
    weights, in sentence order."""
    if weights.shape[0] <= MAX_TABLE_KEYS:
        return list(range(weights.shape[0]))
    return sorted(torch.topk(weights, MAX_TABLE_KEYS).indices.tolist())


def query_table(trace: Trace, query: int) -> pd.DataFrame:
    """Query ``query``'s attention, key by key: the dot product written out (up
    to `MAX_WRITTEN_TERMS` terms), the score, the scaled score and the weight.
    For long sentences, the `MAX_TABLE_KEYS` keys with the largest weights.
    Single-head traces."""
    labels = token_labels(trace.tokens)
    rows = []
    for j in _shown_keys(trace["attn_weights"][query]):
        score = float(trace["attn_scores"][query, j])
        terms = explain.score_terms(trace, query, j)
        total = explain.number(score)
        written = (f"{explain.written_sum(terms)} = {total}" if len(terms) <= MAX_WRITTEN_TERMS
                   else f"Σ of {len(terms)} products = {total} (click the score to see them)")
        row = {"key": labels[j], "dot product q·k": written, "score ω": score}
        if trace.config.scale:
            row["scaled ω̃"] = float(trace["scaled_scores"][query, j])
        row["weight α"] = float(trace["attn_weights"][query, j])
        rows.append(row)
    return pd.DataFrame(rows).set_index("key")


def context_table(trace: Trace, query: int) -> pd.DataFrame:
    """z_query = Σ_j α_qj · v_j as a table: one weighted value vector per key and
    their sum in the last row. For long sentences, the `MAX_TABLE_KEYS` keys with
    the largest weights and one row for all the others. Single-head traces."""
    terms = explain.context_terms(trace, query)
    labels = token_labels(trace.tokens)
    vector = "x" if trace.config.weight_init == "identity" else "v"
    weighted = explain.stacked(terms).to(torch.float64)
    shown = _shown_keys(torch.tensor([w for w, _ in terms]))
    frame = pd.DataFrame(weighted[shown].numpy(),
                         index=[f"α={explain.number(terms[j][0])} × {vector}[{labels[j]}]"
                                for j in shown],
                         columns=[f"dim {c}" for c in range(trace["context"].shape[1])])
    if len(shown) < len(terms):
        others = [j for j in range(len(terms)) if j not in set(shown)]
        frame.loc[f"the other {len(others)} keys together"] = weighted[others].sum(0).numpy()
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


SERIES_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#000000")
"""The colours of a line or bar chart's series, in order: Okabe–Ito, without the
highlight colour (the learner's own point) and without yellow (too pale)."""
REFERENCE_COLOURS = ("#555555", "#999999")
"""Exact reference curves, dotted, each in its own grey."""
SERIES_TEMPLATE = go.layout.Template(layout={"colorway": list(SERIES_COLOURS)})
"""The template every line and bar chart is built with. plotly.express otherwise
takes the active default, and Streamlit's ("streamlit") holds stand-in colours
(#000001 ...) that only ``st.plotly_chart`` replaces: the explorer draws with its
own component (`figure_chart`), so they would stay black. Everything else is
Plotly.js's own default look, as in the heatmaps."""


def _plain_layout(fig: go.Figure, height: int, legend: bool = True) -> None:
    """The layout every line and bar chart shares: a left-aligned title like the
    heatmaps', margins that grow to fit the tick labels and axis titles
    (``automargin``; a fixed 10 px cut "1024" to "24"), and the legend below."""
    fig.update_layout(
        template=SERIES_TEMPLATE, height=height,
        title={"x": 0, "xanchor": "left", "font": {"size": 15}},
        margin={"t": 50, "b": 10, "l": 10, "r": 10}, plot_bgcolor="#ffffff",
        **({"legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.2,
                       "yanchor": "top", "title": None}} if legend else {"showlegend": False}))
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        axis.automargin = True
        axis.gridcolor = "#eeeeee"
        axis.title.standoff = 8


def _scatter(fig: go.Figure, name: str, x, y, **style) -> None:
    fig.add_scatter(x=list(x), y=list(y), name=name, **style)


YOUR_POINT_COLOURS = (HIGHLIGHT_COLOUR, "#CC79A7")
"""The learner's own stars: unscaled (orange), scaled (Okabe–Ito reddish purple, pink)."""


def _your_point(fig: go.Figure, point, y: float, label: str, scaled: bool = False) -> None:
    """The learner's own configuration as a star at (d_k, ``y``): one per
    series, told apart by colour, outline and name, which say the sentence's
    keys per query; hover gives ``label`` and the value."""
    keys = f"{point.n_keys} {'key' if point.n_keys == 1 else 'keys'}"
    name = (f"your sentence: q·k / √d_k ({keys})" if scaled
            else f"your sentence: q·k ({keys})")
    colour = YOUR_POINT_COLOURS[scaled]
    _scatter(fig, name, [point.d_k], [y], mode="markers",
             marker={"size": 14, "symbol": "star-diamond" if scaled else "star",
                     "color": colour, "line": {"color": SERIES_COLOURS[scaled], "width": 1.5}},
             hovertemplate=(f"{literal.plotly(name)}<br>d_k = %{{x}}<br>{label}: %{{y:.4f}}"
                            "<extra></extra>"))


def scaling_variance_figure(curves, point) -> go.Figure:
    """Variance of q·k against d_k (log–log): the estimate from random pairs
    beside the exact values (d_k, and 1 after ÷√d_k). ``point`` (an
    `experiments.ConfigPoint`) marks the learner's own config."""
    frame = _curve_frame(curves.dims, {"q·k (sampled)": curves.variance,
                                       "q·k / √d_k (sampled)": curves.variance_scaled})
    fig = px.line(frame, x="d_k", y="value", color="curve", markers=True,
                  labels={"value": "variance"}, template=SERIES_TEMPLATE,
                  color_discrete_sequence=SERIES_COLOURS,
                  title="Variance of the scores grows with d_k")
    for (name, exact), colour in zip((("exact: Var(q·k) = d_k", list(curves.dims)),
                                      ("exact: Var(q·k / √d_k) = 1", [1.0] * len(curves.dims))),
                                     REFERENCE_COLOURS):
        _scatter(fig, name, curves.dims, exact, mode="lines",
                 line={"dash": "dot", "color": colour, "width": 1.5})
    _your_point(fig, point, max(point.variance, 1e-3), "variance")
    _your_point(fig, point, max(point.variance_scaled, 1e-3), "variance", scaled=True)
    _plain_layout(fig, 400)
    fig.update_layout(xaxis=_log2_axis(curves.dims),
                      yaxis=_log2_axis((0.25, 1, 4, 16, 64, 256, 1024)))
    return fig


def scaling_softmax_figure(curves, point, measure: str = "entropy") -> go.Figure:
    """Mean softmax-row entropy (nats) or mean largest weight against d_k, with
    and without scaling; the learner's config marked on both curves."""
    raw, scaled = ((curves.entropy, curves.entropy_scaled) if measure == "entropy"
                   else (curves.max_weight, curves.max_weight_scaled))
    frame = _curve_frame(curves.dims, {"softmax(q·k)": raw, "softmax(q·k / √d_k)": scaled})
    label = "mean row entropy (nats)" if measure == "entropy" else "mean largest weight"
    fig = px.line(frame, x="d_k", y="value", color="curve", markers=True,
                  labels={"value": label}, template=SERIES_TEMPLATE,
                  color_discrete_sequence=SERIES_COLOURS,
                  title=("Without scaling, softmax rows collapse to one-hot" if measure ==
                         "entropy" else "Without scaling, one key takes all the weight"))
    mine = ((point.entropy, point.entropy_scaled) if measure == "entropy"
            else (point.max_weight, point.max_weight_scaled))
    _your_point(fig, point, mine[0], label)
    _your_point(fig, point, mine[1], label, scaled=True)
    if measure == "entropy":
        fig.add_hline(y=math.log(curves.n_keys), line_dash="dot",
                      annotation_text=f"uniform over {curves.n_keys} keys: log {curves.n_keys}")
    _plain_layout(fig, 420)
    fig.update_layout(xaxis=_log2_axis(curves.dims))
    return fig


def row_bars(values, labels: list[str], title: str, y_label: str) -> go.Figure:
    """One bar per row (e.g. each query's entropy)."""
    fig = px.bar(x=[literal.plotly(s) for s in labels], y=list(values), title=title,
                 labels={"x": "query (row)", "y": y_label}, template=SERIES_TEMPLATE,
                 color_discrete_sequence=SERIES_COLOURS)
    _plain_layout(fig, 320, legend=False)
    fig.update_xaxes(type="category")
    return fig


def figure_chart(fig: go.Figure, filename: str) -> Chart:
    """Any other Plotly figure (a line or bar chart) as a `Chart`, to be drawn
    like the heatmaps (same Plotly.js, same toolbar and downloads)."""
    return Chart(json.loads(fig.to_json()), filename=filename)


def labelled_chart(values, trace: Trace, like: str, title: str, columns: int = 1,
                   zrange: tuple[float, float] | None = None, colorbar: bool = True,
                   decimals: Sequence[int] | None = None) -> Chart:
    """Any (n, n) or (n, d) matrix drawn like step ``like`` (labels, colours).
    ``colorbar=False`` gives its width to the cells (a narrow panel whose numbers
    are printed in them); ``decimals`` as `matrix_chart`'s."""
    step = STEPS[like]
    values = np.asarray(torch.as_tensor(values).to(torch.float64))
    return matrix_chart(values, axis_labels(trace, step.rows, values.shape[0]),
                        axis_labels(trace, step.cols, values.shape[1]), step, title,
                        zrange=zrange, columns=columns, colorbar=colorbar, decimals=decimals,
                        filename=chart_filename(trace, _slug(title, 30)))


def sums_table(matrices: dict[str, torch.Tensor]) -> pd.DataFrame:
    """Row i's sum and column i's sum of each matrix: one row per (matrix, i),
    two narrow columns, so that the table fits a phone without scrolling
    sideways (four columns named "softmax(dim=-1): column sums" did not)."""
    frames = [pd.DataFrame({"row sum": m.sum(dim=1).to(torch.float64).numpy(),
                            "column sum": m.sum(dim=0).to(torch.float64).numpy()},
                           index=pd.MultiIndex.from_product([[name], range(m.shape[0])],
                                                            names=["matrix", "i"]))
              for name, m in matrices.items()]
    return pd.concat(frames)


def table_text(frame: pd.DataFrame, decimals: int = 4) -> pd.DataFrame:
    """``frame`` as a page's table shows it: every float column written as the
    explanations write numbers (`explorer.lessons.explain.number`: ``decimals``
    decimals, the minus sign U+2212, never "−0.0000", −∞ and NaN spelled out),
    so a table and the formula above it read alike. The other columns as they are."""
    text = frame.copy()
    for i, dtype in enumerate(frame.dtypes):
        if dtype.kind == "f":
            text.isetitem(i, [explain.number(float(v), decimals) for v in frame.iloc[:, i]])
    return text


# ---------------------------------------------------------------------------
# Attention as lines (BertViz's head view), and every head of a real model
# ---------------------------------------------------------------------------
LINES_ALL_UP_TO = 32
"""Up to this many tokens the line view draws a line for every weight above 0."""
LINES_MIN_WEIGHT = 0.05
"""With more tokens than `LINES_ALL_UP_TO`, only weights of at least this are
drawn: at 512 tokens that is at most 20 lines per query, not 512."""
LINE_BINS: tuple[tuple[float, float, float, float], ...] = (
    (0.0, 0.1, 0.75, 0.3), (0.1, 0.25, 1.5, 0.5), (0.25, 0.5, 3.0, 0.75),
    (0.5, math.inf, 5.0, 0.95))
"""The line view's weight bins: (above, up to, line width in px, opacity). One
Plotly trace per bin keeps the figure small however many lines it holds."""
LINE_COLOUR = "#08519c"  # the darkest blue of the weights' colour scale
LINE_LABELS_UP_TO = 96
"""Token labels are printed beside the columns up to this many tokens."""


def lines_threshold(n_tokens: int) -> float:
    """The smallest weight the line view draws for ``n_tokens`` tokens: 0 (every
    positive weight) up to `LINES_ALL_UP_TO` tokens, else `LINES_MIN_WEIGHT`."""
    return 0.0 if n_tokens <= LINES_ALL_UP_TO else LINES_MIN_WEIGHT


def lines_spec(trace: Trace, name: str = "attn_weights") -> dict[str, Any]:
    """What chart.js needs to draw an (n, n) weights matrix as lines, like
    BertViz's head view (``linesFigure``), from the matrix the chart holds, for
    the head and the query token the page shows: query tokens in a left column,
    key tokens in a right one, token i at height i; weight α_ij a line from query
    i to key j, thicker and more opaque in a higher bin of `LINE_BINS` (one
    Plotly trace per bin); zero weights (a causal mask's future) get no line,
    long inputs only lines of at least `lines_threshold`, and negative or
    non-finite weights (``normalization`` sum or naive_softmax) none, which the
    title says; the query token's lines in the highlight colour. Returns the
    labels (escaped for Plotly), the bins (an upper bound of None: none), the
    threshold, colours, sizes and words."""
    n = trace.n_tokens
    labels = token_labels(trace.tokens)
    return {"labels": [literal.plotly(s) for s in labels], "label": STEPS[name].label,
            "perHead": trace.per_head(name), "threshold": lines_threshold(n),
            "bins": [[low, None if high == math.inf else high, width, opacity]
                     for low, high, width, opacity in LINE_BINS],
            "colour": LINE_COLOUR, "highlight": HIGHLIGHT_COLOUR,
            "showLabels": n <= LINE_LABELS_UP_TO, "labelWidth": _label_width_px(labels),
            "fontSize": 12 if n <= 32 else 10, "filename": chart_filename(trace, f"{name}_lines")}


def _block_labels(labels: list[str], blocks) -> list[str]:
    """One label per block of tokens: the token, or ``first…last``."""
    return [labels[a] if b - a == 1 else f"{labels[a]}…{labels[b - 1]}" for a, b in blocks]


def head_overview_chart(overview, layer: int | None = None, head: int | None = None) -> Chart:
    """Every head of every layer at a glance: a layers × heads grid of small
    attention patterns, one heatmap trace per head (layer l, head h is trace
    ``l · n_heads + h``, so a click's trace says which head was clicked).

    ``overview`` is an `explorer.models.HeadOverview`: ``thumbnails`` (n_layers,
    n_heads, t, t) with the token ``blocks`` behind each row and column, and the
    shares ``to_previous``, ``to_first``, ``to_self`` (n_layers, n_heads), which
    each thumbnail's hover gives. Rows are layers (labelled on the left), each
    thumbnail is titled with its head; the shown ``layer`` and ``head`` is
    outlined in the highlight colour. One [0, 1] colour scale.
    """
    thumbs = overview.thumbnails.to(torch.float32).numpy()
    n_layers, n_heads, t, _ = thumbs.shape
    names = [literal.plotly(s) for s in
             _block_labels(token_labels(list(overview.tokens)), overview.blocks)]
    shares = [s.to(torch.float64).numpy() for s in
              (overview.to_previous, overview.to_first, overview.to_self)]
    step = STEPS["attn_weights"]
    layout: dict = {"title": {"text": f"Every head's attention weights ({n_layers} layers × "
                                      f"{n_heads} heads)", "x": 0, "xanchor": "left",
                              "font": {"size": 15}},
                    "margin": {"l": 40, "r": 10, "t": 60, "b": 10}, "annotations": [],
                    "shapes": [], "dragmode": False, "hovermode": "closest"}
    data = []
    domains = grid_domains(n_layers * n_heads, n_heads, gap=0.02)
    for k, ((x0, x1), (y0, y1)) in enumerate(domains):
        lay, h = divmod(k, n_heads)
        suffix = "" if k == 0 else str(k + 1)
        axis = {"type": "category", "showticklabels": False, "ticks": "", "showgrid": False,
                "fixedrange": True}
        layout[f"xaxis{suffix}"] = {**axis, "domain": [x0, x1], "anchor": f"y{suffix}"}
        layout[f"yaxis{suffix}"] = {**axis, "domain": [y0, y1], "anchor": f"x{suffix}",
                                    "autorange": "reversed"}
        habits = (f"previous token {shares[0][lay, h]:.2f} · first token "
                  f"{shares[1][lay, h]:.2f} · itself {shares[2][lay, h]:.2f}")
        data.append({"type": "heatmap", "x": names, "y": names, "xaxis": f"x{suffix}",
                     "yaxis": f"y{suffix}", **_colours(step, (0.0, 1.0), False),
                     "matrix": {"block": k, "rows": t, "cols": t, "decimals": [],
                                "hover": f"layer {lay}, head {h}<br>{habits}<br>"
                                         "query: %{y}<br>key: %{x}<br>", "words": None}})
        layout["annotations"].append(
            {"x": (x0 + x1) / 2, "y": y1, "xref": "paper", "yref": "paper",
             "yanchor": "bottom", "showarrow": False, "text": f"H{h}",
             "font": {"size": 10, "color": "#555555"}})
        if h == 0:
            layout["annotations"].append(
                {"x": x0, "y": (y0 + y1) / 2, "xref": "paper", "yref": "paper",
                 "xanchor": "right", "showarrow": False, "text": f"L{lay} ",
                 "font": {"size": 10, "color": "#555555"}})
        if (lay, h) == (layer, head):
            layout["shapes"].append({"type": "rect", "xref": "paper", "yref": "paper",
                                     "x0": x0, "x1": x1, "y0": y0, "y1": y1,
                                     "line": {"color": HIGHLIGHT_COLOUR, "width": 3}})
    size = {"rows": n_layers * 10, "cols": n_heads * 10, "max_cell": 9, "chrome": 50,
            "vertical": 70 + 16 * n_layers, "min_height": 200, "max_height": 2000}
    return Chart({"data": data, "layout": layout}, [m for row in thumbs for m in row],
                 filename=f"every_head_{_slug(overview.model)}", size=size)


def head_habits_table(overview) -> pd.DataFrame:
    """Each head's measured habits on this input, one row per (layer, head): the
    mean share of a token's weight on the previous token, on the first token
    and on itself (see `explorer.models.HeadOverview`)."""
    n_layers, n_heads = overview.to_previous.shape
    index = pd.MultiIndex.from_product([range(n_layers), range(n_heads)],
                                       names=["layer", "head"])
    return pd.DataFrame({"previous token": overview.to_previous.flatten().tolist(),
                         "first token": overview.to_first.flatten().tolist(),
                         "itself": overview.to_self.flatten().tolist()}, index=index)
