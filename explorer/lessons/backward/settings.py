"""What the backward pass page can be asked: the loss, and the training run's
optimiser, learning rate and number of steps. Every limit and choice lives
here, once; a bad value raises the project's `ConfigError` saying what is
allowed, whether it came from a widget, a URL parameter or a notebook call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from explorer.core.config import (
    MAX_ATTENTION_CELLS,
    MAX_SEED,
    MIN_SEED,
    AttentionConfig,
    ConfigError,
    _choice_field,
    _int_field,
    _is_bool,
    shown,
)
from explorer.server.budget import BudgetError

# ---------------------------------------------------------------------------
# Limits and choices (one place)
# ---------------------------------------------------------------------------
NEXT_TOKEN, TARGET = "next_token", "target"
LOSSES = (NEXT_TOKEN, TARGET)
LOSS_HELP = {
    NEXT_TOKEN: "next-token prediction: each output row goes through a fixed unembedding to "
                "logits over the sentence's vocabulary; the mean cross-entropy of each "
                "position's next token (the last position has none and is left out)",
    TARGET: "the squared distance to a target context drawn from another seed "
            "(torch.nn.functional.mse_loss)",
}
"""One line per loss, saying what it computes (UI help texts)."""

SGD, ADAMW = "sgd", "adamw"
OPTIMIZERS = (SGD, ADAMW)
OPTIMIZER_LABELS = {SGD: "SGD", ADAMW: "AdamW"}
"""Each optimiser's name as PyTorch writes it (``torch.optim.AdamW``): widgets, titles."""
OPTIMIZER_HELP = {
    SGD: "torch.optim.SGD(params, lr): W ← W − lr · dL/dW",
    ADAMW: "torch.optim.AdamW(params, lr, weight_decay=0.1), as the book's chapter 5 trains "
           "its GPT (Listing 5.3)",
}
ADAMW_WEIGHT_DECAY = 0.1
"""AdamW's weight decay, the book's chapter 5 value."""

MIN_LEARNING_RATE, MAX_LEARNING_RATE = 1e-6, 10.0
MIN_TRAIN_STEPS, MAX_TRAIN_STEPS = 1, 200
MAX_TRAINING_CELLS = 4 * MAX_ATTENTION_CELLS
"""(steps + 1) × n_heads × n_tokens²: the attention weights a run keeps, one
(n_heads, n, n) per step (64 MiB of float32), which also bounds its time (each
step is a forward and a backward pass over as many cells). 6 tokens allow
every step; 512 tokens and 1 head allow 63."""

MATMUL_FLOPS_PER_SECOND = 100e9
SECONDS_PER_CELL = 25e-9
SECONDS_PER_PARAMETER = 4e-9
SECONDS_PER_STEP = 0.4e-3
"""The four rates of `step_seconds`, measured with ``train`` on this
project's 2-core server (one torch thread, AdamW, causal, 2026-11): the matrix
products run at about 100 GFLOP/s; each of the n_heads × n_tokens² attention
cells costs 25 ns a step (the mask, softmax, dropout and their gradients, one
elementwise operation after another); each trained weight 4 ns (AdamW's
update; SGD's is cheaper); and 0.4 ms a step whatever the sizes (Python and
torch's calls; the default page 0.36 ms). Measured per step (estimated): 288
tokens, d = 1024: 98 ms (107); 400 tokens, d = 1024: 139 (148); 512 tokens,
d = 1024: 186 (200); 512 tokens, 16 heads, d = 16: 107 (107); 64 tokens,
256 heads, d = 256: 24 (29); 128 tokens, 4 heads, d = 256: 4.5 (5.8); 6
tokens, d = 1024: 18 (19). The server's two torch threads take more CPU for
the same work (1.5-3× on a busy machine)."""
MAX_TRAINING_SECONDS = 5.0
"""The most server CPU one link's training run may ask for, by `training_seconds`
(about as much again with the page's other parts; before this bound, 288
tokens at d = 1024 with 200 AdamW steps took the page 53-82 s of CPU)."""

DEFAULT_LEARNING_RATE = {SGD: 0.5, ADAMW: 0.05}
DEFAULT_TRAIN_STEPS = 30


def default_target_seed(seed: int) -> int:
    """The target context's seed when none is given: the config's seed + 1
    (0 after the largest seed)."""
    return MIN_SEED if seed == MAX_SEED else seed + 1


def _rate(name: str, value: Any) -> float:
    """``value`` as a float in [`MIN_LEARNING_RATE`, `MAX_LEARNING_RATE`], or `ConfigError`."""
    message = (f"{name} must be a number between {MIN_LEARNING_RATE:g} and "
               f"{MAX_LEARNING_RATE:g} (got {shown(value)})")
    if _is_bool(value):
        raise ConfigError(name, message)
    try:
        rate = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(name, message) from None
    if not (math.isfinite(rate) and MIN_LEARNING_RATE <= rate <= MAX_LEARNING_RATE):
        raise ConfigError(name, message)
    return rate


def parse_setting(name: str, value: Any) -> Any:
    """Check one setting of `LossConfig` or `TrainingConfig` and return it typed.

    ``value`` may be text, as it arrives from a URL (``"adamw"``, ``"0.1"``,
    ``"20"``). Raises `ConfigError` naming the setting, what is allowed and
    what was given, e.g. ``train_steps must be between 1 and 200 (got 500)``.
    """
    if name == "loss":
        return _choice_field(name, value, LOSSES)
    if name == "target_seed":
        return _int_field(name, value, MIN_SEED, MAX_SEED)
    if name == "optimizer":
        return _choice_field(name, value, OPTIMIZERS)
    if name == "learning_rate":
        return _rate(name, value)
    if name == "train_steps":
        return _int_field(name, value, MIN_TRAIN_STEPS, MAX_TRAIN_STEPS)
    raise ConfigError(name, f"unknown setting {shown(name)}")


