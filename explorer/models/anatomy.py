"""Where GPT-2, BERT and the Llama family keep their attention, and how to read its weights.

One `Architecture` per supported ``model_type``: GPT-2 and BERT in
`ARCHITECTURES`, the Llama-family decoders (Llama, Mistral, Qwen2, Qwen3,
Gemma 3 text) in `DECODERS` (`DecoderArchitecture`, with RMSNorm, RoPE,
grouped-query heads and, for Qwen3 and Gemma 3, QK-norm). Each says
which module receives a layer's attention input X, which module computes the
attention's output O, whether the model is causal, and how to read the layer's
weights in this package's convention

    Q = X @ W_query + b_query,   W_query: (d_model, d_model),  b_query: (d_model,)

(the book's ``x @ W``; ``nn.Linear`` stores ``W.T``). Pure torch: the model
classes are looked up by name when a model is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from explorer.modern.attention import MAX_ROPE_BASE, MIN_ROPE_BASE

WEIGHT_NAMES = ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value", "W_out", "b_out")
"""The trace steps that hold a layer's attention weights, in pipeline order."""


Submodule = Any
"""A transformers module read by the attribute names its architecture gives it
(``block.attn.c_attn``, ``layer.self_attn.q_proj``). Typed as Any: torch types
every attribute of an ``nn.Module`` as ``Tensor | Module``, and these names
are transformers', not torch's."""


def _copy(t: Tensor) -> Tensor:
    """A contiguous copy, detached from the model: a trace must never share
    storage with a model that other sessions use."""
    return t.detach().clone(memory_format=torch.contiguous_format)


def gpt2_weights(block: Submodule) -> dict[str, Tensor]:
    """One ``GPT2Block``'s attention weights, as (d_model, d_model) matrices and (d_model,) biases.

    Mirrors ``GPT2Attention``: ``c_attn`` is a ``Conv1D`` computing
    ``x @ weight + bias`` with ``weight`` of shape (d_model, 3·d_model), and its
    output is split into query, key and value (``.split(embed_dim, dim=2)``).
    So W_query, W_key, W_value are its three column blocks, already in our
    convention; ``c_proj`` (also a ``Conv1D``) gives W_out and b_out.
    """
    attn = block.attn
    d = attn.embed_dim
    weight, bias = attn.c_attn.weight, attn.c_attn.bias  # (d, 3d), (3d,)
    parts = {}
    for i, name in enumerate(("query", "key", "value")):
        parts[f"W_{name}"] = _copy(weight[:, i * d:(i + 1) * d])  # (d, d)
        parts[f"b_{name}"] = _copy(bias[i * d:(i + 1) * d])       # (d,)
    parts["W_out"] = _copy(attn.c_proj.weight)  # (d, d), Conv1D: already x @ W
    parts["b_out"] = _copy(attn.c_proj.bias)    # (d,)
    return {name: parts[name] for name in WEIGHT_NAMES}


def bert_weights(layer: Submodule) -> dict[str, Tensor]:
    """One ``BertLayer``'s attention weights, as (d_model, d_model) matrices and (d_model,) biases.

    Mirrors ``BertSelfAttention``: ``query``, ``key`` and ``value`` are
    ``nn.Linear(d_model, d_model)`` layers computing ``x @ weight.T + bias``, so
    W_query = ``query.weight.T``. ``BertSelfOutput.dense`` gives W_out and b_out.
    """
    self_attn, dense = layer.attention.self, layer.attention.output.dense
    parts = {}
    for name in ("query", "key", "value"):
        linear = getattr(self_attn, name)
        parts[f"W_{name}"] = _copy(linear.weight.T)  # (d_out, d_in).T -> (d_in, d_out)
        parts[f"b_{name}"] = _copy(linear.bias)
    parts["W_out"] = _copy(dense.weight.T)
    parts["b_out"] = _copy(dense.bias)
    return {name: parts[name] for name in WEIGHT_NAMES}


