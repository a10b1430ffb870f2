"""Streamlit glue: cached computation and the step-by-step chart walk."""

from __future__ import annotations

from typing import Callable

import streamlit as st

import torch

from explorer import figures, recipes
from explorer.config import OPTION_HELP, AttentionConfig
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


def normalization_comparison(config: AttentionConfig, query: int) -> None:
    """Seed 001's question: the same scores turned into weights three ways."""
    traces = {name: cached_trace(config.replace(normalization=name))
              for name in OPTION_HELP["normalization"]}
    number_table(figures.normalization_table(traces, query))
    st.caption(" · ".join(f"**{name}**: {text}" for name, text in
                          OPTION_HELP["normalization"].items()))


OVERFLOW_FACTORS = (1, 2, 5, 10, 20, 50)
"""Multipliers of X offered by the overflow demo (scores grow with their square)."""


def softmax_overflow(trace: Trace, key_prefix: str = "") -> None:
    """Why the stable softmax subtracts the row max: multiply X until exp()
    overflows, and compare the naive and the stable weights."""
    weights = trace["attn_weights"]
    broken = not bool(torch.isfinite(weights).all())
    if broken:
        st.warning("Some attention weights are NaN or infinite: the naive softmax overflowed. "
                   "The section below shows why.")
    with st.expander("Why softmax subtracts the row max: watch the naive softmax overflow",
                     expanded=broken or trace.config.normalization == "naive_softmax"):
        st.markdown(
            "In float32, `exp(x)` is infinite once x passes about 88.7, and ∞/∞ is NaN. "
            "The naive softmax `exp(x) / exp(x).sum()` breaks there. The stable softmax "
            "first subtracts each row's maximum m: `exp(x − m) / Σ exp(x − m)` is the same "
            "number (the factor exp(−m) cancels), but every exponent is now ≤ 0, so "
            "nothing overflows. Multiply the embeddings X by c: the scores grow like c².")
        factor = st.select_slider("c: multiply X by", OVERFLOW_FACTORS, value=1,
                                  key=f"{key_prefix}overflow_factor")
        scaled_x = (trace["embeddings"] * factor).tolist()
        base = trace.config.replace(embedding="given", embeddings=scaled_x)
        naive = cached_trace(base.replace(normalization="naive_softmax"))
        stable = cached_trace(base.replace(normalization="softmax"))
        largest = float(naive["scaled_scores"].abs().max())
        st.markdown(f"Largest |score| after scaling: **{largest:,.1f}**")
        left, right = st.columns(2)
        for column, name, shown in ((left, "naive softmax", naive), (right, "softmax", stable)):
            with column:
                st.plotly_chart(figures.heatmap(shown, "attn_weights", share=2,
                                                title=f"{name}, X × {factor}"),
                                width="stretch", key=f"{key_prefix}overflow-demo-{name.replace(' ', '-')}")
