"""Nothing a visitor types is changed or dropped silently (issue 41, item 5): the
sentence box takes a paste of any length and says when it is too long (a box
with max_chars dropped a paste over 20,000 characters in the browser), and a
table cell takes Python's numbers, ``1e-3`` included, or keeps its number and
says why (Chromium: tests/browser/test_browser_tables.py)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.config import MAX_SENTENCE_CHARS
from explorer.lessons.presets import PRESETS
from explorer.ui.navigation import PAGES
from explorer.ui.state import ENTRIES, Text
from tests.support.apptest import charts, errors, open_page, z_values

X = np.array(PRESETS["illustrated"].config.embeddings, dtype=np.float32)


def test_no_text_box_drops_a_long_paste():
    for page in ("Self-attention", "Modern attention"):
        at = open_page(PAGES[page][0])
        assert at.text_input(key="sentence").proto.max_chars == 0  # the browser keeps it all
    assert not hasattr(Text(), "max_chars")  # the field's check is the one bound


def test_a_sentence_over_the_limit_is_refused_with_its_length():
    at = open_page(PAGES["Self-attention"][0])
    at.text_input(key="sentence").set_value("w " * 12_500).run()  # 25,000 characters
    assert not at.exception
    shown = errors(at)
    assert any(f"sentence must be at most {MAX_SENTENCE_CHARS:,} characters (got 25,000)" in e
               for e in shown), shown
    assert ENTRIES["sentence"].kind.field == "sentence"


def _edit(at, row: int, column: str, typed) -> None:
    """Type ``typed`` into X's cell, as the grid reports a text cell."""
    editor = next(e for e in at.data_editor if e.key.startswith("editor:embeddings:"))
    at.session_state[editor.key] = {"edited_rows": {row: {column: typed}}, "added_rows": [],
                                    "deleted_rows": []}
    at.run()


@pytest.mark.parametrize("typed, number", [("1e-3", 1e-3), ("-2.5E2", -250.0), (" 7 ", 7.0),
                                           ("1_000", 1000.0)])
def test_a_cell_takes_any_number_python_reads(typed, number):
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated", "embedding": "given"})
    _edit(at, 0, "dim 1", typed)
    assert not at.exception and errors(at) == []
    expected = X.copy()
    expected[0, 1] = number
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"]), expected)


@pytest.mark.parametrize("typed, message", [
    ("1e39", "embeddings row 1 ('v_2'), column 0 must be between -1e+06 and 1e+06 (got 1e+39): "
             "it keeps 0.0."),
    ("abc", "embeddings row 1 ('v_2'), column 0 must be a number (got 'abc'): it keeps 0.0."),
    ("inf", "must be a finite number (got 'inf'): it keeps 0.0."),
])
def test_a_cell_that_is_no_number_keeps_its_number_and_says_why(typed, message):
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated", "embedding": "given"})
    _edit(at, 1, "dim 0", typed)
    assert not at.exception
    assert any(message in e for e in errors(at)), errors(at)
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"]), X)
    table = next(e for e in at.data_editor if e.key.startswith("editor:embeddings:"))
    assert table.value.iat[1, 0] == "0.0"  # a fresh table, showing the number kept
    _edit(at, 1, "dim 0", "0.5")  # the next good edit: the message goes
    assert errors(at) == []
    assert z_values(charts(at)["embeddings"])[1, 0] == 0.5
