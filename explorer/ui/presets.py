"""Loading a seed notebook's setup into the widgets, and the "matches the
notebook" check shown while it is unchanged."""

from __future__ import annotations

import streamlit as st

from explorer.config import GIVEN_MATRICES, AttentionConfig, ConfigError
from explorer.presets import PRESETS, Preset, check
from explorer.trace import Trace
from explorer.ui import matrices
from explorer.ui.controls import ADVANCED, BASIC, MULTI_HEAD, Control, widget_args
from explorer.ui.navigation import request_switch
from explorer.ui.render import QUERY_KEY

PRESET_KEY = "preset"  # widget key and URL parameter: ?preset=journey
_APPLIED_KEY = "_applied_preset"


def _parse(raw: str) -> str:
    if raw not in PRESETS:
        raise ConfigError(PRESET_KEY, f"preset must be one of {', '.join(PRESETS)} (got {raw!r})")
    return raw


def _draw(control: Control, on_change) -> str:
    return st.selectbox(options=["", *PRESETS], format_func=lambda slug: slug or "none",
                        **widget_args(control, on_change))


PRESET_CONTROL = Control(
    PRESET_KEY, "Load a notebook's setup",
    "Sets every widget to reproduce one of the seed notebooks; change anything afterwards.",
    _draw, parse=_parse, widget_default="")


def apply(preset: Preset) -> None:
    """Set every widget (and the given matrices) to ``preset``'s config."""
    config = preset.config
    for control in (*BASIC, *ADVANCED):
        value = getattr(config, control.key)
        st.session_state[control.key] = str(value) if control.key == "seed" else value
    for control in MULTI_HEAD:  # every notebook is single-head, not causal, no dropout
        st.session_state[control.key] = control.default
    for option, fields in GIVEN_MATRICES.items():
        if getattr(config, option) == "given":
            for field in fields:
                matrices.set_matrix(field, getattr(config, field))
    st.session_state[QUERY_KEY] = preset.query
    st.session_state[_APPLIED_KEY] = preset.slug


def apply_if_new() -> None:
    """Apply the preset picked (in the widget, or in the URL on first load) if it
    has not been applied yet. Runs before the widgets are drawn."""
    slug = st.session_state.get(PRESET_KEY, st.query_params.get(PRESET_KEY, ""))
    if slug != st.session_state.get(_APPLIED_KEY, ""):
        st.session_state[_APPLIED_KEY] = slug
        if slug in PRESETS:
            apply(PRESETS[slug])


def picker(on_change) -> Preset | None:
    """The sidebar's preset picker; returns the chosen preset, if any."""
    slug = PRESET_CONTROL.draw(PRESET_CONTROL, on_change)
    preset = PRESETS.get(slug)
    if preset:
        st.caption(f"**{preset.title}** (`{preset.seed_file}`): {preset.description}")
    return preset


def show_check(preset: Preset | None, config: AttentionConfig, trace: Trace,
               page: str) -> None:
    """The notebook check: ✓ or ✗ with the largest difference while the setup
    is the preset's; otherwise say why there is no check."""
    if preset is None:
        return
    if config != preset.config:
        where = (f" It belongs on the **{preset.page}** page." if page != preset.page else "")
        st.info(f"You have changed the setup of “{preset.title}”, so the numbers "
                f"`{preset.seed_file}` prints no longer apply.{where}")
        st.button("Reset to the notebook's setup", on_click=apply, args=(preset,))
        return
    result = check(preset, trace)
    summary = (f"{result.n_values} printed numbers, largest difference "
               f"{result.max_difference:.1e} ({result.worst})")
    if result.ok:
        st.success(f"✓ Matches the notebook `{preset.seed_file}`: {summary}.")
    else:
        st.error(f"✗ Differs from the notebook `{preset.seed_file}`: {summary}.")


def _open(preset: Preset) -> None:
    st.session_state[PRESET_KEY] = preset.slug
    request_switch(preset.page)


def gallery() -> None:
    """Every preset with its notebook, what it shows, and a button that loads it
    and opens its page."""
    for preset in PRESETS.values():
        text, button = st.columns([5, 1], vertical_alignment="center")
        text.markdown(f"**{preset.title}** · `{preset.seed_file}` · {preset.page}  \n"
                      f"{preset.description}")
        button.button("Open", key=f"open-preset-{preset.slug}", on_click=_open, args=(preset,),
                      width="stretch")
