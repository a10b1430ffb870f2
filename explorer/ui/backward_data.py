"""What the Backward pass page computes, from its settings, cached: the
gradients, their check against autograd, a training run, FlashAttention's
tiled backward pass and the √d_k curves (`explorer.lessons.backward`,
`explorer.modern.flash_backward`).

Each is kept in the byte-bounded cache of computed results
(`explorer.ui.cache.cached_model_result`, within
`explorer.server.budget.MODEL_TRACE_CACHE_BYTES`, counted by the value's
``nbytes``), keyed by the config and the settings it depends on, and a miss
reserves its work bytes from the server's allowance first
(`explorer.server.budget.WORK`). The check against ``torch.autograd.grad``
(about 5 s at 512 tokens and 16 heads) is kept as a few numbers; the
gradients of a trace larger than the cache are computed again (0.27 s at
that size). A download holds these functions' arguments, never a tensor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from explorer.core import attention as att
from explorer.core.agreement import Agreement, max_abs_diff
from explorer.core.config import AttentionConfig
from explorer.lessons.backward.check import check_gradients
from explorer.lessons.backward.gradients import Gradients, backward
from explorer.lessons.backward.loss import compute_loss
from explorer.lessons.backward.saturation import (
    GradientScaling,
    Saturation,
    gradient_scaling_curves,
    saturation_curve,
)
from explorer.lessons.backward.settings import (
    DEFAULT_LEARNING_RATE,
    LossConfig,
    TrainingConfig,
    check_work,
    parse_setting,
)
from explorer.lessons.backward.training import TrainingRun, train
from explorer.lessons.experiments import SCALING_DIMS, SCALING_SAMPLES
from explorer.modern.attention import check_tiles
from explorer.modern.flash_backward import FlashBackward, backward_tile_steps, flash_backward_of
from explorer.server import budget
from explorer.ui.cache import cached_model_result, cached_trace

GRADIENT_WORK_FACTOR = 2
"""The backward pass holds about one gradient per step of the trace, and the
loss's logits: twice the trace's bytes while it is computed."""
FLASH_TOLERANCE = 1e-4
"""Largest difference of the tiled backward pass from autograd through SDPA
still shown as agreement (float32 rounding of two routes)."""
CHECK_WORK_FACTOR = 4
"""The check runs the forward pass again with autograd, which keeps every
step and its gradient: four times the trace's bytes."""


def loss_config_of(values: Mapping[str, Any]) -> LossConfig:
    """The `LossConfig` of the page's ``loss`` and ``target_seed`` values (an
    empty target seed: the seed + 1). Raises `ConfigError` for a bad value."""
    seed = str(values.get("target_seed") or "").strip()
    return LossConfig(values["loss"], int(parse_setting("target_seed", seed)) if seed else None)


def training_config_of(values: Mapping[str, Any]) -> TrainingConfig:
    """The `TrainingConfig` of the page's ``optimizer``, ``learning_rate`` (empty:
    the optimizer's `DEFAULT_LEARNING_RATE`) and ``train_steps``. Raises
    `ConfigError` naming the setting, what is allowed and what was given."""
    optimizer = parse_setting("optimizer", values["optimizer"])
    rate = str(values.get("learning_rate") or "").strip()
    return TrainingConfig(optimizer, rate if rate else DEFAULT_LEARNING_RATE[optimizer],
                          values["train_steps"])


def gradients_of(config: AttentionConfig, loss_config: LossConfig) -> Gradients:
    """`backward` of ``config``'s trace from the loss ``loss_config`` asks for.
    Raises `ConfigError` as `compute_loss`, `explorer.server.budget.BudgetError`
    when the server has no room."""
    def compute() -> Gradients:
        trace = cached_trace(config)
        return backward(trace, compute_loss(trace, loss_config))
    return cached_model_result(("backward", config, loss_config), compute,
                               GRADIENT_WORK_FACTOR * budget.trace_bytes(config),
                               what="this backward pass")


def gradients_json(config: AttentionConfig, loss_config: LossConfig) -> str:
    """Every gradient as strict JSON (`Gradients.to_json`), for a download:
    built when it is clicked, outside the page's run (no waiting note)."""
    trace = cached_trace(config, tell=False)
    return backward(trace, compute_loss(trace, loss_config)).to_json()


def checks_of(config: AttentionConfig, loss_config: LossConfig) -> Agreement:
    """`check_gradients` of the page's gradients against ``torch.autograd.grad``."""
    def compute() -> Agreement:
        return check_gradients(cached_trace(config), loss_config, gradients_of(config, loss_config))
    return cached_model_result(("backward-check", config, loss_config), compute,
                               CHECK_WORK_FACTOR * budget.trace_bytes(config),
                               what="the check against autograd")


