"""The "Backward pass" page's parts (issue 38): the loss, every gradient
backwards beside the tensor it belongs to (a click explains a cell), the check
against autograd, a few steps of training, why √d_k from the gradient's side,
and FlashAttention's backward pass tile by tile.

The page is drawn by `explorer.ui.render.step_page` with the multi-head
page's sidebar (its settings and the loss, `explorer.ui.state.ENTRIES`); what
it computes comes from `explorer.ui.backward_data` (cached, bounded by bytes).
A bad setting gets its message in the part it concerns; the other parts stay.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import streamlit as st

from explorer.core import literal
from explorer.core.agreement import Agreement
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.steps import STEPS, TOKENS
from explorer.core.tokenizer import token_labels
from explorer.lessons.backward.check import TOLERANCE
from explorer.lessons.backward.gradients import Gradients
from explorer.lessons.backward.loss import IGNORE_INDEX
from explorer.lessons.backward.saturation import gradient_point
from explorer.lessons.backward.settings import (
    DEFAULT_LEARNING_RATE,
    NEXT_TOKEN,
    OPTIMIZER_HELP,
    OPTIMIZER_LABELS,
    LossConfig,
)
from explorer.lessons.backward.terms import SYMBOLS, explain_gradient
from explorer.lessons.backward.training import DIVERGENCE_FACTOR, TrainingRun
from explorer.modern.attention import SKIPPED_TILE
from explorer.modern.flash_backward import FlashBackward, masked_tiles, not_shown
from explorer.render import backward as bf
from explorer.render import figures
from explorer.ui import backward_data as data
from explorer.ui import component, state, widgets
from explorer.ui.experiments import keys_per_query, stars_note
from explorer.ui.render import explanation_box, fitted_table, head_picker, query_picker
from explorer.ui.state import View

INTRO = (
    "How attention **learns**: a loss on the attention's output, and the chain rule walked "
    "backwards through every step of the forward pass, from dL/dO to dL/dW_query, dL/dW_key, "
    "dL/dW_value and dL/dX. Each gradient is computed **by hand** from its formula (plain "
    "torch, no autograd), drawn beside the tensor it belongs to, and checked against "
    "`torch.autograd.grad`. A gradient's sign says which way the loss falls: red and blue "
    "are centred at 0. **Click any cell of a gradient** to see its terms. Then train the "
    "weights for a few steps, see why √d_k keeps the softmax's gradient alive, and walk "
    "FlashAttention's backward pass tile by tile."
)

SECTIONS = {
    "output": "Through the output projection", "context": "Through the context Z = α V",
    "dropped_weights": "Through dropout", "attn_weights": "Through the softmax",
    "queries": "Through the scores ω = Q Kᵀ", "W_query": "Into the weights",
    "embeddings": "Into X, by three paths",
}
"""Where a group of gradients begins, with its heading, in backward order (the
mask's and the scaling's group: `_section`)."""
CHART_KEY = "backward-grad-"
FORWARD_KEY = "chart-"
"""The forward tensors are step charts, keyed as on the chapter-3 pages."""


def draw(view: View) -> None:
    """The whole page below its title and sidebar (`explorer.ui.render.step_page`)."""
    config = view.config
    st.header("1. The loss")
    gradients = None
    try:
        loss_config = data.loss_config_of(view.values)
        gradients = data.gradients_of(config, loss_config)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
    if gradients is not None:
        loss_part(view, gradients, loss_config)

    st.header("2. Every gradient, backwards")
    if gradients is None:
        st.info("The gradients start from the loss: fix the loss above to see them.")
    else:
        gradients_part(view, gradients)

    st.header("3. Derived by hand, checked against autograd")
    if gradients is not None:
        _told(lambda: check_part(data.checks_of(config, loss_config)))

    st.header("4. A few steps of training")
    if gradients is not None:
        training_part(view, loss_config)

    st.header("5. Why √d_k, from the gradient's side")
    _told(lambda: scaling_part(view))

    st.header("6. FlashAttention's backward pass, tile by tile")
    if gradients is not None:
        flash_part(view, loss_config)


def _told(part: Callable[[], None]) -> None:
    """Draw ``part``; if the server has no room for it now (`BudgetError`, a
    `ConfigError`), say so in its place and go on with the page."""
    try:
        part()
    except ConfigError as error:
        st.error(literal.markdown(str(error)))


# ---------------------------------------------------------------------------
# 1. The loss
# ---------------------------------------------------------------------------
def loss_part(view: View, gradients: Gradients, loss_config: LossConfig) -> None:
    """The loss's value, its recipe, and for next-token prediction the logits,
    the targets and dL/dlogits."""
    loss, trace = gradients.loss, view.trace
    rows = "O" if loss.rows_name == "output" else "Z (no out_proj)"
    labels = token_labels(trace.tokens)
    if loss.kind == NEXT_TOKEN:
        kept = int((loss.targets != IGNORE_INDEX).sum())
        st.markdown(
            f"**Next-token prediction.** Each output row of {rows} goes through a fixed "
            f"unembedding U ({loss.unembedding.shape[0]} × {len(loss.vocab)}: "
            f"`torch.manual_seed({trace.config.seed}); nn.Linear(d, {len(loss.vocab)}, "
            "bias=False).weight.T`, as the book's `out_head`, Listing 4.7; never trained) to "
            "logits over the sentence's vocabulary; the loss is the mean cross-entropy of each "
            f"position's next token over the {kept} positions that have one "
            "(`F.cross_entropy(logits, targets, ignore_index=-100)`, the book's chapter 5).")
        targets = [labels[i + 1] if int(t) != IGNORE_INDEX else "—"
                   for i, t in enumerate(loss.targets)]
        st.markdown(literal.markdown(
            "Targets: " + ", ".join(f"{a} → {b}" for a, b in zip(labels, targets))))
        st.latex(r"\begin{aligned}L &= -\frac{1}{N}\sum_{i} \log \mathrm{softmax}(O_i U)_{t_i}"
                 rf" \\ &= {loss.value:.6f}\end{{aligned}}")
        left, right = st.columns(2)
        with left:
            component.show(bf.logits_chart(trace, loss, columns=2), key="backward-logits")
        with right:
            component.show(bf.logits_chart(trace, loss, gradient=True, columns=2),
                           key="backward-grad-logits")
    else:
        st.markdown(
            f"**Squared distance to a target.** The output rows {rows} are compared with a "
            "target context T drawn from its own seed, "
            f"`torch.randn({tuple(loss.targets.shape)[0]}, {tuple(loss.targets.shape)[1]}, "
            f"generator=torch.Generator().manual_seed({loss_config.seed_of_target(trace.config)}))`: "
            "`F.mse_loss(O, T)`.")
        st.latex(rf"\begin{{aligned}}L &= \frac{{1}}{{n\,d}}\sum_{{i,c}} (O_{{ic}} - T_{{ic}})^2 "
                 rf"\\ &= {loss.value:.6f}\end{{aligned}}")
        component.show(figures.labelled_chart(loss.targets, trace, loss.rows_name,
                                              "Target context T"), key="backward-target")


# ---------------------------------------------------------------------------
# 2. Every gradient, with the click that explains a cell
# ---------------------------------------------------------------------------
def explained(view: View, gradients: Gradients, name: str, head: int) -> tuple[int, int] | None:
    """The explained cell of gradient ``name`` (of ``head`` for a per-head one),
    if it is the page's (``grad_cell``)."""
    cell = view["grad_cell"]
    if cell is None or cell[0] != name or name not in gradients:
        return None
    if gradients.per_head(name) and cell[3] != head:
        return None
    return cell[1], cell[2]


