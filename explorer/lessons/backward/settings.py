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
    outside them (`check_size` bounds the run's size for a given trace)."""

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
