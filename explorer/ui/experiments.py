"""The Experiments page's five experiments, each a function of the page's
`explorer.ui.state.View`. The open experiment and every parameter are entries
of `explorer.ui.state`, so a link reproduces them."""

from __future__ import annotations

import streamlit as st
import torch

from explorer.core import literal
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.tokenizer import token_labels
from explorer.lessons import experiments as ex
from explorer.render import figures
from explorer.ui import component, state, widgets
from explorer.ui.cache import cached_trace
from explorer.ui.render import number_table
from explorer.ui.state import SCALING_KEYS, View


@st.cache_data(max_entries=16, show_spinner="Sampling random queries and keys…")
def _curves(seed: int, n_keys: int) -> ex.ScalingCurves:
    return ex.scaling_curves(seed=seed, n_keys=n_keys)


def why_scale(view: View) -> None:
    """1. Why divide by √d_k: variance, entropy and max weight against d_k."""
    st.markdown(
        "Take queries and keys with independent entries of variance 1. Then q·k is a sum of "
        "d_k such products, so its **variance is d_k**. Large scores push softmax towards a "
        "one-hot row: one key gets nearly all the weight and the gradients of the others "
        "vanish. Dividing by √d_k brings the variance back to 1, whatever d_k. The solid "
        "lines are measured on 4,096 random query–key pairs per d_k, the dotted ones are the "
        "exact values. The stars are your sentence's own scores at its query/key width: "
        "q·k (orange star) and q·k / √d_k (pink four-pointed star).")
    trace = view.trace
    n_keys = keys_per_query(view)
    curves = _curves(trace.config.seed % (2**31), n_keys)
    point = ex.config_point(trace)
    component.show(figures.figure_chart(figures.scaling_variance_figure(curves, point),
                                    "variance_of_the_scores"), key="exp-variance")
    left, right = st.columns(2)
    with left:
        component.show(figures.figure_chart(figures.scaling_softmax_figure(curves, point, "entropy"),
                                        "softmax_entropy"), key="exp-entropy")
    with right:
        component.show(figures.figure_chart(figures.scaling_softmax_figure(curves, point, "max"),
                                        "largest_weight"), key="exp-max")
    stars_note(point.n_keys, n_keys, trace.config.causal)


def keys_per_query(view: View) -> int:
    """The √d_k curves' keys per query (entry ``n_keys``, the sentence's count
    by default): a slider over `SCALING_KEYS` and the sentence's own count.
    The Backward pass page's √d_k part draws the same."""
    n_tokens = view.trace.n_tokens
    return widgets.draw("n_keys", options=sorted({*SCALING_KEYS, n_tokens, view["n_keys"]}),
                        label=f"keys per query (your sentence has {n_tokens})")


def stars_note(star_keys: int, n_keys: int, causal: bool) -> None:
    """What the stars are beside the curves: the sentence's own rows, every one
    of its ``star_keys`` keys, without the causal mask (the curves have none),
    and when the curves use another count (softmax statistics depend on it), so."""
    mask = (" Like the curves, they take every key of a row, without the causal mask."
            if causal else "")
    if n_keys != star_keys:
        st.caption(f"The stars are your sentence's own scores: {star_keys} keys per query "
                   f"(its tokens), while the curves use {n_keys}. Set keys per query to "
                   f"{star_keys} to compare like with like.{mask}")
    elif mask:
        st.caption(f"The stars are your sentence's own scores: {star_keys} keys per query, "
                   f"as the curves.{mask}")


