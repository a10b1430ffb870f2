"""The widgets of the declared entries (`explorer.ui.state.ENTRIES`).

`draw(name)` draws entry ``name``'s widget and returns its value. Its key,
label, help, bounds and choices come from the entry; its value is already in
the session (`explorer.ui.state.settings` and `~explorer.ui.state.resolve`
put it there before anything is drawn), so no widget is given ``value=``.
Every widget's ``on_change`` is `explorer.ui.state.changed` unless the caller
passes its own callback (which only sets state).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from explorer.core.config import OPTION_HELP
from explorer.ui import state
from explorer.ui.state import ENTRIES, Choice, Flag, Fraction, Number, Steps, Text

MAX_BUTTONS = 16
"""Up to this many choices (heads, layers) an index picker is a row of buttons;
beyond, a drop-down."""


def draw(name: str, *, on_change: Callable[..., None] | None = None, args: tuple = (),
         options: Sequence[Any] | None = None, format_func: Callable[[Any], str] | None = None,
         style: str = "select", **more: Any) -> Any:
    """Draw entry ``name``'s widget and return its value.

    ``options`` replaces a choice's or a number's declared options (the steps
    a page shows, the key counts of an experiment); ``style`` draws a choice
    as ``"select"`` (a drop-down), ``"radio"`` or ``"segmented"`` (buttons),
    and text as ``"area"`` (several lines).
    ``more`` goes to the Streamlit widget (``label``, ``help`` override the
    entry's)."""
    entry = _with_value(name)
    kind = entry.kind
    common = {"label": more.pop("label", entry.label), "key": name,
              "help": more.pop("help", entry.help) or None,
              "on_change": on_change or state.changed, "args": args, **more}
    return _guarded(name, common["label"], lambda: _widget(name, kind, common, options,
                                                          format_func, style))


def _widget(name: str, kind: Any, common: dict[str, Any], options: Sequence[Any] | None,
            format_func: Callable[[Any], str] | None, style: str) -> Any:
    """Entry ``name``'s Streamlit widget (see `draw`)."""
    if isinstance(kind, (Number, Steps)) and (options is not None or isinstance(kind, Steps)):
        shown = list(kind.options if options is None else options)
        return st.select_slider(options=shown, format_func=format_func or _number, **common)
    if isinstance(kind, Number):
        low, high = kind.bounds
        return st.number_input(min_value=low, max_value=high, step=kind.step, **common)
    # No max_chars: the browser would drop a longer paste without a word. The text
    # arrives whole, and the kind's field check says how long it may be.
    if isinstance(kind, Text) and style == "area":
        return st.text_area(placeholder=kind.placeholder, **common)
    if isinstance(kind, Text):
        return st.text_input(placeholder=kind.placeholder, **common)
    if isinstance(kind, Flag):
        return st.toggle(**common)
    if isinstance(kind, Fraction):
        return st.slider(min_value=0.0, max_value=kind.high, step=kind.step, **common)
    if isinstance(kind, Choice):
        shown = list(kind.options if options is None else options)
        label = format_func or kind.label
        if style == "radio":
            return st.radio(options=shown, format_func=label, horizontal=True, **common)
        if style == "segmented":
            return st.segmented_control(options=shown, format_func=label, required=True,
                                        **common)
        return st.selectbox(options=shown, format_func=label, **common)
    raise LookupError(f"{name} has no widget of its own")


FORGED = (TypeError, ValueError, IndexError, KeyError, OverflowError)
"""What Streamlit raises reading a widget value no browser of this page sends
(text for a number, an index past the options): a forged message."""


def _guarded(name: str, label: str, widget: Callable[[], Any]) -> Any:
    """``widget()``; when the value the session holds for it cannot be read
    (`FORGED`), forget that value, say so at the top of the page and run the
    page again from the entry's own value (issue 41: a forged value on the
    Modern page raised a TypeError). Once: if the next run cannot read it
    either, the error is raised."""
    try:
        return widget()
    except FORGED as error:
        message = (f"Ignored a value for “{label}” that this page never sends "
                   f"({type(error).__name__}); it is back to its default.")
        if state.problems().get(name) == message:  # forgetting it did not help
            raise
        state.problems()[name] = message
        try:
            del st.session_state[name]
        except (KeyError, *FORGED):
            pass
        st.rerun()


def _with_value(name: str) -> state.Entry:
    """Entry ``name``, whose value the page has put into the session
    (`state.settings`, `state.resolve`). Raises ``LookupError`` otherwise: the
    entry is not declared for the page (`Entry.pages`), so its widget would
    start from Streamlit's own default instead of the declared one."""
    if name not in st.session_state:
        raise LookupError(f"{name} has no value on this page: declare the page in "
                          f"explorer.ui.state.ENTRIES[{name!r}].pages")
    return ENTRIES[name]


def _number(value: Any) -> str:
    return f"{value:g}"


def index(name: str, count: int, word: str, *, labels: Sequence[str] | None = None,
          none: str | None = None, buttons: bool = True, **more: Any) -> int | None:
    """Pick one of ``count`` things (an `explorer.ui.state.Index` entry: a head,
    a layer, a query token), 0-based: a row of buttons up to `MAX_BUTTONS`
    (with ``buttons``), else a drop-down. ``labels`` name them (default
    ``"<word> <i>"``); ``none`` offers no choice under that label."""
    entry = _with_value(name)
    names = list(labels) if labels is not None else [f"{word} {i}" for i in range(count)]
    options: list[int | None] = ([None] if none is not None else []) + list(range(count))
    common = {"label": more.pop("label", entry.label), "key": name,
              "help": more.pop("help", entry.help) or None,
              "format_func": lambda i: none if i is None else names[i],
              "on_change": more.pop("on_change", state.changed), **more}
    if buttons and none is None and count <= MAX_BUTTONS:
        return _guarded(name, common["label"], lambda: st.segmented_control(
            options=options, required=True, **common))
    return _guarded(name, common["label"], lambda: st.selectbox(options=options,
                                                                placeholder=none, **common))


def group(page: str, which: str, values: dict[str, Any],
          on_change: dict[str, Callable[..., None]] | None = None) -> dict[str, Any]:
    """Draw ``page``'s entries of group ``which`` (e.g. `state.BASIC`) whose
    ``shown_if`` holds for ``values`` (the page's settings), in declaration
    order, and return their values. ``on_change`` gives some entries their own
    callback (it receives the entry's name)."""
    out = {}
    for entry in state.entries_of(page, which):
        if entry.shown_if is not None and not entry.shown_if(values):
            continue
        callback = (on_change or {}).get(entry.name)
        out[entry.name] = draw(entry.name, on_change=callback,
                               args=(entry.name,) if callback else ())
        if entry.config and entry.name in OPTION_HELP:  # a recipe: say what the choice does
            st.caption(f"`{out[entry.name]}`: {OPTION_HELP[entry.name][out[entry.name]]}")
    return out
