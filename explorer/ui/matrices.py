"""Hand-entered matrices: X and W_query / W_key / W_value in `st.data_editor`.

The numbers live in session state under `store_key(field)` as a float array
(NaN marks an empty cell), 8 bytes a cell. A table is labelled with tokens (X
rows) and dims; when the sentence or a dim changes it is resized, keeping the
values that still fit and filling new cells with 0. A CSV file can replace a
table; one written by `explorer.export.matrix_csv` reads back exactly. Tables
above `MAX_EDITABLE_CELLS` are not drawn (a million cells cannot be edited
by hand, and would be sent to the browser on every run): they are imported.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from explorer import literal
from explorer.config import ConfigError, matrix_cell
from explorer.tokenizer import token_labels
from explorer.ui import urlstate

MAX_IMPORT_MB = 1
"""The largest CSV file read, in MB; `.streamlit/config.toml`'s
``server.maxUploadSize`` says the same (a test checks)."""
MAX_IMPORT_BYTES = MAX_IMPORT_MB * 2**20
_IMPORT_ERROR_KEY = "_import_error"
_LINK_READ_KEY = "_link_matrices_read"
EDITOR_VERSION_KEY = "_editor_version"


def store_key(field: str) -> str:
    """Session-state key of a given matrix, e.g. ``given:embeddings``."""
    return f"given:{field}"


MAX_EDITABLE_CELLS = 4096
"""Tables up to this many cells are editable; larger matrices are imported."""


def as_array(matrix: Any) -> np.ndarray:
    """A matrix (rows of numbers, None for an empty cell) as a 2-D float array, NaN empty."""
    array = np.array([[np.nan if cell is None else cell for cell in row] for row in matrix],
                     dtype=np.float64) if not isinstance(matrix, np.ndarray) else matrix
    return array.reshape(len(array), -1) if array.size else np.zeros((0, 0))


def resized(matrix: Any, rows: int, cols: int) -> np.ndarray:
    """``matrix`` cut or padded with 0 to ``rows`` × ``cols``, top-left aligned."""
    out = np.zeros((rows, cols))
    if matrix is not None and len(matrix):
        source = as_array(matrix)
        r, c = min(rows, source.shape[0]), min(cols, source.shape[1])
        out[:r, :c] = source[:r, :c]
    return out


def cells(matrix: np.ndarray) -> list[list[float | None]] | np.ndarray:
    """The matrix for the config: the array itself, or rows with None for the
    empty cells, so that the config names the first empty one."""
    if not np.isnan(matrix).any():
        return matrix
    return [[None if np.isnan(v) else float(v) for v in row] for row in matrix]


def set_matrix(field: str, matrix: Any) -> None:
    """Replace a stored matrix (a preset loading, say) and start its table afresh."""
    st.session_state[store_key(field)] = as_array(matrix)
    st.session_state[EDITOR_VERSION_KEY] = st.session_state.get(EDITOR_VERSION_KEY, 0) + 1


def apply_link_matrices() -> None:
    """On a session's first run, load the matrices a link carries
    (`urlstate.MATRICES`, already checked by `urlstate.clean`)."""
    if st.session_state.get(_LINK_READ_KEY):
        return
    st.session_state[_LINK_READ_KEY] = True
    for field in urlstate.MATRICES:
        if (text := urlstate.param(field)) is not None:
            set_matrix(field, urlstate.decode_matrix(field, text))


def edit_matrix(field: str, title: str, row_labels: list[str], n_cols: int,
                start: Any) -> list[list[float | None]] | np.ndarray:
    """Draw an editable table for ``field`` and return its cells (None = empty).

    ``start`` seeds the table the first time (the numbers the learner was just
    looking at). `AttentionConfig` reports any empty or non-finite cell by row
    and column. The numbers show to 4 decimals, rounded as the heatmaps round
    them. Above `MAX_EDITABLE_CELLS` the table is not drawn: the matrix is
    imported from CSV (or kept as it is).
    """
    key = store_key(field)
    if key not in st.session_state:
        st.session_state[key] = as_array(start) if start is not None and len(start) else None
    values = resized(st.session_state[key], len(row_labels), n_cols)
    st.session_state[key] = values
    if values.size <= MAX_EDITABLE_CELLS:
        frame = pd.DataFrame(values, index=token_labels(row_labels),
                             columns=[f"dim {j}" for j in range(n_cols)])
        version = st.session_state.get(EDITOR_VERSION_KEY, 0)
        edited = st.data_editor(
            frame, key=f"editor:{field}:{len(row_labels)}x{n_cols}:{version}", num_rows="fixed",
            width="stretch", column_config={c: st.column_config.NumberColumn(c, format="%.4f")
                                            for c in frame.columns})
        values = st.session_state[key] = edited.to_numpy(dtype=np.float64, na_value=np.nan)
        how = "Click a cell to type a number, or import"
    else:
        how = (f"Too many cells ({values.size:,}) to edit by hand here (at most "
               f"{MAX_EDITABLE_CELLS:,}): import")
    st.caption(f"{title}: {len(row_labels)}×{n_cols}. {how} a CSV file of numbers (up to "
               f"{MAX_IMPORT_MB} MB; a header row and a label column are optional).")
    # The uploader's key follows the table's numbers, so that a file name never
    # stays on show after the table has changed.
    digest = hashlib.blake2b(values.tobytes(), digest_size=6).hexdigest()
    upload_key = f"upload:{field}:{digest}"
    st.file_uploader(f"Import {title} from CSV", type=["csv", "txt"], key=upload_key,
                     on_change=_import, args=(field, upload_key, (len(row_labels), n_cols)),
                     label_visibility="collapsed")
    if error := st.session_state.get(f"{_IMPORT_ERROR_KEY}:{field}"):
        st.error(literal.markdown(error))
    return cells(values)


def parse_csv_matrix(data: bytes, shape: tuple[int, int], name: str) -> list[list[float]]:
    """Numbers from a CSV file, as a ``shape`` matrix.

    A first row is a header, and dropped, when the file has one row more than
    the matrix or the row ends in a non-number; a first column is labels, and
    dropped, when the file has one column more than the matrix or that column
    is not numeric (so column names "0,1,2" and token labels such as "1" work).
    Raises `ConfigError` (naming the row and column) for a wrong shape, an
    empty or non-numeric cell, NaN/inf or a file that is not CSV text.
    """
    if len(data) > MAX_IMPORT_BYTES:
        raise ConfigError(name, f"{name}: the file is {len(data):,} bytes; at most "
                                f"{MAX_IMPORT_BYTES:,} ({MAX_IMPORT_MB} MB) are read")
    try:
        frame = pd.read_csv(io.BytesIO(data), header=None, dtype=str, skip_blank_lines=True,
                            keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise ConfigError(name, f"{name}: not a CSV table of numbers ({error})") from None
    if frame.shape[0] and (frame.shape[0] == shape[0] + 1 or not _numeric(frame.iloc[0, -1])):
        frame = frame.iloc[1:]  # a header row
    if frame.shape[0] and (frame.shape[1] == shape[1] + 1 or not _numeric(frame.iloc[0, 0])):
        frame = frame.iloc[:, 1:]  # a label column
    if frame.shape != shape:
        raise ConfigError(name, f"{name} must be {shape[0]}×{shape[1]} here "
                                f"(the file holds {frame.shape[0]}×{frame.shape[1]} numbers)")
    return [[matrix_cell(name, f"{name}: the file's row {i}, column {j}", cell.strip())
             for j, cell in enumerate(row)] for i, row in enumerate(frame.itertuples(index=False))]


def _numeric(cell: Any) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return bool(str(cell).strip())


def _import(field: str, upload_key: str, shape: tuple[int, int]) -> None:
    """Load an uploaded CSV into the table, or keep the table and say why not."""
    upload = st.session_state.get(upload_key)
    st.session_state.pop(f"{_IMPORT_ERROR_KEY}:{field}", None)
    if upload is None:
        return
    try:
        set_matrix(field, parse_csv_matrix(upload.getvalue(), shape, field))
    except ConfigError as error:
        st.session_state[f"{_IMPORT_ERROR_KEY}:{field}"] = str(error)
