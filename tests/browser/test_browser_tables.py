"""What a visitor types into a table or imports reaches the matrix as typed, or
is refused with a message and the old number kept (issue 41, items 5 and 6).
Before: ``1e-3`` typed into X was stored as −13 and ``1e39`` as 139 (the grid's
number editor dropped the ``e``), ``abc`` emptied the cell, and a refused
file's message stayed when the uploader refused the next file itself."""

from __future__ import annotations

import numpy as np
from playwright.sync_api import Page, expect

from explorer.core.literal import WORD_JOINER
from explorer.lessons.presets import PRESETS
from tests.support.browser import chart_count, page_url, settle

X = np.array(PRESETS["illustrated"].config.embeddings, dtype=np.float32)
DRAWN_X = """() => {
  const gd = document.querySelector('.st-key-chart-embeddings .explorer-chart');
  return gd && gd.data ? Array.from(gd.data[0].z, (row) => Array.from(row, Number)) : null;
}"""
"""The embeddings chart's numbers, as drawn."""


def _open(server, page: Page) -> None:
    page.goto(page_url(server, "Self_attention", preset="illustrated", embedding="given"))
    settle(page)
    chart_count(page)
    _drawn(page, X)


def _drawn(page: Page, expected: np.ndarray) -> None:
    """Wait until X's chart draws ``expected`` (float32, exactly), then check it."""
    try:
        page.wait_for_function("""(expected) => {
          const gd = document.querySelector('.st-key-chart-embeddings .explorer-chart');
          const z = gd && gd.data ? gd.data[0].z : null;
          return z && expected.every((row, i) => row.every((v, j) => Math.fround(v) === z[i][j]));
        }""", arg=expected.tolist(), timeout=30_000)
    except Exception:  # noqa: BLE001 - the comparison below says what differs
        pass
    np.testing.assert_array_equal(np.array(page.evaluate(DRAWN_X), dtype=np.float32), expected)


def _type(page: Page, row: int, col: int, text: str) -> None:
    """Double-click X's cell (row, col) in its table, type ``text`` and press Enter."""
    grid = page.get_by_test_id("stDataFrame").first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    index_width, header_height, row_height, n_cols = 52, 36, 35, X.shape[1]
    column_width = (box["width"] - index_width) / n_cols
    page.mouse.dblclick(box["x"] + index_width + (col + 0.5) * column_width,
                        box["y"] + header_height + (row + 0.5) * row_height)
    editor = page.locator("textarea.gdg-input, input.gdg-input").first
    editor.fill(text)
    editor.press("Enter")
    settle(page)


def _errors(page: Page) -> list[str]:
    """The error boxes' text as a visitor reads it (`explorer.core.literal.markdown`'s
    word joiners left out)."""
    return [text.replace(WORD_JOINER, "")
            for text in page.get_by_test_id("stAlertContentError").all_inner_texts()]


def _expect_error(page: Page, text: str) -> None:
    """Wait until an error box says ``text``."""
    try:
        page.wait_for_function("""([text, joiner]) => [...document.querySelectorAll(
            "[data-testid='stAlertContentError']")].some(
              (e) => e.innerText.replaceAll(joiner, "").includes(text))""",
                               arg=[text, WORD_JOINER], timeout=60_000)
    except Exception:  # noqa: BLE001 - the assertion says what was shown instead
        pass
    assert any(text in shown for shown in _errors(page)), _errors(page)


def test_a_cell_takes_scientific_notation(shared_server, page: Page):
    _open(shared_server, page)
    _type(page, 0, 1, "1e-3")
    expected = X.copy()
    expected[0, 1] = np.float32(1e-3)  # not −13
    _drawn(page, expected)
    _type(page, 2, 3, "-2.5E2")
    expected[2, 3] = -250
    _drawn(page, expected)
    assert _errors(page) == []


def test_a_cell_that_is_no_number_keeps_its_number_and_says_why(shared_server, page: Page):
    _open(shared_server, page)
    _type(page, 1, 0, "1e39")  # before: 139
    _expect_error(page, "must be between -1e+06 and 1e+06 (got 1e+39): it keeps 0.0")
    _drawn(page, X)
    _type(page, 1, 0, "abc")  # before: an empty cell, its number lost
    _expect_error(page, "must be a number (got 'abc'): it keeps 0.0")
    _drawn(page, X)
    _type(page, 1, 0, "0.5")  # a good edit: the message goes
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expected = X.copy()
    expected[1, 0] = 0.5
    _drawn(page, expected)


def test_a_refused_files_message_names_its_file_next_to_the_uploaders_own(
        shared_server, page: Page, tmp_path):
    # The uploader refuses a file over 1,000,000 bytes itself ("File must be 1.0MB or
    # smaller"), runs nothing and keeps listing the previous file: the previous file's
    # message stays, so it names its file (before: it read as the new file's cause).
    _open(shared_server, page)
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text("1;2;3;4\n0;0;0;1\n2;2;2;2\n")
    uploader = page.get_by_test_id("stFileUploaderDropzoneInput").first
    uploader.set_input_files(str(semicolons))
    _expect_error(page, "'semicolons.csv' was not imported. embeddings: the file separates "
                        "its numbers with semicolons (;)")
    large = tmp_path / "large.csv"
    large.write_text("1," * 500_001)  # 1,000,002 bytes
    uploader.set_input_files(str(large))
    box = page.get_by_test_id("stFileUploader").first
    expect(box).to_contain_text("File must be 1.0MB or smaller")
    expect(box).to_contain_text("semicolons.csv")  # still the uploader's file
    assert [e for e in _errors(page) if "large.csv" in e] == []
    assert any("'semicolons.csv' was not imported" in e for e in _errors(page))
    _drawn(page, X)
