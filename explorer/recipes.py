"""Where the numbers come from: embedding and weight recipes, drawn from one
local ``torch.Generator``.

Never the global RNG: Streamlit serves sessions in threads, and
``torch.manual_seed`` would let them disturb each other. Drawing from a
``Generator().manual_seed(seed)`` in the same order as the reference code gives
the same numbers as ``torch.manual_seed(seed)`` followed by that code.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def seeded_generator(seed: int) -> torch.Generator:
    """A fresh CPU generator, ``torch.Generator().manual_seed(seed)``."""
    return torch.Generator().manual_seed(seed)


def embedding_table(seed: int, vocab_size: int, d_in: int) -> tuple[Tensor, Tensor]:
    """The weight of ``nn.Embedding(vocab_size, d_in)`` after ``torch.manual_seed(seed)``.

    Returns ``(table, rng_state)``: the table, shape ``(vocab_size, d_in)``, drawn
    N(0, 1) as ``nn.Embedding`` does, and the generator state after the draw, so the
    weights can be drawn next without drawing the table again. Costs
    O(vocab_size * d_in); the app caches it per ``(seed, vocab_size, d_in)``.
    Reproduces ``002_8c91a21803773e04.txt`` cell 7.
    """
    rng = seeded_generator(seed)
    table = torch.randn(vocab_size, d_in, generator=rng)  # (vocab_size, d_in)
    return table, rng.get_state()


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
