"""The app's pages, in menu order: one list for the menu, links and tests."""

from __future__ import annotations

import streamlit as st

from explorer.lessons.pages import (
    BACKWARD_PAGE,
    CHECK_PAGE,
    EXPERIMENTS_PAGE,
    HOME_PAGE,
    MODEL_PAGE,
    MODERN_PAGE,
    MULTI_HEAD_PAGE,
    SELF_ATTENTION_PAGE,
    SIMPLIFIED_PAGE,
)

PAGES: dict[str, tuple[str, str]] = {
    HOME_PAGE: ("streamlit_app.py", ":material/home:"),
    SIMPLIFIED_PAGE: ("pages/1_Simplified_attention.py", ":material/looks_one:"),
    SELF_ATTENTION_PAGE: ("pages/2_Self_attention.py", ":material/looks_two:"),
    MULTI_HEAD_PAGE: ("pages/3_Causal_and_multi_head.py", ":material/looks_3:"),
    EXPERIMENTS_PAGE: ("pages/4_Experiments.py", ":material/science:"),
    MODEL_PAGE: ("pages/5_Real_model.py", ":material/memory:"),
    CHECK_PAGE: ("pages/6_Check_your_code.py", ":material/fact_check:"),
    MODERN_PAGE: ("pages/7_Modern_attention.py", ":material/bolt:"),
    BACKWARD_PAGE: ("pages/8_Backward_pass.py", ":material/undo:"),
}
"""Page label -> (script, icon)."""


def page_menu() -> None:
    """Links to every page (the settings travel in the session, see
    `explorer.ui.state`)."""
    for label, (path, icon) in PAGES.items():
        st.page_link(path, label=label, icon=icon)
