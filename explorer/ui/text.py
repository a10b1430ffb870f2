"""Showing a visitor's text as text."""

from __future__ import annotations

import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'])")


def plain(text: str) -> str:
    """Escape ``text`` for Streamlit's markdown (st.error, st.caption, ...), so
    that ``**x**``, ``[link](...)``, ``$math$`` and ``<img ...>`` show literally.

    Every ASCII punctuation mark that markdown, LaTeX or a directive could read
    gets a backslash; CommonMark turns ``\\x`` back into ``x``.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)
