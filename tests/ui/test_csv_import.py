"""The CSV importer's messages name the real cause (issue 41, item 6): the
separator, the size in the unit the uploader uses, the cell as a spreadsheet
shows it, and only the message of the file the uploader holds now."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core.config import ConfigError
from explorer.ui.matrices import MAX_IMPORT_BYTES, parse_csv_matrix, spreadsheet_cell
from explorer.ui.navigation import PAGES
from tests.support.apptest import charts, errors, open_page, z_values

X = b"1,2,3,4\n0,0,0,1\n2,2,2,2\n"
"""X of the illustrated example's shape (3 tokens, d_in 4)."""


@pytest.mark.parametrize("data, message", [
    # A spreadsheet's "CSV" in a European locale, and a copy from a spreadsheet (tabs):
    # before, "the file holds 2×0 numbers" (the one column taken for labels).
    (b"1;2;3;4\n0;0;0;1\n2;2;2;2\n", "separates its numbers with semicolons (;)"),
    (b"0,5;0,3;1,2;4\n0;0;0;1\n2;2;2;2\n", "separates its numbers with semicolons (;)"),
    (b"1\t2\t3\t4\n0\t0\t0\t1\n2\t2\t2\t2\n", "separates its numbers with tabs"),
    # 1-based, counting the header row and the label column a spreadsheet shows.
    (b"1,2,3,4\n1,2,x,4\n1,2,3,4\n", "the file's cell C2 (row 2, column 3) must be a number"),
    (b"token,a,b,c,d\nt,1,2,3,4\nu,1,2,x,4\nv,1,2,3,4\n",
     "the file's cell D3 (row 3, column 4) must be a number (got 'x')"),
    (b"1,2,3\n4,5,6\n", "must be 3×4 here (the file holds 2×3 numbers)"),
    (b"a,b,c,d\n1,2,3,4\n5,6,7,8\n",
     "must be 3×4 here (the file holds 2×4 numbers once a header row is left out)"),
    # The uploader's unit: it refuses 1,000,001 bytes in the browser, and so does this.
    (b"1" * (10**6 + 1), "the file is 1,000,001 bytes; at most 1,000,000 (1 MB) are read"),
])
def test_a_refused_file_is_told_its_real_cause(data, message):
    with pytest.raises(ConfigError) as info:
        parse_csv_matrix(data, (3, 4), "embeddings")
    assert message in str(info.value), str(info.value)


def test_the_size_limit_is_the_uploaders_megabyte_and_a_comma_file_still_reads():
    assert MAX_IMPORT_BYTES == 1_000_000
    assert parse_csv_matrix(X, (3, 4), "embeddings") == [[1, 2, 3, 4], [0, 0, 0, 1],
                                                          [2, 2, 2, 2]]
    # A label that holds a semicolon is no separator; nor is a byte-order mark a label.
    assert parse_csv_matrix(b"token,a;b,c,d,e\nt,1,2,3,4\nu,0,0,0,1\nv,2,2,2,2\n", (3, 4),
                            "embeddings")[2] == [2, 2, 2, 2]
    assert parse_csv_matrix(b"\xef\xbb\xbf" + X, (3, 4), "embeddings")[0] == [1, 2, 3, 4]


@pytest.mark.parametrize("row, column, name", [(1, 1, "A1"), (2, 3, "C2"), (9, 26, "Z9"),
                                                (1, 27, "AA1"), (4, 53, "BA4")])
def test_cells_are_named_as_a_spreadsheet_names_them(row, column, name):
    assert spreadsheet_cell(row, column) == f"cell {name} (row {row}, column {column})"


def _upload(at, content: bytes, file_name: str = "x.csv") -> None:
    uploader = next(u for u in at.get("file_uploader") if "upload:embeddings:" in u.proto.id)
    uploader.upload(file_name, content, "text/csv")
    at.run()


def test_the_previous_files_message_goes_when_another_file_comes():
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    before = z_values(charts(at)["embeddings"])
    _upload(at, b"1;2;3;4\n0;0;0;1\n2;2;2;2\n", "semicolons.csv")
    assert [e for e in errors(at) if "semicolons" in e], errors(at)
    _upload(at, b"1,2,3\n4,5,6\n", "small.csv")  # another bad file: its own message alone
    shown = errors(at)
    assert len(shown) == 1 and "the file holds 2×3 numbers" in shown[0], shown
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"]), before)
    _upload(at, X, "good.csv")
    assert not at.exception and errors(at) == []
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"]),
                                  [[1, 2, 3, 4], [0, 0, 0, 1], [2, 2, 2, 2]])


