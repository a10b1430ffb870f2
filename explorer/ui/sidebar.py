"""The shared settings every page starts with: `settings()` returns the `View`
a page draws."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st

from explorer import figures, literal
from explorer.config import GIVEN_MATRICES, AttentionConfig, ConfigError
from explorer.presets import SIMPLIFIED, Preset
from explorer.tokenizer import tokenize
from explorer.trace import Trace
from explorer.ui import controls, downloads, matrices, presets, urlstate
from explorer.ui.cache import cached_trace
from explorer.ui.controls import ADVANCED, BASIC, Control
from explorer.ui.navigation import follow_requested_switch, page_menu

VIEW_KEYS = (urlstate.QUERY, urlstate.HEAD)
"""Session keys of the view pickers, which keep their values across pages too."""
_MATRIX_TITLES = {"embeddings": "X, the embeddings", "W_query": "W_query", "W_key": "W_key",
                  "W_value": "W_value"}


@dataclass(frozen=True)
class View:
    """What a page draws. ``before_heads_only``: ``n_heads`` was rejected, so
    the trace is the single-head one and only the steps before the head split
    are the visitor's."""

    config: AttentionConfig
    trace: Trace
    preset: Preset | None
    before_heads_only: bool = False


def settings(page: str, simplified: bool = False, extra: tuple[Control, ...] = (),
             view: tuple[str, ...] = (),
             view_checks: Mapping[str, Callable[[str], Any]] | None = None) -> View | None:
    """Draw the shared settings and return the `View` to draw, or None.

    The sidebar holds the page menu, the worked-example picker, this page's own
    settings (``extra``, e.g. `controls.MULTI_HEAD`) at the top, the basic and
    advanced settings, the link to this view and the downloads. The main area
    gets the messages about the input, the tables of hand-entered matrices and,
    for an unchanged example, its check. ``simplified`` fixes `SIMPLIFIED` and
    d_k = d_v = d_in (Q = K = V = X) and hides those settings. ``view`` names the
    page's view parameters (`urlstate.QUERY`, `urlstate.HEAD`,
    `urlstate.EXPERIMENT`) for the link; ``view_checks`` checks a link's value
    of a parameter the page binds itself (raising `ConfigError`).
    Invalid input gets ``st.error`` with the backend's message and no charts
    (None), except a bad ``n_heads``, which keeps the steps before the split.
    """
    urlstate.clean({**{c.key: c.check_url_value for c in controls.ALL}, **(view_checks or {})})
    messages = st.container()
    keep_across_pages()
    presets.apply_link_preset()
    matrices.apply_link_matrices()
    with st.sidebar:
        page_menu()
        preset = presets.picker(page)
        base = controls.baseline(page, preset.config if preset else None)
        values: dict[str, Any] = {}
        if extra:
            st.header(page)
            values.update(_draw(extra, base))
        st.header("Settings")
        hidden = ("d_k", "d_v") if simplified else ()
        values.update(_draw([c for c in BASIC if c.key not in hidden], base))
        with st.expander("Advanced: the recipes", expanded=False):
            values.update(_draw([c for c in ADVANCED
                                 if not (simplified and c.key in SIMPLIFIED)], base))
            if simplified:
                st.caption("Fixed on this page: weight_init = identity (Q = K = V = X), "
                           "no scaling, d_k = d_v = d_in.")
        link_box = st.container()
    follow_requested_switch(preset)
    if simplified:
        values.update(SIMPLIFIED, d_k=values["d_in"], d_v=values["d_in"])
    fields = {c.key: c.to_config(values[c.key]) for c in controls.ALL if c.key in values}
    given, starts = _given_matrices(values, preset)
    with link_box:
        link = _share_link(page, values, base, preset, given, starts, view)
    try:
        config, before_heads_only = _config({**fields, **given})
        trace = cached_trace(config)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        show_problems(messages)
        return None
    check_link_view(trace, view)
    show_problems(messages)
    with st.sidebar:
        downloads.take_it_with_you(trace, link)
    presets.show_check(preset, config, trace, page)
    return View(config, trace, preset, before_heads_only)


def show_problems(container) -> None:
    with container:
        for message in urlstate.problems().values():
            st.error(literal.markdown(message))


_VIEW_CHECKED_KEY = "_link_view_checked"