def _clicked(name: str, head: int, cell: dict[str, int]) -> None:
    """A click on a gradient's cell explains it; in a chart whose rows are
    tokens it also picks the query (the Jacobian's row)."""
    state.put("grad_cell", (name, cell["row"], cell["col"], head))
    if STEPS[name].rows.labels == TOKENS:
        state.put("query", cell["row"])
    state.changed()


def gradients_part(view: View, gradients: Gradients) -> None:
    """Every gradient in backward order: its rule, the forward tensor and the
    gradient side by side; the softmax's Jacobian of the query's row."""
    trace, c = view.trace, view.config
    st.markdown("Read from the top: the loss's gradient dL/dO flows back through each step. "
                "Left, the tensor of the forward pass; right, the loss's gradient with respect "
                "to it, the same shape. Click a cell of either to see the gradient's terms.")
    head = head_picker(view)
    query = query_picker(view, "Query row of the softmax's Jacobian")
    for name in gradients:
        heading = _section(name, c.causal)
        if heading:
            st.subheader(heading)
        st.latex(bf.gradient_latex(gradients, name))
        left, right = st.columns(2)
        shown = head if gradients.per_head(name) else 0
        cell = explained(view, gradients, name, shown)
        with left:  # a click on the tensor explains its gradient's cell, the same position
            component.show(figures.heatmap_chart(trace, name, shown, marked_cell=cell,
                                                 columns=2, follows_view=False),
                           key=FORWARD_KEY + name, on_click=partial(_clicked, name, shown))
        with right:
            component.show(bf.gradient_chart(gradients, name, shown, marked_cell=cell,
                                             columns=2),
                           key=CHART_KEY + name, on_click=partial(_clicked, name, shown))
        if cell is not None:
            explanation_box(explain_gradient(gradients, name, *cell, head=shown))
        if name == "attn_scores" and c.scale and c.head_dim == 1:
            st.caption(head_dim_one_text(c))
        if name == ("masked_scores" if c.causal else "scaled_scores"):
            _jacobian(view, query, head)
        if name == "W_query" and c.n_heads > 1:
            st.caption(f"The heads meet in W_query's columns: head h's dL/dQ_h reaches only "
                       f"the {c.head_dim} columns it was cut from (outlined), so dL/dW_query is "
                       "every head's Xᵀ·dL/dQ_h side by side; dL/dX sums the heads back.")


