"""Simplified attention: no trainable weights (seeds 000, 001 and 003)."""

import streamlit as st

from explorer import figures
from explorer.presets import SIMPLIFIED_PAGE
from explorer.ui.sidebar import settings
from explorer.ui.render import cached_trace, page_header, step_charts, visible_steps

page_header(
    SIMPLIFIED_PAGE,
    "Attention with **no trainable weights**: every token's embedding is its own query, "
    "key and value (Q = K = V = X). The scores are plain dot products X·Xᵀ, softmax "
    "turns each row into weights, and each context vector is a weighted average of the "
    "embeddings. This is section 3.3 of *Build a Large Language Model (From Scratch)*. "
    "d_k and d_v are not used here: they equal d_in.",
)
config = settings(SIMPLIFIED_PAGE, simplified=True)
if config is not None:
    trace = cached_trace(config)
    labels = figures.unique_labels(trace.tokens)
    query = st.selectbox("Query token: look at one token's attention in detail",
                         range(trace.n_tokens), index=min(1, trace.n_tokens - 1),
                         format_func=labels.__getitem__, key="query")

    step_charts(trace, visible_steps(trace, lambda step: not step.projection),
                highlight_row=query)

    st.header(f"One query, written out: token {query}")
    st.markdown("Its score with every key is a dot product; softmax of the row gives "
                "the weights; the context vector is the weight-averaged sum of the inputs.")
    st.dataframe(figures.query_table(trace, query), width="stretch")
    st.dataframe(figures.context_table(trace, query), width="stretch")
