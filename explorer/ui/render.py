"""Streamlit glue: the step-by-step chart walk, the explained cell, the query
picker, tables and the page header."""

from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

from explorer import explain, figures, literal
from explorer.steps import STEPS, TOKENS, Step, chart_caption, layout_rows, shows_colour_bar
from explorer.tokenizer import token_labels
from explorer.trace import Trace
from explorer.ui import chart, urlstate


# ---------------------------------------------------------------------------
# The explained cell: one per page, kept in session state and in the link
# ---------------------------------------------------------------------------
def explained_cell(name: str, head: int, shape: tuple[int, int]) -> tuple[int, int] | None:
    """The explained cell of step ``name`` (and ``head``) if it lies in
    ``shape``; one that no longer fits (the sentence got shorter) is dropped."""
    explained = st.session_state.get(urlstate.CELL)
    if explained is None or explained[0] != name or (STEPS[name].per_head and
                                                      explained[3] != head):
        return None
    row, col = explained[1:3]
    if row < shape[0] and col < shape[1]:
        return row, col
    urlstate.set_view(urlstate.CELL, None)
    return None


def _follow_click(step: Step, head: int, cell: dict[str, int], col_offset: int = 0) -> None:
    """Explain the clicked cell; in a chart whose rows are tokens it also
    picks the query. ``col_offset``: the chart shows one head's columns from
    that one on (a head slice), so the cell's column in the step is col + offset."""
    urlstate.set_view(urlstate.CELL, (step.name, cell["row"], cell["col"] + col_offset, head))
    if step.rows.labels == TOKENS:
        set_query(cell["row"])


# ---------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------
BIG_MATRIX_CELLS = 64 * 64
"""Above this many cells a cell is a pixel or two: a picker explains one by number."""
LINE_VIEW_STEPS = ("attn_weights",)
"""Steps that offer "Show as lines" under their heatmap (BertViz's head view)."""


def step_chart(trace: Trace, name: str, head: int = 0, highlight_row: int | None = None,
               columns: int = 1, colorbar: bool = True, head_slice: bool = False) -> None:
    """One step: its formula (st.latex), heatmap and a one-line explanation.

    Clicking a cell explains it under the chart (`cell_explanation`) and, when
    the rows are tokens, makes that token the highlighted query on the page.
    ``columns`` charts share the page's row; ``colorbar=False`` leaves the
    colour bar to a neighbour on the same scale. ``head_slice`` draws only head
    ``head``'s columns of a step such as W_query (`figures.head_columns`); its
    cells are still explained and linked by their column in the whole step."""
    step = STEPS[name]
    st.latex(step.latex(trace.config))
    n_rows, n_cols = figures.step_matrix(trace, name, head, dtype=np.float32).shape
    shown = figures.head_columns(trace, name, head) if head_slice else range(n_cols)
    key = f"chart-{name}" + ("-head" if len(shown) < n_cols else "")
    cell = explained_cell(name, head, (n_rows, n_cols))
    if cell is not None and cell[1] not in shown:  # another head's column: not here
        cell = None
    marked = None if cell is None else (cell[0], cell[1] - shown.start)
    chart.show(figures.heatmap_chart(trace, name, head=head, highlight_row=highlight_row,
                                     marked_cell=marked, colorbar=colorbar, columns=columns,
                                     head_slice=head_slice),
               key=key, on_click=partial(_follow_click, step, head, col_offset=shown.start))
    if step.explain:
        st.caption(chart_caption(trace, name, head))
    if name in LINE_VIEW_STEPS:
        line_view(trace, name, head, highlight_row)
    if n_rows * len(shown) > BIG_MATRIX_CELLS:
        _cell_picker(key, step, n_rows, shown, head)
    if cell is not None:
        cell_explanation(trace, name, *cell, head=head)


def line_view(trace: Trace, name: str, head: int = 0, highlight_row: int | None = None) -> None:
    """The "Show as lines" toggle and, when on, the weights as lines from each
    query token to each key token (`figures.attention_lines_chart`)."""
    if st.toggle("Show as lines", key=f"lines-{name}",
                 help="Each weight as a line from its query token (left) to its key token "
                      "(right): the larger the weight, the thicker and darker the line."):
        chart.show(figures.attention_lines_chart(trace, name, head, highlight_row),
                   key=f"lines-chart-{name}")


def _cell_picker(key: str, step: Step, n_rows: int, cols: range, head: int) -> None:
    """For matrices whose cells are too small to aim at: pick one by number
    (``cols``: the columns the chart shows, numbered as in the whole step)."""
    col_key = f"{key}-col" if cols.start == 0 else f"{key}-col{cols.start}"
    with st.popover("Explain a cell", icon=":material/calculate:"):
        st.number_input("row", 0, n_rows - 1, key=f"{key}-row")
        st.number_input("column", cols.start, cols.stop - 1, key=col_key)
        st.button("Explain", key=f"{key}-explain", on_click=_pick_cell,
                  args=(key, col_key, step, head))