def head_dim_one_text(config: AttentionConfig) -> str:
    """Why dL/dω equals dL/dω̃ at head_dim 1 (settings carried over from another
    page, d_k = 2 over 2 heads), and what to change to see the scaling."""
    c = config
    return (f"head_dim is 1 here (d_k = {c.d_k} over {c.n_heads} head"
            f"{'s' if c.n_heads > 1 else ''}), so ÷√1 changes nothing and dL/dω equals "
            f"dL/dω̃. Set d_k to {2 * c.d_k}{' or n_heads to 1' if c.n_heads > 1 else ''} "
            "to see the scaling at work.")


def _section(name: str, causal: bool) -> str | None:
    """The heading of the group of gradients that begins at ``name``, if any."""
    if name == ("scaled_scores" if causal else "attn_scores"):
        return "Through the causal mask and the scaling" if causal else "Through the scaling"
    return SECTIONS.get(name)


def _jacobian(view: View, query: int | None, head: int) -> None:
    """The softmax's Jacobian of the query's row, drawn as a matrix."""
    row = view.trace.n_tokens - 1 if query is None else query
    st.markdown("The softmax's Jacobian of one row, ∂α_j/∂ω̃_k = α_j (δ_jk − α_k): "
                "diag(α) − α αᵀ. Each row of dL/dω̃ is this matrix times the row's dL/dα; its "
                "rows sum to 0, and a saturated row (one weight near 1) has a Jacobian near 0, "
                "which passes almost no gradient back. Masked keys are 0.")
    st.latex(r"J = \operatorname{diag}(\alpha) - \alpha\,\alpha^\top")
    component.show(bf.jacobian_chart(view.trace, row, head), key="backward-jacobian")


