"""The app's pages, in menu order: one list for the menu, links and tests."""

from __future__ import annotations

import streamlit as st

from explorer.presets import (EXPERIMENTS_PAGE, MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE,
                              SIMPLIFIED_PAGE)
from explorer.ui.urlstate import PRESET

HOME_PAGE = "Home"
MODEL_PAGE = "Real model"
PAGES: dict[str, tuple[str, str]] = {
    HOME_PAGE: ("streamlit_app.py", ":material/home:"),
    SIMPLIFIED_PAGE: ("pages/1_Simplified_attention.py", ":material/looks_one:"),
    SELF_ATTENTION_PAGE: ("pages/2_Self_attention.py", ":material/looks_two:"),
    MULTI_HEAD_PAGE: ("pages/3_Causal_and_multi_head.py", ":material/looks_3:"),
    EXPERIMENTS_PAGE: ("pages/4_Experiments.py", ":material/science:"),
    MODEL_PAGE: ("pages/5_Real_model.py", ":material/memory:"),
}
"""Page label -> (script, icon)."""

_PENDING_KEY = "_switch_to_page"


def page_menu() -> None:
    """Links to every page (the settings travel in session state)."""
    for label, (path, icon) in PAGES.items():
        st.page_link(path, label=label, icon=icon)


def request_switch(page: str) -> None:
    """Ask for a switch to ``page`` at the end of this run (usable in callbacks,
    where `st.switch_page` is not)."""
    st.session_state[_PENDING_KEY] = page


def follow_requested_switch(preset=None) -> None:
    """Switch page if a callback asked for it (call after the settings are
    drawn). The new page's URL keeps the active ``preset``; the settings
    travel in session state."""
    page = st.session_state.pop(_PENDING_KEY, None)
    if page is not None:
        # An explicit mapping: st.switch_page's default clears the query
        # parameters, which Streamlit refuses while widgets are bound to them.
        st.switch_page(PAGES[page][0], query_params={PRESET: preset.slug} if preset else {})