def temperature(view: View) -> None:
    """2. A temperature on the softmax: the weights and each row's entropy."""
    trace = view.trace
    st.markdown(
        "Divide the scores by a temperature T before the softmax. T < 1 sharpens each row "
        "towards its largest score (entropy → 0); T > 1 flattens it towards uniform "
        f"(entropy → log n = {torch.log(torch.tensor(float(trace.n_tokens))):.3f}). "
        "Scaling by √d_k is a temperature of √d_k.")
    t = widgets.draw("temperature")
    scores = trace.head("scaled_scores")
    if trace.config.causal:
        scores = scores.masked_fill(trace["causal_mask"], float("-inf"))
    weights = ex.with_temperature(scores.to(torch.float64), t)
    entropy = ex.row_entropy(weights)
    left, right = st.columns([3, 2])
    with left:
        component.show(figures.labelled_chart(
            weights, trace, "attn_weights", f"softmax(ω̃ / {t:g}) ({trace.n_tokens}×"
                                            f"{trace.n_tokens})", columns=2),
            key="exp-temperature-weights")
    with right:
        component.show(figures.figure_chart(
            figures.row_bars(entropy.numpy(), token_labels(trace.tokens),
                             f"Row entropy at T = {t:g}", "entropy (nats)"), "row_entropy"),
            key="exp-temperature-entropy")
    st.caption(f"Mean row entropy: {float(entropy.mean()):.4f} nats.")


def softmax_dim(view: View) -> None:
    """3. softmax over dim 0 or dim -1, and seed 001's keepdim trap."""
    st.markdown(
        "The teaching notebook “Your journey starts with one step” writes "
        "`softmax_naive(x, dim) = exp(x) / exp(x).sum(dim=dim)` (no "
        "`keepdim=True`) and finds the **same matrix for dim=0 and dim=1** on X·Xᵀ. Why? "
        "The sum has shape (n,) and broadcasts along the **last** axis, so both calls "
        "divide column j by one number: the result's columns sum to 1, not its rows. X·Xᵀ "
        "is symmetric, so its row sums equal its column sums, which hides the bug. "
        "Attention normalises each query's row over the keys, `torch.softmax(x, dim=-1)`, "
        "so that every query spreads exactly one unit of attention.")
    trace = view.trace
    which = widgets.draw("dim_scores", style="radio")
    x = trace["embeddings"].to(torch.float64)
    scores = x @ x.T if which == "symmetric" else trace.head("attn_scores")
    trap = ex.keepdim_trap(scores)
    verdict = ("the same matrix" if trap.dims_agree else "different matrices")
    st.markdown(f"On these scores the naive dim=0 and dim=1 give **{verdict}** "
                f"({'symmetric' if trap.symmetric else 'not symmetric'} scores).")
    n = trace.n_tokens
    panels = (("naive, dim=0 (no keepdim)", trap.naive_dim0),
              ("naive, dim=1 (no keepdim)", trap.naive_dim1),
              ("torch.softmax(dim=-1)", trap.correct))
    for column, part, (title, matrix) in zip(st.columns(3), ("dim0", "dim1", "softmax"), panels):
        with column:
            component.show(figures.labelled_chart(matrix, trace, "attn_weights",
                                              f"{title} ({n}×{n})", columns=3),
                       key=f"exp-dim-{part}")
    left, right = st.columns(2)
    with left:
        component.show(figures.labelled_chart(trap.difference, trace, "attn_scores",
                                          "naive dim=0 − softmax(dim=-1)", columns=2),
                   key="exp-dim-difference")
    with right:
        number_table(figures.sums_table({"naive dim=0": trap.naive_dim0,
                                         "softmax(dim=-1)": trap.correct}))


def _shuffle() -> None:
    state.put("shuffles", state.value("shuffles", 1) % ex.MAX_SHUFFLES + 1)
    state.changed()


