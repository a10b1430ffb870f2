"""The app's menu, from the page catalogue (`explorer.lessons.pages.CATALOGUE`)."""

from __future__ import annotations

import streamlit as st

from explorer.lessons.pages import CATALOGUE

PAGES: dict[str, tuple[str, str]] = {page.name: (page.script, page.icon) for page in CATALOGUE}
"""Page label -> (script, icon), in menu order."""


def page_menu() -> None:
    """Links to every page (the settings travel in the session, see
    `explorer.ui.state`)."""
    for label, (path, icon) in PAGES.items():
        st.page_link(path, label=label, icon=icon)
