"""The shared settings every page starts with: `settings()`."""

from __future__ import annotations

import urllib.parse
from typing import Any

import streamlit as st

from explorer.config import GIVEN_MATRICES, AttentionConfig, ConfigError
from explorer.tokenizer import tokenize
from explorer.ui import matrices, presets
from explorer.ui.cache import cached_trace
from explorer.ui.controls import ADVANCED, BASIC, MULTI_HEAD, Control
from explorer.ui.navigation import follow_requested_switch, page_menu
from explorer import literal

SIMPLIFIED = {"weight_init": "identity", "scale": False}
"""Simplified attention (seeds 000, 001, 003): no trainable weights, no scaling."""

CONTROLS: tuple[Control, ...] = (presets.PRESET_CONTROL, *BASIC, *ADVANCED, *MULTI_HEAD)
_URL_PROBLEMS_KEY = "_url_problems"
_MATRIX_TITLES = {"embeddings": "X, the embeddings", "W_query": "W_query", "W_key": "W_key",
                  "W_value": "W_value"}


def settings(page: str, simplified: bool = False,
             extra: tuple[Control, ...] = ()) -> AttentionConfig | None:
    """Draw the shared settings and return the chosen `AttentionConfig`.

    The sidebar holds the page menu, the preset picker, the basic and the
    advanced widgets and a link to this view. The main area gets the messages
    about the input, the tables of hand-entered matrices and, for an unchanged
    preset, the notebook check. ``simplified`` fixes `SIMPLIFIED` and
    d_k = d_v = d_in (Q = K = V = X). ``extra`` adds this page's own settings
    (e.g. `MULTI_HEAD`). On invalid input shows ``st.error`` with the backend's
    message and returns None; the page stays usable.
    """
    raw_url = {c.key: st.query_params.get(c.key) for c in CONTROLS}
    _keep_across_pages()
    presets.apply_if_new()
    with st.sidebar:
        page_menu()
        preset = presets.picker(_forget_url_problems)
        st.header("Settings")
        values = {c.key: c.draw(c, _forget_url_problems) for c in BASIC}
        with st.expander("Advanced: the recipes", expanded=False):
            for control in ADVANCED:
                if simplified and control.key in SIMPLIFIED:
                    continue
                values[control.key] = control.draw(control, _forget_url_problems)
            if simplified:
                st.caption("Fixed on this page: weight_init = identity (Q = K = V = X), "
                           "no scaling.")
        if extra:
            st.header(page)
            values.update({c.key: c.draw(c, _forget_url_problems) for c in extra})
        shown = {**values, presets.PRESET_KEY: preset.slug if preset else ""}
        _share_link(shown)
    _note_dropped_url_values(raw_url, shown)
    for message in st.session_state.get(_URL_PROBLEMS_KEY, {}).values():
        st.error(literal.markdown(message))
    if simplified:
        values.update(SIMPLIFIED, d_k=values["d_in"], d_v=values["d_in"])
    fields = {c.key: c.to_config(values[c.key]) for c in CONTROLS if c.key in values}
    fields.update(_given_matrices(values))
    try:
        config = AttentionConfig(**fields)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        return None
    follow_requested_switch()
    trace = cached_trace(config)
    with st.sidebar:
        st.download_button("Download every matrix (JSON)", data=trace.to_json,
                           file_name="attention_trace.json", mime="application/json",
                           on_click="ignore", icon=":material/download:")
    presets.show_check(preset, config, trace, page)
    return config


def url_params(values: dict[str, Any]) -> dict[str, str]:
    """The widget values that differ from their defaults, as URL query parameters."""
    defaults = {c.key: c.default for c in CONTROLS}
    return {key: str(value) for key, value in values.items()
            if key in defaults and str(value) != str(defaults[key])}


def _share_link(values: dict[str, Any]) -> None:
    """The URL that reproduces this view, with a copy button."""
    query = urllib.parse.urlencode(url_params(values))
    st.caption("Link to this view:")
    st.code(f"{st.context.url or ''}{'?' + query if query else ''}", language=None,
            wrap_lines=True)


def _keep_across_pages() -> None:
    """Carry the settings over to the page being opened.

    Each page registers its own copy of the sidebar widgets. Re-assigning the
    values under their keys before the widgets are drawn is Streamlit's
    documented way to keep them when the visitor switches pages; it also covers
    values that came from the URL, which ``persist_state`` alone drops.
    """
    for control in CONTROLS:
        if control.key in st.session_state:
            st.session_state[control.key] = st.session_state[control.key]


def _forget_url_problems() -> None:
    st.session_state.pop(_URL_PROBLEMS_KEY, None)


def _note_dropped_url_values(raw_url: dict[str, str | None], values: dict[str, Any]) -> None:
    """Record URL parameters that a widget dropped because they are invalid.

    Streamlit silently ignores a bound parameter it cannot parse or that lies
    outside the widget's bounds (``?d_in=0``, ``?d_k=abc``); a visitor who
    followed a link deserves to know why. The messages stay until the visitor
    changes a setting. Values a widget kept (text) are checked with the rest of
    the config instead.
    """
    problems = st.session_state.setdefault(_URL_PROBLEMS_KEY, {})
    by_key = {c.key: c for c in CONTROLS}
    for key, raw in raw_url.items():
        if raw is None or key not in values or str(values[key]) == raw:
            continue
        try:
            by_key[key].check_url_value(raw)
        except ConfigError as error:
            problems[key] = f"Ignored the link's {key}={raw!r}: {error}"


def _given_matrices(values: dict[str, Any]) -> dict[str, Any]:
    """Tables for the matrices the learner types in (embedding or weight_init
    "given"), drawn at the top of the page; returns them as config fields."""
    wanted = [f for option, fields in GIVEN_MATRICES.items()
              if values.get(option) == "given" for f in fields]
    if not wanted:
        return {}
    start = _starting_point(values)
    tokens = tokenize(values["sentence"])
    dims = [str(i) for i in range(values["d_in"])]
    shapes = {"embeddings": (tokens, values["d_in"]), "W_query": (dims, values["d_k"]),
              "W_key": (dims, values["d_k"]), "W_value": (dims, values["d_v"])}
    given = {}
    with st.expander("Your matrices: edit any cell and the heatmaps follow", expanded=True):
        # X on its own row, the weights side by side under it.
        for row in ([f for f in wanted if f == "embeddings"],
                    [f for f in wanted if f != "embeddings"]):
            for column, field in zip(st.columns(max(len(row), 1)), row):
                with column:
                    labels, n_cols = shapes[field]
                    st.markdown(f"**{_MATRIX_TITLES[field]}**")
                    given[field] = matrices.edit_matrix(field, _MATRIX_TITLES[field], labels,
                                                        n_cols, start.get(field, []))
    return given


def _starting_point(values: dict[str, Any]) -> dict[str, Any]:
    """The matrices a learner was looking at before switching to "given":
    the same config drawn with the table and randn recipes."""
    try:
        drawn = cached_trace(AttentionConfig(**{**values, "embedding": "table",
                                                "weight_init": "randn"}))
    except ConfigError:
        return {}
    return {name: drawn[name].tolist() for fields in GIVEN_MATRICES.values() for name in fields}