# ---------------------------------------------------------------------------
# 3. The check against autograd
# ---------------------------------------------------------------------------
def check_part(check: Agreement) -> None:
    """Every gradient's largest difference from ``torch.autograd.grad``."""
    if check.ok:
        st.success(f"✓ Every gradient equals `torch.autograd.grad` on the same forward pass: "
                   f"largest |difference| = {check.max_abs_diff:.1e} (float32 rounding; "
                   f"tolerance {TOLERANCE:g}, relative above 1).")
    else:
        bad = [SYMBOLS.get(name, "L") for name in check.failed]
        st.error(literal.markdown(f"✗ These differ from autograd: {', '.join(bad)}."))
    fitted_table(bf.check_table(check))


# ---------------------------------------------------------------------------
# 4. Training
# ---------------------------------------------------------------------------
def _slider(view: View, entry: str, count: int, label: str,
            format_func: Callable[[int], str] = str) -> int:
    """A slider over 0 … count − 1 for the view value ``entry`` (None or
    outside: the last), each stop named by ``format_func``; its choice goes
    into the state (and the link)."""
    value = view[entry]
    shown = count - 1 if value is None or not 0 <= value < count else value
    if count == 1:
        return 0
    key = f"backward-{entry}"
    st.session_state[key] = shown
    st.select_slider(label, options=range(count), format_func=format_func, key=key,
                     on_change=_slid, args=(entry, key), help=state.ENTRIES[entry].help or None)
    return shown


def _slid(entry: str, key: str) -> None:
    state.put(entry, int(st.session_state[key]))
    state.changed()


def training_part(view: View, loss_config: LossConfig) -> None:
    """Optimiser, learning rate and steps; the loss curve; the weights at a step."""
    st.markdown("Each step runs the forward pass, the loss and the backward pass **by hand**, "
                "and lets `torch.optim` update W_query, W_key, W_value (and out_proj) from "
                "those gradients, as the book's chapter 5 trains its GPT "
                "(`train_model_simple`, with `loss.backward()` there). The same seed gives "
                "the same run.")
    left, middle, right = st.columns(3)
    with left:
        widgets.draw("optimizer", style="segmented")
    with middle:
        widgets.draw("learning_rate")
    with right:
        widgets.draw("train_steps")
    try:
        training = data.training_config_of(view.values)
        run = data.run_of(view.config, loss_config, training)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        return
    st.caption(OPTIMIZER_HELP[training.optimizer])
    first, last = run.losses[0], run.losses[-1]
    if run.diverged_at is not None:
        st.warning(divergence_text(run))
    else:
        st.markdown(f"Loss {first:.4f} before training, {last:.4f} after "
                    f"{training.steps} steps.")
    component.show(figures.figure_chart(bf.loss_curve_figure(run), "loss_curve"),
                   key="backward-loss-curve")
    step = _slider(view, "train_step", training.steps + 1, "Attention weights after step")
    component.show(bf.training_weights_chart(view.trace, run, step, view.head),
                   key="backward-train-weights")


def divergence_text(run: TrainingRun) -> str:
    """What a diverged run (`TrainingRun.diverged_at`) says: where, how far the
    loss went, and what to do."""
    step, training = run.diverged_at, run.training
    went = run.losses[step]
    how = (f"is no longer a number ({went})" if not math.isfinite(went) else
           f"reached {went:.3g}, more than {DIVERGENCE_FACTOR:g} × the {run.losses[0]:.4f} "
           "it started from")
    peak = run.largest_loss
    top = f" (at most {peak:.3g} in the run)" if math.isfinite(peak) and peak > went else ""
    lost = next((i for i, x in enumerate(run.losses) if not math.isfinite(x)), None)
    if lost is not None and lost > step:
        top = f", and from step {lost} it is no longer a number"
    return (f"Training diverged at step {step}: the loss {how}{top}. The learning rate "
            f"{training.learning_rate:g} is too large for these numbers, so each step "
            f"overshoots; try a smaller one ({DEFAULT_LEARNING_RATE[training.optimizer]:g} is "
            f"{OPTIMIZER_LABELS[training.optimizer]}'s default here).")


