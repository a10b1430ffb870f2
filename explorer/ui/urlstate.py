"""What a link holds, in one place: every URL parameter, cleaning the URL before
any widget is drawn, and the "Link to this view".

The parameters:

- each sidebar setting, named as its `AttentionConfig` field (``sentence``,
  ``d_in``, ``causal``...): Streamlit binds those widgets to the URL;
- ``preset``: a notebook preset's slug, applied first, then every setting the
  link gives explicitly;
- ``head`` and ``query``: the head shown and the highlighted query token,
  0-based;
- ``cell``: the explained cell, ``step:row,col`` (``attn_scores:1,0``), of the
  head ``head`` for a per-head step;
- ``experiment``, on the Experiments page only: the open tab, by its label
  (Streamlit's tabs bind it to the URL; the page checks it through `clean`'s
  ``checks``);
- ``model`` and ``layer``, on the Real model page only: the model by its Hub
  name (``gpt2``; a folder's path never goes into a link) and the layer shown,
  0-based; ``sentence``, ``head``, ``query`` and ``cell`` work there too (the
  page checks ``model`` and ``layer`` itself, through `clean`'s ``checks``);
- ``embeddings``, ``W_query``, ``W_key``, ``W_value``: hand-edited matrices,
  rows separated by ``;`` and cells by ``,``, each number in the shortest text
  that reads back as the same float32 (``0.43,0.15;0.55,0.87``). Together at
  most `MAX_LINK_MATRIX_CHARS` characters; larger matrices are left out and
  the sidebar says so.

A bad value gets a message on the page (`problems`) and is dropped from the
URL before the widgets read it: Streamlit's own number widget would crash on
``d_in=inf`` and silently ignore other bad values.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import streamlit as st
from streamlit.errors import StreamlitAPIException

from explorer import literal
from explorer.config import GIVEN_MATRICES, ConfigError, shown
from explorer.steps import STEPS

PRESET, HEAD, QUERY, CELL = "preset", "head", "query", "cell"
MODEL, LAYER = "model", "layer"
EXPERIMENT = "experiment"
MATRICES: tuple[str, ...] = tuple(f for fields in GIVEN_MATRICES.values() for f in fields)
MAX_LINK_MATRIX_CHARS = 2048
_PROBLEMS_KEY = "_url_problems"
_CLEANED_KEY = "_url_cleaned"


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------
def encode_matrix(matrix) -> str:
    """``0.43,0.15;0.55,0.87``: rows split by ``;``, cells by ``,``, each cell
    the shortest text that reads back as the same float32."""
    rows = np.asarray(matrix, dtype=np.float32)
    return ";".join(",".join(literal.float32_text(v) for v in row) for row in rows)


def decode_matrix(name: str, text: str) -> list[list[float]]:
    """The rows of an `encode_matrix` text. Raises `ConfigError` naming the
    cell that is not a number, or rows of different lengths."""
    rows = []
    for i, row in enumerate(text.split(";")):
        cells = []
        for j, cell in enumerate(row.split(",")):
            try:
                cells.append(float(cell))
            except ValueError:
                raise ConfigError(name, f"{name}: row {i}, column {j} of the link is not a "
                                        f"number (got {shown(cell)})") from None
        rows.append(cells)
    if len({len(r) for r in rows}) > 1:
        raise ConfigError(name, f"{name}: the link's rows have different lengths")
    return rows


def index(name: str, raw: str, size: int | None = None) -> int:
    """A 0-based index from the URL, below ``size`` when it is known.
    Raises `ConfigError` otherwise."""
    try:
        value = int(raw.strip())
    except (ValueError, AttributeError):
        raise ConfigError(name, f"{name} must be a whole number, 0-based "
                                f"(got {shown(raw)})") from None
    if value < 0 or (size is not None and value >= size):
        allowed = f"between 0 and {size - 1}" if size is not None else "at least 0"
        raise ConfigError(name, f"{name} must be {allowed} (got {value})")
    return value


def cell(raw: str) -> tuple[str, int, int]:
    """``(step, row, col)`` from ``attn_scores:1,0``. Raises `ConfigError`."""
    step, _, where = raw.partition(":")
    row, _, col = where.partition(",")
    if step not in STEPS:
        raise ConfigError(CELL, f"cell must name a step such as attn_scores:1,0 "
                                f"(got {shown(raw)})")
    return step, index(CELL, row), index(CELL, col)


def cell_text(step: str, row: int, col: int) -> str:
    """The ``cell`` parameter's text for a cell."""
    return f"{step}:{row},{col}"


# ---------------------------------------------------------------------------
# Cleaning the URL, and the messages about it
# ---------------------------------------------------------------------------
def problems() -> dict[str, str]:
    """Messages about the link's bad values, by parameter; they stay until the
    visitor changes a setting (`forget_problems`)."""
    return st.session_state.setdefault(_PROBLEMS_KEY, {})


