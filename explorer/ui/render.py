"""Streamlit glue: cached computation and the step-by-step chart walk."""

from __future__ import annotations

from typing import Callable

from functools import partial

import streamlit as st

import torch

from explorer import attention as att
from explorer import explain, figures, recipes, verify
from explorer.config import OPTION_HELP, AttentionConfig
from explorer.steps import STEPS, TOKENS, Step, layout_rows
from explorer.trace import Trace, compute_trace
from explorer.ui.text import plain

QUERY_KEY = "query"  # the page's query-token picker: widget key and URL parameter

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

    Clicking a cell explains it under the chart (`cell_explanation`) and, when
    the rows are tokens, makes that token the highlighted query on the page. A
    chart that ``share``s its row with others fills its column; a chart on its
    own keeps the size its cells need."""
    step = STEPS[name]
    st.latex(step.latex(trace.config))
    key = f"{key_prefix}chart-{name}"
    cell = st.session_state.get(_clicked_key(key))
    figure = figures.heatmap(trace, name, head=head, highlight_row=highlight_row, share=share,
                             marked_cell=cell)
    n_cols = figures.step_matrix(trace, name, head).shape[1]
    st.plotly_chart(
        figure, width="stretch" if share > 1 else "content", key=key,
        config={"displaylogo": False}, on_select=partial(_follow_click, key, step, n_cols),
        selection_mode="points")
    if step.explain:
        st.caption(step.caption(trace.config))
    if cell is not None:
        cell_explanation(trace, name, *cell, head=head)


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
        st.markdown(f"**{plain(exp.cell)}** = {plain(exp.formula)}")
        if exp.combine != explain.GIVEN:
            st.code(exp.written(), language=None, wrap_lines=True)
        if exp.note:
            st.caption(plain(exp.note))
        if name == "context" and trace.config.n_heads == 1:
            number_table(figures.context_table(trace, row))
        elif len(exp.terms) > 1:
            number_table(figures.terms_table(exp))
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


HEAD_KEY = "head"  # the head picker's widget key and URL parameter


def head_picker(trace: Trace) -> int:
    """Pick the head whose matrices the page shows (0 when there is one)."""
    n_heads = trace.config.n_heads
    if n_heads == 1:
        return 0
    head = st.segmented_control("Head to show", list(range(n_heads)), default=0, key=HEAD_KEY,
                                format_func=lambda h: f"head {h}", required=True)
    return 0 if head is None or head >= n_heads else head


def head_split(trace: Trace) -> None:
    """The picture of the split: Q, K and V whole, each head's columns outlined."""
    if trace.config.n_heads == 1:
        st.caption("One head: Q, K and V are used whole (set n_heads > 1 to split them).")
        return
    c = trace.config
    st.markdown(
        f"Q = X·W_query is one {trace.n_tokens}×{c.d_k} matrix. Head h takes its own "
        f"{c.head_dim} columns (head_dim = d_k / n_heads = {c.d_k} / {c.n_heads}), and so "
        f"do K and V ({c.head_dim_v} columns each of V). Each head then runs attention on "
        "its slices alone; the colours mark the heads in every chart below.")
    for column, name in zip(st.columns(3), ("queries", "keys", "values")):
        with column:
            st.plotly_chart(figures.head_split(trace, name), width="stretch",
                            key=f"split-{name}", config={"displaylogo": False})


def heads_grid(trace: Trace) -> None:
    """Every head's attention weights side by side."""
    st.plotly_chart(figures.heads_grid(trace), width="stretch", key="heads-grid",
                    config={"displaylogo": False})


def causal_second_route(trace: Trace, head: int) -> None:
    """The book's other route to causal weights: softmax first, zero the future,
    renormalise; same weights as masking with -inf before the softmax."""
    c = trace.config
    if not c.causal or c.normalization != "softmax":
        return
    scaled = trace["scaled_scores"]
    rerouted = att.mask_after_softmax(scaled, trace["causal_mask"])
    difference = float((rerouted - trace["attn_weights"]).abs().max())
    st.subheader("The same weights by the other route")
    st.markdown(
        "The book first computes the softmax over all keys, then zeroes the future and "
        "divides each row by its new sum. The masked terms just drop out of the softmax's "
        "denominator, so both routes agree: largest difference "
        f"**{difference:.1e}** over all heads.")
    step = STEPS["attn_weights"]
    values = (rerouted[head] if rerouted.dim() == 3 else rerouted).to(torch.float64).numpy()
    labels = figures.unique_labels(trace.tokens)
    st.plotly_chart(figures.matrix_heatmap(
        values, labels, labels, step,
        f"softmax(ω̃), future zeroed, rows renormalised ({len(labels)}×{len(labels)})"),
        width="content", key="causal-second-route", config={"displaylogo": False})


def dropout_note(trace: Trace) -> None:
    """What dropout did, and why the mask may differ from a learner's machine."""
    c = trace.config
    if c.dropout == 0:
        return
    kept = float(trace["dropout_mask"].mean())
    st.info(
        f"Dropout p = {c.dropout:g}: {kept:.1%} of the weights were kept (expected "
        f"{1 - c.dropout:.0%}) and scaled by 1/(1−p) = {1 / (1 - c.dropout):.4g}, so each "
        "row's expected sum stays 1. The mask is drawn like "
        f"`torch.manual_seed({c.mask_seed}); nn.Dropout({c.dropout:g})(attn_weights)`. "
        "The same seed can give a different mask on another operating system or PyTorch "
        "build (learners report this), so your notebook's mask may not match this one.")


def verification(trace: Trace) -> None:
    """The "verified against PyTorch" line."""
    result = verify.against_pytorch(trace)
    if result is None:
        st.caption("No PyTorch check: PyTorch's attention always normalises with softmax.")
        return
    line = (f"Verified against PyTorch: `{result.reference}` gives the same {result.compared}, "
            f"max |difference| = {result.max_abs_diff:.1e}.")
    (st.success if result.max_abs_diff < VERIFY_TOLERANCE else st.error)(
        ("✓ " if result.max_abs_diff < VERIFY_TOLERANCE else "✗ ") + line)
    if result.note:
        st.caption(result.note)


VERIFY_TOLERANCE = 1e-4
"""Largest difference from PyTorch still shown as agreement (float32 rounding)."""


def query_picker(trace: Trace, label: str, default: int | None = None) -> int | None:
    """The page's query token: its row is outlined in every heatmap. Clicking a
    cell in a token-row chart picks it too. ``default=None`` offers "none"."""
    labels = figures.unique_labels(trace.tokens)
    options = ([] if default is not None else [None]) + list(range(trace.n_tokens))
    if st.session_state.get(QUERY_KEY, default) not in options:  # the sentence got shorter
        st.session_state.pop(QUERY_KEY, None)
    return st.selectbox(label, options, index=options.index(default), key=QUERY_KEY,
                        format_func=lambda i: "none" if i is None else f"{i}: {labels[i]}")
