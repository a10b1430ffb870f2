"""Streamlit glue: cached computation and the step-by-step chart walk."""

from __future__ import annotations

from typing import Callable

import streamlit as st

from explorer import figures, recipes
from explorer.config import AttentionConfig
from explorer.steps import STEPS, Step, layout_rows
from explorer.trace import Trace, compute_trace

TABLE_CACHE_ENTRIES = 4
"""Embedding tables kept per server: each is up to 64 Mi floats (256 MiB)."""
TRACE_CACHE_ENTRIES = 64


@st.cache_resource(max_entries=TABLE_CACHE_ENTRIES, show_spinner="Drawing the embedding table…")
def cached_embedding_table(seed: int, vocab_size: int, d_in: int):
    """`recipes.embedding_table`, cached per (seed, vocab_size, d_in) so that
    editing the sentence does not redraw the table. A shared resource, not
    copied per call: the trace only reads (indexes) it."""
    return recipes.embedding_table(seed, vocab_size, d_in)


@st.cache_data(max_entries=TRACE_CACHE_ENTRIES, show_spinner=False)
def cached_trace(config: AttentionConfig) -> Trace:
    """`compute_trace` with the cached embedding table, memoised per config."""
    return compute_trace(config, embedding_table=cached_embedding_table)


def visible_steps(trace: Trace, keep: Callable[[Step], bool] = lambda step: True) -> list[str]:
    """The trace's heatmap steps, in pipeline order, that ``keep`` accepts."""
    return [name for name in trace
            if STEPS[name].heatmap and STEPS[name].shown(trace.config) and keep(STEPS[name])]


def step_chart(trace: Trace, name: str, head: int = 0, highlight_row: int | None = None,
               key_prefix: str = "", share: int = 1) -> None:
    """One step: its formula (st.latex), heatmap and a one-line explanation.

    A chart that ``share``s its row with others fills its column; a chart on
    its own keeps the size its cells need."""
    step = STEPS[name]
    st.latex(step.latex(trace.config))
    figure = figures.heatmap(trace, name, head=head, highlight_row=highlight_row, share=share)
    st.plotly_chart(figure, width="stretch" if share > 1 else "content",
                    key=f"{key_prefix}chart-{name}", config={"displaylogo": False})
    if step.explain:
        st.caption(step.caption(trace.config))


def step_charts(trace: Trace, names: list[str], head: int = 0,
                highlight_row: int | None = None, key_prefix: str = "") -> None:
    """Draw ``names`` in pipeline order, related steps side by side."""
    for row in layout_rows(names):
        columns = st.columns(len(row)) if len(row) > 1 else [st.container()]
        for column, name in zip(columns, row):
            with column:
                step_chart(trace, name, head, highlight_row, key_prefix, share=len(row))


def token_table(trace: Trace) -> None:
    """Tokens and ids as a table (st.dataframe shows visitor text as plain text)."""
    st.dataframe(figures.token_table(trace), width="content")


def page_header(title: str, intro: str) -> None:
    """Page config, title and a short explanation of what the page shows."""
    st.set_page_config(page_title=f"{title} · Self-attention explorer", page_icon="🔍",
                       layout="wide")
    st.title(title)
    st.markdown(intro)