@dataclass(frozen=True)
class LossConfig:
    """The loss whose gradients the page shows.

    - ``loss``: `NEXT_TOKEN` (cross-entropy of each position's next token
      through a fixed unembedding) or `TARGET` (squared distance to a target
      context);
    - ``target_seed``: seeds the target context of `TARGET`; None means the
      config's seed + 1 (`default_target_seed`).

    Raises `ConfigError` for a value outside `LOSSES` or the seed's range.
    """

    loss: str = NEXT_TOKEN
    target_seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "loss", parse_setting("loss", self.loss))
        if self.target_seed is not None:
            object.__setattr__(self, "target_seed",
                               parse_setting("target_seed", self.target_seed))

    def seed_of_target(self, config: AttentionConfig) -> int:
        """The target context's seed for ``config``."""
        return default_target_seed(config.seed) if self.target_seed is None else self.target_seed


@dataclass(frozen=True)
class TrainingConfig:
    """A few steps of training: ``optimizer`` (`SGD` or `ADAMW`),
    ``learning_rate`` in [`MIN_LEARNING_RATE`, `MAX_LEARNING_RATE`] and
    ``steps`` in [`MIN_TRAIN_STEPS`, `MAX_TRAIN_STEPS`]. Raises `ConfigError`
    outside them (`check_size` bounds the run's size for a given trace, `check_work`
    its CPU)."""

    optimizer: str = SGD
    learning_rate: float = DEFAULT_LEARNING_RATE[SGD]
    steps: int = DEFAULT_TRAIN_STEPS

    def __post_init__(self) -> None:
        for name, field in (("optimizer", "optimizer"), ("learning_rate", "learning_rate"),
                            ("train_steps", "steps")):
            object.__setattr__(self, field, parse_setting(name, getattr(self, field)))

    def check_size(self, n_heads: int, n_tokens: int) -> None:
        """Raise `ConfigError` unless (steps + 1) × n_heads × n_tokens² is at most
        `MAX_TRAINING_CELLS`, saying how many steps would fit."""
        per_step = n_heads * n_tokens ** 2
        if (self.steps + 1) * per_step > MAX_TRAINING_CELLS:
            most = max(0, MAX_TRAINING_CELLS // per_step - 1)
            raise ConfigError(
                "train_steps", f"(train_steps + 1) × n_heads × n_tokens² must be at most "
                               f"{MAX_TRAINING_CELLS:,} (got ({self.steps} + 1) × {n_heads} × "
                               f"{n_tokens}² = {(self.steps + 1) * per_step:,}); with "
                               f"{n_tokens} tokens and {n_heads} head(s) use at most {most} "
                               f"steps, or fewer tokens or heads.")


def step_seconds(config: AttentionConfig) -> float:
    """One training step's CPU seconds on this project's server, an estimate:
    a forward pass, its loss, the backward pass by hand and the optimiser's
    update (`MATMUL_FLOPS_PER_SECOND`, `SECONDS_PER_CELL`, `SECONDS_PER_PARAMETER`,
    `SECONDS_PER_STEP`).

    Floating-point operations of the matrix products of one forward pass, for
    n tokens (the vocabulary of next-token prediction at most n):
    2·n·d_in·(2·d_k + d_v) for Q, K, V; 2·n²·(d_k + d_v) for the scores and
    the context (every head's together); 2·n·d_v² for out_proj; 2·n·d_v·n for
    the logits. The backward pass takes twice as many (two products per
    product), so a step three times. Plus n_heads × n² attention cells and
    d_in·(2·d_k + d_v) + d_v² trained weights, at their own rates.
    """
    c = config
    n = len(c.tokens)
    products = (2 * n * c.d_in * (2 * c.d_k + c.d_v) + 2 * n * n * (c.d_k + c.d_v)
                + 2 * n * c.d_v * n)
    parameters = c.d_in * (2 * c.d_k + c.d_v)
    if c.has_out_proj:
        products += 2 * n * c.d_v * c.d_v
        parameters += c.d_v * c.d_v
    return (3 * products / MATMUL_FLOPS_PER_SECOND + c.n_heads * n * n * SECONDS_PER_CELL
            + parameters * SECONDS_PER_PARAMETER + SECONDS_PER_STEP)


def training_seconds(config: AttentionConfig, steps: int) -> float:
    """A run of ``steps`` steps on ``config``'s trace: its CPU seconds on this
    project's server, an estimate (`step_seconds` each, and a last forward pass)."""
    return (steps + 1) * step_seconds(config)


def check_work(config: AttentionConfig, training: TrainingConfig) -> None:
    """Raise `explorer.server.budget.BudgetError` when ``training`` on
    ``config``'s trace would take more than `MAX_TRAINING_SECONDS` of the
    server's CPU (`training_seconds`), before anything is computed: the
    message says the estimate, what the server allows, and how many steps fit."""
    needed = training_seconds(config, training.steps)
    if needed <= MAX_TRAINING_SECONDS:
        return
    most = int(MAX_TRAINING_SECONDS // step_seconds(config)) - 1
    c = config
    fit = (f"use at most {most} steps, or fewer tokens or smaller d_in, d_k, d_v" if most >= 1
           else "use fewer tokens or smaller d_in, d_k, d_v")
    raise BudgetError(
        f"this training run needs about {needed:,.0f} s of the server's CPU ({training.steps} "
        f"steps at {len(c.tokens)} tokens, {c.n_heads} head(s), d_in = {c.d_in}, d_k = {c.d_k}, "
        f"d_v = {c.d_v}); this server allows {MAX_TRAINING_SECONDS:g} s for one link's run. "
        f"With these sizes {fit}.")
