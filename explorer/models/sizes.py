"""What a GPT-2, BERT or Llama-family config asks for, known before the model is built.

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

The Llama family (`DecoderSizes`, `decoder_sizes`) is counted as loaded, with
its language-model head (``LlamaForCausalLM`` ...; a head tied to the
embeddings counts once), in the dtype its weights ship in (bfloat16: 2 bytes a
parameter). Per layer, with h query heads and k K/V heads of width e:

    attention  W_q: d·h·e   W_k, W_v: 2·d·k·e   o_proj: h·e·d   (+ biases)
    QK-norm    2·e (Qwen3, Gemma 3)
    MLP        gate, up, down: 3·d·m
    RMSNorms   2·d (Gemma 3: 4·d)

SmolLM2-135M: 30 layers of 3,540,096, 134,515,008 in all.
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
    return _size_in(config, field, model, *LIMITS[name])


def _size_in(config: Any, field: str, model: str, low: int, high: int) -> int:
    """``config.<field>``, a whole number from ``low`` to ``high``, or `ModelError`."""
    value = getattr(config, field, None)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ModelError("model", f"{field} in the config.json of {model} must be a whole "
                                  f"number from {low:,} to {high:,} (got {shown(value)})")
    return value


def model_sizes(architecture: str, config: Any,
                model: str = "this model") -> ModelSizes | DecoderSizes:
    """The sizes ``config`` (a transformers ``GPT2Config`` / ``BertConfig``) asks
    for, checked before a model is built from it.

    ``architecture``: ``"gpt2"`` or ``"bert"``; ``model`` names the model in
    messages (already quoted, e.g. ``"'gpt2'"``). GPT-2's ``n_inner`` may be
    None (then 4 · n_embd). Raises `ModelError` when a size is not a whole
    number within `LIMITS`, or when the width is not divisible by the number
    of heads, saying which field, what it holds and what is allowed. A
    Llama-family ``architecture`` (`explorer.models.anatomy.DECODERS`) gives
    `decoder_sizes`.
    """
    if architecture in DECODER_FIELDS_OF:
        return decoder_sizes(architecture, config, model)
    fields = CONFIG_FIELDS[architecture]
    values: dict[str, int] = {}
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


# ---------------------------------------------------------------------------
# The Llama family
# ---------------------------------------------------------------------------
DECODER_LIMITS: dict[str, tuple[int, int]] = {
    **{name: LIMITS[name] for name in ("n_layers", "n_heads", "d_model", "d_mlp", "vocab_size")},
    "n_kv_heads": (1, 128),
    "head_dim": (2, 1_024),
}
"""`LIMITS` for the Llama family, with its K/V heads and head width (Llama 3
70B: 80 layers, 64 query and 8 K/V heads of 128; Gemma 3: vocabulary 262,208)."""

DECODER_FIELDS = {"n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                  "n_kv_heads": "num_key_value_heads", "d_model": "hidden_size",
                  "d_mlp": "intermediate_size", "vocab_size": "vocab_size",
                  "head_dim": "head_dim"}
"""Each size's name in a Llama-family config.json."""
DECODER_FIELDS_OF = dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gemma3_text"),
                                  DECODER_FIELDS)

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""The weights' dtypes a checkpoint may ship in, and their bytes; others load as float32."""


def shipped_dtype(config: Any) -> str:
    """The dtype a config says its weights ship in (``dtype``, formerly
    ``torch_dtype``), as a key of `DTYPE_BYTES`; float32 when it says none we keep."""
    value = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    name = str(value).removeprefix("torch.") if value is not None else "float32"
    return name if name in DTYPE_BYTES else "float32"


