"""What a GPT-2 or BERT config asks for, known before the model is built.

A checkpoint's ``config.json`` fixes every tensor's shape, so its parameter
count and float32 bytes follow from a handful of numbers (`ModelSizes`).
`model_sizes` reads them from a transformers config and checks each against
`LIMITS` (a whole number, positive, within a bound that holds every GPT-2 and
BERT released) and the heads against the width; `ModelSizes.nbytes` is then
what `explorer.server.budget.check_model_fits` weighs before anything is allocated.
A config with ``n_layer=10**6`` is refused here in microseconds, instead of
being built for minutes.

The counts are of the base models the explorer loads (``GPT2Model``,
``BertModel`` without its pooler): no language-model head. Per layer, with
d = d_model and m = the MLP's width (4·d unless the config says otherwise),
both architectures hold the same tensors under different names:

    attention  Q, K, V: 3 · (d·d + d)     output projection: d·d + d
    MLP        up: d·m + m                down: m·d + d
    two LayerNorms: 2 · 2d

that is 4d² + 2dm + 9d + m. GPT-2 small: 7,087,872 per layer, 124,439,808 in all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from explorer.core.config import shown
from explorer.models.errors import ModelError

FLOAT32_BYTES = 4
INT64_BYTES = 8

LIMITS: dict[str, tuple[int, int]] = {
    "n_layers": (1, 128),
    "n_heads": (1, 128),
    "d_model": (1, 16_384),
    "d_mlp": (1, 65_536),
    "vocab_size": (1, 2**20),
    "n_positions": (1, 2**16),
    "n_token_types": (1, 1_024),
}
"""The smallest and largest value each size may take (GPT-2 XL: 48 layers × 25
heads, d_model 1600; BERT large: 24 × 16, 1024; vocabularies of 30,522 and
50,257 tokens; 512 and 1024 positions). Within these bounds the memory budget
decides: 128 layers of d_model 16,384 would be refused by it with the figures."""

CONFIG_FIELDS: dict[str, dict[str, str]] = {
    "gpt2": {"n_layers": "n_layer", "n_heads": "n_head", "d_model": "n_embd",
             "d_mlp": "n_inner", "vocab_size": "vocab_size", "n_positions": "n_positions"},
    "bert": {"n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
             "d_model": "hidden_size", "d_mlp": "intermediate_size",
             "vocab_size": "vocab_size", "n_positions": "max_position_embeddings",
             "n_token_types": "type_vocab_size"},
}
"""Each size's name in a config.json, per architecture (the name messages use)."""


@dataclass(frozen=True)
class ModelSizes:
    """The sizes a GPT-2 or BERT config asks for, each checked against `LIMITS`.

    ``n_token_types`` is BERT's segment vocabulary (``type_vocab_size``), 0 for GPT-2.
    """

    architecture: str
    n_layers: int
    n_heads: int
    d_model: int
    d_mlp: int
    vocab_size: int
    n_positions: int
    n_token_types: int = 0

    @property
    def layer_parameters(self) -> int:
        """One layer's parameters: 4d² + 2dm + 9d + m (see the module docstring)."""
        d, m = self.d_model, self.d_mlp
        attention = 3 * (d * d + d) + (d * d + d)  # W_query, W_key, W_value, W_out and biases
        mlp = (d * m + m) + (m * d + d)             # up and down projections
        norms = 2 * (2 * d)                         # two LayerNorms: weight and bias
        return attention + mlp + norms

    @property
    def embedding_parameters(self) -> int:
        """The token, position (and BERT's segment) tables, and the LayerNorm
        outside the layers (GPT-2's final ``ln_f``, BERT's embedding LayerNorm)."""
        rows = self.vocab_size + self.n_positions + self.n_token_types
        return rows * self.d_model + 2 * self.d_model

    @property
    def parameters(self) -> int:
        """Every parameter of the base model, exactly as ``sum(p.numel() for p in
        model.parameters())`` counts them: GPT-2 small 124,439,808, DistilGPT-2
        81,912,576, BERT base (uncased) 108,891,648."""
        return self.embedding_parameters + self.n_layers * self.layer_parameters

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the buffers the model registers: BERT keeps its position ids
        and token type ids (int64, one per position); GPT-2 none."""
        return 2 * INT64_BYTES * self.n_positions if self.architecture == "bert" else 0

    @property
    def nbytes(self) -> int:
        """Bytes of the loaded model in float32, parameters and buffers: what
        `explorer.models.LoadedModel.memory_bytes` will be (MB = 2**20 bytes:
        GPT-2 small 475 MB)."""
        return FLOAT32_BYTES * self.parameters + self.buffer_bytes


def _size(config: Any, name: str, field: str, model: str) -> int:
    """One size from ``config``, a whole number within `LIMITS`, or `ModelError`."""
    low, high = LIMITS[name]
    value = getattr(config, field, None)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ModelError("model", f"{field} in the config.json of {model} must be a whole "
                                  f"number from {low:,} to {high:,} (got {shown(value)})")
    return value


def model_sizes(architecture: str, config: Any, model: str = "this model") -> ModelSizes:
    """The sizes ``config`` (a transformers ``GPT2Config`` / ``BertConfig``) asks
    for, checked before a model is built from it.

    ``architecture``: ``"gpt2"`` or ``"bert"``; ``model`` names the model in
    messages (already quoted, e.g. ``"'gpt2'"``). GPT-2's ``n_inner`` may be
    None (then 4 · n_embd). Raises `ModelError` when a size is not a whole
    number within `LIMITS`, or when the width is not divisible by the number
    of heads, saying which field, what it holds and what is allowed.
    """
    fields = CONFIG_FIELDS[architecture]
    values = {}
    for name, field in fields.items():
        if name == "d_mlp" and architecture == "gpt2" and getattr(config, field, None) is None:
            values[name] = 4 * values["d_model"]  # GPT-2's default MLP width
            continue
        values[name] = _size(config, name, field, model)
    if values["d_model"] % values["n_heads"]:
        d, h = fields["d_model"], fields["n_heads"]
        raise ModelError("model", f"{d} in the config.json of {model} must be divisible by "
                                  f"{h}, since each head gets {d} / {h} dimensions (got {d} = "
                                  f"{values['d_model']}, {h} = {values['n_heads']})")
    return ModelSizes(architecture, **values)
