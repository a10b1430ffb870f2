"""The models the explorer offers by name, and which of them this server's
memory budget holds.

Sizes are known before loading: a model's float32 weights take 4 bytes per
parameter of the base model (no LM head, no pooler). `DEFAULT_MODEL` is the
largest one the budget's model share holds (`explorer.server.budget.MODEL_BYTES`):
GPT-2 small from ``EXPLORER_MEMORY_BUDGET_MB=1536``, DistilGPT-2 on the
default 1 GB.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.server import budget


@dataclass(frozen=True)
class ModelChoice:
    """A model offered by name: ``name`` (what `explorer.models.load_model`
    takes and a link says), ``label`` (for people), ``parameters`` (the base
    model's, which fix its float32 size before it is loaded) and ``about``
    (one line on its shape)."""

    name: str
    label: str
    parameters: int
    about: str

    @property
    def nbytes(self) -> int:
        """Bytes of its float32 weights."""
        return 4 * self.parameters

    @property
    def fits(self) -> bool:
        """Whether this server's model share (`explorer.server.budget.MODEL_BYTES`) holds it."""
        return self.nbytes <= budget.MODEL_BYTES


MODEL_CHOICES: dict[str, ModelChoice] = {c.name: c for c in (
    ModelChoice("gpt2", "GPT-2 small", 124_439_808,
                "OpenAI's GPT-2 (2019): 12 layers × 12 heads, d_model 768, causal"),
    ModelChoice("distilgpt2", "DistilGPT-2", 81_912_576,
                "GPT-2 distilled to 6 layers × 12 heads, d_model 768, causal"),
    ModelChoice("bert-base-uncased", "BERT base (uncased)", 108_891_648,
                "Google's BERT (2018): 12 layers × 12 heads, d_model 768, every token "
                "sees every other"),
)}
"""The models offered by name, GPT-2 small first; their parameter counts are
checked against transformers' own configs in the tests."""


def _default_model() -> str:
    """GPT-2 small when this server's memory budget holds it, else the first
    model that fits (DistilGPT-2 on the default 1 GB budget)."""
    fitting = [c.name for c in MODEL_CHOICES.values() if c.fits]
    return fitting[0] if fitting else "gpt2"


DEFAULT_MODEL = _default_model()
"""The model the Real model page opens on."""