@dataclass(frozen=True)
class DecoderSizes:
    """The sizes a Llama-family config asks for, each checked against `DECODER_LIMITS`.

    ``qk_norm``: per-head RMSNorm of Q and K (two (head_dim,) weights);
    ``qkv_bias`` / ``out_bias``: biases of q/k/v_proj and o_proj; ``mlp_bias``;
    ``norms_per_layer``: 2 (Gemma 3: 4); ``tied``: the LM head is the embedding
    table; ``dtype``: what the weights ship in (`shipped_dtype`);
    ``rope_tables``: how many sets of RoPE frequencies the model keeps
    (Gemma 3: one per layer type); ``embed_scale``: Gemma's √d_model buffer.
    """

    architecture: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    d_mlp: int
    vocab_size: int
    qk_norm: bool = False
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    norms_per_layer: int = 2
    tied: bool = True
    dtype: str = "float32"
    rope_tables: int = 1
    embed_scale: bool = False

    @property
    def layer_parameters(self) -> int:
        """One layer's parameters (see the module docstring)."""
        d, m, e = self.d_model, self.d_mlp, self.head_dim
        q, kv = self.n_heads * e, self.n_kv_heads * e
        attention = d * q + 2 * d * kv + q * d                     # W_q, W_k, W_v, o_proj
        attention += (q + 2 * kv if self.qkv_bias else 0) + (d if self.out_bias else 0)
        qk_norm = 2 * e if self.qk_norm else 0                     # q_norm, k_norm
        mlp = 3 * d * m + (2 * m + d if self.mlp_bias else 0)      # gate, up, down
        return attention + qk_norm + mlp + self.norms_per_layer * d

    @property
    def parameters(self) -> int:
        """Every parameter of the loaded model (``…ForCausalLM``), a tied head
        counted once, as ``sum(p.numel() for p in model.parameters())``."""
        table = self.vocab_size * self.d_model
        head = 0 if self.tied else table
        return table + self.n_layers * self.layer_parameters + self.d_model + head

    @property
    def buffer_bytes(self) -> int:
        """The buffers: each RoPE table's inverse frequencies and their
        original copy (float32, head_dim/2 each), and Gemma's embedding scale."""
        return self.rope_tables * 2 * (self.head_dim // 2) * FLOAT32_BYTES + (
            DTYPE_BYTES[self.dtype] if self.embed_scale else 0)

    @property
    def nbytes(self) -> int:
        """Bytes of the loaded model in the dtype its weights ship in, parameters
        and buffers: what `explorer.models.LoadedModel.memory_bytes` will be
        (SmolLM2-135M in bfloat16: 257 MB, MB = 2**20 bytes)."""
        return DTYPE_BYTES[self.dtype] * self.parameters + self.buffer_bytes


def decoder_sizes(architecture: str, config: Any, model: str = "this model") -> DecoderSizes:
    """The sizes a Llama-family ``config`` (``LlamaConfig``, ``Qwen3Config``,
    ``Gemma3TextConfig`` ...) asks for, checked before the model is built.

    ``num_key_value_heads`` may be None (then one per query head, multi-head
    attention) and ``head_dim`` None (then hidden_size // num_attention_heads).
    Raises `ModelError` for a size that is not a whole number within
    `DECODER_LIMITS`, and for K/V heads that do not divide the query heads
    (each K/V head serves a group of n_heads / n_kv_heads query heads).
    """
    values: dict[str, int] = {}
    for name, field in DECODER_FIELDS.items():
        if name == "n_kv_heads" and getattr(config, field, None) is None:
            values[name] = values["n_heads"]
        elif name == "head_dim" and getattr(config, field, None) is None:
            values[name] = values["d_model"] // values["n_heads"]
        else:
            low, high = DECODER_LIMITS[name]
            values[name] = _size_in(config, field, model, low, high)
    if values["n_heads"] % values["n_kv_heads"]:
        raise ModelError("model", f"num_key_value_heads in the config.json of {model} must "
                                  "divide num_attention_heads, since each K/V head serves a "
                                  "group of query heads (got num_attention_heads = "
                                  f"{values['n_heads']}, num_key_value_heads = "
                                  f"{values['n_kv_heads']})")
    gemma = architecture == "gemma3_text"
    types = getattr(config, "layer_types", None) or ["full_attention"]
    return DecoderSizes(
        architecture, **values,
        qk_norm=architecture in ("qwen3", "gemma3_text"),
        qkv_bias=architecture == "qwen2" or bool(getattr(config, "attention_bias", False)),
        out_bias=architecture != "qwen2" and bool(getattr(config, "attention_bias", False)),
        mlp_bias=bool(getattr(config, "mlp_bias", False)),
        norms_per_layer=4 if gemma else 2,
        tied=bool(getattr(config, "tie_word_embeddings", True)),
        dtype=shipped_dtype(config),
        rope_tables=len(set(types)) if gemma else 1,
        embed_scale=gemma)
