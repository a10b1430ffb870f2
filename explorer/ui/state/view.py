"""A page's values: `begin` (every page's first call), its settings and
their baseline, its view values bounded by its trace (`resolve`), and the
`View` it draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from explorer.core.config import ConfigError, shown
from explorer.core.trace import Trace, TraceConfig
from explorer.lessons.pages import SIMPLIFIED_PAGE
from explorer.lessons.presets import SIMPLIFIED, Preset
from explorer.ui.navigation import PAGES
from explorer.ui.state.entries import CONFIG_ENTRIES, ENTRIES, VIEW, Context, Entry, entries_of
from explorer.ui.state.kinds import CellRef, MatrixKind, _whole
from explorer.ui.state.link import read_link
from explorer.ui.state.session import LINK_CHECKS, PAGE_FOLLOWS, SWITCH_TO, note, put, value


def begin(page: str) -> None:
    """Every page's first call. Carries every widget's value over (see the
    module docstring), opens a page a callback asked for, and on a session's
    first run reads its link (`read_link`)."""
    st.session_state.pop(PAGE_FOLLOWS, None)  # this run is the whole page
    for entry in ENTRIES.values():
        if entry.widget and entry.name in st.session_state:
            st.session_state[entry.name] = st.session_state[entry.name]
    target = st.session_state.pop(SWITCH_TO, None)
    if target is not None and target != page:
        st.switch_page(PAGES[target][0])
    read_link(page)


def baseline(page: str, preset: Preset | None) -> dict[str, Any]:
    """Every setting of ``page`` as it is when the visitor changed nothing:
    the worked example's when one is active, else the page's defaults."""
    out = {}
    for entry in entries_of(page):
        if entry.config and preset is not None:
            out[entry.name] = entry.from_config(getattr(preset.config, entry.name))
        elif entry.group != VIEW and not isinstance(entry.kind, MatrixKind):
            out[entry.name] = entry.default_on(page)
    return out


def settings(page: str, preset: Preset | None) -> dict[str, Any]:
    """The values of ``page``'s settings (not its view values), the baseline
    where the session holds none; put into the session for the widgets."""
    out = {}
    for name, base in baseline(page, preset).items():
        if name not in st.session_state:
            put(name, base)
        out[name] = value(name)
    return out


def config_fields(page: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The `AttentionConfig` fields of a page's setting ``values``; the
    Simplified page fixes `SIMPLIFIED` and d_k = d_v = d_in (Q = K = V = X)."""
    fields = {e.name: e.to_config(values[e.name]) for e in CONFIG_ENTRIES if e.name in values}
    if page == SIMPLIFIED_PAGE:
        fields.update(SIMPLIFIED, d_k=values["d_in"], d_v=values["d_in"])
    return fields


def _in_bounds(entry: Entry, found: Any, context: Context, head: int) -> None:
    """Raise `ConfigError` unless ``found`` is one of the values ``entry``
    allows in ``context``; a cell must lie inside its step (of the head shown,
    ``head``, for a step with a head axis)."""
    if isinstance(entry.kind, CellRef):
        step, row, col, cell_head = found
        trace = context.trace
        if step not in trace:
            raise ConfigError(entry.name, f"this page has no step {step}")
        if trace.per_head(step) and cell_head != head:
            raise ConfigError(entry.name, f"the cell is head {cell_head}'s, not the head shown")
        shape = trace.head(step, cell_head).shape
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape
        _whole(entry.name, str(row), 0, rows - 1)
        _whole(entry.name, str(col), 0, cols - 1)
        return
    allowed = entry.allowed(context) if entry.allowed else None
    if allowed is None or found in allowed:
        return
    if isinstance(allowed, range):
        raise ConfigError(entry.name, f"{entry.name} must be between 0 and {len(allowed) - 1} "
                                      f"(got {found})")
    raise ConfigError(entry.name, f"{entry.name} must be one of {', '.join(map(str, allowed))} "
                                  f"here (got {shown(found)})")


def resolve(page: str, context: Context, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The view values of ``page`` (those in ``names``, else all), each within
    what ``context`` allows: a value that no longer fits (a shorter sentence,
    fewer heads, another head shown than a cell's) falls back to the page's
    default, and a link's value that does not fit is noted. Put into the
    session, for the widgets."""
    checks = st.session_state.get(LINK_CHECKS, set())
    out: dict[str, Any] = {}
    for entry in entries_of(page, VIEW):
        if names is not None and entry.name not in names:
            continue
        found = value(entry.name)
        try:
            if found is not None:
                _in_bounds(entry, found, context, out.get("head", value("head") or 0))
        except ConfigError as error:
            if entry.name in checks:
                note(entry.name, entry.kind.text(found), error)
            found = None
        if found is None:
            found = entry.default_on(page, context)
        checks.discard(entry.name)
        if entry.name not in st.session_state or value(entry.name) != found:
            put(entry.name, found)
        out[entry.name] = found
    return out


@dataclass(frozen=True)
class View:
    """What a page draws: the ``config`` and its ``trace``, the active worked
    example, and ``values``: every entry of the page, settings and view values
    alike, resolved (`view["temperature"]`). ``before_heads_only``: n_heads
    was rejected, so the trace is the one-head one and only the steps before
    the head split are the visitor's. ``link``: the link to this view."""

    page: str
    config: TraceConfig
    trace: Trace | None
    values: Mapping[str, Any]
    preset: Preset | None = None
    before_heads_only: bool = False
    link: str = ""

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def query(self) -> int | None:
        """The highlighted query token (None: none)."""
        return self.values.get("query")

    @property
    def head(self) -> int:
        """The head shown (0 on a page without heads)."""
        return self.values.get("head") or 0

    @property
    def cell(self) -> tuple[str, int, int, int] | None:
        """The explained cell, ``(step, row, col, head)``."""
        return self.values.get("cell")

    def without_trace(self) -> View:
        """This view without its trace: what a chart keeps for its own reruns
        (`explorer.ui.render.step_chart`), so that no session holds a trace
        outside the byte-bounded cache."""
        return replace(self, trace=None)

    def in_browser(self) -> dict[str, Any]:
        """The view as chart.js follows it (`explorer.render.payload.Chart.view`): the
        query token, the explained cell, the head shown and the line view."""
        return {"query": self.query, "cell": list(self.cell) if self.cell else None,
                "head": self.head, "lines": bool(self.values.get("lines"))}
