"""The attention of 2026's open models, step by step: one module per mechanism.

- `mla`: multi-head latent attention (DeepSeek-V2/V3), expanded and absorbed;
- `sparse`: DeepSeek sparse attention (V3.2): the lightning indexer and top-k keys;
- `sinks`: learned attention sinks (gpt-oss);
- `ring`: the sliding window decoded with a ring-buffer cache (Mistral);
- `gated`: gated attention (Qwen3-Next): σ(x W_g) on each head's output;
- `deltanet`: Gated DeltaNet, recurrent and chunked.

`parts` runs them all, in the page's order, each with its own generator.

Every mechanism is a function ``(x, config, generator) -> Part``: from X
``(n_tokens, d_in)``, the page's `FrontierConfig` and a local `torch.Generator`
(seeded from the learner's seed), it draws its own weights, computes every
intermediate matrix as a `Step`, and checks itself against an independent
reference (transformers' own module on a tiny config built offline, or a second
route to the same numbers) as `explorer.core.agreement.Agreement` values. The
page (`explorer.ui.frontier`), its JSON and its script read only `Part`s, in the
order of `PARTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from explorer.core.agreement import Agreement
from explorer.core.config import ConfigError

LIMITS: dict[str, tuple[int, int]] = {
    "n_heads": (1, 8),
    "head_dim": (2, 64),
    "rope_dim": (2, 64),
    "kv_lora_rank": (1, 256),
    "q_lora_rank": (1, 256),
    "top_k": (1, 512),
    "index_heads": (1, 8),
    "index_dim": (1, 64),
    "window": (1, 512),
    "chunk": (1, 512),
}
"""Each `FrontierConfig` size's smallest and largest value (both allowed): the
page's settings, their link's bounds and `FrontierConfig.check` read them here."""
EVEN = ("rope_dim", "head_dim")
"""Sizes that must be even: RoPE turns pairs of dimensions (MLA's rope_dim;
the heads of the sinks, the ring buffer and the gated part)."""


@dataclass(frozen=True)
class FrontierConfig:
    """The Frontier page's sizes, shared by every part.

    ``n_heads`` query heads of ``head_dim`` (the "nope" part for MLA);
    ``rope_dim``: MLA's decoupled RoPE dimension (even); ``kv_lora_rank`` and
    ``q_lora_rank``: MLA's latent widths; ``top_k``: how many keys each query
    keeps in sparse attention; ``index_heads``, ``index_dim``: the lightning
    indexer's heads and width; ``window``: the sliding window, in keys, the
    query's own key included (transformers' and Mistral's convention);
    ``chunk``: Gated DeltaNet's chunk length, in tokens."""

    n_heads: int = 2
    head_dim: int = 4
    rope_dim: int = 2
    kv_lora_rank: int = 4
    q_lora_rank: int = 6
    top_k: int = 3
    index_heads: int = 2
    index_dim: int = 4
    window: int = 3
    chunk: int = 2

    def check(self, n_tokens: int | None = None) -> None:
        """Raise `ConfigError` (naming the field) for a size outside `LIMITS`, an
        odd one of `EVEN`, or, given ``n_tokens``, a sentence of no token; the
        message says what is allowed and what was given
        (``rope_dim must be between 2 and 64 (got 0)``). Sizes larger than the
        sentence are allowed: ``top_k``, ``window`` and ``chunk`` then take every
        token, as the models' code does."""
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= high:
                raise ConfigError(name, f"{name} must be a whole number between {low} and "
                                        f"{high} (got {value!r})")
            if name in EVEN and value % 2:
                raise ConfigError(name, f"{name} must be even, since RoPE turns pairs of "
                                        f"dimensions (got {value})")
        if n_tokens is not None and n_tokens < 1:
            raise ConfigError("n_tokens", f"the sentence must have at least 1 token (got "
                                          f"{n_tokens})")


@dataclass(frozen=True)
class Step:
    """One intermediate matrix of a part, drawn as one heatmap.

    ``name``: its key in the JSON and the link (snake_case, unique in its part);
    ``title``: what the chart's title says; ``formula``: LaTeX; ``values``: a
    2-D tensor ``(rows, cols)`` or a 3-D one ``(n_heads, rows, cols)`` (one
    head shown at a time); ``rows`` and ``cols``: what the axes count
    (``"tokens"`` labels them with the sentence's tokens, ``"keys"`` too,
    anything else by index: ``"dims"``, ``"slots"``, ``"steps"``);
    ``explain``: a sentence or two on what a cell means; ``signed``: whether the
    values have a sign (a diverging colour scale) or are weights in [0, 1]."""

    name: str
    title: str
    formula: str
    values: Tensor
    rows: str = "tokens"
    cols: str = "dims"
    explain: str = ""
    signed: bool = True


@dataclass(frozen=True)
class Part:
    """One mechanism on the page: its ``steps`` in reading order, its
    ``checks`` (each an `Agreement`: what was compared with what, and the
    largest difference), and ``facts``: short labelled numbers the page shows
    as a table (``{"cache bytes per token (MLA)": "48"}``). ``key``: the part's
    name in the JSON and the link; ``title`` and ``summary``: the section's
    heading and its first paragraph (Markdown, the explorer's own text);
    ``source``: the paper's equation or the model's code it reproduces."""

    key: str
    title: str
    summary: str
    source: str
    steps: tuple[Step, ...]
    checks: tuple[Agreement, ...] = ()
    facts: dict[str, str] = field(default_factory=dict)

    def step(self, name: str) -> Step:
        """The step called ``name``. Raises KeyError for no such step."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)
