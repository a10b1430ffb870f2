"""The hand-derived gradients checked against ``torch.autograd.grad``.

The forward pass is run again from the trace's own tensors (X, the weights,
out_proj's, the dropout mask), with ``requires_grad``, through the same
`explorer.core.trace.attention_steps`; the loss is PyTorch's own
(``F.cross_entropy(..., ignore_index=-100)`` or ``F.mse_loss``), and
``torch.autograd.grad`` gives dL/d(step) for every step the hand-derived
pass has. The comparison is one `explorer.core.agreement.Agreement` with a
part per gradient, as the forward pages show theirs against PyTorch
(`explorer.core.verify`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from explorer.core.agreement import (
    Agreement,
    largest_abs,
    max_abs_diff,
    of_all,
    relative_tolerance,
)
from explorer.core.trace import Trace, attention_steps
from explorer.lessons.backward.gradients import Gradients, backward
from explorer.lessons.backward.loss import (
    IGNORE_INDEX,
    NEXT_TOKEN,
    Objective,
    compute_loss,
    objective,
)
from explorer.lessons.backward.settings import LossConfig

TOLERANCE = 1e-4
"""Largest difference still shown as agreement, relative to the gradient's
largest value when that is above 1 (float32 rounding of two routes)."""

LEAVES = ("embeddings", "W_query", "W_key", "W_value", "b_query", "b_key", "b_value",
          "W_out", "b_out")
"""The trace's tensors the forward pass is recomputed from, with requires_grad."""


def _gradient(name: str, compared: str, reference: str, ours: Tensor | float,
              theirs: Tensor | float) -> Agreement:
    """One gradient (or the loss) against autograd's: within `TOLERANCE` ×
    max(1, its largest finite |autograd value|), which is its ``scale``."""
    ours, theirs = torch.as_tensor(ours), torch.as_tensor(theirs)
    largest = largest_abs(theirs)
    return Agreement(name, compared, reference, max_abs_diff(ours, theirs),
                     relative_tolerance(largest, TOLERANCE), n_values=theirs.numel(),
                     scale=largest)


def _reference_loss(rows: Tensor, goal: Objective) -> Tensor:
    """PyTorch's own loss on ``rows``: cross-entropy of the logits, or the MSE."""
    if goal.kind == NEXT_TOKEN:
        return F.cross_entropy(rows @ goal.unembedding, goal.targets, ignore_index=IGNORE_INDEX)
    return F.mse_loss(rows, goal.targets)


def autograd_gradients(trace: Trace, loss_config: LossConfig = LossConfig()
                       ) -> tuple[float, dict[str, Tensor]]:
    """The loss and every gradient of `explorer.lessons.backward.gradients.backward`,
    by ``torch.autograd.grad`` on the same forward pass (recomputed from the
    trace's tensors with requires_grad). Shapes as the trace's steps.
    Raises `ConfigError` as `explorer.lessons.backward.loss.objective`."""
    c = trace.config
    goal = objective(trace, loss_config)
    leaves = {name: trace[name].detach().clone().requires_grad_(True)
              for name in LEAVES if name in trace}
    keep = trace["dropout_mask"] if "dropout_mask" in trace else None
    if keep is not None and keep.dim() == 2:
        keep = keep[None]
    with torch.enable_grad():
        steps = attention_steps(leaves["embeddings"], leaves, n_heads=c.n_heads, scale=c.scale,
                                causal=c.causal, normalization=c.normalization,
                                dropout=c.dropout, keep_mask=keep)
        loss = _reference_loss(steps[goal.rows_name], goal)
        inputs = {**{name: t for name, t in steps.items() if t.requires_grad}, **leaves}
        found = torch.autograd.grad(loss, list(inputs.values()))
    grads = {}
    for name, grad in zip(inputs, found):
        grads[name] = grad[0] if c.n_heads == 1 and grad.dim() == 3 else grad
    return float(loss.detach()), grads


def check_gradients(trace: Trace, loss_config: LossConfig = LossConfig(),
                    gradients: Gradients | None = None) -> Agreement:
    """The loss and every hand-derived gradient (``gradients``, else `backward`
    of ``trace``) against ``torch.autograd.grad`` on the same forward pass: a
    part each, the loss first, then the gradients in backward order, each named
    by its step (``"queries"`` for dL/dQ) and within `TOLERANCE` × max(1, its
    largest |autograd value|) (float32 rounding of two routes); a difference is
    ∞ where one is NaN or ±∞ and the other is not."""
    if gradients is None:
        gradients = backward(trace, compute_loss(trace, loss_config))
    value, reference = autograd_gradients(trace, loss_config)
    parts = [_gradient("loss", "the loss's value", "PyTorch's own loss", gradients.loss.value,
                       value)]
    parts += [_gradient(name, f"dL/d{name}", "torch.autograd.grad", ours, reference[name])
              for name, ours in gradients.items()]
    return of_all("Every gradient", "the loss and dL/d every step",
                  "torch.autograd.grad on the same forward pass", parts)