def _cross_attention(config: Any) -> str | None:
    if getattr(config, "add_cross_attention", False):
        return "its layers also attend to an encoder's output (add_cross_attention)"
    return None


def _gpt2_unsupported(config: Any) -> str | None:
    if not getattr(config, "scale_attn_weights", True):
        return "it does not scale its scores by 1/√head_dim (scale_attn_weights=False)"
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        return "it also divides its scores by the layer number (scale_attn_by_inverse_layer_idx)"
    return _cross_attention(config)


def _bert_unsupported(config: Any) -> str | None:
    kind = getattr(config, "position_embedding_type", "absolute")
    if kind not in (None, "absolute"):
        return f"its attention adds relative-position terms (position_embedding_type={kind!r})"
    return _cross_attention(config)


@dataclass(frozen=True)
class Architecture:
    """How one family of models lays out its attention.

    ``model_class``: the transformers base class loaded (no LM head, no pooler);
    ``config_class``: its config class, built from a config.json by name (never
    through ``AutoConfig``, which would follow a config's ``auto_map`` to code).
    ``blocks(model)``: the layers, in order. ``attention(block)``: the module
    whose first input is the layer's attention input X (n, d_model).
    ``output(block)``: the module whose output is the attention's output O
    (n, d_model), before dropout and the residual; ``output_name`` its path
    inside a block. ``weights(block)``: see
    `gpt2_weights` / `bert_weights`. ``causal(config)``: whether future tokens
    are masked. ``unsupported(config)``: why a variant cannot be mirrored, or
    None. ``input_note``: what X is, for learners. ``base(module)``: the model
    without its language-model head (forward passes that only read attention
    run this). ``family``: ``"classic"`` (GPT-2, BERT) or ``"decoder"``.
    """

    name: str
    label: str
    model_class: str
    config_class: str
    model_kwargs: dict
    blocks: Callable[[Submodule], nn.ModuleList]
    attention: Callable[[Submodule], nn.Module]
    output: Callable[[Submodule], nn.Module]
    output_name: str
    weights: Callable[[Submodule], dict[str, Tensor]]
    causal: Callable[[Any], bool]
    unsupported: Callable[[Any], str | None]
    input_note: str
    base: Callable[[Submodule], nn.Module] = lambda module: module
    family: str = "classic"


ARCHITECTURES: dict[str, Architecture] = {
    "gpt2": Architecture(
        name="gpt2", label="GPT-2", model_class="GPT2Model", config_class="GPT2Config",
        model_kwargs={},
        blocks=lambda model: model.h,
        attention=lambda block: block.attn,
        output=lambda block: block.attn.c_proj,
        output_name="attn.c_proj",
        weights=gpt2_weights,
        causal=lambda config: True,
        unsupported=_gpt2_unsupported,
        input_note="X is the layer's input hidden state after its LayerNorm ln_1 "
                   "(GPT-2 normalises before attention).",
    ),
    "bert": Architecture(
        name="bert", label="BERT", model_class="BertModel", config_class="BertConfig",
        model_kwargs={"add_pooling_layer": False},
        blocks=lambda model: model.encoder.layer,
        attention=lambda layer: layer.attention.self,
        output=lambda layer: layer.attention.output.dense,
        output_name="attention.output.dense",
        weights=bert_weights,
        causal=lambda config: bool(getattr(config, "is_decoder", False)),
        unsupported=_bert_unsupported,
        input_note="X is the layer's input hidden state (BERT normalises after "
                   "attention, so no LayerNorm comes first).",
    ),
}
"""The supported ``config.model_type`` values and their anatomy."""


CLASSIC = tuple(ARCHITECTURES)
"""GPT-2 and BERT: what `explorer.models.load_model` opens unless told otherwise."""


