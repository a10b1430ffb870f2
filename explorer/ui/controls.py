"""The shared sidebar: widgets whose keys are the `AttentionConfig` field names.

Each widget's key is also its URL query parameter (``bind="query-params"``), so
``?sentence=...&d_in=4`` reproduces a view. Values persist across pages
(``persist_state="session"``). Defaults and bounds come from `explorer.config`.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable

import streamlit as st

from explorer import config as cfg
from explorer.config import AttentionConfig, ConfigError, parse_field
from explorer.ui.text import plain

DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(AttentionConfig)}
"""Widget defaults: the dataclass defaults, one place."""

URL_PROBLEMS_KEY = "_url_problems"

PAGES: tuple[tuple[str, str, str], ...] = (
    ("streamlit_app.py", "Home", ":material/home:"),
    ("pages/1_Simplified_attention.py", "Simplified attention", ":material/looks_one:"),
    ("pages/2_Self_attention.py", "Self-attention", ":material/looks_two:"),
)
"""The app's pages (path, label, icon), in menu order."""


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


def url_params(values: dict[str, Any]) -> dict[str, str]:
    """The settings that differ from their defaults, as URL query parameters."""
    return {key: str(value) for key, value in values.items() if value != DEFAULTS[key]
            and str(value) != str(DEFAULTS[key])}


def _page_menu() -> None:
    """Links to every page (the settings travel in session state)."""
    for path, label, icon in PAGES:
        st.page_link(path, label=label, icon=icon)


def _share_link(values: dict[str, Any]) -> None:
    """The URL that reproduces this view, with a copy button."""
    query = urllib.parse.urlencode(url_params(values))
    st.caption("Link to this view:")
    st.code(f"{st.context.url or ''}{'?' + query if query else ''}", language=None,
            wrap_lines=True)


def _keep_across_pages(controls: tuple[Control, ...]) -> None:
    """Carry the settings over to the page being opened.

    Each page registers its own copy of the sidebar widgets. Re-assigning the
    values under their keys before the widgets are drawn is Streamlit's
    documented way to keep them when the visitor switches pages; it also covers
    values that came from the URL, which ``persist_state`` alone drops.
    """
    for control in controls:
        if control.key in st.session_state:
            st.session_state[control.key] = st.session_state[control.key]


def _note_dropped_url_values(raw_url: dict[str, str | None], values: dict[str, Any]) -> None:
    """Record URL parameters that a widget dropped because the backend rejects them.

    Streamlit silently ignores a bound parameter it cannot parse or that lies
    outside the widget's bounds (``?d_in=0``, ``?d_k=abc``); a visitor who
    followed a link deserves to know why. The messages stay until the visitor
    changes a setting. Values a widget kept (text) are checked with the rest of
    the config instead.
    """
    problems = st.session_state.setdefault(URL_PROBLEMS_KEY, {})
    for key, raw in raw_url.items():
        if raw is None or str(values[key]) == raw:
            continue
        try:
            parse_field(key, raw)
        except ConfigError as error:
            problems[key] = f"Ignored the link's {key}={raw!r}: {error}"


SIMPLIFIED = {"weight_init": "identity", "scale": False}
"""Simplified attention (seeds 000, 001, 003): no trainable weights, no scaling."""


def sidebar(simplified: bool = False) -> AttentionConfig | None:
    """Draw the shared sidebar and return the chosen `AttentionConfig`.

    ``simplified`` fixes `SIMPLIFIED` and d_k = d_v = d_in (Q = K = V = X). On
    invalid input shows ``st.error`` with the backend's message and returns
    None; the sidebar stays usable.
    """
    raw_url = {c.key: st.query_params.get(c.key) for c in SIDEBAR_CONTROLS}
    _keep_across_pages(SIDEBAR_CONTROLS)
    with st.sidebar:
        _page_menu()
        st.header("Settings")
        values = {c.key: c.draw(c) for c in SIDEBAR_CONTROLS}
        _share_link(values)
    _note_dropped_url_values(raw_url, values)
    for message in st.session_state.get(URL_PROBLEMS_KEY, {}).values():
        st.error(plain(message))
    if simplified:
        values.update(SIMPLIFIED, d_k=values["d_in"], d_v=values["d_in"])
    try:
        return AttentionConfig(**values)
    except ConfigError as error:
        st.error(plain(str(error)))
        return None
