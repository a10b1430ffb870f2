"""A forged widget value on the Modern page gets a message, not an exception
(issue 41, item 4): values no browser of the page sends, spoken in Streamlit's
own protocol (`benchmarks.protocol`): an index past a drop-down's options or of
the wrong type, a picker's choice that is no index, a chart click that names
no cell. Before, each raised a TypeError (the exception box for the session)."""

from __future__ import annotations

import json

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from benchmarks.protocol import Run, Visitor, _trigger_id
from explorer.lessons.pages import MODERN_PAGE


def _forge(url: str, key: str, **value) -> Run:
    """Open the Modern page, then send widget ``key`` the forged ``value``."""
    with Visitor(url, timeout=120) as visitor:
        visitor.open(MODERN_PAGE)
        _, proto = visitor._elements[key]
        visitor._states[proto.id] = WidgetState(id=proto.id, **value)
        return visitor._rerun()


def _event(url: str, key: str, event: str, value) -> Run:
    """Open the Modern page, then send component ``key`` a forged ``event``."""
    with Visitor(url, timeout=120) as visitor:
        visitor.open(MODERN_PAGE)
        _, proto = visitor._elements[key]
        visitor._states.setdefault(proto.id, WidgetState(id=proto.id, json_value="{}"))
        trigger = WidgetState(id=_trigger_id(proto.id),
                              json_trigger_value=json.dumps([{"event": event, "value": value}]))
        return visitor._rerun(extra=[trigger])


def _no_exception(run: Run) -> list[str]:
    assert [e for e in run.errors if e.startswith("exception")] == [], run.errors
    return run.errors


@pytest.mark.parametrize("key, value", [
    ("decode_row", {"double_value": 2.5}), ("decode_row", {"int_value": -5}),
    ("decode_row", {"int_value": 2**62}), ("tile", {"bool_value": True}),
    ("tile", {"double_value": 1e300}),
])
def test_a_forged_drop_down_value_is_ignored_with_a_message(shared_server, key, value):
    shown = _no_exception(_forge(shared_server.url, key, **value))
    # A value in another field than the drop-down's is dropped by the guard
    # (`explorer.ui.private.install`: it keeps its value); one the page's code cannot
    # read, by `explorer.ui.widgets` (back to its default). Both say so.
    assert any("that this page never sends" in e for e in shown), shown


@pytest.mark.parametrize("value", ["abc", [1], {"a": 1}])
def test_a_forged_pick_is_ignored(shared_server, value):
    _no_exception(_event(shared_server.url, "picker-head", "pick", value))


@pytest.mark.parametrize("cell", [{"trace": 0, "row": "a", "col": 0}, {"row": None}, "x", [1],
                                  {"trace": 0, "row": -1, "col": 0}])
def test_a_forged_click_names_no_cell_and_says_so(shared_server, cell):
    shown = _no_exception(_event(shared_server.url, "modern-scores-after", "click", cell))
    assert any("Ignored a click on a chart that named no cell" in e for e in shown), shown
