"""One layer of a real model, step by step: `compute_model_trace`.

The trace has the same steps and shapes as the multi-head trace of
`explorer.core.trace.compute_trace`, plus the biases b_query, b_key, b_value that
real models add, so the pages that show a trace can show this one. X and the
weights come from the model; every later step is computed by the hand-written
functions of `explorer.core.attention`, and `against_model` checks them against the
model's own numbers.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.config import shown
from explorer.core.trace import Trace
from explorer.models.anatomy import ARCHITECTURES
from explorer.models.errors import ModelError
from explorer.models.forward import attention_input
from explorer.models.loading import LoadedModel
from explorer.models.tokens import model_input


@dataclass(frozen=True)
class ModelConfig:
    """What a real-model trace shows: which model, which layer, which input.

    Fields: ``model`` (the name it was loaded by), ``source`` (``"folder"``,
    ``"cache"``, ``"hub"``), ``architecture`` (``"gpt2"``, ``"bert"``),
    ``layer`` (0-based), ``head`` (the head to show first; the trace holds all),
    ``n_layers``, ``n_heads``, ``d_model``, ``causal``, ``input_ids`` and
    ``token_pieces`` (the readable tokens), ``text`` (None when ids were given).

    Fixed by the models (not settable): ``scale=True`` (scores ÷ √head_dim),
    ``normalization="softmax"``, ``dropout=0.0`` (inference), ``has_out_proj=True``,
    ``qkv_bias=True`` (Q = X·W_query + b_query), ``weight_init="model"`` (trained
    weights read from the checkpoint). It is a `explorer.core.trace.TraceConfig`,
    as `explorer.core.config.AttentionConfig` is: ``tokens``, ``d_in``, ``d_k``,
    ``d_v``, ``head_dim``, ``head_dim_v`` and the fields above are what the pages,
    `explain` and `verify` read of either.

    Raises `ModelError` for a layer or head outside the model.
    """

    model: str
    architecture: str
    layer: int
    head: int
    n_layers: int
    n_heads: int
    d_model: int
    causal: bool
    input_ids: tuple[int, ...]
    token_pieces: tuple[str, ...]
    text: str | None = None
    source: str = ""
    scale: bool = field(default=True, init=False)
    normalization: str = field(default="softmax", init=False)
    dropout: float = field(default=0.0, init=False)
    has_out_proj: bool = field(default=True, init=False)
    qkv_bias: bool = field(default=True, init=False)
    weight_init: str = field(default="model", init=False)

    def __post_init__(self) -> None:
        for name, count in (("layer", self.n_layers), ("head", self.n_heads)):
            value = getattr(self, name)
            try:
                index = operator.index(value)  # int, numpy or torch integers; not 1.0
            except TypeError:
                index = None
            if isinstance(value, bool) or index is None or not 0 <= index < count:
                raise ModelError(name, f"{name} must be between 0 and {count - 1} for "
                                       f"{self.model!r}, which has {count} {name}s "
                                       f"(got {shown(value)})")
            object.__setattr__(self, name, index)  # frozen: store the plain int

    @property
    def tokens(self) -> list[str]:
        """The readable tokens, one per id (``'·cat'``, ``'##ing'``, ``'[CLS]'``)."""
        return list(self.token_pieces)

    @property
    def d_in(self) -> int:
        """Width of X: d_model."""
        return self.d_model

    @property
    def d_k(self) -> int:
        """Width of Q and K across all heads: d_model."""
        return self.d_model

    @property
    def d_v(self) -> int:
        """Width of V and of the context across all heads: d_model."""
        return self.d_model

    @property
    def head_dim(self) -> int:
        """One head's query and key width, d_model // n_heads (64 in GPT-2 and BERT base)."""
        return self.d_model // self.n_heads

    @property
    def head_dim_v(self) -> int:
        """One head's value width (equal to head_dim in these models)."""
        return self.d_model // self.n_heads

    @property
    def input_note(self) -> str:
        """What X is in this architecture, in one sentence."""
        return ARCHITECTURES[self.architecture].input_note

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with ``changes`` applied (and checked again), e.g. ``head=3``."""
        return dataclasses.replace(self, **changes)


def project_heads(x: Tensor, weight: Tensor, bias: Tensor, n_heads: int) -> Tensor:
    """Queries, keys or values with a bias, cut into heads: ``X·W + b``.

    x: (n, d_model); weight: (d_model, d_model); bias: (d_model,) ->
    (n_heads, n, head_dim), head h holding columns ``h*head_dim:(h+1)*head_dim``,
    as the models' ``.view(n, n_heads, head_dim).transpose``.
    """
    return att.split_heads(att.project(x, weight) + bias, n_heads)  # (n, d) -> (h, n, hd)


def compute_model_trace(model: LoadedModel, text: str | None = None, *, input_ids: Any = None,
                        layer: int = 0, head: int = 0) -> Trace:
    """Attention of one layer of a real model, every intermediate matrix kept.

    Give ``text`` (read by the model's tokenizer) or ``input_ids`` (no tokenizer
    needed). ``layer`` picks the layer (0-based); ``head`` is stored in the
    config as the head to show first. Steps, with n = n_tokens, d = d_model,
    h = n_heads, hd = head_dim = d / h:

    - ``token_ids (n,)``; ``embeddings (n, d)``: X, the attention's input (GPT-2:
      the hidden state after ``ln_1``; BERT: the layer's input);
    - ``W_query, W_key, W_value (d, d)`` and ``b_query, b_key, b_value (d,)``:
      the trained weights in the convention Q = X·W + b (GPT-2's ``c_attn``
      split in three; BERT's ``query`` / ``key`` / ``value`` ``nn.Linear``,
      transposed);
    - ``queries, keys, values (h, n, hd)``: X·W + b cut into heads;
    - ``attn_scores, scaled_scores (h, n, n)``: Q·Kᵀ and Q·Kᵀ / √hd;
    - GPT-2 only: ``causal_mask (n, n)`` bool and ``masked_scores (h, n, n)`` with
      −∞ above the diagonal (the model adds the dtype's minimum instead; the
      weights are the same);
    - ``attn_weights (h, n, n)``: softmax over each row;
    - ``context (n, d)``: the heads' A·V side by side (the models' ``reshape(n, d)``);
    - ``W_out (d, d)``, ``b_out (d,)``, ``output (n, d)``: GPT-2's ``c_proj`` /
      BERT's ``attention.output.dense``, before dropout, residual and LayerNorm.

    With a single head the per-head steps drop the head axis, as in
    `explorer.core.trace.compute_trace`. One forward pass (stopped at the layer) runs
    under the model's lock. Raises `ModelError` for bad input, layer or head, and
    for a Llama-family model (its message names `explorer.models.llama.compute_decoder_trace`).
    """
    if model.architecture not in ARCHITECTURES:
        raise ModelError("model", f"{shown(model.name)} is a Llama-family model "
                                  f"({shown(model.architecture)}): trace its layer with "
                                  "explorer.models.compute_decoder_trace(model, text, "
                                  "layer=..., head=...)")
    seq = model_input(model, text, input_ids)
    config = ModelConfig(
        model=model.name, source=model.source, architecture=model.architecture, layer=layer,
        head=head, n_layers=model.n_layers, n_heads=model.n_heads, d_model=model.d_model,
        causal=model.causal, input_ids=seq.ids, token_pieces=seq.tokens, text=text)
    x = attention_input(model, seq.ids, config.layer)  # (n, d)
    weights = model.anatomy.weights(model.anatomy.blocks(model.module)[config.layer])
    h = config.n_heads
    steps: dict[str, Tensor] = {"token_ids": torch.tensor(seq.ids), "embeddings": x}
    steps.update((name, weights[name]) for name in
                 ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value"))
    with torch.no_grad():
        per_head = _per_head_steps(x, weights, h, config.head_dim, config.causal)
        # Context A·V, heads side by side: (h, n, hd) -> (n, d); then the output projection
        context = att.combine_heads(att.context_vectors(per_head["attn_weights"],
                                                        per_head["values"]))
        output = att.output_projection(context, weights["W_out"], weights["b_out"])  # (n, d)

    for name, tensor in per_head.items():  # a single head is shown without a head axis
        steps[name] = tensor[0] if h == 1 and tensor.dim() == 3 else tensor
    steps.update(context=context, W_out=weights["W_out"], b_out=weights["b_out"], output=output)
    return Trace(config, list(seq.tokens), steps)


def _per_head_steps(x: Tensor, weights: dict[str, Tensor], h: int, head_dim: int,
                    causal: bool) -> dict[str, Tensor]:
    """`compute_model_trace`'s per-head steps of X (n, d): Q, K, V = X·W + b cut
    into heads (h, n, hd); the scores Q·Kᵀ, scaled by 1/√hd, causally masked
    (GPT-2; with the (n, n) bool mask), and their softmax (h, n, n)."""
    per_head = {name: project_heads(x, weights[f"W_{w}"], weights[f"b_{w}"], h)
                for name, w in (("queries", "query"), ("keys", "key"), ("values", "value"))}
    scores = per_head["attn_scores"] = att.attention_scores(per_head["queries"], per_head["keys"])
    scores = per_head["scaled_scores"] = att.scale_scores(scores, head_dim)
    if causal:
        per_head["causal_mask"] = att.causal_mask(x.shape[0])  # (n, n) bool
        scores = per_head["masked_scores"] = att.apply_mask(scores, per_head["causal_mask"])
    per_head["attn_weights"] = att.softmax(scores)
    return per_head


def model_trace_bytes(model: LoadedModel, n_tokens: int) -> int:
    """The bytes `compute_model_trace` will hold for ``n_tokens`` tokens, exactly
    (equal to the finished trace's ``Trace.nbytes``), for a memory budget.

    float32 (4 bytes) except the ids (8) and the causal mask (1): X, Q, K, V,
    context and output (n, d) each; four (d, d) weights and four (d,) biases;
    scores, scaled scores and weights (h, n, n), plus the masked scores and the
    (n, n) mask when causal. GPT-2 small at 512 tokens: 69,484,544 bytes.
    """
    n, d, h = n_tokens, model.d_model, model.n_heads
    per_head_steps = 3 + (1 if model.causal else 0)
    elements = 6 * n * d + 4 * d * d + 4 * d + per_head_steps * h * n * n
    return 4 * elements + 8 * n + (n * n if model.causal else 0)