def note(key: str, raw: Any, error: Exception | str) -> None:
    """Record that the link's ``key`` was ignored, and why."""
    problems()[key] = f"Ignored the link's {shown(key)[1:-1]}={shown(raw)}: {error}"


def forget_problems() -> None:
    st.session_state.pop(_PROBLEMS_KEY, None)


def clean(checks: Mapping[str, Callable[[str], Any]]) -> None:
    """Check every URL parameter before any widget reads it.

    ``checks`` maps each setting's parameter to a function that raises
    `ConfigError` for a value its widget cannot show. A bad value is noted and
    removed from the URL, and the script reruns on the cleaned URL (once per
    session: later runs' parameters come from the widgets themselves).
    Parameters of no known name are noted and left alone.
    """
    if st.session_state.get(_CLEANED_KEY):
        return
    st.session_state[_CLEANED_KEY] = True
    dropped = False
    for key in list(st.query_params):
        raw = st.query_params.get(key)
        try:
            if key in checks:
                checks[key](raw)
            elif key in (HEAD, QUERY):
                index(key, raw)
            elif key == CELL:
                cell(raw)
            elif key in MATRICES:
                decode_matrix(key, raw)
            elif key != PRESET:  # the preset picker checks its own
                problems()[key] = f"Ignored the link's unknown setting {shown(key)}."
                continue
        except ConfigError as error:
            note(key, raw, error)
            try:
                del st.query_params[key]
                dropped = True
            except StreamlitAPIException:  # bound to a widget already: it has its value
                pass
    if dropped:
        st.rerun()


def param(key: str) -> str | None:
    """A manual (unbound) parameter's value, or None."""
    return st.query_params.get(key)


ZERO_LEFT_OUT = (HEAD, LAYER)
"""Parameters a link leaves out at 0, their default."""


def set_param(key: str, value: Any | None) -> None:
    """Write a manual parameter, or remove it when ``value`` is None (or 0 for
    `ZERO_LEFT_OUT`)."""
    if value is None or (key in ZERO_LEFT_OUT and str(value) == "0"):
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get(key) != str(value):
        st.query_params[key] = str(value)


def set_view(key: str, value: Any | None) -> None:
    """Show ``value`` in the view picker ``key`` (`HEAD`, `QUERY`, `LAYER`,
    `CELL`) and write it into the URL: session state and link in one step. A
    cell ``(step, row, col, head)`` is written as `cell_text`."""
    st.session_state[key] = value
    set_param(key, cell_text(*value[:3]) if key == CELL and value is not None else value)


def follow_picker(key: str) -> None:
    """A view picker's ``on_change``: write its new value into the URL."""
    set_param(key, st.session_state[key])


# ---------------------------------------------------------------------------
# The link
# ---------------------------------------------------------------------------
def url_value(value: Any) -> str:
    """A setting as the URL writes it: ``true``/``false`` for booleans."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def matrix_params(matrices: Mapping[str, Any]) -> tuple[dict[str, str], int]:
    """The encoded matrices for the link, if together they fit in
    `MAX_LINK_MATRIX_CHARS`; else none. Returns them and their total length."""
    encoded = {name: encode_matrix(m) for name, m in matrices.items()}
    total = sum(len(text) for text in encoded.values())
    return (encoded if total <= MAX_LINK_MATRIX_CHARS else {}), total


def link(page_url: str, params: Mapping[str, Any]) -> str:
    """``page_url`` with ``params`` as its query, keeping ``,;:`` readable."""
    query = urllib.parse.urlencode({k: url_value(v) for k, v in params.items()},
                                   safe=",;:", quote_via=urllib.parse.quote)
    return f"{page_url}?{query}" if query else page_url


def view_params(keys: tuple[str, ...]) -> dict[str, Any]:
    """The view pickers' values for the link: each of ``keys`` (`HEAD`, `QUERY`,
    `LAYER`, `EXPERIMENT`) from session state, else from the URL, leaving out
    head and layer 0; then the explained cell."""
    params: dict[str, Any] = {}
    for key in keys:
        value = st.session_state.get(key, param(key))
        if value is not None and not (key in ZERO_LEFT_OUT and str(value) == "0"):
            params[key] = value
    if (explained := st.session_state.get(CELL)) is not None:
        params[CELL] = cell_text(*explained[:3])
    return params


def link_box(params: Mapping[str, Any], note: str | None = None) -> str:
    """The sidebar's "Link to this view": this page's URL with ``params``,
    collapsed, in a code box with Streamlit's copy button, and ``note`` (a
    caption) under it. Returns the URL."""
    url = link(st.context.url or "", params)
    with st.expander("Link to this view", icon=":material/link:"):
        st.code(url, language=None, wrap_lines=True, height=min(300, 40 + 22 * (len(url) // 40)))
        if note:
            st.caption(note)
    return url
