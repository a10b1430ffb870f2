"""Simplified attention: no trainable weights (seeds 000, 001 and 003)."""

import streamlit as st

from explorer.core import literal
from explorer.core.steps import visible_steps
from explorer.core.tokenizer import token_labels
from explorer.lessons.pages import SIMPLIFIED_PAGE
from explorer.render import figures
from explorer.ui.lessons import normalization_comparison, softmax_overflow
from explorer.ui.render import fitted_table, number_table, query_picker, step_charts, step_page
from explorer.ui.state import View

INTRO = (
    "Attention with **no trainable weights**: every token's embedding is its own query, "
    "key and value (Q = K = V = X). The scores are plain dot products X·Xᵀ, softmax "
    "turns each row into weights, and each context vector is a weighted average of the "
    "embeddings. This is section 3.3 of *Build a Large Language Model (From Scratch)*."
)


def draw(view: View) -> None:
    trace = view.trace
    query = query_picker(view, "Query token: look at one token's attention in detail "
                               "(or click a row in a chart)")

    step_charts(view, visible_steps(trace, lambda step: not step.projection))

    label = literal.markdown(token_labels(trace.tokens)[query])
    st.header(f"One query, written out: “{label}”")
    st.markdown("Its score with every key is a dot product; normalising the row gives "
                "the weights; the context vector is the weighted sum of the inputs.")
    fitted_table(figures.query_table(trace, query))  # its written sums wrap on a phone
    number_table(figures.context_table(trace, query))

    st.subheader("Three ways to turn the scores into weights")
    st.markdown("Dividing by the row sum, the naive softmax and the stable softmax, for "
                "this query, as the teaching notebook compares them. Each row sums to 1. "
                "Both softmaxes keep every weight positive whatever the sign of the "
                "scores; dividing by the row sum does not, and breaks when a row sums "
                "to 0.")
    normalization_comparison(view)
    softmax_overflow(view)


step_page(SIMPLIFIED_PAGE, INTRO, draw)
