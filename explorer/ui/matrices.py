"""Hand-entered matrices: X and W_query / W_key / W_value in `st.data_editor`.

Each matrix is an entry of `explorer.ui.state` (``embeddings``, ``W_query``
...), held in the session under its name as a float array (NaN marks an empty
cell), 8 bytes a cell. `tables` draws the tables of the matrices whose option
is "given" and returns them for the config. A table starts from the numbers on
screen when the learner switched to "given" (`_shown_config`: the last config
drawn), or, on a link's first run, from where a link's tables start
(`link_starts`: the worked example's matrices, else the recipes' draws). A
matrix whose option is no longer "given" is forgotten, so switching back starts
from the screen again. A table is labelled with tokens (X rows) and dims; when
the sentence or a dim changes it is resized, keeping the values that still fit
and filling new cells with 0. A CSV file can replace a table; one written by
`explorer.render.export.matrix_csv` reads back exactly. Tables above
`MAX_EDITABLE_CELLS` are not drawn (a million cells cannot be edited by hand,
and would be sent to the browser on every run): they are imported.
"""

from __future__ import annotations

import hashlib
import io
import re
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from explorer.core import literal
from explorer.core.config import GIVEN_MATRICES, AttentionConfig, ConfigError, matrix_cell, shown
from explorer.core.tokenizer import token_labels, tokenize
from explorer.lessons.presets import Preset
from explorer.ui import state
from explorer.ui.cache import cached_trace

MAX_IMPORT_MB = 1
"""The largest CSV file read, in MB; `.streamlit/config.toml`'s
``server.maxUploadSize`` says the same (a test checks)."""
MAX_IMPORT_BYTES = MAX_IMPORT_MB * 10**6
"""The same in bytes, as the uploader counts them in the browser (a MB of
10**6 bytes: it refuses a file of 1,000,001 bytes itself, on Linux and macOS)."""
SEPARATORS = {";": "semicolons (;)", "\t": "tabs", "|": "pipes (|)", " ": "spaces"}
"""Separators a spreadsheet, a text editor or a Markdown table may write
instead of commas, which the importer names when a file uses one (it reads
commas only; " " stands for any run of spaces). A semicolon file often writes
its decimals with commas, 0,5 (`DECIMAL_COMMA`)."""
DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+(?:[eE][-+]?\d+)?")
"""A number written with a decimal comma, ``0,5`` (a European spreadsheet's),
as a whole cell."""
MAX_EDITABLE_CELLS = 4096
"""Tables up to this many cells are editable; larger matrices are imported."""
TITLES = {"embeddings": "X, the embeddings", "W_query": "W_query", "W_key": "W_key",
          "W_value": "W_value"}


def resized(matrix: Any, rows: int, cols: int) -> np.ndarray:
    """``matrix`` cut or padded with 0 to ``rows`` × ``cols``, top-left aligned."""
    out = np.zeros((rows, cols))
    if matrix is not None and len(matrix):
        source = state.as_array(matrix)
        r, c = min(rows, source.shape[0]), min(cols, source.shape[1])
        out[:r, :c] = source[:r, :c]
    return out


def cells(matrix: np.ndarray) -> list[list[float | None]] | np.ndarray:
    """The matrix for the config: the array itself, or rows with None for the
    empty cells, so that the config names the first empty one."""
    if not np.isnan(matrix).any():
        return matrix
    return [[None if np.isnan(v) else float(v) for v in row] for row in matrix]


def _drawn_matrices(config: AttentionConfig | None) -> dict[str, Any]:
    """X and the weights of ``config``'s trace, or none if it has no valid trace."""
    if config is None:
        return {}
    try:
        trace = cached_trace(config)
    except ConfigError:
        return {}
    return {name: trace[name].numpy() for name in state.MATRICES if name in trace}


def link_starts(page: str, values: dict[str, Any], preset: Preset | None) -> dict[str, Any]:
    """Where a link's tables start when it leaves a matrix out: the worked
    example's matrices, else the numbers the baseline's recipe draws for the same
    settings (`explorer.ui.state.baseline`: the example's, else the defaults), so
    that a link to the book's SelfAttention_v1 with ``weight_init=given`` starts
    from the book's weights. What the baseline types in too draws nothing, so
    it stands in as zeros (the draws after it do not depend on its numbers)."""
    fields = state.config_fields(page, values)
    base = state.baseline(page, preset)
    drawn = dict(fields, n_heads=1)
    for option, names in GIVEN_MATRICES.items():
        if fields.get(option) != "given":
            continue
        if base.get(option) != "given":
            drawn[option] = base.get(option, AttentionConfig.__dataclass_fields__[option].default)
            continue
        drawn.update({name: np.zeros(_shapes(fields)[name]) for name in names})
    try:
        starts = _drawn_matrices(AttentionConfig(**drawn))
    except ConfigError:
        starts = {}
    if preset is not None:
        starts.update({name: getattr(preset.config, name) for name in state.MATRICES
                       if getattr(preset.config, name) is not None})
    return starts


