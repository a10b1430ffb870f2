"""A malformed widget value on Streamlit's websocket costs the visitor nothing
(issue 41, "a link or a message crashes a visitor"): a hand-made ``rerun_script``
BackMsg (`benchmarks.protocol`) whose widget states carry a value of another
type than the widget's, for every kind of widget the pages draw. Before the
guard (`explorer.ui.private.install`), Streamlit's deserializer raised inside
``SessionState.on_script_will_rerun``, before the page's script ran: the
visitor saw the exception box, and every later run of the session failed the
same way. Now the page runs, says which value it ignored, and the next
well-formed run draws the page as before.
"""

from __future__ import annotations

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from benchmarks.protocol import Run, Visitor
from explorer.lessons.pages import (
    BACKWARD_PAGE,
    EXPERIMENTS_PAGE,
    MULTI_HEAD_PAGE,
    SELF_ATTENTION_PAGE,
)

IGNORED = "that this page never sends"
"""What every message about a forged widget value says (`explorer.ui.state.dropped`,
`explorer.ui.widgets`)."""
HUGE = 500_000
"""Entries of a huge array value: 2.5 MB, under Streamlit's 25 MB cap on a message."""


def _value(**fields) -> WidgetState:
    """A `WidgetState` holding ``fields`` (a list fills an ``*_array_value``)."""
    state = WidgetState()
    for name, value in fields.items():
        if isinstance(value, list):
            getattr(state, name).data.extend(value)
        else:
            setattr(state, name, value)
    return state


# (page, its link's query, the widget's key, its Streamlit element, the forged value)
FORGED = [
    *[(SELF_ATTENTION_PAGE, "", "d_in", "number_input", value) for value in (
        _value(string_value="abc"), _value(double_value=float("inf")),
        _value(double_value=float("nan")), _value(int_array_value=[1, 2]),
        _value(json_value="{"))],
    *[(SELF_ATTENTION_PAGE, "", "embedding", "selectbox", value) for value in (
        _value(int_array_value=[999]), _value(int_value=999), _value(double_value=2.5),
        _value(string_array_value=["x"]), _value(int_array_value=list(range(HUGE))))],
    *[(SELF_ATTENTION_PAGE, "", "sentence", "text_input", value) for value in (
        _value(json_value="x"), _value(double_array_value=[1.0]))],
    (SELF_ATTENTION_PAGE, "", "scale", "checkbox", _value(json_value="{")),
    *[(SELF_ATTENTION_PAGE, "embedding=given", "editor:embeddings:6x3:0", "data_editor", value)
      for value in (_value(json_value="not json"), _value(json_value="[1]"),
                    _value(int_value=3),
                    _value(json_value='{"edited_rows": {"999": {"0": 1}}}'))],
    (MULTI_HEAD_PAGE, "", "dropout", "slider", _value(string_value="x")),
    (MULTI_HEAD_PAGE, "", "causal", "toggle", _value(json_value="[")),
    (MULTI_HEAD_PAGE, "", "n_heads", "number_input", _value(string_value="2")),
    *[(EXPERIMENTS_PAGE, "", "experiment", "segmented_control", value) for value in (
        _value(int_value=5), _value(int_array_value=[99]))],
    *[(BACKWARD_PAGE, "train_steps=1", "backward-train_step", "select_slider", value)
      for value in (_value(string_value="x"), _value(int_array_value=[999]),
                    _value(double_array_value=[-1.0]))],
]


QUIET = [(MULTI_HEAD_PAGE, "", "dropout", "slider", value) for value in (
    _value(double_array_value=[5.0]), _value(double_array_value=[0.1] * 100),
    _value(double_array_value=[]))]
"""Values of the widget's own field that Streamlit reads without a word (a slider
keeps its value): no message is owed, and nothing may break."""


def _exceptions(run: Run) -> list[str]:
    return [e for e in run.errors if e.startswith("exception")]


@pytest.mark.parametrize("page, query, key, element, value, message",
                         [(*f, True) for f in FORGED] + [(*f, False) for f in QUIET],
                         ids=[f"{f[2]}-{f[4].WhichOneof('value')}-{i}"
                              for i, f in enumerate(FORGED + QUIET)])
def test_a_malformed_widget_value_gets_a_message_and_the_session_lives_on(
        shared_server, page, query, key, element, value, message):
    with Visitor(shared_server.url, timeout=120) as visitor:
        opened = visitor.open(page, query)
        assert opened.errors == [], opened.errors
        _, proto = visitor._elements[key]
        value.id = proto.id
        visitor._states[proto.id] = value
        forged = visitor._rerun()
        assert _exceptions(forged) == [], f"{element}: {forged.errors}"
        if message:
            assert any(IGNORED in e for e in forged.errors), f"{element}: {forged.errors}"

        del visitor._states[proto.id]  # the browser's next, well-formed message
        after = visitor._rerun()
        assert _exceptions(after) == [], f"{element}: {after.errors}"
        assert set(after.charts) == set(opened.charts), element  # the page as before


def test_a_value_for_a_widget_the_page_never_drew_is_ignored(shared_server):
    with Visitor(shared_server.url, timeout=120) as visitor:
        opened = visitor.open(SELF_ATTENTION_PAGE)
        run = visitor._rerun(extra=[WidgetState(id="$$ID-0123456789abcdef-no_such_widget",
                                                string_value="x")])
        assert run.errors == [] and set(run.charts) == set(opened.charts), run.errors
