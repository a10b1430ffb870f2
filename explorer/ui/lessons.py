"""Two short lessons on the attention pages: the normalisations compared, and
why the stable softmax subtracts the row max."""

from __future__ import annotations

import streamlit as st
import torch

from explorer.core import literal
from explorer.core.config import OPTION_HELP, ConfigError
from explorer.core.trace import with_embeddings
from explorer.render import figures
from explorer.ui import component, widgets
from explorer.ui.cache import cached_trace
from explorer.ui.render import number_table
from explorer.ui.state import View


def normalization_comparison(view: View) -> None:
    """Seed 001's question: the same scores turned into weights three ways."""
    traces = {name: cached_trace(view.config.replace(normalization=name))
              for name in OPTION_HELP["normalization"]}
    # one row per key, a column per normalisation: four columns fit a phone's width,
    # where one column per key hid the last keys and the row sum
    number_table(figures.normalization_table(traces, view.query).T.rename_axis("key"))
    st.caption(" · ".join(f"**{name}**: {text}" for name, text in
                          OPTION_HELP["normalization"].items()))


def softmax_overflow(view: View) -> None:
    """Why the stable softmax subtracts the row max: multiply X until exp()
    overflows, and compare the naive and the stable weights. Drawn only while
    the learner has it open (entry ``overflow``, open by default when the page's
    weights overflowed or use the naive softmax); it recomputes two traces."""
    trace = view.trace
    if not bool(torch.isfinite(trace["attn_weights"]).all()):
        st.warning("Some attention weights are NaN or infinite: the naive softmax overflowed. "
                   "The section below shows why.")
    if not widgets.draw("overflow"):
        return
    with st.container(border=True):
        st.markdown(
            "In float32, `exp(x)` is infinite once x passes about 88.7, and ∞/∞ is NaN. "
            "The naive softmax `exp(x) / exp(x).sum()` breaks there. The stable softmax "
            "first subtracts each row's maximum m: `exp(x − m) / Σ exp(x − m)` is the same "
            "number (the factor exp(−m) cancels), but every exponent is now ≤ 0, so "
            "nothing overflows. Multiply the embeddings X by c: the scores grow like c².")
        factor = widgets.draw("overflow_c")
        try:
            base = with_embeddings(trace, trace["embeddings"] * factor)  # the page's weights
            naive = cached_trace(base.replace(normalization="naive_softmax"))
            stable = cached_trace(base.replace(normalization="softmax"))
        except ConfigError as error:  # typed-in X beyond the typed range, or a busy server
            st.error(literal.markdown(f"X × {factor} cannot be computed: {error}"))
            return
        largest = float(naive["scaled_scores"].abs().max())
        divided = " ÷ √d_k" if trace.config.scale else ""  # the Simplified page: no ÷ √d_k
        st.markdown(f"Largest |score{divided}| with X × {factor}: **{largest:,.1f}**")
        left, right = st.columns(2)
        for column, name, shown in ((left, "naive softmax", naive), (right, "softmax", stable)):
            with column:
                component.show(figures.heatmap_chart(shown, "attn_weights", columns=2,
                                                 title=f"{name}, X × {factor}",
                                                 follows_view=False),  # X × c's trace
                           key=f"overflow-demo-{name.replace(' ', '-')}")