def _pick_cell(key: str, col_key: str, step: Step, head: int) -> None:
    _follow_click(step, head, {"row": st.session_state[f"{key}-row"],
                               "col": st.session_state[col_key]})


def cell_explanation(trace: Trace, name: str, row: int, col: int, head: int = 0) -> None:
    """How the explained cell was computed, with its real numbers."""
    exp = explain.explain_cell(trace, name, row, col, head)
    cell = f"**{literal.markdown(exp.cell)}** ({exp.position})"
    with st.container(border=True):
        if exp.combine == explain.GIVEN:
            st.markdown(f"{cell} = {figures.format_value(exp.value)}")
            st.caption(literal.markdown(exp.formula[0].upper() + exp.formula[1:]) + ".")
            return
        st.markdown(f"{cell} = {literal.markdown(exp.formula)}")
        st.code(exp.written(), language=None, wrap_lines=True)
        if exp.note:
            st.caption(literal.markdown(exp.note))
        if name == "context" and trace.config.n_heads == 1:
            number_table(figures.context_table(trace, row))
        elif len(exp.terms) > 1:
            number_table(figures.terms_table(exp))
            st.caption(literal.markdown(exp.total_text()))


def step_charts(trace: Trace, names: list[str], head: int = 0,
                highlight_row: int | None = None, head_slice: bool = False) -> None:
    """Draw ``names`` in pipeline order, related steps side by side; steps of
    one colour scale in a row show one colour bar, on the last of them.
    ``head_slice``: see `step_chart`."""
    for row in layout_rows(names):
        columns = st.columns(len(row)) if len(row) > 1 else [st.container()]
        for i, (column, name) in enumerate(zip(columns, row)):
            with column:
                step_chart(trace, name, head, highlight_row, columns=len(row),
                           colorbar=shows_colour_bar(row, i), head_slice=head_slice)


# ---------------------------------------------------------------------------
# Tables, header, query picker
# ---------------------------------------------------------------------------
def number_table(frame) -> None:
    """A labelled table, its numbers written as the formulas write them
    (`figures.table_text`) and right-aligned, every row shown (no inner scroll)."""
    numbers = {str(c): st.column_config.TextColumn(alignment="right")
               for c, dtype in frame.dtypes.items() if dtype.kind == "f"}
    st.dataframe(figures.table_text(frame), width="stretch", height="content",
                 column_config=numbers)


def token_table(trace: Trace) -> None:
    """Tokens and ids as a table (st.dataframe shows visitor text as plain text)."""
    st.dataframe(figures.token_table(trace), width="content")


def page_header(title: str, intro: str) -> None:
    """Page config, title and a short explanation of what the page shows."""
    st.set_page_config(page_title=f"{title} · Self-attention explorer", page_icon="🔍",
                       layout="wide")
    st.title(title)
    st.markdown(intro)


MAX_BUTTONS = 16
"""Up to this many choices (heads, layers) an index picker is a row of buttons;
beyond, a drop-down."""


def index_picker(label: str, count: int, key: str, word: str, **options) -> int:
    """Pick one of ``count`` things (a head, a layer), 0-based, under the view
    parameter ``key`` (`urlstate.HEAD`, `urlstate.LAYER`), which follows the
    choice into the link. ``options`` go to the Streamlit widget."""
    picker = st.segmented_control if count <= MAX_BUTTONS else st.selectbox
    extra = {"required": True} if picker is st.segmented_control else {}
    value = picker(label, list(range(count)), key=key, format_func=lambda i: f"{word} {i}",
                   on_change=urlstate.follow_picker, args=(key,), **extra, **options)
    return 0 if value is None else value


def set_query(query: int | None) -> None:
    """Make ``query`` the highlighted query token (in session and in the link)."""
    urlstate.set_view(urlstate.QUERY, query)


def query_picker(trace: Trace, label: str, default: int | None = None,
                 preset_query: int | None = None) -> int | None:
    """The page's query token: its row is outlined in every heatmap. Clicking a
    cell in a token-row chart picks it too. ``default=None`` offers "none".
    A link's ``?query=`` (0-based, checked by the sidebar) or the token a
    preset looks at is the first choice."""
    labels = token_labels(trace.tokens)
    options = ([] if default is not None else [None]) + list(range(trace.n_tokens))
    if preset_query is not None:
        st.session_state[urlstate.QUERY] = preset_query
    elif urlstate.QUERY not in st.session_state and (raw := urlstate.param(urlstate.QUERY)):
        st.session_state[urlstate.QUERY] = int(raw)
    if st.session_state.get(urlstate.QUERY, default) not in options:  # the sentence got shorter
        st.session_state[urlstate.QUERY] = default
    st.session_state.setdefault(urlstate.QUERY, default)
    return st.selectbox(label, options, key=urlstate.QUERY, placeholder="none",
                        format_func=lambda i: "none" if i is None else labels[i],
                        on_change=urlstate.follow_picker, args=(urlstate.QUERY,))
