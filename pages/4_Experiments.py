"""Experiments: why √d_k, temperature, softmax's dim, permutation, compare."""

import streamlit as st

from explorer.presets import EXPERIMENTS_PAGE
from explorer.ui import experiments
from explorer.ui.render import page_header
from explorer.ui.sidebar import settings

page_header(
    EXPERIMENTS_PAGE,
    "Poke at attention and watch what changes. Each tab asks one question learners ask "
    "most, using the sentence and sizes from the sidebar.",
)
view = settings(EXPERIMENTS_PAGE)
if view is not None:
    tabs = st.tabs(["Why divide by √d_k", "Temperature", "softmax dim & keepdim",
                    "Permutation", "Compare two configurations"])
    for tab, experiment in zip(tabs, (experiments.why_scale, experiments.temperature,
                                      experiments.softmax_dim, experiments.permutation,
                                      experiments.compare)):
        with tab:
            experiment(view.trace)
