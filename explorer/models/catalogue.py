"""The models the explorer offers by name, and which of them this server's
memory budget holds.

Sizes are known before loading: a model's float32 weights take 4 bytes per
parameter of the base model (no LM head, no pooler). The Llama-family models
(`DECODER_CHOICES`) are counted as loaded, with their language-model head
(tied to the embeddings, so counted once), in bfloat16, as they ship: 2 bytes a
parameter. `DEFAULT_MODEL` is the
largest one the budget's model share holds (`explorer.server.budget.MODEL_BYTES`):
GPT-2 small from ``EXPLORER_MEMORY_BUDGET_MB=1536``, DistilGPT-2 on the
default 1 GB.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.models.packaged import NAME as PACKAGED
from explorer.server import budget


@dataclass(frozen=True)
class ModelChoice:
    """A model offered by name: ``name`` (what `explorer.models.load_model`
    takes and a link says), ``label`` (for people), ``parameters`` (the base
    model's, which fix its float32 size before it is loaded) and ``about``
    (one line on its shape); ``bytes_per_parameter``: 4 (float32), 2 for a
    model kept in the bfloat16 it ships in; ``hub``: its Hub repository."""

    name: str
    label: str
    parameters: int
    about: str
    bytes_per_parameter: int = 4
    hub: str = ""

    @property
    def nbytes(self) -> int:
        """Bytes of its weights (float32, or as shipped: bfloat16)."""
        return self.bytes_per_parameter * self.parameters

    @property
    def fits(self) -> bool:
        """Whether this server's model share (`explorer.server.budget.MODEL_BYTES`) holds it."""
        return self.nbytes <= budget.MODEL_BYTES


CLASSIC_CHOICES: dict[str, ModelChoice] = {c.name: c for c in (
    ModelChoice("gpt2", "GPT-2 small", 124_439_808,
                "OpenAI's GPT-2 (2019): 12 layers × 12 heads, d_model 768, causal"),
    ModelChoice("distilgpt2", "DistilGPT-2", 81_912_576,
                "GPT-2 distilled to 6 layers × 12 heads, d_model 768, causal"),
    ModelChoice("bert-base-uncased", "BERT base (uncased)", 108_891_648,
                "Google's BERT (2018): 12 layers × 12 heads, d_model 768, every token "
                "sees every other"),
    ModelChoice(PACKAGED, "all-MiniLM-L6-v2", 22_565_376,
                "sentence-transformers' sentence-embedding model (2021), a BERT "
                "fine-tuned from MiniLM: 6 layers × 12 heads, d_model 384, every token "
                "sees every other; installed as a package, so it opens offline",
                hub="sentence-transformers/all-MiniLM-L6-v2"),
)}
"""GPT-2, BERT and all-MiniLM-L6-v2 (a BERT that ships in a package,
`explorer.models.packaged`), offered by name, GPT-2 small first; their
parameter counts are checked against transformers' own configs in the tests."""


def _default_model() -> str:
    """GPT-2 small when this server's memory budget holds it, else the first
    model that fits (DistilGPT-2 on the default 1 GB budget). Offline, the
    Real model page may open all-MiniLM-L6-v2 instead
    (`explorer.models.loading.page_default`)."""
    fitting = [c.name for c in CLASSIC_CHOICES.values() if c.fits and c.name != PACKAGED]
    return fitting[0] if fitting else "gpt2"



PUBLISHED_CONFIGS: dict[str, dict] = {
    "smollm2-135m": {
        "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "head_dim": 64, "vocab_size": 49152, "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5, "rope_theta": 100000, "rope_scaling": None,
        "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
        "torch_dtype": "bfloat16"},
    "qwen3-0.6b": {
        "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000, "rope_scaling": None,
        "tie_word_embeddings": True, "attention_bias": False, "sliding_window": None,
        "use_sliding_window": False, "max_window_layers": 28, "torch_dtype": "bfloat16"},
}
"""The sizes in each Llama-family model's published config.json on the Hub
(HuggingFaceTB/SmolLM2-135M, Qwen/Qwen3-0.6B), from which the tests compute
`DECODER_CHOICES`' parameter counts offline."""

DECODER_CHOICES: dict[str, ModelChoice] = {c.name: c for c in (
    ModelChoice("smollm2-135m", "SmolLM2-135M", 134_515_008,
                "Hugging Face's SmolLM2 (2024), a Llama: 30 layers × 9 query heads sharing "
                "3 K/V heads of 64, d_model 576, RoPE θ = 100,000, causal",
                bytes_per_parameter=2, hub="HuggingFaceTB/SmolLM2-135M"),
    ModelChoice("qwen3-0.6b", "Qwen3-0.6B", 596_049_920,
                "Alibaba's Qwen3 (2025): 28 layers × 16 query heads sharing 8 K/V heads of "
                "128, d_model 1024, QK-norm, RoPE θ = 1,000,000, causal",
                bytes_per_parameter=2, hub="Qwen/Qwen3-0.6B"),
)}
"""The Llama-family models offered by name (in bfloat16, as they ship:
SmolLM2-135M 257 MB, within the default budget's 320 MB model share;
Qwen3-0.6B 1,137 MB, listed but refused there, with the figures)."""

MODEL_CHOICES: dict[str, ModelChoice] = {**CLASSIC_CHOICES, **DECODER_CHOICES}
"""Every model the Real model page offers by name, in the picker's order: GPT-2,
DistilGPT-2, BERT, then the Llama family (`DECODER_CHOICES`). One over the
server's memory budget is listed with why (`ModelChoice.fits`), not loaded."""

DEFAULT_MODEL = _default_model()
"""The model the Real model page opens on."""


MAX_NEW_TOKENS = 32
"""The most tokens one generation may add (`explorer.models.generation.generate`;
the page's "Tokens to generate")."""
DEFAULT_NEW_TOKENS = 8
"""The tokens `explorer.models.generation.generate`, the downloaded script and
the page's "Tokens to generate" add unless told."""
GENERATION_SECONDS = 20.0
"""The longest one generation may run; it stops after the token that passes it."""
