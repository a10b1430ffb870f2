"""The "Causal & multi-head attention" page's own pieces: the head picker, the
split picture, every head at a glance, the second causal route, the dropout
note and the PyTorch check."""

from __future__ import annotations

import weakref

import streamlit as st

from explorer.core import literal, verify
from explorer.core.trace import Trace
from explorer.render import figures
from explorer.ui import component, state


def head_split(trace: Trace) -> None:
    """The picture of the split: Q, K and V whole, each head's columns outlined."""
    if trace.config.n_heads == 1:
        st.caption("One head: Q, K and V are used whole (set n_heads > 1 to split them).")
        return
    st.markdown(literal.markdown(figures.head_split_caption(trace)))
    for column, name in zip(st.columns(3), ("queries", "keys", "values")):
        with column:
            component.show(figures.head_split_chart(trace, name), key=f"split-{name}")


def heads_grid(trace: Trace) -> None:
    """Every head's attention weights side by side."""
    grid = figures.heads_grid_chart(trace)
    grid.marks = {"pick": "head"}  # a click on a head shows it at once (chart.js)
    component.show(grid, key="heads-grid", on_click=_open_head)
    st.caption("Click a head to show it above.")


def _open_head(cell: dict[str, int]) -> None:
    """A click on a head in the grid makes it the head shown."""
    state.put("head", cell["trace"])
    state.changed()


def causal_second_route(trace: Trace, head: int) -> None:
    """The book's other route to causal weights: softmax first, zero the future,
    renormalise; same weights as masking with -inf before the softmax."""
    route = verify.second_causal_route(trace)
    if route is None:
        return
    st.subheader("The same weights by the other route")
    st.markdown(literal.markdown(route.explanation()))
    component.show(figures.second_route_chart(trace, route, head), key="causal-second-route")


def dropout_note(trace: Trace) -> None:
    """What dropout did, and why the mask may differ from a learner's machine."""
    c = trace.config
    if c.dropout == 0:
        return
    kept = float(trace["dropout_mask"].mean())
    st.info(
        f"Dropout p = {c.dropout:g}: {kept:.1%} of the weights were kept (expected "
        f"{1 - c.dropout:.0%}) and scaled by 1/(1−p) = {1 / (1 - c.dropout):.4g}, so each "
        "row's expected sum stays 1. The mask is drawn like "
        f"`torch.manual_seed({c.mask_seed}); nn.Dropout({c.dropout:g})(attn_weights)`. "
        "The same seed can give a different mask on another operating system or PyTorch "
        "build (learners report this), so your notebook's mask may not match this one.")


_VERIFIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""PyTorch's check of each cached trace, done once (it reruns the attention)."""


def verification(trace: Trace) -> None:
    """The "verified against PyTorch" line, with the tolerance it was judged by."""
    if trace not in _VERIFIED:
        _VERIFIED[trace] = verify.against_pytorch(trace)
    result = _VERIFIED[trace]
    if result is None:
        st.caption("No PyTorch check: PyTorch's attention always normalises with softmax.")
        return
    (st.success if result.ok else st.error)(verify.summary(result))
    if result.note:
        st.caption(result.note)

