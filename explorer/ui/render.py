"""Streamlit glue: the step-by-step chart walk, the explained cell, the query
picker, tables and the page header. Everything reads the page's
`explorer.ui.state.View`; clicks only set state (`explorer.ui.state.put`)."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from explorer.core import literal
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.steps import STEPS, TOKENS, Step, chart_caption, layout_rows, shows_colour_bar
from explorer.core.tokenizer import token_labels
from explorer.lessons import explain
from explorer.render import figures
from explorer.ui import component, sidebar, state, widgets
from explorer.ui.cache import cached_trace, drawing
from explorer.ui.state import View


# ---------------------------------------------------------------------------
# The explained cell: one per page, kept in the session and in the link
# ---------------------------------------------------------------------------
def explained_cell(view: View, name: str, head: int) -> tuple[int, int] | None:
    """The explained cell of step ``name`` (of ``head`` for a per-head step)
    as ``(row, col)``, if it is the page's explained cell (`View.cell`)."""
    cell = view.cell
    if cell is None or cell[0] != name or (view.trace.per_head(name) and cell[3] != head):
        return None
    return cell[1], cell[2]


def _follow_click(step: Step, head: int, cell: dict[str, int], col_offset: int = 0) -> None:
    """Explain the clicked cell; in a chart whose rows are tokens it also
    picks the query. ``col_offset``: the chart shows one head's columns from
    that one on (a head slice), so the cell's column in the step is col + offset."""
    state.put("cell", (step.name, cell["row"], cell["col"] + col_offset, head))
    if step.rows.labels == TOKENS:
        state.put("query", cell["row"])
    state.changed()
    state.page_follows()


# ---------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------
BIG_MATRIX_CELLS = 64 * 64
"""Above this many cells a cell is a pixel or two: a picker explains one by number."""
CLICK_VALUES = ("query", "cell", "lines")
"""The view values a click on a chart sets (`_follow_click`, `_pick`)."""
LINE_VIEW_STEPS = ("attn_weights",)
"""Steps whose chart offers "Show as lines" under its heatmap (BertViz's head
view), drawn by chart.js from the matrix it holds (`figures.lines_spec`)."""


def step_chart(view: View, name: str, head: int = 0, columns: int = 1, colorbar: bool = True,
               head_slice: bool = False) -> None:
    """One step: its formula (st.latex), heatmap and a one-line explanation.

    Clicking a cell explains it under the chart (`cell_explanation`) and, when
    the rows are tokens, makes that token the highlighted query on the page.
    ``columns`` charts share the page's row; ``colorbar=False`` leaves the
    colour bar to a neighbour on the same scale. ``head_slice`` draws only head
    ``head``'s columns of a step such as W_query (`figures.head_columns`); its
    cells are still explained and linked by their column in the whole step.

    The chart is a fragment: a click reruns it alone, so its explanation comes
    without waiting for the whole page, which then follows (`state.page_follows`;
    the browser has already moved the other charts' outlines).

    Streamlit keeps a fragment's arguments for its reruns, for as long as the
    session lasts; so the chart is handed its trace as a weak reference
    (`_chart_view`), and no session holds a trace outside the byte-bounded cache."""
    _step_fragment(view.without_trace(), weakref.ref(view.trace), name, head, columns, colorbar,
                   head_slice)


def _chart_view(light: View, trace_ref: weakref.ref) -> View:
    """The view a step chart draws: ``light`` (`View.without_trace`) with the
    page's trace (``trace_ref``) and, on the chart's own rerun after a click
    (`state.page_will_follow`), the view values the click set, resolved again.
    When the page's trace is gone (a rerun of the chart alone, later), the
    trace of ``light.config`` comes from the cache; a real model's layer,
    not cached by config, and a server too busy now leave it to the whole page."""
    trace = trace_ref()
    if trace is None:
        if not isinstance(light.config, AttentionConfig):
            st.rerun()
        try:
            trace = cached_trace(light.config)
        except ConfigError:  # the server is too busy now: the whole page says so
            st.rerun()
    if not state.page_will_follow():  # the page's values, resolved by its run
        return replace(light, trace=trace)
    clicked = state.resolve(light.page, state.Context(trace, light.config), CLICK_VALUES)
    return replace(light, trace=trace, values={**light.values, **clicked})