# ---------------------------------------------------------------------------
# The Llama family
# ---------------------------------------------------------------------------
def decoder_weights(block: Submodule) -> dict[str, Tensor]:
    """One decoder layer's attention weights in the convention Q = X @ W_query (+ b_query).

    Mirrors ``LlamaAttention`` (and Mistral's, Qwen2's, Qwen3's, Gemma 3's):
    ``q_proj``, ``k_proj``, ``v_proj`` and ``o_proj`` are ``nn.Linear`` layers
    computing ``x @ weight.T (+ bias)``, so W_query = ``q_proj.weight.T``,
    (d_model, n_heads·head_dim); W_key and W_value (d_model, n_kv_heads·head_dim);
    W_out = ``o_proj.weight.T`` (n_heads·head_dim, d_model). Biases (Qwen2's
    Q, K, V; a config's ``attention_bias``) are kept when the layer has them.
    Plus the RMSNorm weights: ``input_norm`` (d_model,) and, with QK-norm,
    ``q_norm`` and ``k_norm`` (head_dim,). Copies in float32, whatever the
    model's dtype: the layer is computed in float32 when it is opened.
    """
    attn = block.self_attn
    parts = {"input_norm": block.input_layernorm.weight}
    for name, linear in (("query", attn.q_proj), ("key", attn.k_proj), ("value", attn.v_proj),
                         ("out", attn.o_proj)):
        parts[f"W_{name}"] = linear.weight.T  # (d_out, d_in).T -> (d_in, d_out)
        if linear.bias is not None:
            parts[f"b_{name}"] = linear.bias
    for name in ("q_norm", "k_norm"):
        if hasattr(attn, name):
            parts[name] = getattr(attn, name).weight
    return {name: _copy(t).to(torch.float32) for name, t in parts.items()}


SUPPORTED_ROPE = ("default", "linear", "llama3")
"""The RoPE variants mirrored step by step (`explorer.models.llama.rope_frequencies`)."""


def rope_parameters(config: Any, layer_type: str = "full_attention") -> dict:
    """A config's RoPE parameters (``rope_type``, ``rope_theta``, a scaling's
    ``factor`` ...) for a layer of ``layer_type``: Gemma 3 keeps one set per
    layer type (``"full_attention"``, ``"sliding_attention"``), the others one."""
    params = dict(getattr(config, "rope_parameters", None) or {})
    if "rope_type" not in params and layer_type in params:
        params = dict(params[layer_type] or {})
    return params


def layer_types(config: Any) -> list[str]:
    """Each layer's attention: ``"full_attention"`` or ``"sliding_attention"``.
    Qwen2, Qwen3 and Gemma 3 say so per layer (``layer_types``); Mistral's
    every layer slides when it has a ``sliding_window``; Llama's never do."""
    types = getattr(config, "layer_types", None)
    if types:
        return list(types)
    sliding = getattr(config, "sliding_window", None) is not None
    return ["sliding_attention" if sliding else "full_attention"] * config.num_hidden_layers


def _decoder_unsupported(config: Any) -> str | None:
    """Why a Llama-family config cannot be mirrored step by step, or None."""
    for kind in sorted(set(layer_types(config))):
        params = rope_parameters(config, kind)
        rope_type = params.get("rope_type", "default")
        if rope_type not in SUPPORTED_ROPE:
            return (f"its RoPE is scaled by {rope_type!r} (mirrored: "
                    f"{', '.join(SUPPORTED_ROPE)})")
        if params.get("partial_rotary_factor", 1.0) != 1.0:
            return "it rotates only part of each head (partial_rotary_factor)"
        theta = params.get("rope_theta")
        if not isinstance(theta, (int, float)) or not MIN_ROPE_BASE <= theta <= MAX_ROPE_BASE:
            return (f"its rope_theta is not a number from {MIN_ROPE_BASE:g} to "
                    f"{MAX_ROPE_BASE:g} (got {theta!r})")
    if getattr(config, "use_bidirectional_attention", False):
        return "its tokens see later tokens too (use_bidirectional_attention)"
    return None


