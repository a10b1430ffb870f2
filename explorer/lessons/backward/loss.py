"""The loss a learner understands, and its gradient dL/dO: where the backward
pass starts.

Next-token prediction (the book's chapter 5, ``calc_loss_batch``): the
attention's output rows O (the ``output`` step, or the ``context`` without
``out_proj``) go through a fixed unembedding U to logits over the sentence's
vocabulary, and the loss is the mean cross-entropy of each position's next
token. Or the squared distance to a target context drawn from another seed.

Pure torch, float32, as the forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core import recipes
from explorer.core.config import ConfigError
from explorer.core.tokenizer import build_vocab
from explorer.core.trace import Trace
from explorer.lessons.backward.settings import NEXT_TOKEN, LossConfig

IGNORE_INDEX = -100
"""The target of a position without a next token (the last one): left out of
the mean, as ``torch.nn.functional.cross_entropy(..., ignore_index=-100)`` does."""


def rows_name(trace: Trace) -> str:
    """The step the loss reads: ``"output"`` with the output projection, else ``"context"``."""
    return "output" if "output" in trace else "context"


# ---------------------------------------------------------------------------
# Next-token prediction
# ---------------------------------------------------------------------------
def unembedding(seed: int, d_model: int, n_vocab: int) -> Tensor:
    """The fixed unembedding U, (d_model, n_vocab), so that logits = O·U.

    ``nn.Linear(d_model, n_vocab, bias=False).weight``'s default init
    (uniform within ±1/√d_model), drawn from ``torch.Generator().manual_seed(seed)``
    and transposed: the same numbers as ``torch.manual_seed(seed)`` followed by
    the book's ``out_head = nn.Linear(emb_dim, vocab_size, bias=False)`` (Listing 4.7).
    Not trained.
    """
    rng = recipes.seeded_generator(seed)
    return recipes.linear_weight(d_model, n_vocab, rng).T.contiguous()


def next_token_targets(token_ids: Tensor) -> Tensor:
    """Each position's target, the next token's id: targets[i] = token_ids[i + 1].

    token_ids: (n,) -> (n,) int64. The last position has no next token: its
    target is `IGNORE_INDEX`, and it is left out of the loss (its row of dL/dO is 0).
    """
    targets = torch.full_like(token_ids, IGNORE_INDEX)
    targets[:-1] = token_ids[1:]
    return targets


def logits_of(rows: Tensor, unembedding_matrix: Tensor) -> Tensor:
    """logits = O·U: rows (n, d_model) @ U (d_model, n_vocab) -> (n, n_vocab)."""
    return rows @ unembedding_matrix


def log_softmax(logits: Tensor) -> Tensor:
    """log softmax of each row, stably: x − max − log Σ exp(x − max). (n, V) -> (n, V)."""
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """L = −(1/N) Σ_i log softmax(logits_i)[targets_i] over the N positions
    whose target is not `IGNORE_INDEX` (0-dim tensor).

    logits (n, V); targets (n,) int64. Equals ``F.cross_entropy(logits,
    targets, ignore_index=-100)``.
    """
    kept = targets != IGNORE_INDEX
    picked = log_softmax(logits[kept]).gather(-1, targets[kept, None])  # (N, 1)
    return -picked.mean()


def cross_entropy_gradient(logits: Tensor, targets: Tensor) -> Tensor:
    """dL/dlogits = (softmax(logits_i) − onehot(targets_i)) / N for the N kept
    positions, 0 for the left-out one (Goodfellow et al., "Deep Learning", §6.2.2.3).

    logits (n, V); targets (n,) -> (n, V).
    """
    kept = targets != IGNORE_INDEX
    probabilities = log_softmax(logits).exp()
    onehot = torch.zeros_like(logits)
    onehot[kept, targets[kept]] = 1.0
    return (probabilities - onehot) * kept[:, None] / kept.sum()


def rows_gradient(d_logits: Tensor, unembedding_matrix: Tensor) -> Tensor:
    """dL/dO = dL/dlogits · Uᵀ: (n, V) @ (V, d_model) -> (n, d_model)."""
    return d_logits @ unembedding_matrix.T


# ---------------------------------------------------------------------------
# Squared distance to a target context
# ---------------------------------------------------------------------------
def target_context(seed: int, n_tokens: int, d_model: int) -> Tensor:
    """The target T, ``torch.randn(n_tokens, d_model)`` drawn from
    ``torch.Generator().manual_seed(seed)``: (n_tokens, d_model)."""
    return torch.randn(n_tokens, d_model, generator=recipes.seeded_generator(seed))


def squared_distance(rows: Tensor, target: Tensor) -> Tensor:
    """L = (1/(n·d)) Σ_i,c (O_ic − T_ic)², the mean squared error
    (``F.mse_loss(rows, target)``), 0-dim. rows, target: (n, d)."""
    return ((rows - target) ** 2).mean()


def squared_distance_gradient(rows: Tensor, target: Tensor) -> Tensor:
    """dL/dO = 2 (O − T) / (n·d): (n, d) -> (n, d)."""
    return 2.0 * (rows - target) / rows.numel()


# ---------------------------------------------------------------------------
# One loss on one trace
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Loss:
    """The loss on one set of output rows, and where the backward pass starts.

    ``kind``: `NEXT_TOKEN` or `TARGET`. ``value``: L. ``rows_name``: the step
    it reads (``"output"`` or ``"context"``). ``rows``: O, (n, d). ``grad_rows``:
    dL/dO, (n, d). For `NEXT_TOKEN`: ``vocab`` (the sentence's distinct
    tokens, sorted, as `explorer.core.tokenizer.build_vocab`), ``unembedding``
    U (d, V), ``logits`` (n, V), ``grad_logits`` dL/dlogits (n, V) and
    ``targets`` (n,) int64 (`IGNORE_INDEX` at the last position). For
    `TARGET`: ``targets`` is the target context T (n, d); the others are None.
    ``seed``: the seed its fixed part was drawn from (U's: the config's seed;
    T's: the target seed), so that the loss can be drawn again.
    """

    kind: str
    value: float
    rows_name: str
    rows: Tensor
    grad_rows: Tensor
    targets: Tensor
    vocab: tuple[str, ...] = ()
    unembedding: Tensor | None = None
    logits: Tensor | None = None
    grad_logits: Tensor | None = None
    seed: int | None = None

    def description(self) -> dict:
        """The loss as plain data, enough to compute it again from the trace
        (the downloads' ``"loss"``): its ``kind``, the step it ``reads``, its
        ``value``, the seed of its fixed part (``unembedding_seed`` or
        ``target_seed``; the other None) and its ``recipe`` in PyTorch."""
        n, width = self.rows.shape
        rows = "O" if self.rows_name == "output" else "Z"
        if self.kind == NEXT_TOKEN:
            recipe = (f"U = nn.Linear({width}, {len(self.vocab)}, bias=False).weight.T drawn "
                      f"after torch.manual_seed({self.seed}); targets[i] = token_ids[i + 1] "
                      f"({IGNORE_INDEX} at the last position); "
                      f"F.cross_entropy({rows} @ U, targets, ignore_index={IGNORE_INDEX})")
        else:
            recipe = (f"T = torch.randn({n}, {width}, generator=torch.Generator()"
                      f".manual_seed({self.seed})); F.mse_loss({rows}, T)")
        return {"kind": self.kind, "reads": self.rows_name, "value": self.value,
                "unembedding_seed": self.seed if self.kind == NEXT_TOKEN else None,
                "target_seed": None if self.kind == NEXT_TOKEN else self.seed,
                "vocab": list(self.vocab) if self.kind == NEXT_TOKEN else None,
                "recipe": recipe}


@dataclass(frozen=True)
class Objective:
    """A loss with its fixed parts drawn once (the unembedding, or the target),
    to evaluate on changing rows (training). Call it on rows (n, d) for a `Loss`."""

    kind: str
    rows_name: str
    targets: Tensor
    vocab: tuple[str, ...] = ()
    unembedding: Tensor | None = None
    seed: int | None = None

    def __call__(self, rows: Tensor) -> Loss:
        if self.kind == NEXT_TOKEN:
            logits = logits_of(rows, self.unembedding)
            d_logits = cross_entropy_gradient(logits, self.targets)
            return Loss(self.kind, float(cross_entropy(logits, self.targets)), self.rows_name,
                        rows, rows_gradient(d_logits, self.unembedding), self.targets,
                        self.vocab, self.unembedding, logits, d_logits, self.seed)
        return Loss(self.kind, float(squared_distance(rows, self.targets)), self.rows_name,
                    rows, squared_distance_gradient(rows, self.targets), self.targets,
                    seed=self.seed)


def objective(trace: Trace, loss_config: LossConfig = LossConfig()) -> Objective:
    """The loss ``loss_config`` asks for, on ``trace``'s sentence and sizes.

    Next-token: U = `unembedding` (config's seed, d = the rows' width, V =
    the vocabulary's length), targets = `next_token_targets` of the token
    ids. Target: T = `target_context` (``loss_config.seed_of_target``).
    Raises `ConfigError` for next-token prediction on a single token (no
    position has a next token).
    """
    c, name = trace.config, rows_name(trace)
    n, width = trace[name].shape
    if loss_config.loss == NEXT_TOKEN:
        if n < 2:
            raise ConfigError("loss", "the next-token loss needs at least 2 tokens: the last "
                                      f"token has no next one (got {n}). Add a word, or choose "
                                      "the squared distance to a target.")
        vocab = tuple(build_vocab(trace.tokens))
        return Objective(NEXT_TOKEN, name, next_token_targets(trace["token_ids"]), vocab,
                         unembedding(c.seed, width, len(vocab)), c.seed)
    seed = loss_config.seed_of_target(c)
    return Objective(loss_config.loss, name, target_context(seed, n, width), seed=seed)


def compute_loss(trace: Trace, loss_config: LossConfig = LossConfig()) -> Loss:
    """The loss on ``trace``'s output rows (`objective` applied to them).
    Raises `ConfigError` as `objective`."""
    return objective(trace, loss_config)(trace[rows_name(trace)])