# ---------------------------------------------------------------------------
# 5. Why √d_k
# ---------------------------------------------------------------------------
def scaling_part(view: View) -> None:
    """The softmax's gradient over d_k, with and without √d_k, and as it saturates."""
    n_keys = keys_per_query(view)
    curves, saturation = data.scaling_of(view.config.seed, n_keys)
    point = gradient_point(view.trace)
    st.markdown(
        "The Experiments page shows that q·k has variance d_k. Here is what that does to the "
        "**gradient**: as the scores grow, softmax saturates (one weight near 1) and its "
        "Jacobian diag(α) − α αᵀ goes to 0, so almost no gradient reaches the scores, the "
        "queries and the keys. Dividing by √d_k keeps the scores' spread at 1 whatever d_k, "
        f"and the gradient alive (Vaswani et al. 2017, §3.2.1). {n_keys} keys per query, "
        "random N(0, 1) queries and keys; the stars are your sentence's own rows.")
    left, right = st.columns(2)
    with left:
        component.show(figures.figure_chart(
            bf.gradient_scaling_figure(curves, point, "jacobian"),
            "grad_scaling_jacobian"), key="backward-scaling-jacobian")
    with right:
        component.show(figures.figure_chart(bf.gradient_scaling_figure(curves, None, "gradient"),
                                            "grad_scaling_gradient"),
                       key="backward-scaling-gradient")
    stars_note(point.n_keys, n_keys, view.config.causal)
    component.show(figures.figure_chart(bf.saturation_figure(saturation), "saturation"),
                   key="backward-saturation")


# ---------------------------------------------------------------------------
# 6. FlashAttention's backward pass
# ---------------------------------------------------------------------------
def flash_part(view: View, loss_config: LossConfig) -> None:
    """FlashAttention-2's Algorithm 2 on the page's heads: tiles, P, dP, dS of
    the tile chosen, m, ℓ and D, and the check through SDPA."""
    c, head = view.config, view.head
    st.markdown(
        "FlashAttention never stores the n × n weights, not even for the backward pass. The "
        "forward pass keeps each query row's maximum m and sum ℓ; the backward pass computes "
        "D = rowsum(dO ⊙ O) once, then walks key tiles (outside) and query tiles (inside), "
        "**recomputes** each tile's weights from m and ℓ, and accumulates dV, dK and dQ "
        "(Dao, FlashAttention-2, 2023, Algorithm 2). D stands in for the softmax backward's "
        "rowsum(α ⊙ dα) of part 2, which would need the whole row.")
    # Algorithm 2's six lines in its order, in two columns: side by side on a wide
    # screen, one under the other on a phone (Streamlit stacks columns there; as
    # one block the six were 11 px wider than 390 px).
    first, then = st.columns(2)
    first.latex(r"\begin{aligned}P &= e^{S - m} / \ell \\ dV_j &\mathrel{+}= P^\top dO_i \\ "
                r"dP &= dO_i V_j^\top\end{aligned}")
    then.latex(r"\begin{aligned}dS &= P \odot (dP - D_i) \\ "
               r"dQ_i &\mathrel{+}= dS\,K_j / \sqrt{d} \\ "
               r"dK_j &\mathrel{+}= dS^\top Q_i / \sqrt{d}\end{aligned}")
    left, right = st.columns(2)
    with left:
        block_q = widgets.draw("flash_block_q")
    with right:
        block_k = widgets.draw("flash_block_k")
    reason = not_shown(c)
    if reason is not None:  # a setting, not a fault: a note, not an error
        st.info(literal.markdown(reason[1] + "."))
        return
    try:
        count = data.tile_count(c, block_q, block_k)
        chosen = view["flash_tile"]
        chosen = count - 1 if chosen is None or not 0 <= chosen < count else chosen
        part = data.flash_of(c, loss_config, block_q, block_k, chosen)
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        return
    result, tokens = part.result, view.trace.tokens
    tiles = result.tiles
    chosen = _slider(view, "flash_tile", count, "Tiles walked",
                     lambda i: f"{i + 1} of {count}")
    tile = tiles[chosen]
    component.show(bf.flash_tiles_chart(result, tokens, upto=chosen), key="backward-flash-tiles")
    if c.causal:
        st.caption(masked_tiles_text(result, chosen))
    if tile.P is not None:
        columns = st.columns(3)
        for column, which in zip(columns, bf.TILE_MATRICES):
            with column:
                component.show(bf.flash_tile_chart(result, tokens, chosen, which, head,
                                                   columns=3), key=f"backward-flash-{which}")
    st.markdown("What the pass keeps per query row, besides Q, K, V, O and dO:")
    rows = bf.flash_rows_table(result, tokens, head)
    fitted_table(rows)
    worst = max(part.sdpa.values())
    line = (f"FlashAttention's dQ, dK and dV equal `torch.autograd.grad` through "
            f"`F.scaled_dot_product_attention`: max |difference| = {worst:.1e}.")
    (st.success if worst < data.FLASH_TOLERANCE else st.error)(
        ("✓ " if worst < data.FLASH_TOLERANCE else "✗ ") + line)
    st.caption(memory_text(result, block_q, block_k, view.trace.n_tokens))