def gemma_scaling(config: Any) -> float:
    """Gemma 3 scales its scores by query_pre_attn_scalar^(-1/2), not head_dim^(-1/2)."""
    return config.query_pre_attn_scalar ** -0.5


def head_dim_scaling(config: Any) -> float:
    """The scores' scale 1/√head_dim (Llama, Mistral, Qwen2, Qwen3)."""
    return decoder_head_dim(config) ** -0.5


def decoder_head_dim(config: Any) -> int:
    """One head's width: the config's ``head_dim`` (Qwen3, Gemma 3 set it apart
    from the width), else hidden_size // num_attention_heads."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


@dataclass(frozen=True)
class DecoderArchitecture(Architecture):
    """A Llama-family decoder (`Architecture` plus what sets these apart).

    ``qk_norm``: Q and K are RMS-normalised per head before RoPE (Qwen3, Gemma 3;
    ``norm_after_transpose``: Gemma 3 normalises (heads, n, e), Qwen3 (n, heads, e)).
    ``norm_offset``: RMSNorm multiplies by (offset + weight): 0 for Llama,
    1 for Gemma (its weights are stored around 0). ``scaling(config)``: the
    scores' factor. ``qkv_bias(config)`` / ``out_bias(config)``: whether
    q/k/v_proj and o_proj add a bias. A block's first input is the layer's
    input (the residual stream), before its RMSNorm ``input_layernorm``.
    """

    qk_norm: bool = False
    norm_after_transpose: bool = False
    norm_offset: float = 0.0
    scaling: Callable[[Any], float] = head_dim_scaling
    qkv_bias: Callable[[Any], bool] = lambda config: bool(getattr(config, "attention_bias", False))
    out_bias: Callable[[Any], bool] = lambda config: bool(getattr(config, "attention_bias", False))


def _decoder(name: str, label: str, prefix: str, **kwargs: Any) -> DecoderArchitecture:
    norm = "Gemma's RMSNorm, x / rms(x) · (1 + weight)" if kwargs.get("norm_offset") else \
        "RMSNorm, x / rms(x) · weight"
    return DecoderArchitecture(
        name=name, label=label, model_class=f"{prefix}ForCausalLM",
        config_class=f"{prefix}Config" if name != "gemma3_text" else "Gemma3TextConfig",
        model_kwargs={},
        blocks=lambda model: model.model.layers,
        attention=lambda block: block.self_attn,
        output=lambda block: block.self_attn.o_proj,
        output_name="self_attn.o_proj",
        weights=decoder_weights,
        causal=lambda config: True,
        unsupported=_decoder_unsupported,
        input_note=f"X is the layer's input hidden state after its input_layernorm ({norm}): "
                   "the model normalises before attention.",
        base=lambda model: model.model,
        family="decoder",
        **kwargs)


DECODERS: dict[str, DecoderArchitecture] = {
    "llama": _decoder("llama", "Llama", "Llama"),
    "mistral": _decoder("mistral", "Mistral", "Mistral"),
    "qwen2": _decoder("qwen2", "Qwen2", "Qwen2", qkv_bias=lambda config: True,
                      out_bias=lambda config: False),
    "qwen3": _decoder("qwen3", "Qwen3", "Qwen3", qk_norm=True),
    "gemma3_text": _decoder("gemma3_text", "Gemma 3", "Gemma3", qk_norm=True, norm_offset=1.0,
                            norm_after_transpose=True,
                            scaling=gemma_scaling),
}
"""The supported Llama-family ``config.model_type`` values (Gemma 3: its text
model, ``gemma3_text``; the multimodal ``gemma3`` checkpoints are not read)."""

EVERY_ARCHITECTURE: dict[str, Architecture] = {**ARCHITECTURES, **DECODERS}
"""GPT-2, BERT and the Llama family, by ``model_type``."""
