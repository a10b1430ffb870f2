"""Hand-entered matrices: X and W_query / W_key / W_value in `st.data_editor`.

The numbers live in session state under `store_key(field)` as nested lists. A
table is labelled with tokens (X rows) and dims; when the sentence or a dim
changes it is resized, keeping the values that still fit and filling new
cells with 0.
"""

from __future__ import annotations

import io
import math
from typing import Any

import pandas as pd
import streamlit as st

from explorer.config import MAX_ABS_GIVEN, ConfigError
from explorer.tokenizer import token_labels
from explorer import literal

MAX_IMPORT_BYTES = 1_000_000
_IMPORT_ERROR_KEY = "_import_error"

EDITOR_VERSION_KEY = "_editor_version"


def store_key(field: str) -> str:
    """Session-state key of a given matrix, e.g. ``given:embeddings``."""
    return f"given:{field}"


def resized(matrix: Any, rows: int, cols: int) -> list[list[Any]]:
    """``matrix`` cut or padded with 0 to ``rows`` × ``cols``, top-left aligned."""
    matrix = [list(row) for row in (matrix or [])]
    return [[matrix[i][j] if i < len(matrix) and j < len(matrix[i]) else 0.0
             for j in range(cols)] for i in range(rows)]


def set_matrix(field: str, matrix: Any) -> None:
    """Replace a stored matrix (a preset loading, say) and start its table afresh."""
    st.session_state[store_key(field)] = [list(row) for row in matrix]
    st.session_state[EDITOR_VERSION_KEY] = st.session_state.get(EDITOR_VERSION_KEY, 0) + 1


def has_matrix(field: str) -> bool:
    return store_key(field) in st.session_state


def edit_matrix(field: str, title: str, row_labels: list[str], n_cols: int,
                start: Any) -> list[list[Any]]:
    """Draw an editable table for ``field`` and return its cells (None = empty).

    ``start`` seeds the table the first time (the numbers the learner was just
    looking at). Cells stay as typed; `AttentionConfig` reports any empty,
    non-numeric or non-finite cell by row and column.
    """
    key = store_key(field)
    if key not in st.session_state:
        st.session_state[key] = [list(row) for row in start]
    values = resized(st.session_state[key], len(row_labels), n_cols)
    frame = pd.DataFrame(values, index=token_labels(row_labels),
                         columns=[f"dim {j}" for j in range(n_cols)], dtype="float64")
    version = st.session_state.get(EDITOR_VERSION_KEY, 0)
    edited = st.data_editor(
        frame, key=f"editor:{field}:{len(row_labels)}x{n_cols}:{version}", num_rows="fixed",
        width="stretch",
        column_config={c: st.column_config.NumberColumn(c, format="%.4f", step=0.0001)
                       for c in frame.columns})
    cells = edited.astype(object).where(edited.notna(), None).values.tolist()
    st.session_state[key] = cells
    st.caption(f"{title}: {len(row_labels)}×{n_cols}. Click a cell to type a number, or "
               "import a CSV file of numbers (a header row and a label column are optional).")
    st.file_uploader(f"Import {title} from CSV", type=["csv", "txt"], key=f"upload:{field}",
                     on_change=_import, args=(field, (len(row_labels), n_cols)),
                     label_visibility="collapsed")
    if error := st.session_state.get(f"{_IMPORT_ERROR_KEY}:{field}"):
        st.error(literal.markdown(error))
    return cells


def parse_csv_matrix(data: bytes, shape: tuple[int, int], name: str) -> list[list[float]]:
    """Numbers from a CSV file, as a ``shape`` matrix.

    A first row or first column that is not numeric is taken as labels and
    dropped. Raises `ConfigError` (naming the row and column) for a wrong shape,
    an empty or non-numeric cell, NaN/inf or a file that is not CSV text.
    """
    if len(data) > MAX_IMPORT_BYTES:
        raise ConfigError(name, f"{name}: the file is {len(data):,} bytes; at most "
                                f"{MAX_IMPORT_BYTES:,} are read")
    try:
        frame = pd.read_csv(io.BytesIO(data), header=None, dtype=str, skip_blank_lines=True,
                            keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise ConfigError(name, f"{name}: not a CSV table of numbers ({error})") from None
    if frame.shape[0] and not _numeric(frame.iloc[0, -1]):
        frame = frame.iloc[1:]  # a header row
    if frame.shape[1] and frame.shape[0] and not _numeric(frame.iloc[0, 0]):
        frame = frame.iloc[:, 1:]  # a label column
    if frame.shape != shape:
        raise ConfigError(name, f"{name} must be {shape[0]}×{shape[1]} here "
                                f"(the file holds {frame.shape[0]}×{frame.shape[1]} numbers)")
    values = []
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = []
        for j, cell in enumerate(row):
            if not _numeric(cell):
                raise ConfigError(name, f"{name}: the file's row {i}, column {j} is not a "
                                        f"number (got {cell!r})")
            number = float(cell)
            if not math.isfinite(number) or abs(number) > MAX_ABS_GIVEN:
                raise ConfigError(name, f"{name}: the file's row {i}, column {j} must be a "
                                        f"finite number up to {MAX_ABS_GIVEN:g} (got {cell!r})")
            cells.append(number)
        values.append(cells)
    return values


def _numeric(cell: Any) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return bool(str(cell).strip())


def _import(field: str, shape: tuple[int, int]) -> None:
    """Load an uploaded CSV into the table, or keep the table and say why not."""
    upload = st.session_state.get(f"upload:{field}")
    st.session_state.pop(f"{_IMPORT_ERROR_KEY}:{field}", None)
    if upload is None:
        return
    try:
        set_matrix(field, parse_csv_matrix(upload.getvalue(), shape, field))
    except ConfigError as error:
        st.session_state[f"{_IMPORT_ERROR_KEY}:{field}"] = str(error)
