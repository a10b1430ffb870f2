"""The app's pages, in menu order: one list for the menu, links and tests."""

from __future__ import annotations

import streamlit as st

from explorer.lessons import pages

PAGES: dict[str, tuple[str, str]] = {
    pages.HOME_PAGE: ("streamlit_app.py", ":material/home:"),
    pages.SIMPLIFIED_PAGE: ("pages/1_Simplified_attention.py", ":material/looks_one:"),
    pages.SELF_ATTENTION_PAGE: ("pages/2_Self_attention.py", ":material/looks_two:"),
    pages.MULTI_HEAD_PAGE: ("pages/3_Causal_and_multi_head.py", ":material/looks_3:"),
    pages.EXPERIMENTS_PAGE: ("pages/4_Experiments.py", ":material/science:"),
    pages.MODEL_PAGE: ("pages/5_Real_model.py", ":material/memory:"),
    pages.CHECK_PAGE: ("pages/6_Check_your_code.py", ":material/fact_check:"),
    pages.MODERN_PAGE: ("pages/7_Modern_attention.py", ":material/bolt:"),
    pages.BACKWARD_PAGE: ("pages/8_Backward_pass.py", ":material/undo:"),
}
"""Page label -> (script, icon)."""


def page_menu() -> None:
    """Links to every page (the settings travel in the session, see
    `explorer.ui.state`)."""
    for label, (path, icon) in PAGES.items():
        st.page_link(path, label=label, icon=icon)
