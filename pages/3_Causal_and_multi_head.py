"""Causal attention, dropout and multi-head attention (book §3.5 and §3.6)."""

import streamlit as st

from explorer.core.steps import split_after, stages, visible_steps
from explorer.lessons.pages import MULTI_HEAD_PAGE
from explorer.ui.multihead import (
    causal_second_route,
    dropout_note,
    head_split,
    heads_grid,
    verification,
)
from explorer.ui.render import head_picker, query_picker, step_charts, step_page
from explorer.ui.state import View

INTRO = (
    "The attention inside every GPT, step by step (sections 3.5 and 3.6 of *Build a Large "
    "Language Model (From Scratch)*). A **causal mask** stops each token from looking at "
    "later ones; **dropout** randomly zeroes attention weights while training; **multiple "
    "heads** each attend over their own slice of Q, K and V, and an **output projection** "
    "mixes the concatenated heads. The page opens with the mask on and two heads; change "
    "them at the top of the sidebar."
)


def draw(view: View) -> None:
    trace = view.trace
    before, per_head, after = stages(visible_steps(trace))
    query_picker(view, "Highlight a query token in every chart")

    st.header("1. Project X, then split into heads")
    step_charts(view, before)
    if view.before_heads_only:
        return
    verification(trace)
    head_split(trace)

    st.header("2. Attention inside one head")
    head = head_picker(view)
    weights, dropout = split_after(per_head, "attn_weights")
    step_charts(view, weights, head=head)
    causal_second_route(trace, head)
    step_charts(view, dropout, head=head)
    dropout_note(trace)
    if view.config.n_heads > 1:
        st.subheader("Every head at a glance")
        heads_grid(trace)

    st.header("3. Concatenate the heads" + (" and project" if view.config.has_out_proj
                                             else ""))
    step_charts(view, after)


step_page(MULTI_HEAD_PAGE, INTRO, draw)
