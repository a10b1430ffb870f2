"""A few steps of training on the hand-derived gradients: the loss curve and
the attention weights at every step, so a learner watches a pattern form.

Each step runs the forward pass (`explorer.core.trace.attention_steps`) on
the current weights, the loss (`explorer.lessons.backward.loss`), the
backward pass by hand (`explorer.lessons.backward.gradients.backward`), and
lets ``torch.optim`` update the weights from those gradients, assigned to
each parameter's ``.grad`` (no autograd anywhere). The book's chapter 5 trains
its GPT the same way with AdamW (Listing 5.3, ``train_model_simple``), there
with ``loss.backward()`` filling ``.grad``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core import recipes
from explorer.core.trace import Trace, attention_steps
from explorer.lessons.backward.gradients import backward
from explorer.lessons.backward.loss import objective
from explorer.lessons.backward.settings import ADAMW, ADAMW_WEIGHT_DECAY, LossConfig, TrainingConfig

DIVERGENCE_FACTOR = 10.0
"""A run has diverged once its loss is more than this many times the loss
before training (or not finite): a loss that grows tenfold is being pushed
away by steps too large, not learnt (`TrainingRun.diverged_at`)."""

TRAINED = ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value", "W_out", "b_out")
"""The trace's tensors a run trains (those it has). X and the loss's
unembedding or target stay fixed."""


@dataclass(frozen=True)
class TrainingRun:
    """A training run: ``losses`` (steps + 1 floats: before any update, then
    after each), ``attn_weights`` (steps + 1, n_heads, n, n): the weights
    before dropout at each of those points, ``parameters``: the trained
    tensors after the last step (by name, shapes as in the trace), and the
    ``training`` settings it ran with."""

    losses: tuple[float, ...]
    attn_weights: Tensor
    parameters: dict[str, Tensor]
    training: TrainingConfig

    @property
    def diverged_at(self) -> int | None:
        """The first step at which training diverged (a learning rate too large
        for these numbers), or None: its loss is not finite, or more than
        `DIVERGENCE_FACTOR` times the loss before training (SGD at lr = 10 on
        the Backward page's defaults reaches 2.0e20, finite but no longer learning)."""
        start = self.losses[0]
        return next((step for step, loss in enumerate(self.losses)
                     if not math.isfinite(loss) or (start > 0 and loss > DIVERGENCE_FACTOR * start)),
                    None)

    @property
    def largest_loss(self) -> float:
        """The largest loss of the run (NaN if one is NaN): how far it blew up."""
        return math.nan if any(math.isnan(x) for x in self.losses) else max(self.losses)

    @property
    def nbytes(self) -> int:
        """Bytes held (what a cache of runs pays)."""
        tensors = [self.attn_weights, *self.parameters.values()]
        return sum(t.element_size() * t.nelement() for t in tensors)


def optimizer_for(parameters: list[Tensor], training: TrainingConfig) -> torch.optim.Optimizer:
    """``torch.optim.SGD(parameters, lr)`` or ``torch.optim.AdamW(parameters, lr,
    weight_decay=0.1)`` (the book's chapter 5), as ``training`` says."""
    if training.optimizer == ADAMW:
        return torch.optim.AdamW(parameters, lr=training.learning_rate,
                                 weight_decay=ADAMW_WEIGHT_DECAY)
    return torch.optim.SGD(parameters, lr=training.learning_rate)


def forward(trace: Trace, parameters: dict[str, Tensor], keep_mask: Tensor | None) -> Trace:
    """``trace``'s forward pass again with ``parameters`` (W_query, W_key,
    W_value, and b_query, b_key, b_value, W_out, b_out where given) in place of
    its weights (same X, settings and tokens), as a new `Trace` (a single head
    without its head axis, as `explorer.core.trace.compute_trace` gives it).
    keep_mask: (n_heads, n, n) when the config has dropout."""
    c = trace.config
    steps = {"token_ids": trace["token_ids"], "embeddings": trace["embeddings"],
             **{name: parameters[name] for name in TRAINED[:6] if name in parameters}}
    computed = attention_steps(trace["embeddings"], parameters, n_heads=c.n_heads, scale=c.scale,
                               causal=c.causal, normalization=c.normalization,
                               dropout=c.dropout, keep_mask=keep_mask)
    for name, tensor in computed.items():
        steps[name] = tensor[0] if c.n_heads == 1 and tensor.dim() == 3 else tensor
    return Trace(c, trace.tokens, steps)


def train(trace: Trace, loss_config: LossConfig = LossConfig(),
          training: TrainingConfig = TrainingConfig()) -> TrainingRun:
    """Train ``trace``'s weights (`TRAINED`) for ``training.steps`` steps on
    the loss ``loss_config`` asks for, with the hand-derived gradients.

    Dropout draws a fresh keep-mask each step from one generator seeded with
    the config's ``mask_seed`` (the first is the trace's own). The same trace
    and settings give the same run, number for number. Raises `ConfigError`
    when the run is too large (`TrainingConfig.check_size`) or the loss cannot
    be computed (`explorer.lessons.backward.loss.objective`).
    """
    c = trace.config
    training.check_size(c.n_heads, trace.n_tokens)
    goal = objective(trace, loss_config)
    parameters = {name: trace[name].detach().clone() for name in TRAINED if name in trace}
    optimizer = optimizer_for(list(parameters.values()), training)
    masks = recipes.seeded_generator(c.mask_seed)
    shape = (c.n_heads, trace.n_tokens, trace.n_tokens)
    losses, weights = [], []
    for step in range(training.steps + 1):
        keep = (torch.empty(shape).bernoulli_(1.0 - c.dropout, generator=masks)
                if c.dropout > 0 else None)  # as recipes.dropout_mask draws it
        current = forward(trace, parameters, keep)
        loss = goal(current[goal.rows_name])
        losses.append(loss.value)
        attn = current["attn_weights"]
        weights.append(attn if attn.dim() == 3 else attn[None])
        if step == training.steps:
            break
        grads = backward(current, loss)
        for name, tensor in parameters.items():
            tensor.grad = grads[name].clone()
        optimizer.step()
    return TrainingRun(tuple(losses), torch.stack(weights),
                       {name: t.detach().clone() for name, t in parameters.items()}, training)
