"""The frame every attention page shares: `settings(page)` draws the sidebar
and the tables of hand-entered matrices, and returns the page's
`explorer.ui.state.View`.

The sidebar holds the page menu, the worked-example picker, the page's own
settings at the top (the multi-head page's), the basic and the advanced
settings, the link to this view and the downloads. Every widget comes from the
declaration in `explorer.ui.state`, and so does the link.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from explorer import literal
from explorer.config import AttentionConfig, ConfigError
from explorer.presets import SIMPLIFIED_PAGE
from explorer.steps import visible_steps
from explorer.ui import downloads, matrices, presets, state, widgets
from explorer.ui.cache import cached_trace
from explorer.ui.navigation import page_menu


def settings(page: str) -> state.View | None:
    """Draw ``page``'s settings and return the `explorer.ui.state.View` to draw,
    or None.

    Invalid input gets ``st.error`` with the backend's message and no charts
    (None), except a bad ``n_heads``, which keeps the steps before the split.
    The messages about a link's bad values show at the top of the page.
    """
    state.begin(page)
    messages = st.container()
    preset = state.active_preset()
    values = state.settings(page, preset)
    with st.sidebar:
        page_menu()
        presets.picker(page)
        if state.entries_of(page, state.PAGE_OWN):
            st.header(page)
            values |= widgets.group(page, state.PAGE_OWN, values)
        st.header("Settings")
        values |= widgets.group(page, state.BASIC, values)
        with st.expander("Advanced: the recipes", expanded=False):
            values |= widgets.group(page, state.ADVANCED, values)
            if page == SIMPLIFIED_PAGE:
                st.caption("Fixed on this page: weight_init = identity (Q = K = V = X), "
                           "no scaling, d_k = d_v = d_in.")
        link_slot, downloads_slot = st.container(), st.container()
    given, starts = matrices.tables(page, values, preset)
    base = state.baseline(page, preset)
    try:
        config, before_heads_only = _config({**state.config_fields(page, values), **given})
        trace = cached_trace(config)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        with link_slot:
            state.publish(*state.link_params(page, {**values, **given}, base, preset))
        with messages:
            state.show_problems()
        return None
    st.session_state["_shown_config"] = config
    context = state.Context(trace, config, shown_steps=tuple(visible_steps(trace)))
    shown = {**values, **given, **state.resolve(page, context)}
    with link_slot:
        link = state.publish(*state.link_params(page, shown, base, preset, context, starts))
    with messages:
        state.show_problems()
    view = state.View(page, config, trace, shown, preset, before_heads_only, link)
    with downloads_slot:
        downloads.take_it_with_you(view)
    presets.show_check(view)
    return view


def _config(fields: dict[str, Any]) -> tuple[AttentionConfig, bool]:
    """The config of ``fields``; if only ``n_heads`` is wrong, say so and fall
    back to one head (returning True), so the steps before the split still show."""
    try:
        return AttentionConfig(**fields), False
    except ConfigError as error:
        if error.field != "n_heads":
            raise
        st.error(literal.markdown(str(error)) + " The steps before the head split are "
                 "shown below with one head.")
        return AttentionConfig(**{**fields, "n_heads": 1}), True