def masked_tiles_text(result: FlashBackward, chosen: int) -> str:
    """How many of the walked tiles lie wholly above the diagonal, that causal
    FlashAttention skips them (`explorer.modern.attention.SKIPPED_TILE`, the
    Modern page's words), and whether tile ``chosen`` is one of them."""
    masked = masked_tiles(result)
    total = len(result.tiles)
    if not masked:
        return (f"None of the {total} tiles lies wholly above the diagonal: each holds a key "
                "at or before one of its queries, so every one is walked.")
    this = (" The tile shown is one of them: its P and dS are all 0 (its dP = dO·Vᵀ is "
            "not, but dS = P ⊙ (dP − D) multiplies it by 0)." if chosen in masked else "")
    numbers = [str(i + 1) for i in masked]  # as the grid and the slider count them
    named = numbers[0] if len(numbers) == 1 else f"{', '.join(numbers[:-1])} and {numbers[-1]}"
    return (f"{len(masked)} of these {total} tiles (number {named} in the grid) hold only "
            "keys after their queries. "
            f"{SKIPPED_TILE[0].upper()}{SKIPPED_TILE[1:]}, as the Modern attention page's "
            "forward walk does. This walk goes through them too, to show that their "
            f"P and dS are 0 and add nothing to dV, dQ or dK: a real kernel walks "
            f"{total - len(masked)} "
            f"of the {total}.{this}")


def memory_text(result: FlashBackward, block_q: int, block_k: int, n_tokens: int) -> str:
    """What the tiled pass holds at once, per head and for all heads, beside the
    n × n weights it never allocates."""
    heads = result.n_heads
    every = (f", {result.tile_bytes:,} bytes for the {heads} heads together" if heads > 1
             else "")
    weights = f"{result.full_scores_bytes // heads:,} bytes per head"
    if heads > 1:
        weights += f", {result.full_scores_bytes:,} for the {heads} heads"
    return (f"At most one {block_q} × {block_k} tile per head at a time: "
            f"{result.tile_bytes_per_head:,} bytes of float32 per head{every}, instead of "
            f"the {n_tokens} × {n_tokens} weights ({weights}).")
