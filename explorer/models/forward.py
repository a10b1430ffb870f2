"""Forward passes through a real model, and what hooks catch on the way.

Every pass holds the model's lock and runs under ``torch.inference_mode()``;
hooks are registered for that pass only and removed in ``finally``. So a model
shared by many sessions is never changed, and one session's hooks never see
another session's pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

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
        return model.module(input_ids=torch.tensor([list(ids)]),
                            output_attentions=output_attentions, use_cache=False)


def _block(model: LoadedModel, layer: int) -> torch.nn.Module:
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
    ``attn.c_proj`` (GPT-2) or ``attention.output.dense`` (BERT).
    """
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
