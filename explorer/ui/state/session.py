"""The session: the values of the entries, the messages about a link, the
internal keys (`INTERNAL`), a worked example loading, and a chart's click
asking for the whole page to follow.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import streamlit as st

from explorer.core.config import ConfigError, shown
from explorer.lessons.presets import PRESETS, Preset
from explorer.ui.state.entries import CONFIG_ENTRIES, ENTRIES, MATRICES

LINK_READ, LINK_CHECKS, PROBLEMS = "_link_read", "_link_checks", "_problems"
SWITCH_TO, PAGE_FOLLOWS = "_switch_to", "_page_follows"
SHOWN_CONFIG, EDITOR_VERSION, IMPORT_ERROR = "_shown_config", "_editor_version", "_import_error"
CHART_SENT, MODEL_EXAMPLE_FOUND = "_chart_sent", "_model_example_found"
INTERNAL: dict[str, str] = {
    LINK_READ: "the session's link has been read (its first run)",
    LINK_CHECKS: "names of link values whose bounds `resolve` has yet to check",
    PROBLEMS: "messages about a link's bad values, by parameter",
    SWITCH_TO: "a page a callback asked to open (a worked example's)",
    SHOWN_CONFIG: "the config last drawn: where hand-entered tables start",
    EDITOR_VERSION: "bumped when a table's numbers are replaced (a new editor)",
    IMPORT_ERROR: "a CSV import's message, per matrix (`_import_error:<name>`)",
    CHART_SENT: "chart key -> hashes of the matrices its page holds",
    MODEL_EXAMPLE_FOUND: "the last measured example of the Real model page",
    PAGE_FOLLOWS: "a chart reran alone for a click; the whole page is to follow",
}
"""Session keys that are not entries, with what they hold."""


def value(name: str, default: Any = None) -> Any:
    """Entry ``name``'s value in this session, or ``default``."""
    return st.session_state.get(name, default)


def checked(name: str) -> Any:
    """Entry ``name``'s value in this session when its kind reads it back as
    itself (`explorer.ui.state.Kind.parse` of its text), else None: a value no
    widget or link puts there (a forged one, such as ``"abc"`` or ``-3`` for a
    tile step) is removed, with a message (`problems`) saying what it was and
    what is allowed. For a view value the page reads before `resolve` can bound
    it. Raises nothing."""
    found = value(name)
    if found is None:
        return None
    try:
        read = ENTRIES[name].kind.parse(name, str(found))
        if type(read) is not type(found) or read != found:
            raise ConfigError(name, f"{name} must be a value the page sets, such as "
                                    f"{shown(read)} (got {shown(found)})")
    except ConfigError as error:
        problems()[name] = (f"Ignored the session's {name}={shown(found)} "
                            f"(“{ENTRIES[name].label}”): {error}. The page shows its default.")
        put(name, None)
        return None
    return found


def put(name: str, new: Any) -> None:
    """Set entry ``name`` (from a callback, a link or before its widget is drawn)."""
    st.session_state[name] = new


def problems() -> dict[str, str]:
    """Messages about the link's bad values, by parameter; they stay until the
    visitor changes a setting (`changed`)."""
    return st.session_state.setdefault(PROBLEMS, {})


def note(name: str, raw: Any, error: Exception | str) -> None:
    """Record that the link's ``name`` was ignored, and why."""
    problems()[name] = f"Ignored the link's {shown(name)[1:-1]}={shown(raw)}: {error}"


def dropped(keys: list[str | None]) -> None:
    """Say that the values the browser sent for the widgets with these keys
    (None: a widget without a key) could not be read and were dropped
    (`explorer.ui.private.install`): each keeps the value it had."""
    for key in keys:
        what = f"“{ENTRIES[key].label}”" if key in ENTRIES else "one of the page's widgets"
        problems()[key or ""] = (f"Ignored a value for {what} that this page never sends; "
                                 "it keeps the value it had.")


def changed(name: str | None = None) -> None:
    """Every widget's ``on_change``: the visitor changed something, so the
    messages about the link no longer apply."""
    st.session_state.pop(PROBLEMS, None)


def page_follows() -> None:
    """From a chart's callback: the chart reruns alone first (it is a fragment,
    `explorer.ui.render.step_chart`), so that the clicked cell's explanation
    shows at once; then the whole page reruns (`follow_page`) for what the
    click changed elsewhere: the link, another chart's explanation, a table of
    the query token."""
    st.session_state[PAGE_FOLLOWS] = True


def page_will_follow() -> bool:
    """Whether this run is a chart's own rerun after a click (`page_follows` was
    asked for, and the whole page has not run since: `begin` clears it)."""
    return bool(st.session_state.get(PAGE_FOLLOWS))


FOLLOW_PAUSE_SECONDS = 0.05
"""How long a chart's own rerun lets the browser draw the explanation before
the whole page reruns. The page's messages (145 on the multi-head page) arrive
in a burst that keeps React from drawing: with no pause the explanation came
with the page's (0.26-0.67 s after the click, Chromium, 2 cores); with 0.05 s
at 0.18-0.32 s, and the page's run ended 0.1-0.15 s later than before."""


def follow_page() -> None:
    """End of a chart's own rerun: rerun the whole page if a click asked
    for it (`page_follows`), after `FOLLOW_PAUSE_SECONDS`. A whole run clears
    the request (`begin`)."""
    if st.session_state.pop(PAGE_FOLLOWS, False):
        time.sleep(FOLLOW_PAUSE_SECONDS)
        st.rerun()


def request_switch(page: str) -> None:
    """Ask for ``page`` to be opened (from a callback, where `st.switch_page`
    is not allowed); `begin` opens it."""
    st.session_state[SWITCH_TO] = page


def as_array(matrix: Any) -> np.ndarray:
    """A matrix (rows of numbers, None for an empty cell) as a 2-D float array, NaN empty."""
    array = np.array([[np.nan if cell is None else cell for cell in row] for row in matrix],
                     dtype=np.float64) if not isinstance(matrix, np.ndarray) else matrix
    return array.reshape(len(array), -1) if array.size else np.zeros((0, 0))


def set_matrix(name: str, matrix: Any) -> None:
    """Replace a matrix (a worked example loading, a link, an import) and start
    its table afresh."""
    put(name, as_array(matrix))
    st.session_state[EDITOR_VERSION] = st.session_state.get(EDITOR_VERSION, 0) + 1


def apply_preset(preset: Preset | None) -> None:
    """Set every setting (and the hand-entered matrices and the query token) to
    ``preset``'s; None forgets the worked example and keeps the settings."""
    put("preset", preset.slug if preset else "")
    if preset is None:
        return
    for entry in CONFIG_ENTRIES:
        put(entry.name, entry.from_config(getattr(preset.config, entry.name)))
    for name in MATRICES:
        if getattr(preset.config, name) is not None:
            set_matrix(name, getattr(preset.config, name))
    put("query", preset.query)


def active_preset() -> Preset | None:
    """The worked example the visitor picked (by link, menu or gallery), if any."""
    return PRESETS.get(value("preset") or "")
