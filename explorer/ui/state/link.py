"""The link: read once, on a session's first run, every parameter in one pass
(`read_link`); written from the state (`link_params`, `publish`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

import numpy as np
import streamlit as st

from explorer.core import literal
from explorer.core.config import ConfigError, shown
from explorer.lessons.presets import PRESETS, Preset
from explorer.ui.state.entries import ENTRIES, MAX_LINK_MATRIX_CHARS, Context, entries_of
from explorer.ui.state.kinds import CellRef, Choice, MatrixKind
from explorer.ui.state.session import (
    LINK_CHECKS,
    LINK_READ,
    apply_preset,
    note,
    problems,
    put,
    set_matrix,
    value,
)


def read_link(page: str) -> None:
    """On a session's first run, read every URL parameter in one pass.

    ``preset`` first (`apply_preset`), then every other parameter: a declared
    entry's value is parsed by its kind and stored; a bad one is noted
    (`problems`) and dropped, and so is an unknown name, a parameter given
    twice, and one that never goes into a link (a folder). Values whose bounds
    depend on the trace are marked for `resolve`, which checks them once the
    trace is known. The URL is then rewritten from the state (`publish`).
    """
    if st.session_state.get(LINK_READ):
        return
    st.session_state[LINK_READ] = True
    params = {key: st.query_params.get_all(key) for key in st.query_params}
    checks: set[str] = set()
    if "preset" in params:
        raw = params.pop("preset")[-1]
        try:
            apply_preset(PRESETS.get(ENTRIES["preset"].kind.parse("preset", raw)) or None)
        except ConfigError as error:
            note("preset", raw, error)
    head = None
    for name, raws in params.items():
        entry = ENTRIES.get(name)
        raw = raws[-1]
        try:
            if entry is None or not entry.linked:
                raise ConfigError(name, "it is not a setting of the explorer" if entry is None
                                  else "it is never part of a link")
            if len(raws) > 1:
                raise ConfigError(name, f"it is given {len(raws)} times")
            parsed = entry.kind.parse(name, raw)
        except ConfigError as error:
            if entry is None:
                problems()[name] = f"Ignored the link's unknown setting {shown(name)}."
            else:
                note(name, raw, error)
            continue
        if name == "head":
            head = parsed
        if isinstance(entry.kind, MatrixKind):
            set_matrix(name, parsed)
        else:
            put(name, parsed)
        if entry.allowed is not None or isinstance(entry.kind, CellRef):
            checks.add(name)
    for name in checks:  # a cell's head is the link's head (CellRef writes none)
        if isinstance(ENTRIES[name].kind, CellRef) and head is not None:
            put(name, (*value(name)[:3], head))
    st.session_state[LINK_CHECKS] = checks


def link_params(page: str, values: Mapping[str, Any], base: Mapping[str, Any],
                preset: Preset | None, context: Context | None = None,
                matrix_starts: Mapping[str, Any] | None = None) -> tuple[dict[str, str], str]:
    """The link's parameters for ``page``: the worked example, then every
    setting that differs from ``base`` (`baseline`), every view value that
    differs from its default, and the hand-edited matrices when they differ from
    where a link's tables start (``matrix_starts``) and fit in
    `MAX_LINK_MATRIX_CHARS`. Returns them and a note for the link box (or "")."""
    params: dict[str, str] = {"preset": preset.slug} if preset else {}
    matrices: dict[str, str] = {}
    for entry in entries_of(page):
        if not entry.linked or entry.name not in values or entry.name == "preset":
            continue
        found = values[entry.name]
        if isinstance(entry.kind, MatrixKind):
            start = (matrix_starts or {}).get(entry.name)
            if found is not None and not _same_numbers(found, start):
                try:
                    matrices[entry.name] = entry.kind.text(found)
                except (TypeError, ValueError):  # an empty cell: no matrix to link yet
                    pass
            continue
        if found is None or (isinstance(entry.kind, Choice) and found not in entry.kind.options):
            continue  # nothing, or what no link gives (a local folder)
        default = base[entry.name] if entry.name in base else entry.default_on(page, context)
        text = entry.kind.text(found)
        if entry.always_linked or default is None or text != entry.kind.text(default):
            params[entry.name] = text
    length = sum(len(text) for text in matrices.values())
    note_text = ""
    if length <= MAX_LINK_MATRIX_CHARS:
        params.update(matrices)
    else:
        note_text = (f"The link leaves out your hand-edited matrices ({length:,} characters; "
                     f"a link carries up to {MAX_LINK_MATRIX_CHARS:,}). Download them as JSON "
                     "instead.")
    return params, note_text


def _same_numbers(a: Any, b: Any) -> bool:
    """Whether two matrices hold the same float32 numbers (None never matches)."""
    if a is None or b is None:
        return False
    try:
        return np.array_equal(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
    except (TypeError, ValueError):  # an empty or unfinished cell
        return False


def url(page_url: str, params: Mapping[str, str]) -> str:
    """``page_url`` with ``params`` as its query, keeping ``,;:`` readable."""
    query = urllib.parse.urlencode(dict(params), safe=",;:", quote_via=urllib.parse.quote)
    return f"{page_url}?{query}" if query else page_url


LINK_BOX_KEY = "link-box"
"""The key of the "Link to this view" box (an action of `ACTIONS`): open, it
holds the link's code box."""


def publish(params: Mapping[str, str], note_text: str = "") -> str:
    """Write ``params`` into the address bar (when they changed) and draw the
    sidebar's "Link to this view": collapsed; opened, the page's URL with them
    in a code box with Streamlit's copy button, and ``note_text`` under it.
    Returns the link (the downloads write it into the script and the report).

    The code box is drawn only while the box is open (it reruns the page when
    opened): the first ``st.code`` of a page loads Streamlit's syntax
    highlighter, about 0.25 s of the browser's main thread (Chromium, 2 cores,
    a profile of the Self-attention page's first open) before any chart is
    drawn; the address bar holds the same link all along."""
    if st.query_params.to_dict() != dict(params):
        st.query_params.from_dict(params)
    link = url(st.context.url or "", params)
    box = st.expander("Link to this view", icon=":material/link:", key=LINK_BOX_KEY,
                      on_change="rerun")
    if box.open:
        with box:
            st.code(link, language=None, wrap_lines=True,
                    height=min(300, 40 + 22 * (len(link) // 40)))
            if note_text:
                st.caption(note_text)
    return link


def show_problems() -> None:
    """The messages about the link's bad values, each as an error."""
    for message in problems().values():
        st.error(literal.markdown(message))
