"""Where the numbers come from: embedding and weight recipes, drawn from one
local ``torch.Generator``.

Never the global RNG: Streamlit serves sessions in threads, and
``torch.manual_seed`` would let them disturb each other. Drawing from a
``Generator().manual_seed(seed)`` in the same order as the reference code gives
the same numbers as ``torch.manual_seed(seed)`` followed by that code.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator

import torch
from torch import Tensor

from explorer.core.config import MAX_TOKENS


def seeded_generator(seed: int) -> torch.Generator:
    """A fresh CPU generator, ``torch.Generator().manual_seed(seed)``."""
    return torch.Generator().manual_seed(seed)


_GLOBAL_RNG = threading.Lock()


@contextlib.contextmanager
def global_rng(seed: int | None = None) -> Iterator[None]:
    """PyTorch's global random state seeded with ``seed`` (None: as it is) for
    the block, then put back, one thread at a time. Only for PyTorch's own modules
    that draw from it and take no generator (``nn.Dropout``, a transformers
    model's init), used as the independent reference a learner's notebook would
    run after ``torch.manual_seed(seed)``, or built only to have our weights
    copied in (``seed`` None); the explorer's own numbers never come from it."""
    with _GLOBAL_RNG, torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        yield


TABLE_CHUNK = 1 << 20
"""Table values drawn at a time (4 MiB of float32); a multiple of 16."""


def embedding_table(seed: int, vocab_size: int, d_in: int,
                    n_rows: int | None = None) -> tuple[Tensor, Tensor]:
    """The first rows of ``nn.Embedding(vocab_size, d_in)``'s weight after
    ``torch.manual_seed(seed)``, and the generator state after the whole table.

    Returns ``(rows, rng_state)``: ``rows`` has shape ``(n_rows, d_in)``, drawn
    N(0, 1) as ``nn.Embedding`` does; ``n_rows`` defaults to
    ``min(vocab_size, MAX_TOKENS)``, all a sentence can use, since token ids
    index the sorted vocabulary of at most `MAX_TOKENS` distinct tokens. The
    state lets the weights be drawn next without drawing the table again.
    Reproduces ``002_8c91a21803773e04.txt`` cell 7.

    The table is drawn in chunks of `TABLE_CHUNK` values and only the rows kept,
    so memory is O(n_rows · d_in) while time stays O(vocab_size · d_in). The
    numbers are exactly those of one ``torch.randn(vocab_size, d_in)``: the CPU
    kernel fills blocks of 16 values and redraws the last 16 of a tensor whose
    size is not a multiple of 16, and chunks of a multiple of 16, ending in one
    of at least 16 values, do the same (``tests/core/test_backend.py`` checks it).
    """
    n_rows = min(vocab_size, MAX_TOKENS) if n_rows is None else n_rows
    rng = seeded_generator(seed)
    total, keep = vocab_size * d_in, n_rows * d_in
    kept, drawn = [], 0
    while drawn < total:
        size = total - drawn if total - drawn < TABLE_CHUNK + 16 else TABLE_CHUNK
        chunk = torch.randn(size, generator=rng)
        if drawn < keep:
            kept.append(chunk[: keep - drawn].clone())
        drawn += size
    return torch.cat(kept).view(n_rows, d_in), rng.get_state()


def uniform_embeddings(n_tokens: int, d_in: int, rng: torch.Generator) -> Tensor:
    """``torch.rand(n_tokens, d_in)``: U[0, 1) embeddings, shape ``(n_tokens, d_in)``.

    Reproduces ``001_c475e8729ba8e095.txt`` cell 2 (``torch.rand((6, 3))``).
    """
    return torch.rand(n_tokens, d_in, generator=rng)


def linear_weight(d_in: int, d_out: int, rng: torch.Generator) -> Tensor:
    """``nn.Linear(d_in, d_out).weight``'s default init, shape ``(d_out, d_in)``.

    Kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(d_in), 1/sqrt(d_in)),
    exactly as ``nn.Linear.reset_parameters`` draws it.
    """
    weight = torch.empty(d_out, d_in)
    torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=rng)
    return weight


def linear_bias(d_in: int, d_out: int, rng: torch.Generator) -> Tensor:
    """``nn.Linear(d_in, d_out).bias``'s default init, U(-1/sqrt(d_in), 1/sqrt(d_in)),
    shape ``(d_out,)``. Drawn after the weight, as ``nn.Linear`` does."""
    bound = 1 / math.sqrt(d_in)
    return torch.empty(d_out).uniform_(-bound, bound, generator=rng)


def projection_weight(init: str, d_in: int, d_out: int, rng: torch.Generator) -> Tensor:
    """A projection matrix W of shape ``(d_in, d_out)``, so that ``Q = X @ W``.

    - ``"randn"``: ``torch.randn(d_in, d_out)`` (``002_8c91a21803773e04.txt`` cell 11);
    - ``"rand"``: ``torch.rand(d_in, d_out)`` (the book's ``SelfAttention_v1``);
    - ``"linear"``: ``nn.Linear(d_in, d_out, bias=False)``'s init, transposed
      (``SelfAttention_v2``);
    - ``"identity"``: ``I`` (``d_out`` must equal ``d_in``; draws nothing).

    Raises ``ValueError`` for any other name (``"given"`` matrices do not come
    from here).
    """
    if init == "randn":
        return torch.randn(d_in, d_out, generator=rng)
    if init == "rand":
        return torch.rand(d_in, d_out, generator=rng)
    if init == "linear":
        return linear_weight(d_in, d_out, rng).T.contiguous()  # (d_out, d_in) -> (d_in, d_out)
    if init == "identity":
        if d_in != d_out:
            raise ValueError(f"identity weights need d_out = d_in (got {d_out} and {d_in})")
        return torch.eye(d_in)
    raise ValueError(f"no recipe for weight_init={init!r}")


def dropout_mask(shape: tuple[int, ...], p: float, seed: int) -> Tensor:
    """The keep-mask ``nn.Dropout(p)`` draws after ``torch.manual_seed(seed)``.

    Returns a float tensor of 0s and 1s with ``shape``; 1 means "kept". Drawn as
    ``bernoulli(1 - p)`` from its own generator, exactly as PyTorch's CPU dropout
    does, so ``weights * mask / (1 - p)`` equals ``nn.Dropout(p)(weights)``.
    The CPU kernel may differ between operating systems for the same seed.
    """
    rng = seeded_generator(seed)
    return torch.empty(shape).bernoulli_(1.0 - p, generator=rng)
