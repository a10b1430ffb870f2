"""Two short lessons on the attention pages: the normalisations compared, and
why the stable softmax subtracts the row max."""

from __future__ import annotations

import streamlit as st
import torch

from explorer import figures
from explorer.config import OPTION_HELP, AttentionConfig
from explorer.trace import Trace
from explorer.ui import chart
from explorer.ui.cache import cached_trace
from explorer.ui.render import number_table


def normalization_comparison(config: AttentionConfig, query: int) -> None:
    """Seed 001's question: the same scores turned into weights three ways."""
    traces = {name: cached_trace(config.replace(normalization=name))
              for name in OPTION_HELP["normalization"]}
    number_table(figures.normalization_table(traces, query))
    st.caption(" · ".join(f"**{name}**: {text}" for name, text in
                          OPTION_HELP["normalization"].items()))


OVERFLOW_FACTORS = (1, 2, 5, 10, 20, 50)
"""Multipliers of X offered by the overflow demo (scores grow with their square)."""


OVERFLOW_KEY = "overflow_demo"


def softmax_overflow(trace: Trace) -> None:
    """Why the stable softmax subtracts the row max: multiply X until exp()
    overflows, and compare the naive and the stable weights. Drawn only while
    the learner has it open (it recomputes two traces)."""
    weights = trace["attn_weights"]
    broken = not bool(torch.isfinite(weights).all())
    if broken:
        st.warning("Some attention weights are NaN or infinite: the naive softmax overflowed. "
                   "The section below shows why.")
    st.session_state.setdefault(OVERFLOW_KEY, broken or
                                trace.config.normalization == "naive_softmax")
    if not st.toggle("Why softmax subtracts the row max: watch the naive softmax overflow",
                     key=OVERFLOW_KEY):
        return
    with st.container(border=True):
        st.markdown(
            "In float32, `exp(x)` is infinite once x passes about 88.7, and ∞/∞ is NaN. "
            "The naive softmax `exp(x) / exp(x).sum()` breaks there. The stable softmax "
            "first subtracts each row's maximum m: `exp(x − m) / Σ exp(x − m)` is the same "
            "number (the factor exp(−m) cancels), but every exponent is now ≤ 0, so "
            "nothing overflows. Multiply the embeddings X by c: the scores grow like c².")
        factor = st.select_slider("c: multiply X by", OVERFLOW_FACTORS, value=1,
                                  key="overflow_factor")
        scaled_x = trace["embeddings"] * factor
        base = trace.config.replace(embedding="given", embeddings=scaled_x)
        naive = cached_trace(base.replace(normalization="naive_softmax"))
        stable = cached_trace(base.replace(normalization="softmax"))
        largest = float(naive["scaled_scores"].abs().max())
        st.markdown(f"Largest |score| after scaling: **{largest:,.1f}**")
        left, right = st.columns(2)
        for column, name, shown in ((left, "naive softmax", naive), (right, "softmax", stable)):
            with column:
                chart.show(figures.heatmap_chart(shown, "attn_weights", columns=2,
                                                 title=f"{name}, X × {factor}"),
                           key=f"overflow-demo-{name.replace(' ', '-')}")
