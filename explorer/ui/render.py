"""Streamlit glue: cached computation, the step-by-step chart walk, a clicked
cell's explanation, tables and the page header."""

from __future__ import annotations

from functools import partial
from typing import Callable

import streamlit as st

from explorer import explain, figures
from explorer.steps import STEPS, TOKENS, Step, layout_rows
from explorer.tokenizer import token_labels
from explorer.trace import Trace
from explorer import literal

QUERY_KEY = "query"  # the page's query-token picker: widget key and URL parameter

def visible_steps(trace: Trace, keep: Callable[[Step], bool] = lambda step: True) -> list[str]:
    """The trace's heatmap steps, in pipeline order, that ``keep`` accepts."""
    return [name for name in trace
            if STEPS[name].heatmap and STEPS[name].shown(trace.config) and keep(STEPS[name])]


def step_chart(trace: Trace, name: str, head: int = 0, highlight_row: int | None = None,
               share: int = 1) -> None:
    """One step: its formula (st.latex), heatmap and a one-line explanation.

    Clicking a cell explains it under the chart (`cell_explanation`) and, when
    the rows are tokens, makes that token the highlighted query on the page. A
    chart that ``share``s its row with others fills its column; a chart on its
    own keeps the size its cells need."""
    step = STEPS[name]
    st.latex(step.latex(trace.config))
    key = f"chart-{name}"
    cell = st.session_state.get(_clicked_key(key))
    figure = figures.heatmap(trace, name, head=head, highlight_row=highlight_row, share=share,
                             marked_cell=cell)
    n_rows, n_cols = figures.step_matrix(trace, name, head).shape
    st.plotly_chart(
        figure, width="stretch" if share > 1 else "content", key=key,
        config={"displaylogo": False}, on_select=partial(_follow_click, key, step, n_cols),
        selection_mode="points")
    if step.explain:
        st.caption(step.caption(trace.config))
    if n_rows * n_cols > figures.MAX_CLICK_CELLS:
        _cell_picker(key, n_rows, n_cols)
    if cell is not None:
        cell_explanation(trace, name, *cell, head=head)


def _cell_picker(key: str, n_rows: int, n_cols: int) -> None:
    """For matrices too big to click: pick the cell to explain by number."""
    with st.popover("Explain a cell", icon=":material/calculate:"):
        st.number_input("row", 0, n_rows - 1, key=f"{key}-row")
        st.number_input("column", 0, n_cols - 1, key=f"{key}-col")
        st.button("Explain", key=f"{key}-explain", on_click=_pick_cell, args=(key,))


def _pick_cell(key: str) -> None:
    st.session_state[_clicked_key(key)] = (st.session_state[f"{key}-row"],
                                           st.session_state[f"{key}-col"])


def _clicked_key(chart_key: str) -> str:
    return f"_clicked:{chart_key}"


def _follow_click(key: str, step: Step, n_cols: int) -> None:
    """Remember the clicked cell (the chart redraws, and Plotly forgets its
    selection); in a chart whose rows are tokens it also picks the query."""
    event = st.session_state.get(key)
    cell = figures.selected_cell(event.selection.points, n_cols) if event else None
    st.session_state[_clicked_key(key)] = cell
    if cell is not None and step.rows.labels == TOKENS:
        st.session_state[QUERY_KEY] = cell[0]


def cell_explanation(trace: Trace, name: str, row: int, col: int, head: int = 0) -> None:
    """How the clicked cell was computed, with its real numbers."""
    try:
        exp = explain.explain_cell(trace, name, row, col, head)
    except IndexError:  # the matrix shrank since the click
        return
    with st.container(border=True):
        st.markdown(f"**{literal.markdown(exp.cell)}** = {literal.markdown(exp.formula)}")
        if exp.combine != explain.GIVEN:
            st.code(exp.written(), language=None, wrap_lines=True)
        if exp.note:
            st.caption(literal.markdown(exp.note))
        if name == "context" and trace.config.n_heads == 1:
            number_table(figures.context_table(trace, row))
        elif len(exp.terms) > 1:
            number_table(figures.terms_table(exp))


def step_charts(trace: Trace, names: list[str], head: int = 0,
                highlight_row: int | None = None) -> None:
    """Draw ``names`` in pipeline order, related steps side by side."""
    for row in layout_rows(names):
        columns = st.columns(len(row)) if len(row) > 1 else [st.container()]
        for column, name in zip(columns, row):
            with column:
                step_chart(trace, name, head, highlight_row, share=len(row))


def number_table(frame) -> None:
    """A labelled table with every float column printed to 4 decimals."""
    formats = {str(c): st.column_config.NumberColumn(format="%.4f")
               for c, dtype in frame.dtypes.items() if dtype.kind == "f"}
    st.dataframe(frame, width="stretch", column_config=formats)


def token_table(trace: Trace) -> None:
    """Tokens and ids as a table (st.dataframe shows visitor text as plain text)."""
    st.dataframe(figures.token_table(trace), width="content")


def page_header(title: str, intro: str) -> None:
    """Page config, title and a short explanation of what the page shows."""
    st.set_page_config(page_title=f"{title} · Self-attention explorer", page_icon="🔍",
                       layout="wide")
    st.title(title)
    st.markdown(intro)


def query_picker(trace: Trace, label: str, default: int | None = None) -> int | None:
    """The page's query token: its row is outlined in every heatmap. Clicking a
    cell in a token-row chart picks it too. ``default=None`` offers "none"."""
    labels = token_labels(trace.tokens)
    options = ([] if default is not None else [None]) + list(range(trace.n_tokens))
    if st.session_state.get(QUERY_KEY, default) not in options:  # the sentence got shorter
        st.session_state.pop(QUERY_KEY, None)
    return st.selectbox(label, options, index=options.index(default), key=QUERY_KEY,
                        format_func=lambda i: "none" if i is None else labels[i])