@st.fragment
def _step_fragment(light: View, trace_ref: weakref.ref, name: str, head: int, columns: int,
                   colorbar: bool, head_slice: bool) -> None:
    """`step_chart` of the view `_chart_view` makes of ``light`` and ``trace_ref``."""
    view = _chart_view(light, trace_ref)
    trace = view.trace
    step = STEPS[name]
    st.latex(step.latex(trace.config))
    n_rows, n_cols = figures.step_matrix(trace, name, head, dtype=np.float32).shape
    shown = figures.head_columns(trace, name, head) if head_slice else range(n_cols)
    key = f"chart-{name}" + ("-head" if len(shown) < n_cols else "")
    cell = explained_cell(view, name, head)
    if cell is not None and cell[1] not in shown:  # another head's column: not here
        cell = None
    marked = None if cell is None else (cell[0], cell[1] - shown.start)
    drawn = figures.heatmap_chart(trace, name, head=head, highlight_row=view.query,
                                  marked_cell=marked, colorbar=colorbar, columns=columns,
                                  head_slice=head_slice, every_head=True)
    drawn.view = view.in_browser()
    if name in LINE_VIEW_STEPS:
        switch = state.ENTRIES["lines"]
        drawn.lines = {**figures.lines_spec(trace, name), "toggle": switch.label,
                       "help": switch.help}
    component.show(drawn, key=key, on_click=partial(_follow_click, step, head,
                                                 col_offset=shown.start),
               on_lines=partial(_pick, "lines") if name in LINE_VIEW_STEPS else None)
    if step.explain:
        st.caption(chart_caption(trace, name, head))
    if n_rows * len(shown) > BIG_MATRIX_CELLS:
        _cell_picker(key, step, n_rows, shown, head)
    if cell is not None:
        cell_explanation(view, name, *cell, head=head)
    state.follow_page()


def _cell_picker(key: str, step: Step, n_rows: int, cols: range, head: int) -> None:
    """For matrices whose cells are too small to aim at: pick one by number
    (``cols``: the columns the chart shows, numbered as in the whole step)."""
    pick = f"pick-{key}"
    with st.popover("Explain a cell", icon=":material/calculate:"):
        st.number_input("row", 0, n_rows - 1, key=f"{pick}-row")
        st.number_input("column", cols.start, cols.stop - 1, key=f"{pick}-col")
        st.button("Explain", key=f"{pick}-explain", on_click=_pick_cell, args=(pick, step, head))


def _pick_cell(pick: str, step: Step, head: int) -> None:
    _follow_click(step, head, {"row": st.session_state[f"{pick}-row"],
                               "col": st.session_state[f"{pick}-col"]})


def cell_explanation(view: View, name: str, row: int, col: int, head: int = 0) -> None:
    """How the explained cell was computed, with its real numbers."""
    trace = view.trace
    exp = explain.explain_cell(trace, name, row, col, head)
    single_context = name == "context" and trace.config.n_heads == 1
    explanation_box(exp, figures.context_table(trace, row) if single_context else None)


def explanation_box(exp: explain.Explanation, table=None) -> None:
    """An `explain.Explanation` written out in a box: the cell and its formula,
    the computation with its numbers, the note, and the terms as a table
    (``table``: another table in their place), or for a given number where it
    came from. Every page's click-to-explain shows its cell with this box."""
    cell = f"**{literal.markdown(exp.cell)}** ({exp.position})"
    with st.container(border=True):
        if exp.combine == explain.GIVEN:
            st.markdown(f"{cell} = {figures.format_value(exp.value)}")
            st.caption(literal.markdown(exp.formula[0].upper() + exp.formula[1:]) + "."
                       + (f" {literal.markdown(exp.note)}" if exp.note else ""))
            return
        st.markdown(f"{cell} = {literal.markdown(exp.formula)}")
        st.code(exp.written(), language=None, wrap_lines=True)
        if exp.note:
            st.caption(literal.markdown(exp.note))
        if table is not None:
            number_table(table)
        elif len(exp.terms) > 1:
            number_table(figures.terms_table(exp))
            st.caption(literal.markdown(exp.total_text()))


