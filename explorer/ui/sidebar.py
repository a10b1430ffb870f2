"""The frame every attention page shares: `settings(page)` draws the sidebar
and the tables of hand-entered matrices, and returns the page's
`explorer.ui.state.View`.

The sidebar holds the page menu, the worked-example picker, the page's own
settings at the top (the multi-head page's), the basic and the advanced
settings, the link to this view and the downloads. Every widget comes from the
declaration in `explorer.ui.state`, and so does the link.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import streamlit as st

from explorer.core import literal
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.steps import visible_steps
from explorer.lessons.pages import SIMPLIFIED_PAGE
from explorer.server import budget
from explorer.ui import downloads, matrices, presets, private, state, widgets
from explorer.ui.cache import cached_trace
from explorer.ui.navigation import page_menu


class Frame:
    """What every page draws around its own content, in one sequence (the
    attention pages through `settings`, the Real model page through
    `explorer.ui.real_model.settings`).

    Making one carries the values over and reads a link (`state.begin`),
    keeps a place at the top for the messages about the link, puts the page's
    settings into the session (`values`) and draws the page menu; the page
    draws its own settings into `sidebar`. `finish` writes the link from the
    values shown, shows the messages, and offers the downloads of the view.
    """

    def __init__(self, page: str) -> None:
        private.install()  # before any widget value is read
        state.begin(page)
        self.page = page
        self.preset = state.active_preset()
        self.messages = st.container()
        self.values = state.settings(page, self.preset)
        with st.sidebar:
            page_menu()
            self.sidebar = st.container()
            self._link, self._downloads = st.container(), st.container()

    def finish(self, view: state.View | None, values: dict[str, Any],
               context: state.Context | None = None, starts: dict[str, Any] | None = None,
               note: str = "", offer_downloads: bool = True) -> state.View | None:
        """Write the link of ``values`` (every entry shown; ``starts``: where a
        link's tables start), show the messages, and offer ``view``'s downloads
        (not with ``offer_downloads=False``: a page with downloads of its own).
        Returns ``view`` with its link (None stays None)."""
        params, too_long = state.link_params(self.page, values,
                                             state.baseline(self.page, self.preset),
                                             self.preset, context, starts)
        with self._link:
            link = state.publish(params, note or too_long)
        state.dropped(private.forged_widget_values())
        with self.messages:
            state.show_problems()
        if view is None:
            return None
        view = dataclasses.replace(view, link=link)
        if offer_downloads:
            with self._downloads:
                downloads.take_it_with_you(view)
        return view


def settings(page: str) -> state.View | None:
    """Draw ``page``'s settings and return the `explorer.ui.state.View` to draw,
    or None.

    Invalid input gets ``st.error`` with the backend's message and no charts
    (None), except a bad ``n_heads``, which keeps the steps before the split.
    The messages about a link's bad values show at the top of the page.
    """
    frame = Frame(page)
    values = frame.values
    with frame.sidebar:
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
    given, starts = matrices.tables(page, values, frame.preset)
    try:
        config, before_heads_only = _config({**state.config_fields(page, values), **given})
        budget.check_tab(config)  # before anything is computed or sent
        trace = cached_trace(config)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        return frame.finish(None, {**values, **given})
    st.session_state[state.SHOWN_CONFIG] = config
    context = state.Context(trace, config, shown_steps=tuple(visible_steps(trace)))
    shown = {**values, **given, **state.resolve(page, context)}
    view = frame.finish(state.View(page, config, trace, shown, frame.preset, before_heads_only),
                        shown, context, starts)
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
