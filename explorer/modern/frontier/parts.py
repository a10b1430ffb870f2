"""The Frontier page's parts in page order (`PARTS`), and `compute_parts`, which
computes them all from one X, one `FrontierConfig` and one seed.

Each part draws its weights from its own `torch.Generator`, seeded with the
learner's seed, so a part's numbers do not depend on which parts came before
it (adding, removing or reordering a part changes no other part's numbers).
A part that cannot compute the settings raises `ConfigError`; its message is
kept in `FrontierTrace.errors` and the other parts are computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core.config import ConfigError
from explorer.modern.frontier import FrontierConfig, Part, deltanet, gated, mla, ring, sinks, sparse

PARTS: dict[str, Callable[[Tensor, FrontierConfig, torch.Generator], Part]] = {
    "mla": mla.mla,
    "sparse": sparse.sparse,
    "sinks": sinks.sinks,
    "ring": ring.ring,
    "gated": gated.gated,
    "deltanet": deltanet.deltanet,
}
"""Each part's key (its name in the link, the JSON and the script) -> its
function ``(x, config, generator) -> Part``, in the page's order."""


@dataclass(frozen=True)
class FrontierTrace:
    """Every part of the page for one X: ``parts`` (key -> `Part`, in `PARTS`'
    order, those that computed) and ``errors`` (key -> the `ConfigError`'s
    message of each part that could not), with the ``config`` and the sentence's
    ``n_tokens`` they were computed for."""

    config: FrontierConfig
    n_tokens: int
    parts: dict[str, Part]
    errors: dict[str, str]

    @property
    def nbytes(self) -> int:
        """Bytes of every step's values (what the byte-bounded cache counts)."""
        return sum(step.values.numel() * step.values.element_size()
                   for part in self.parts.values() for step in part.steps)


def compute_parts(x: Tensor, config: FrontierConfig, seed: int) -> FrontierTrace:
    """Every part of `PARTS` for X ``(n_tokens, d_in)``, each with its own
    ``torch.Generator().manual_seed(seed)``.

    Raises `ConfigError` when ``config`` is outside its limits
    (`FrontierConfig.check`) or X is not a 2-D matrix of at least one token; a
    `ConfigError` of one part is kept in `FrontierTrace.errors` instead, and the
    other parts are computed."""
    if x.dim() != 2:
        raise ConfigError("x", f"X must be a matrix (n_tokens, d_in) (got {x.dim()} "
                               "dimensions)")
    n_tokens = x.shape[0]
    config.check(n_tokens)
    parts: dict[str, Part] = {}
    errors: dict[str, str] = {}
    for key, compute in PARTS.items():
        generator = torch.Generator().manual_seed(seed)
        try:
            parts[key] = compute(x, config, generator)
        except ConfigError as error:
            errors[key] = str(error)
    return FrontierTrace(config, n_tokens, parts, errors)
