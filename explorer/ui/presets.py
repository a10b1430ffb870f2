"""Loading a worked example's setup into the widgets, and the "matches the
numbers it prints" check shown while it is unchanged."""

from __future__ import annotations

import streamlit as st

from explorer.config import GIVEN_MATRICES, AttentionConfig, ConfigError, shown
from explorer.presets import PRESETS, Preset, check
from explorer.trace import Trace
from explorer.ui import matrices, urlstate
from explorer.ui.controls import widget_values
from explorer.ui.navigation import request_switch

PICKER_KEY = "_preset_picker"
_APPLIED_KEY = "_applied_preset"
_VIEW_KEY = "_preset_query"  # the query token a preset asks for, until the page reads it


def active() -> Preset | None:
    """The preset the visitor picked (by link, menu or gallery), if any."""
    return PRESETS.get(st.session_state.get(_APPLIED_KEY, ""))


def requested_query() -> int | None:
    """The query token the preset just applied looks at (read once)."""
    return st.session_state.pop(_VIEW_KEY, None)


def apply(preset: Preset | None) -> None:
    """Set every widget (and the given matrices) to ``preset``'s config and
    put it in the URL; ``None`` keeps the widgets and forgets the preset."""
    st.session_state[_APPLIED_KEY] = preset.slug if preset else ""
    st.session_state[PICKER_KEY] = preset.slug if preset else ""
    urlstate.set_param(urlstate.PRESET, preset.slug if preset else None)
    if preset is None:
        return
    st.session_state.update(widget_values(preset.config))
    for option, fields in GIVEN_MATRICES.items():
        if getattr(preset.config, option) == "given":
            for field in fields:
                matrices.set_matrix(field, getattr(preset.config, field))
    st.session_state[_VIEW_KEY] = preset.query


def apply_link_preset() -> None:
    """On a session's first run, apply ``?preset=`` before the widgets are
    drawn; the link's explicit settings then override it (Streamlit seeds
    the widgets from the URL). A bad slug gets a message."""
    if _APPLIED_KEY in st.session_state:
        return
    slug = urlstate.param(urlstate.PRESET)
    if slug is None or slug in PRESETS:
        apply(PRESETS.get(slug))
        if urlstate.param(urlstate.QUERY) is not None:  # the link's own query wins
            st.session_state.pop(_VIEW_KEY, None)
        return
    urlstate.note(urlstate.PRESET, slug, ConfigError(
        urlstate.PRESET, f"preset must be one of {', '.join(PRESETS)} (got {shown(slug)})"))
    apply(None)


def _picked(page: str) -> None:
    preset = PRESETS.get(st.session_state[PICKER_KEY])
    apply(preset)
    urlstate.forget_problems()
    if preset is not None and preset.page != page:
        request_switch(preset.page)


def picker(page: str) -> Preset | None:
    """The sidebar's preset picker, named as the Home gallery names them;
    picking one loads it and opens its page. Returns the active preset."""
    st.session_state.setdefault(PICKER_KEY, st.session_state.get(_APPLIED_KEY, ""))
    st.selectbox("Start from a worked example", ["", *PRESETS], key=PICKER_KEY,
                 format_func=lambda slug: PRESETS[slug].title if slug else "none",
                 on_change=_picked, args=(page,),
                 help="Sets every setting to a book or notebook example; change anything "
                      "afterwards. While it is unchanged, the page checks the numbers it prints.")
    preset = active()
    if preset:
        st.caption(f"From {preset.source}.")
    return preset


def show_check(preset: Preset | None, config: AttentionConfig, trace: Trace,
               page: str) -> None:
    """The check: ✓ or ✗ with the largest difference while the setup is the
    preset's; otherwise say that the printed numbers no longer apply."""
    if preset is None:
        return
    if config != preset.config:
        where = f" It belongs on the **{preset.page}** page." if page != preset.page else ""
        st.info(f"You have changed the setup of “{preset.title}”, so the numbers "
                f"{preset.source} prints no longer apply.{where}")
        st.button("Reset to the example's setup", on_click=apply, args=(preset,))
        return
    result = check(preset, trace)
    summary = (f"{result.n_values} printed numbers, largest difference "
               f"{result.max_difference:.1e} (in {result.worst})")
    if result.ok:
        st.success(f"✓ Matches the numbers printed in {preset.source}: {summary}.")
    else:
        st.error(f"✗ Differs from the numbers printed in {preset.source}: {summary}.")


def _open(preset: Preset) -> None:
    apply(preset)
    request_switch(preset.page)


def gallery() -> None:
    """Every preset with its source, what it shows, and a button that loads it
    and opens its page."""
    for preset in PRESETS.values():
        text, button = st.columns([5, 1], vertical_alignment="center")
        text.markdown(f"**{preset.title}** · {preset.page}  \n{preset.description}  \n"
                      f":gray[From {preset.source}.]")
        button.button("Open", key=f"open-preset-{preset.slug}", on_click=_open, args=(preset,),
                      width="stretch")