def permutation(view: View) -> None:
    """4. Without positions, shuffling the tokens just shuffles the context rows."""
    st.markdown(
        "Self-attention has no notion of order: every score is a dot product between two "
        "tokens, wherever they stand. Shuffle the tokens (same embeddings, same weights) "
        "and each context vector moves with its token, unchanged. Add sinusoidal "
        "positional encodings (Vaswani et al. 2017, §3.5) to X and the symmetry breaks.")
    trace = view.trace
    st.button("Shuffle the tokens", key="shuffle", on_click=_shuffle)
    positions = widgets.draw("positions")
    order = ex.permutation(trace.n_tokens, seed=view["shuffles"])  # seeds the shuffle
    original = cached_trace(ex.frozen(trace, positions))
    shuffled = cached_trace(ex.permuted(trace, order, positions))
    moved = original["context"][order].to(torch.float64)
    raw = shuffled["context"].to(torch.float64) - moved
    largest = float(raw.abs().max())
    diff = ex.without_noise(raw, moved)
    st.markdown(f"Order: {literal.markdown(' '.join(shuffled.tokens))}  \nLargest |shuffled context − "
                f"original context rows, reordered| = **{largest:.1e}**"
                + (" (float rounding: the rows just moved)" if largest < 1e-5 else
                   " (the context changed: position now matters)"))
    panels = ((original, original["context"], "original context"),
              (shuffled, shuffled["context"], "context of the shuffled tokens"),
              (shuffled, diff, "difference (shuffled − original rows)"))
    for column, part, (source, matrix, title) in zip(st.columns(3), ("original", "shuffled",
                                                                    "difference"), panels):
        with column:
            component.show(figures.labelled_chart(matrix, source, "context", title, columns=3),
                       key=f"exp-perm-{part}")


def _side(label: str, base: AttentionConfig, side: str) -> AttentionConfig | None:
    """Configuration A's or B's settings (entries ``a_seed`` ... ``b_causal``)."""
    st.markdown(f"**{label}**")
    chosen = {name: widgets.draw(f"{side}_{name}")
              for name in ("seed", "scale", "normalization", "causal")}
    try:
        return base.replace(**chosen)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        return None


COMPARE_DECIMALS = (4, 2, 1)
"""A third of the page is narrow: weights of ``normalization="sum"`` (−1.01)
print with one decimal where two do not fit (hover gives four)."""


def compare(view: View) -> None:
    """5. Two configurations side by side: A, B and where they differ, B − A."""
    st.markdown("Same sentence and sizes, two settings. Each row shows A, B and B − A "
                "(blank where they agree).")
    base = view.config
    a_column, b_column = st.columns(2)
    with a_column:
        a = _side("Configuration A", base, "a")
    with b_column:
        b = _side("Configuration B", base, "b")
    if a is None or b is None:
        return
    trace_a, trace_b = cached_trace(a), cached_trace(b)
    for name in ("attn_weights", "context"):
        diff = ex.difference(trace_a, trace_b, name)
        diff = diff[0] if diff.dim() == 3 else diff
        panels = (("a", trace_a, trace_a[name], name, f"A: {name}"),
                  ("b", trace_b, trace_b[name], name, f"B: {name}"),
                  ("diff", trace_a, diff, "attn_scores" if name == "attn_weights" else "context",
                   f"B − A (largest |difference| {float(diff.abs().max()):.4f})"))
        for column, (part, source, matrix, like, title) in zip(st.columns(3), panels):
            matrix = matrix[0] if matrix.dim() == 3 else matrix
            with column:
                component.show(figures.labelled_chart(matrix, source, like, title, columns=3,
                                                  colorbar=part != "diff",
                                                  decimals=COMPARE_DECIMALS),
                           key=f"exp-compare-{name}-{part}")


EXPERIMENTS = {
    "scaling": why_scale,
    "temperature": temperature,
    "softmax_dim": softmax_dim,
    "permutation": permutation,
    "compare": compare,
}
"""The experiments by their link name (their labels: `explorer.ui.state.EXPERIMENT_LABELS`)."""


def experiments(view: View) -> None:
    """The experiment picker (entry ``experiment``, in the link) and the open
    experiment: only it is computed and drawn."""
    EXPERIMENTS[widgets.draw("experiment", style="segmented", label_visibility="collapsed")](view)