def _shapes(fields: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Each matrix's shape for the config ``fields``: X (n_tokens, d_in), the
    weights (d_in, d_k) and (d_in, d_v)."""
    n_tokens = len(tokenize(fields["sentence"]))
    d_in, d_k, d_v = fields["d_in"], fields.get("d_k", fields["d_in"]), fields.get("d_v",
                                                                               fields["d_in"])
    return {"embeddings": (n_tokens, d_in), "W_query": (d_in, d_k), "W_key": (d_in, d_k),
            "W_value": (d_in, d_v)}


def tables(page: str, values: dict[str, Any],
           preset: Preset | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Draw the tables of ``page``'s matrices whose option is "given" (X on its
    own row, the weights side by side under it) and return them as config
    fields, with `link_starts` (which a link need not repeat)."""
    wanted = []
    for entry in state.entries_of(page, state.MATRIX):
        if entry.shown_if(values):
            wanted.append(entry.name)
        elif entry.name in st.session_state:
            del st.session_state[entry.name]  # switching back starts from the screen
    if not wanted:
        return {}, {}
    starts = link_starts(page, values, preset)
    screen = _drawn_matrices(st.session_state.get(state.SHOWN_CONFIG))
    tokens = tokenize(values["sentence"])
    dims = [str(i) for i in range(values["d_in"])]
    shapes = {name: (tokens if name == "embeddings" else dims, cols)
              for name, (_, cols) in _shapes(state.config_fields(page, values)).items()}
    given = {}
    with st.expander("Your matrices: edit any cell and the heatmaps follow", expanded=True):
        for row in ([n for n in wanted if n == "embeddings"],
                    [n for n in wanted if n != "embeddings"]):
            for column, name in zip(st.columns(max(len(row), 1)), row):
                with column:
                    labels, n_cols = shapes[name]
                    st.markdown(f"**{TITLES[name]}**")
                    start = screen.get(name, starts.get(name))
                    given[name] = edit_matrix(name, labels, n_cols, start)
                    if name == "embeddings" and values.get("weight_init", "given") != "given":
                        st.caption(_DRAWN_AFTER_GIVEN_X.format(seed=values["seed"]))
    return given, starts


_DRAWN_AFTER_GIVEN_X = (
    "With X typed in, nothing is drawn for X: W_query, W_key and W_value are the first "
    "draws after torch.manual_seed({seed}), as in the book's §3.4.1 with its hand-picked "
    "vectors. So they differ from the weights drawn after a random X.")


def edit_matrix(name: str, row_labels: list[str], n_cols: int,
                start: Any) -> list[list[float | None]] | np.ndarray:
    """Draw an editable table for matrix ``name`` and return its cells (None = empty).

    ``start`` seeds the table the first time (the numbers the learner was just
    looking at). The cells are text, each number written as the shortest text
    that reads back as the same float32 (what the config computes with), so
    that a visitor types numbers as Python reads them, ``1e-3`` included (the
    grid's number editor drops the ``e``: ``1e-3`` became −13). A typed cell
    is read by `explorer.core.config.matrix_cell`: one that is not a number,
    not finite or beyond its bounds keeps its number and the table says why
    (`_apply_edits`); an emptied cell is empty, and `AttentionConfig` names it.
    Above `MAX_EDITABLE_CELLS` the table is not drawn: the matrix is imported
    from CSV (or kept as it is).
    """
    title = TITLES[name]
    if state.value(name) is None:
        state.put(name, state.as_array(start) if start is not None and len(start) else None)
    values = resized(state.value(name), len(row_labels), n_cols)
    state.put(name, values)
    if values.size <= MAX_EDITABLE_CELLS:
        columns = [f"dim {j}" for j in range(n_cols)]
        shown = pd.DataFrame([[cell_text(v) for v in row] for row in values],
                             index=token_labels(row_labels), columns=columns)
        version = st.session_state.get(state.EDITOR_VERSION, 0)
        edited = st.data_editor(
            shown, key=f"editor:{name}:{len(row_labels)}x{n_cols}:{version}", num_rows="fixed",
            width="stretch", column_config={c: st.column_config.TextColumn(c, alignment="right")
                                            for c in columns})
        values = _apply_edits(name, values, shown, edited, row_labels)
        how = "Click a cell to type a number (0.25, -3, 1e-3), or import"
    else:
        how = (f"Too many cells ({values.size:,}) to edit by hand here (at most "
               f"{MAX_EDITABLE_CELLS:,}): import")
    st.caption(f"{title}: {len(row_labels)}×{n_cols}. {how} a CSV file of numbers "
               f"separated by commas (up to {MAX_IMPORT_MB} MB, {MAX_IMPORT_BYTES:,} bytes; a "
               "header row and a label column are optional).")
    # The uploader's key follows the table's numbers, so that a file name never
    # stays on show after the table has changed.
    digest = hashlib.blake2b(values.tobytes(), digest_size=6).hexdigest()
    upload_key = f"upload:{name}:{digest}"
    st.file_uploader(f"Import {title} from CSV", type=["csv", "txt"], key=upload_key,
                     on_change=_import, args=(name, upload_key, (len(row_labels), n_cols)),
                     label_visibility="collapsed")
    if error := _import_error(name, st.session_state.get(upload_key)):
        st.error(literal.markdown(error))
    return cells(values)


def cell_text(value: float) -> str:
    """A table cell's text: the shortest text that reads back as the same
    float32 (``0.4300``'s float32 is ``0.43``), or "" for an empty cell."""
    return "" if np.isnan(value) else literal.float32_text(value)


EDITED = "edited"
"""The source of a table edit's message (an import's is its file's id)."""


def _apply_edits(name: str, values: np.ndarray, shown: pd.DataFrame, edited: pd.DataFrame,
                 row_labels: list[str]) -> np.ndarray:
    """``values`` with the cells whose text the visitor changed (``edited``
    against ``shown``) read as numbers; an emptied cell is NaN. A cell that is
    no number keeps its number: the table is drawn afresh (a rerun) and says
    which cell, what was typed and what it keeps, until the next edit."""
    out = values.copy()
    problems = []
    for i, j in zip(*np.nonzero((edited.to_numpy() != shown.to_numpy()))):
        typed = edited.iat[i, j]
        if typed is None or (isinstance(typed, str) and not typed.strip()) or (
                isinstance(typed, float) and np.isnan(typed)):
            out[i, j] = np.nan
            continue
        where = f"{name} row {i} ({row_labels[i]!r}), column {j}"
        try:
            out[i, j] = matrix_cell(name, where, typed.strip() if isinstance(typed, str) else typed)
        except ConfigError as error:
            kept = cell_text(values[i, j])
            problems.append(f"{error}: it keeps {kept}." if kept else f"{error}.")
    if np.array_equal(out, values, equal_nan=True) and not problems:
        return values
    state.put(name, out)
    key = f"{state.IMPORT_ERROR}:{name}"
    if problems:
        st.session_state[key] = (EDITED, " ".join(problems))
        st.session_state[state.EDITOR_VERSION] = st.session_state.get(state.EDITOR_VERSION, 0) + 1
        st.rerun()  # the table again, holding the numbers kept
    if st.session_state.get(key, (None,))[0] == EDITED:
        del st.session_state[key]  # a good edit: the last one's message goes
    return out


def _import_error(name: str, upload: Any) -> str | None:
    """The message about the last table edit that kept a cell (`_apply_edits`),
    or about the file the uploader holds now, if its import was refused: none
    once the file is removed or another takes its place."""
    found = st.session_state.get(f"{state.IMPORT_ERROR}:{name}")
    if found is None or (found[0] != EDITED and (
            upload is None or found[0] != getattr(upload, "file_id", None))):
        return None
    return found[1]


def parse_csv_matrix(data: bytes, shape: tuple[int, int], name: str) -> list[list[float]]:
    """Numbers from a CSV file, as a ``shape`` matrix.

    A first row is a header, and dropped, when the file has one row more than
    the matrix or the row ends in a non-number; a first column is labels, and
    dropped, when the file has one column more than the matrix or that column
    is not numeric (so column names "0,1,2" and token labels such as "1" work).
    Raises `ConfigError` for a file over `MAX_IMPORT_BYTES` (both figures in
    bytes), one whose numbers are separated by one of `SEPARATORS` (named), one
    with decimal commas (`DECIMAL_COMMA`: named, with the cell), a wrong shape, an empty or non-numeric cell, NaN/inf, or a file that is not
    CSV text. A cell is named as a spreadsheet shows it, counting the rows and
    columns dropped: ``cell C2 (row 2, column 3)``.
    """
    if len(data) > MAX_IMPORT_BYTES:
        raise ConfigError(name, f"{name}: the file is {len(data):,} bytes; at most "
                                f"{MAX_IMPORT_BYTES:,} ({MAX_IMPORT_MB} MB) are read")
    try:
        text = data.decode("utf-8-sig")
        frame = pd.read_csv(io.StringIO(text), header=None, dtype=str, skip_blank_lines=True,
                            keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        _check_separator(name, data.decode("utf-8", "replace"), shape)
        raise ConfigError(name, f"{name}: not a CSV table of numbers ({error})") from None
    _check_separator(name, text, shape)
    try:
        return _numbers(frame, shape, name)
    except ConfigError:
        _check_decimal_comma(name, frame)  # the likelier cause, when the file holds one
        raise


def _numbers(frame: pd.DataFrame, shape: tuple[int, int], name: str) -> list[list[float]]:
    """`parse_csv_matrix`'s numbers from a file read as text cells, ``frame``:
    its header row and label column dropped where it has them."""
    header = bool(frame.shape[0]) and (frame.shape[0] == shape[0] + 1
                                       or not _numeric(frame.iloc[0, -1]))
    if header:
        frame = frame.iloc[1:]
    labels = bool(frame.shape[0]) and (frame.shape[1] == shape[1] + 1
                                       or not _numeric(frame.iloc[0, 0]))
    if labels:
        frame = frame.iloc[:, 1:]
    if frame.shape != shape:
        dropped = " and ".join(part for part, on in (("a header row", header),
                                                     ("a label column", labels)) if on)
        wider = ("" if frame.shape[1] <= shape[1] else
                 ": more per row than the matrix has columns; if it writes decimal commas "
                 "(0,5), write decimal points (0.5)")
        raise ConfigError(name, f"{name} must be {shape[0]}×{shape[1]} here (the file holds "
                                f"{frame.shape[0]}×{frame.shape[1]} numbers"
                                + (f" once {dropped} is left out" if dropped else "")
                                + wider + ")")
    return [[matrix_cell(name, f"{name}: the file's "
                               f"{spreadsheet_cell(i + 1 + header, j + 1 + labels)}",
                         cell.strip())
             for j, cell in enumerate(row)] for i, row in enumerate(frame.itertuples(index=False))]


def spreadsheet_cell(row: int, column: int) -> str:
    """A 1-based cell as a spreadsheet names it: ``cell C2 (row 2, column 3)``."""
    letters, n = "", column
    while n:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return f"cell {letters}{row} (row {row}, column {column})"


def _fields(line: str, separator: str) -> list[str]:
    """``line``'s cells between ``separator`` (any run of spaces for " ")."""
    return line.split() if separator == " " else line.split(separator)


def _check_separator(name: str, text: str, shape: tuple[int, int]) -> None:
    """Raise `ConfigError` naming the separator when ``text`` separates its numbers
    with one of `SEPARATORS` rather than commas: its first line holds at least
    as many of it as a row of ``shape`` needs, and no comma but decimal commas
    (`DECIMAL_COMMA`), which the message names too."""
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    for separator, called in SEPARATORS.items():
        fields = _fields(first, separator)
        if len(fields) - 1 < max(1, shape[1] - 1) or any(
                "," in field and not DECIMAL_COMMA.fullmatch(field.strip()) for field in fields):
            continue
        decimal = next((field.strip() for line in lines for field in _fields(line, separator)
                        if DECIMAL_COMMA.fullmatch(field.strip())), None)
        if decimal is None:
            raise ConfigError(name, f"{name}: the file separates its numbers with {called}; "
                                    "the importer reads commas. Save it as CSV with commas.")
        raise ConfigError(name, f"{name}: the file separates its numbers with {called} and "
                                f"writes a decimal comma ({shown(decimal)}); the importer "
                                "reads commas between numbers and decimal points. Save it "
                                "as CSV with commas and decimal points (0.5, not 0,5).")


def _check_decimal_comma(name: str, frame: pd.DataFrame) -> None:
    """Raise `ConfigError` naming the first cell of ``frame`` (a comma file read
    as text cells) written with a decimal comma, a quoted ``"0,5"``, if any."""
    for i, row in enumerate(frame.itertuples(index=False)):
        for j, cell in enumerate(row):
            if isinstance(cell, str) and DECIMAL_COMMA.fullmatch(cell.strip()):
                raise ConfigError(name, f"{name}: a decimal comma ({shown(cell.strip())}, the "
                                        f"file's {spreadsheet_cell(i + 1, j + 1)}) was found: "
                                        "the importer reads decimal points (0.5), not 0,5. "
                                        "Save the file with decimal points.")


def _numeric(cell: Any) -> bool:
    try:
        float(str(cell).strip())
    except ValueError:
        return False
    return bool(str(cell).strip())


def _import(name: str, upload_key: str, shape: tuple[int, int]) -> None:
    """Load an uploaded CSV into the table, or keep the table and say why not."""
    upload = st.session_state.get(upload_key)
    st.session_state.pop(f"{state.IMPORT_ERROR}:{name}", None)
    if upload is None:
        return
    try:
        state.set_matrix(name, parse_csv_matrix(upload.getvalue(), shape, name))
    except ConfigError as error:
        # Named by its file: the uploader keeps listing it when it refuses a next file
        # itself (too large), so the message stays true next to the uploader's own.
        st.session_state[f"{state.IMPORT_ERROR}:{name}"] = (
            upload.file_id, f"{shown(upload.name)} was not imported. {error}")