def step_charts(view: View, names: list[str], head: int = 0, head_slice: bool = False) -> None:
    """Draw ``names`` in pipeline order, related steps side by side; steps of
    one colour scale in a row show one colour bar, on the last of them.
    ``head_slice``: see `step_chart`."""
    for row in layout_rows(names):
        columns = st.columns(len(row)) if len(row) > 1 else [st.container()]
        for i, (column, name) in enumerate(zip(columns, row)):
            with column:
                step_chart(view, name, head, columns=len(row),
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


def fitted_table(frame) -> None:
    """A labelled table that fits a phone's width: static (`st.table`, shown as
    text), its cells wrap, and no toolbar covers the heading above it; numbers as
    `number_table` writes them. A frame numbered 0, 1, 2 … is labelled by its first column."""
    text = figures.table_text(frame)
    if text.index.equals(pd.RangeIndex(len(text))):
        text = text.set_index(text.columns[0])
    # st.table renders its cells' Markdown: every label and text cell goes through
    # `literal.markdown` (numbers written by `figures.table_text` need no escaping).
    text = text.map(_table_cell)
    text.index = text.index.map(_table_cell)
    text.columns = text.columns.map(_table_cell)
    st.table(text)


_PLAIN_NUMBER = re.compile(r"[−+-]?[0-9][0-9.,]*(e[−+-]?[0-9]+)?%?")
"""A cell that is only a number as `figures.table_text` writes it: nothing to escape."""


def _table_cell(cell) -> str:
    """A table's cell or label as `st.table` shows it literally (`literal.markdown`)."""
    text = str(cell)
    return text if _PLAIN_NUMBER.fullmatch(text) else literal.markdown(text)


def token_table(view: View) -> None:
    """Tokens and ids as a table (st.dataframe shows visitor text as plain text)."""
    st.dataframe(figures.token_table(view.trace), width="content")


def page_header(title: str, intro: str) -> None:
    """Page config, title and a short explanation of what the page shows."""
    st.set_page_config(page_title=f"{title} · Self-attention explorer", page_icon="🔍",
                       layout="wide")
    st.title(title)
    st.markdown(intro)


def step_page(page: str, intro: str, draw: Callable[[View], None]) -> None:
    """A chapter-3 page (Simplified, Self-attention, Causal & multi-head): its
    title and ``intro`` (`page_header`), the sidebar's settings
    (`explorer.ui.sidebar.settings`), then ``draw(view)`` of what they give,
    holding the page's share of the work allowance from its trace on
    (`explorer.ui.cache.drawing`: large pages compute and draw in turn).
    Settings that make no view (a message says why) draw nothing."""
    page_header(page, intro)
    with drawing(page):
        view = sidebar.settings(page)
        if view is not None:
            draw(view)


def query_picker(view: View, label: str) -> int | None:
    """The page's query token (`View.query`): its row is outlined in every
    heatmap; clicking a cell in a token-row chart picks it too. Offers "none"
    where the page's default is none. The page follows a choice at once
    (`component.picker`)."""
    optional = state.ENTRIES["query"].optional_on(view.page)
    return component.picker("query", label, token_labels(view.trace.tokens), view.query,
                        none="none" if optional else None, on_pick=partial(_pick, "query"))


def head_picker(view: View) -> int:
    """Pick the head whose matrices the page shows (`View.head`; nothing to pick
    when there is one): buttons, or a drop-down beyond `widgets.MAX_BUTTONS`
    heads. The page follows a choice at once where its charts carry every head."""
    n_heads = view.trace.config.n_heads
    if n_heads == 1:
        return 0
    return component.picker("head", state.ENTRIES["head"].label, [f"head {h}" for h in range(n_heads)],
                        view.head, buttons=n_heads <= widgets.MAX_BUTTONS,
                        on_pick=partial(_pick, "head"))


def _pick(name: str, value: int | bool | None) -> None:
    """A choice the browser made and already shows (a picker's, the line view's
    switch): into the state."""
    state.put(name, value)
    state.changed()
    state.page_follows()
