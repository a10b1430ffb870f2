"""Hand-entered matrices: X and W_query / W_key / W_value in `st.data_editor`.

The numbers live in session state under `store_key(field)` as nested lists. A
table is labelled with tokens (X rows) and dims; when the sentence or a dim
changes it is resized, keeping the values that still fit and filling new
cells with 0.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from explorer.figures import unique_labels

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
    frame = pd.DataFrame(values, index=unique_labels(row_labels),
                         columns=[f"dim {j}" for j in range(n_cols)], dtype="float64")
    version = st.session_state.get(EDITOR_VERSION_KEY, 0)
    edited = st.data_editor(
        frame, key=f"editor:{field}:{len(row_labels)}x{n_cols}:{version}", num_rows="fixed",
        width="stretch",
        column_config={c: st.column_config.NumberColumn(c, format="%.4f", step=0.0001)
                       for c in frame.columns})
    cells = edited.astype(object).where(edited.notna(), None).values.tolist()
    st.session_state[key] = cells
    st.caption(f"{title}: {len(row_labels)}×{n_cols}. Click a cell to type a number.")
    return cells
