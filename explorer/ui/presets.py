"""The worked examples in the UI: the sidebar's picker, the Home page's gallery,
and the "matches the numbers it prints" check shown while an example is
unchanged. Loading one is `explorer.ui.state.apply_preset`."""

from __future__ import annotations

import streamlit as st

from explorer.lessons.presets import PRESETS, check
from explorer.ui import state, widgets


def _picked(page: str) -> None:
    """The picker's callback: load the example and open its page."""
    preset = state.active_preset()
    state.apply_preset(preset)
    state.changed()
    if preset is not None and preset.page != page:
        state.request_switch(preset.page)


def picker(page: str) -> None:
    """The sidebar's worked-example picker, named as the Home gallery names
    them; picking one loads it and opens its page."""
    widgets.draw("preset", on_change=_picked, args=(page,),
                 format_func=lambda slug: PRESETS[slug].title if slug else "none")
    if preset := state.active_preset():
        st.caption(f"From {preset.source}.")


def show_check(view: state.View) -> None:
    """✓ or ✗ with the largest difference while the setup is the worked
    example's; otherwise say that the printed numbers no longer apply."""
    preset = view.preset
    if preset is None:
        return
    if view.config != preset.config:
        where = (f" It belongs on the **{preset.page}** page." if view.page != preset.page
                 else "")
        st.info(f"You have changed the setup of “{preset.title}”, so the numbers "
                f"{preset.source} prints no longer apply.{where}")
        st.button("Reset to the example's setup", key="reset-preset",
                  on_click=state.apply_preset, args=(preset,))
        return
    result = check(preset, view.trace)
    summary = (f"{result.n_values} printed numbers, largest difference "
               f"{result.max_abs_diff:.1e} (in {result.where})")
    if result.ok:
        st.success(f"✓ Matches the numbers printed in {preset.source}: {summary}.")
    else:
        st.error(f"✗ Differs from the numbers printed in {preset.source}: {summary}.")


def _open(slug: str) -> None:
    preset = PRESETS[slug]
    state.apply_preset(preset)
    state.request_switch(preset.page)


def gallery() -> None:
    """Every worked example with its source, what it shows, and a button that
    loads it and opens its page."""
    for preset in PRESETS.values():
        text, button = st.columns([5, 1], vertical_alignment="center")
        text.markdown(f"**{preset.title}** · {preset.page}  \n{preset.description}  \n"
                      f":gray[From {preset.source}.]")
        button.button("Open", key=f"open-{preset.slug}", on_click=_open, args=(preset.slug,),
                      width="stretch")