@pytest.mark.parametrize("data, message", [
    # issue 52: before, "the file holds 2×0 numbers once a header row and a label column
    # is left out" (each line one cell, taken for a header and a label)
    (b"1 2 3 4\n0 0 0 1\n2 2 2 2\n", "the file separates its numbers with spaces; the "
                                     "importer reads commas"),
    (b"  1.5   2   3   4\n0 0 0 1\n2 2 2 2\n", "separates its numbers with spaces;"),
    (b"token a b c d\nt 1 2 3 4\nu 0 0 0 1\nv 2 2 2 2\n", "separates its numbers with spaces;"),
    (b"1|2|3|4\n0|0|0|1\n2|2|2|2\n", "the file separates its numbers with pipes (|); the "
                                     "importer reads commas"),
    (b"| 1 | 2 | 3 | 4 |\n| 0 | 0 | 0 | 1 |\n| 2 | 2 | 2 | 2 |\n", "with pipes (|);"),
])
def test_a_space_or_pipe_file_is_told_its_separator(data, message):
    with pytest.raises(ConfigError) as info:
        parse_csv_matrix(data, (3, 4), "embeddings")
    assert message in str(info.value), str(info.value)
    assert "decimal comma" not in str(info.value)


@pytest.mark.parametrize("data, message", [
    # a spreadsheet's decimal commas, quoted in a comma file: before, "the file holds 3×3
    # numbers once a label column is left out"
    (b'"0,5","1,5",2,3\n0,0,0,1\n2,2,2,2\n',
     "a decimal comma ('0,5', the file's cell A1 (row 1, column 1)) was found: the importer "
     "reads decimal points (0.5)"),
    (b'1,2,3,4\n0,0,"-0,25",1\n2,2,2,2\n', "a decimal comma ('-0,25', the file's cell C2"),
    # with another separator: both said
    (b"0,5;1,5;2;3\n0;0;0;1\n2;2;2;2\n",
     "separates its numbers with semicolons (;) and writes a decimal comma ('0,5')"),
    (b"0,5 1,5 2 3\n0 0 0 1\n2 2 2 2\n",
     "separates its numbers with spaces and writes a decimal comma ('0,5')"),
    (b"1\t2\t3\t4\n0\t0,75\t0\t1\n2\t2\t2\t2\n",
     "separates its numbers with tabs and writes a decimal comma ('0,75')"),
    # unquoted in a comma file, each comma reads as a separator: twice the columns
    (b"0,5,1,5,2,5,3,5\n0,0,0,0,0,0,1,0\n2,0,2,0,2,0,2,0\n",
     "(the file holds 3×8 numbers: more per row than the matrix has columns; if it writes "
     "decimal commas (0,5), write decimal points (0.5))"),
])
def test_a_decimal_comma_is_named(data, message):
    with pytest.raises(ConfigError) as info:
        parse_csv_matrix(data, (3, 4), "embeddings")
    assert message in str(info.value), str(info.value)


def test_a_comma_file_with_spaces_or_a_comma_in_a_label_still_reads():
    assert parse_csv_matrix(b"1, 2, 3, 4\n0, 0, 0, 1\n2, 2, 2, 2\n", (3, 4),
                            "embeddings")[1] == [0, 0, 0, 1]
    assert parse_csv_matrix(b'token name,a,b,c,d\n"1,2",1,2,3,4\nu,0,0,0,1\nv,2,2,2,2\n',
                            (3, 4), "embeddings")[0] == [1, 2, 3, 4]
    assert parse_csv_matrix(b"1 ,2 ,3 ,4\n0,0,0,1\n2,2,2,2\n", (3, 4), "embeddings")[0] == [
        1, 2, 3, 4]


def test_a_space_separated_upload_gets_its_message_on_the_page():
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    _upload(at, b"1 2 3 4\n0 0 0 1\n2 2 2 2\n", "spaces.txt")
    assert not at.exception
    assert [e for e in errors(at) if e.startswith("'spaces.txt' was not imported. embeddings: "
                                                  "the file separates its numbers with spaces")]
