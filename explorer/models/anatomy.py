"""Where GPT-2 and BERT keep their attention, and how to read its weights.

One `Architecture` per supported ``model_type``, in `ARCHITECTURES`. Each says
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

WEIGHT_NAMES = ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value", "W_out", "b_out")
"""The trace steps that hold a layer's attention weights, in pipeline order."""


def _copy(t: Tensor) -> Tensor:
    """A contiguous copy, detached from the model: a trace must never share
    storage with a model that other sessions use."""
    return t.detach().clone(memory_format=torch.contiguous_format)


def gpt2_weights(block: nn.Module) -> dict[str, Tensor]:
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


def bert_weights(layer: nn.Module) -> dict[str, Tensor]:
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
    None. ``input_note``: what X is, for learners.
    """

    name: str
    label: str
    model_class: str
    config_class: str
    model_kwargs: dict
    blocks: Callable[[nn.Module], nn.ModuleList]
    attention: Callable[[nn.Module], nn.Module]
    output: Callable[[nn.Module], nn.Module]
    output_name: str
    weights: Callable[[nn.Module], dict[str, Tensor]]
    causal: Callable[[Any], bool]
    unsupported: Callable[[Any], str | None]
    input_note: str


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
