"""The shared sidebar: widgets whose keys are the `AttentionConfig` field names.

Each widget's key is also its URL query parameter (``bind="query-params"``), so
``?sentence=...&d_in=4`` reproduces a view. Values persist across pages
(``persist_state="session"``). Defaults and bounds come from `explorer.config`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import streamlit as st

from explorer import config as cfg
from explorer.config import AttentionConfig, ConfigError, parse_field
from explorer.ui.text import plain

DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(AttentionConfig)}
"""Widget defaults: the dataclass defaults, one place."""

URL_PROBLEMS_KEY = "_url_problems"


@dataclass(frozen=True)
class Control:
    """One sidebar widget. ``key`` is the config field, the widget key and the URL
    parameter; ``draw(control)`` renders it and returns its value."""

    key: str
    label: str
    help: str
    draw: Callable[["Control"], Any]


def _widget_args(control: Control) -> dict[str, Any]:
    return {"label": control.label, "key": control.key, "help": control.help,
            "bind": "query-params", "persist_state": "session",
            "on_change": _forget_url_problems}


def _text(control: Control) -> str:
    return st.text_input(value=DEFAULTS[control.key], max_chars=cfg.MAX_SENTENCE_CHARS,
                         **_widget_args(control))


def _dim(control: Control) -> int:
    return st.number_input(min_value=cfg.MIN_DIM, max_value=cfg.MAX_DIM, step=1,
                           value=DEFAULTS[control.key], **_widget_args(control))


def _seed(control: Control) -> str:
    # A text box, not a number box: seeds go up to 2**63 - 1, past what a
    # browser number input holds exactly. The backend parses and checks it.
    return st.text_input(value=str(DEFAULTS[control.key]), **_widget_args(control))


SIDEBAR_CONTROLS: tuple[Control, ...] = (
    Control("sentence", "Sentence",
            "Split on whitespace; punctuation at word ends is stripped; "
            f"{cfg.MIN_TOKENS} to {cfg.MAX_TOKENS} tokens.", _text),
    Control("d_in", "d_in: embedding dim", "Width of each token's embedding vector x_i.", _dim),
    Control("d_k", "d_k: query/key dim", "Width of the queries and keys (W_query, W_key).", _dim),
    Control("d_v", "d_v: value dim", "Width of the values and context vectors (W_value).", _dim),
    Control("seed", "seed", f"Seeds a local torch.Generator; {cfg.MIN_SEED} to {cfg.MAX_SEED}. "
            "The same seed gives the book's numbers.", _seed),
)


def _forget_url_problems() -> None:
    st.session_state.pop(URL_PROBLEMS_KEY, None)


def _check_url(controls: tuple[Control, ...]) -> None:
    """Record, before the widgets read them, URL parameters the backend rejects.

    Streamlit silently drops a bound parameter it cannot parse or that lies
    outside the widget's bounds; a visitor who followed a link deserves to know.
    The messages stay until the visitor changes a setting.
    """
    problems = st.session_state.setdefault(URL_PROBLEMS_KEY, {})
    for control in controls:
        raw = st.query_params.get(control.key)
        if raw is None:
            continue
        try:
            parse_field(control.key, raw)
        except ConfigError as error:
            problems[control.key] = f"URL parameter ignored: {error}"


SIMPLIFIED = {"weight_init": "identity", "scale": False}
"""Simplified attention (seeds 000, 001, 003): no trainable weights, no scaling."""


def sidebar(simplified: bool = False) -> AttentionConfig | None:
    """Draw the shared sidebar and return the chosen `AttentionConfig`.

    ``simplified`` fixes `SIMPLIFIED` and d_k = d_v = d_in (Q = K = V = X). On
    invalid input shows ``st.error`` with the backend's message and returns
    None; the sidebar stays usable.
    """
    _check_url(SIDEBAR_CONTROLS)
    with st.sidebar:
        st.header("Settings")
        values = {c.key: c.draw(c) for c in SIDEBAR_CONTROLS}
        st.caption("Every setting is in the page URL: copy it to share this exact view.")
    for message in st.session_state.get(URL_PROBLEMS_KEY, {}).values():
        st.error(plain(message))
    if simplified:
        values.update(SIMPLIFIED, d_k=values["d_in"], d_v=values["d_in"])
    try:
        return AttentionConfig(**values)
    except ConfigError as error:
        st.error(plain(str(error)))
        return None