def training_bytes(config: AttentionConfig, training: TrainingConfig) -> int:
    """A run's work: the (steps + 1, n_heads, n, n) weights it keeps, and a
    forward and a backward pass at a time."""
    n = len(config.tokens)
    kept = 4 * (training.steps + 1) * config.n_heads * n * n
    return kept + (1 + GRADIENT_WORK_FACTOR) * budget.trace_bytes(config)


def run_of(config: AttentionConfig, loss_config: LossConfig,
           training: TrainingConfig) -> TrainingRun:
    """`train` on ``config``'s trace. Raises `ConfigError` past the run's size
    (`TrainingConfig.check_size`) or for a loss that cannot be computed, and
    `explorer.server.budget.BudgetError` past the server's CPU for a run
    (`check_work`), before anything is computed."""
    training.check_size(config.n_heads, len(config.tokens))
    check_work(config, training)
    return cached_model_result(
        ("backward-train", config, loss_config, training),
        lambda: train(cached_trace(config), loss_config, training),
        training_bytes(config, training), what="this training run")


@dataclass(frozen=True)
class FlashPart:
    """FlashAttention's backward pass on the page's heads (`flash_backward_of`,
    only tile ``tile``'s P, dP and dS kept), and ``sdpa``: the largest
    difference of its dQ, dK and dV from ``torch.autograd.grad`` through
    ``F.scaled_dot_product_attention`` (by name)."""

    result: FlashBackward
    tile: int
    sdpa: dict[str, float]

    @property
    def nbytes(self) -> int:
        r = self.result
        tensors = [r.d_queries, r.d_keys, r.d_values, r.output, r.m, r.l, r.D]
        tensors += [t for tile in r.tiles for t in (tile.P, tile.dP, tile.dS) if t is not None]
        return sum(t.element_size() * t.nelement() for t in tensors)


def tile_count(config: AttentionConfig, block_q: int, block_k: int) -> int:
    """How many tiles the tiled backward pass walks; raises `ConfigError` for
    tiles outside 1 … n_tokens or too many steps (`check_tiles`)."""
    n = len(config.tokens)
    check_tiles(n, block_q, block_k)
    return backward_tile_steps(n, block_q, block_k)


def sdpa_gradients(queries: Tensor, keys: Tensor, values: Tensor, d_output: Tensor,
                   causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    """dL/dQ, dL/dK, dL/dV by ``torch.autograd.grad`` through
    ``F.scaled_dot_product_attention(Q, K, V, is_causal=causal)`` for the
    upstream ``d_output``: queries, keys (h, n, d); values, d_output (h, n, hv)."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (queries, keys, values)]
    with torch.enable_grad():
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
        return torch.autograd.grad(out, leaves, grad_outputs=d_output)


def flash_of(config: AttentionConfig, loss_config: LossConfig, block_q: int, block_k: int,
             tile: int) -> FlashPart:
    """The tiled backward pass of the page's gradients with tiles of ``block_q`` ×
    ``block_k``, tile ``tile`` (0-based, in the order walked) recorded, and its
    check through SDPA. Raises `ConfigError` as `flash_backward_of`."""
    def compute() -> FlashPart:
        gradients = gradients_of(config, loss_config)
        n_q_tiles = -(-len(config.tokens) // block_q)
        result = flash_backward_of(gradients, block_q, block_k,
                                   record=lambda kj, qi: kj * n_q_tiles + qi == tile)
        trace = gradients.trace
        q, k, v = (trace[name] if trace[name].dim() == 3 else trace[name][None]
                   for name in ("queries", "keys", "values"))
        d_output = att.split_heads(gradients["context"], config.n_heads)
        ours = (result.d_queries, result.d_keys, result.d_values)
        reference = sdpa_gradients(q, k, v, d_output, config.causal)
        return FlashPart(result, tile, {name: max_abs_diff(a, b) for name, a, b
                                        in zip(("queries", "keys", "values"), ours, reference)})
    return cached_model_result(("backward-flash", config, loss_config, block_q, block_k, tile),
                               compute, CHECK_WORK_FACTOR * budget.trace_bytes(config),
                               what="FlashAttention's backward pass")


SCALING_WORK_BYTES = 4 * 8 * SCALING_SAMPLES * max(SCALING_DIMS)
"""The √d_k curves draw, for the largest d_k, float64 queries and keys of
`SCALING_SAMPLES` pairs each, and their product: four such tensors at once
(128 MiB); whatever the sentence, the samples are the same count."""


def scaling_of(seed: int, n_keys: int) -> tuple[GradientScaling, Saturation]:
    """Why √d_k from the gradient's side, for ``n_keys`` keys per query:
    `gradient_scaling_curves` and `saturation_curve` of ``seed`` (a few numbers)."""
    return cached_model_result(("backward-scaling", seed, n_keys),
                               partial(_scaling, seed, n_keys), SCALING_WORK_BYTES,
                               what="the √d_k curves")


def _scaling(seed: int, n_keys: int) -> tuple[GradientScaling, Saturation]:
    return gradient_scaling_curves(seed, n_keys), saturation_curve(seed, n_keys)
