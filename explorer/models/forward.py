"""Forward passes through a real model, and what hooks catch on the way.

Every pass holds the model's lock and runs under ``torch.inference_mode()``;
hooks are registered for that pass only and removed in ``finally``. So a model
shared by many sessions is never changed, and one session's hooks never see
another session's pass. Passes that only read attention run the model without
its language-model head (``anatomy.base``).

For the Llama family, `decoder_layer_call` catches everything one layer's
attention saw and computed, in float32: from the model's own pass when its
weights are float32, else from float32 copies of the layer's RMSNorm and
attention modules, run on the model's own layer input, mask and RoPE.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor

from explorer.models.anatomy import Submodule
from explorer.models.loading import LoadedModel


class _Enough(Exception):
    """Raised by a hook that has caught what it needed: later layers need not run."""


@contextmanager
def _hooked(model: LoadedModel, hooks: Sequence[Callable[[], Any]]) -> Iterator[None]:
    """Hold the model's lock, run ``hooks`` (each registers one hook and returns
    its handle) and remove them all afterwards."""
    with model.lock:
        handles = []
        try:
            for register in hooks:
                handles.append(register())
            yield
        finally:
            for handle in handles:
                handle.remove()


def _run(model: LoadedModel, ids: Sequence[int], output_attentions: bool = False) -> Any:
    """``model.module(input_ids)`` for one sequence, without a KV cache."""
    with torch.inference_mode():
        return model.anatomy.base(model.module)(input_ids=torch.tensor([list(ids)]),
                                                output_attentions=output_attentions,
                                                use_cache=False)


def _block(model: LoadedModel, layer: int) -> Submodule:
    return model.anatomy.blocks(model.module)[layer]


def attention_input(model: LoadedModel, ids: Sequence[int], layer: int) -> Tensor:
    """X: what layer ``layer``'s attention receives, (n_tokens, d_model).

    Caught by a forward pre-hook on the attention module (``GPT2Attention``,
    whose input is ``ln_1``'s output; ``BertSelfAttention``, whose input is the
    layer's input). The pass stops there: later layers are not computed.
    Returns a normal (not inference-mode) tensor owned by the caller.
    """
    caught: list[Tensor] = []

    def catch(module: Any, args: tuple, kwargs: dict) -> None:
        caught.append(args[0] if args else kwargs["hidden_states"])
        raise _Enough

    attention = model.anatomy.attention(_block(model, layer))
    with _hooked(model, [lambda: attention.register_forward_pre_hook(catch, with_kwargs=True)]):
        try:
            _run(model, ids)
        except _Enough:
            pass
    return caught[0][0].clone()  # (1, n, d) -> (n, d), out of inference mode


def attention_outputs(model: LoadedModel, ids: Sequence[int], layer: int) -> tuple[Tensor, Tensor]:
    """The model's own numbers for one layer, from one normal forward pass.

    Returns ``(weights, output)``: the layer's entry of ``output_attentions``,
    (n_heads, n_tokens, n_tokens), and the attention's output before dropout
    and the residual, (n_tokens, d_model), caught by a forward hook on
    ``attn.c_proj`` (GPT-2), ``attention.output.dense`` (BERT) or
    ``self_attn.o_proj`` (the Llama family; see `decoder_layer_call`, which
    this returns the weights and output of, in float32).
    """
    if model.family == "decoder":
        call = decoder_layer_call(model, ids, layer)
        return call.attn_weights, call.output
    caught: list[Tensor] = []
    output_module = model.anatomy.output(_block(model, layer))

    def catch(module: Any, args: tuple, output: Tensor) -> None:
        caught.append(output)

    with _hooked(model, [lambda: output_module.register_forward_hook(catch)]):
        result = _run(model, ids, output_attentions=True)
    return result.attentions[layer][0].clone(), caught[0][0].clone()


def attention_maps(model: LoadedModel, ids: Sequence[int]) -> tuple[Tensor, ...]:
    """Every layer's attention weights from ``output_attentions``: a tuple of
    n_layers tensors, each (n_heads, n_tokens, n_tokens). Inference-mode tensors:
    read them, do not keep them."""
    with _hooked(model, []):
        result = _run(model, ids, output_attentions=True)
    return tuple(weights[0] for weights in result.attentions)


# ---------------------------------------------------------------------------
# The Llama family: one layer's attention, every tensor it made
# ---------------------------------------------------------------------------
def _first(args: tuple, kwargs: dict, name: str = "hidden_states") -> Any:
    return args[0] if args else kwargs[name]


def layer_input(model: LoadedModel, ids: Sequence[int], layer: int) -> Tensor:
    """What decoder layer ``layer`` receives: the residual stream before its
    RMSNorm, (n_tokens, d_model), in float32 (a bfloat16 model's values upcast,
    exactly). Caught by a forward pre-hook on the layer; the pass stops there."""
    caught: list[Tensor] = []

    def catch(module: Any, args: tuple, kwargs: dict) -> None:
        caught.append(_first(args, kwargs))
        raise _Enough

    block = _block(model, layer)
    with _hooked(model, [lambda: block.register_forward_pre_hook(catch, with_kwargs=True)]):
        try:
            _run(model, ids)
        except _Enough:
            pass
    return caught[0][0].to(torch.float32).clone()  # (1, n, d) -> (n, d)


@dataclass(frozen=True)
class LayerCall:
    """One decoder layer's attention as the model's own modules computed it,
    all float32 (n = n_tokens, h = n_heads, k = n_kv_heads, e = head_dim):

    ``layer_input`` (n, d) and ``x`` (n, d), ``input_layernorm``'s output;
    ``q_proj`` (n, h·e), ``k_proj``, ``v_proj`` (n, k·e): the projections'
    outputs; ``q_norm`` (h, n, e) and ``k_norm`` (k, n, e): QK-norm's outputs
    (None without); ``cos``, ``sin`` (n, e): the RoPE tables the layer was
    given; ``mask`` (n, n): the additive mask it was given (0 or a large
    negative number); ``attn_weights`` (h, n, n): ``output_attentions``;
    ``context`` (n, h·e): ``o_proj``'s input; ``output`` (n, d): its output.
    ``reference`` says where they come from. ``own_attn_weights`` (h, n, n):
    for a model in another dtype (bfloat16), the weights its own pass gave
    (``output_attentions`` in that dtype), upcast exactly; None for a float32
    model, whose own weights are ``attn_weights``.
    """

    reference: str
    layer_input: Tensor
    x: Tensor
    q_proj: Tensor
    k_proj: Tensor
    v_proj: Tensor
    q_norm: Tensor | None
    k_norm: Tensor | None
    cos: Tensor
    sin: Tensor
    mask: Tensor
    attn_weights: Tensor
    context: Tensor
    output: Tensor
    own_attn_weights: Tensor | None = None


def _catch_outputs(modules: dict[str, torch.nn.Module], caught: dict[str, Tensor]
                   ) -> list[Callable[[], Any]]:
    """Hook registrations that store each module's output (o_proj's input too)."""
    def keep(name: str) -> Callable:
        def hook(module: Any, args: tuple, output: Any) -> None:
            caught[name] = output
            if name == "o_proj":
                caught["context"] = args[0]
        return hook
    return [partial(m.register_forward_hook, keep(n)) for n, m in modules.items()]


def _submodules(norm: Submodule, attention: Submodule) -> dict[str, torch.nn.Module]:
    """The modules whose outputs `LayerCall` keeps, by name."""
    names = ("q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "o_proj")
    found = {name: getattr(attention, name) for name in names if hasattr(attention, name)}
    return {"input_layernorm": norm, **found}


def decoder_layer_call(model: LoadedModel, ids: Sequence[int], layer: int) -> LayerCall:
    """Every tensor decoder layer ``layer``'s attention made, from the model's
    own modules, in float32 (see `LayerCall`).

    A float32 model: one normal forward pass with ``output_attentions=True``,
    forward hooks on ``input_layernorm``, ``q_proj`` ... ``o_proj`` and a
    pre-hook on ``self_attn`` for the RoPE tables and the mask it is given.
    A model in another dtype (bfloat16): that pass catches the layer's input,
    mask and positions; then float32 copies of the layer's ``input_layernorm``
    and ``self_attn`` (the same weights, upcast exactly) run on them, with RoPE
    tables from the model's own ``rotary_emb`` in float32, so that the numbers
    are float32 computations of the model's own code. The shared model is
    never changed.
    """
    block = _block(model, layer)
    attention = model.anatomy.attention(block)
    base = model.anatomy.base(model.module)
    seen: dict[str, Any] = {}
    caught: dict[str, Any] = {}

    def before_block(module: Any, args: tuple, kwargs: dict) -> None:
        seen["layer_input"] = _first(args, kwargs)
        seen["position_ids"] = kwargs.get("position_ids")

    def before_attention(module: Any, args: tuple, kwargs: dict) -> None:
        seen["position_embeddings"] = kwargs["position_embeddings"]
        seen["attention_mask"] = kwargs.get("attention_mask")

    def after_attention(module: Any, args: tuple, output: Any) -> None:
        caught["attn_weights"] = output[1]

    float32 = model.dtype == "float32"
    hooks = [lambda: block.register_forward_pre_hook(before_block, with_kwargs=True),
             lambda: attention.register_forward_pre_hook(before_attention, with_kwargs=True),
             lambda: attention.register_forward_hook(after_attention)]
    if float32:
        hooks += _catch_outputs(_submodules(block.input_layernorm, attention), caught)
    with _hooked(model, hooks):
        with torch.inference_mode():
            base(input_ids=torch.tensor([list(ids)]), output_attentions=True, use_cache=False)
        own = None if float32 else caught["attn_weights"]  # the model's own, in its dtype
        if not float32:
            _rerun_in_float32(model, block, attention, seen, caught)
    n = len(ids)
    mask = seen["attention_mask"]
    mask = (torch.zeros(n, n) if mask is None
            else mask[0, 0].to(torch.float32) if mask.dtype != torch.bool
            else torch.zeros(n, n).masked_fill(~mask[0, 0], torch.finfo(torch.float32).min))
    cos, sin = seen["position_embeddings32"] if not float32 else seen["position_embeddings"]

    def plain(t: Tensor, *shape: int) -> Tensor:
        return t[0].to(torch.float32).clone().reshape(*shape)

    after_transpose = getattr(model.anatomy, "norm_after_transpose", False)  # decoders'

    def heads_first(t: Tensor | None) -> Tensor | None:
        """QK-norm's output as (h, n, e), (-1, n, e) as plain tensors: Qwen3
        normalises before the heads' transpose, (1, n, h, e); Gemma 3 after it,
        (1, h, n, e). None for a layer without QK-norm."""
        if t is None:
            return None
        return plain(t if after_transpose else t.transpose(1, 2), -1, n, e)

    e = model.head_dim
    where = ("output_attentions and forward hooks on the layer's modules" if float32 else
             f"float32 copies of the layer's input_layernorm and self_attn (the {model.dtype} "
             "weights upcast), run on the model's own layer input, mask and RoPE")
    return LayerCall(
        reference=f"{type(model.module).__name__} {model.name!r} layer {layer} ({where})",
        layer_input=plain(seen["layer_input"], n, -1), x=plain(caught["input_layernorm"], n, -1),
        q_proj=plain(caught["q_proj"], n, -1), k_proj=plain(caught["k_proj"], n, -1),
        v_proj=plain(caught["v_proj"], n, -1),
        q_norm=heads_first(caught.get("q_norm")), k_norm=heads_first(caught.get("k_norm")),
        cos=plain(cos, n, e), sin=plain(sin, n, e), mask=mask.clone(),
        attn_weights=plain(caught["attn_weights"], -1, n, n),
        context=plain(caught["context"], n, -1), output=plain(caught["o_proj"], n, -1),
        own_attn_weights=None if own is None else plain(own, -1, n, n))


def _rerun_in_float32(model: LoadedModel, block: Submodule, attention: Submodule,
                      seen: dict[str, Any], caught: dict[str, Any]) -> None:
    """Run float32 copies of ``block.input_layernorm`` and ``attention`` on the
    caught layer input, mask and positions, catching their tensors in ``caught``
    (and the float32 RoPE tables in ``seen["position_embeddings32"]``)."""
    norm32 = copy.deepcopy(block.input_layernorm).to(torch.float32)
    attention32 = copy.deepcopy(attention).to(torch.float32)
    hidden = seen["layer_input"].to(torch.float32)
    base = model.anatomy.base(model.module)
    positions = seen["position_ids"]
    if positions is None:
        positions = torch.arange(hidden.shape[1])[None]
    rotary: Submodule = base.rotary_emb
    layer_type = getattr(attention, "layer_type", None)
    with torch.inference_mode():
        if hasattr(rotary, "layer_types"):  # Gemma 3: one RoPE per layer type
            cos, sin = rotary(hidden, positions, layer_type)
        else:
            cos, sin = rotary(hidden, positions)
        seen["position_embeddings32"] = (cos, sin)
        mask = seen["attention_mask"]
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.to(torch.float32)
        handles = [register() for register in _catch_outputs(
            _submodules(norm32, attention32), caught)]
        try:
            x = norm32(hidden)
            _, weights = attention32(hidden_states=x, position_embeddings=(cos, sin),
                                     attention_mask=mask)
        finally:
            for handle in handles:
                handle.remove()
    caught["attn_weights"] = weights