def check_link_view(trace: Trace, view: tuple[str, ...]) -> None:
    """On a session's first run, check the link's view against the trace: a
    ``query`` below the token count, a ``head`` below n_heads and a ``cell``
    inside its step. A bad one is noted and dropped; a good ``cell`` becomes
    the explained cell."""
    if st.session_state.get(_VIEW_CHECKED_KEY):
        return
    st.session_state[_VIEW_CHECKED_KEY] = True
    sizes = {urlstate.QUERY: trace.n_tokens, urlstate.HEAD: trace.config.n_heads}
    for key in (urlstate.QUERY, urlstate.HEAD):
        if key in view and (raw := urlstate.param(key)) is not None:
            try:
                urlstate.index(key, raw, sizes[key])
            except ConfigError as error:
                urlstate.note(key, raw, error)
                urlstate.set_param(key, None)
    if (raw := urlstate.param(urlstate.CELL)) is None:
        return
    try:
        step, row, col = urlstate.cell(raw)
        if step not in trace:
            raise ConfigError(urlstate.CELL, f"this page has no step {step}")
        head = int(urlstate.param(urlstate.HEAD) or 0)
        matrix = figures.step_matrix(trace, step, min(head, trace.config.n_heads - 1),
                                     dtype=np.float32)
        urlstate.index(urlstate.CELL, str(row), matrix.shape[0])
        urlstate.index(urlstate.CELL, str(col), matrix.shape[1])
        st.session_state[urlstate.CELL] = (step, row, col, head)
    except ConfigError as error:
        urlstate.note(urlstate.CELL, raw, error)
        urlstate.set_param(urlstate.CELL, None)


def _draw(shown: list[Control] | tuple[Control, ...], base: dict[str, Any]) -> dict[str, Any]:
    return {c.key: c.draw(c, base[c.key], urlstate.forget_problems) for c in shown}


def _config(fields: dict[str, Any]) -> tuple[AttentionConfig, bool]:
    """The config of ``fields``; if only ``n_heads`` is wrong, say so and fall
    back to one head (returning True), so the steps before the split still show."""
    try:
        return AttentionConfig(**fields), False
    except ConfigError as error:
        if error.field != "n_heads":
            raise
        st.error(literal.markdown(str(error)) + " The steps before the head split are "
                 "shown below with one head.")
        return AttentionConfig(**{**fields, "n_heads": 1}), True


def keep_across_pages() -> None:
    """Carry the settings over to the page being opened.

    Each page registers its own copy of the sidebar widgets. Re-assigning the
    values under their keys before the widgets are drawn is Streamlit's
    documented way to keep them when the visitor switches pages; it also covers
    values that came from the URL, which ``persist_state`` alone drops.
    """
    for key in (*controls.BY_KEY, presets.PICKER_KEY, *VIEW_KEYS):
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def _share_link(page: str, values: dict[str, Any], base: dict[str, Any],
                preset: Preset | None, given: dict[str, Any], starts: dict[str, Any],
                view: tuple[str, ...]) -> str:
    """The link that reproduces this view: the preset, every setting that
    differs from the baseline, the view state and the edited matrices if they
    fit. Collapsed, with Streamlit's copy button. Returns it (the downloads
    write it into the script and the report)."""
    params: dict[str, Any] = {urlstate.PRESET: preset.slug} if preset else {}
    params.update({key: value for key, value in values.items()
                   if key in controls.BY_KEY and urlstate.url_value(value)
                   != urlstate.url_value(base[key])})
    params.update(urlstate.view_params(view))
    edited = {name: m for name, m in given.items() if not _same_numbers(m, starts.get(name))}
    encoded, length = urlstate.matrix_params(edited)
    params.update(encoded)
    note = None
    if edited and not encoded:
        note = (f"The link leaves out your hand-edited matrices ({length:,} characters; "
                f"a link carries up to {urlstate.MAX_LINK_MATRIX_CHARS:,}). Download "
                "them as JSON instead.")
    return urlstate.link_box(params, note)


def _same_numbers(a: Any, b: Any) -> bool:
    """Whether two matrices hold the same float32 numbers (None never matches)."""
    if a is None or b is None:
        return False
    try:
        return np.array_equal(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
    except (TypeError, ValueError):  # an empty or unfinished cell
        return False


def _given_matrices(values: dict[str, Any],
                    preset: Preset | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tables for the matrices the learner types in (embedding or weight_init
    "given"), drawn at the top of the page. Returns the matrices as config
    fields, and where each table started (the preset's, or the numbers the
    recipes drew), which a link need not repeat."""
    wanted = [f for option, fields in GIVEN_MATRICES.items()
              if values.get(option) == "given" for f in fields]
    if not wanted:
        return {}, {}
    starts = _starting_point(values, preset)
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
                                                        n_cols, starts.get(field, []))
    return given, starts


def _starting_point(values: dict[str, Any], preset: Preset | None) -> dict[str, Any]:
    """The matrices a table starts from: the active preset's where it gives
    them, else the numbers a learner was looking at before switching to
    "given" (the same config drawn with the table and randn recipes)."""
    starts: dict[str, Any] = {}
    try:
        fields = {c.key: c.to_config(values[c.key]) for c in controls.ALL if c.key in values}
        drawn = cached_trace(AttentionConfig(**{**fields, "embedding": "table",
                                                "weight_init": "randn", "n_heads": 1}))
        starts = {name: drawn[name].tolist() for name in urlstate.MATRICES}
    except ConfigError:
        pass
    if preset is not None:
        starts.update({name: getattr(preset.config, name) for name in urlstate.MATRICES
                       if getattr(preset.config, name) is not None})
    return starts
