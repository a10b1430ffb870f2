"""One layer of a Llama-family model, every step, on its real weights:
`compute_decoder_trace`.

Llama, Mistral, Qwen2, Qwen3 and Gemma 3 compute a layer's attention the same
way, with a few switches (`explorer.models.anatomy.DECODERS`):

1. RMSNorm of the layer's input: x / rms(x) · w (Gemma: · (1 + w));
2. Q = X·W_q (+ b_q), K = X·W_k, V = X·W_v, cut into h query heads and k K/V
   heads of width e (grouped-query attention: k divides h);
3. QK-norm (Qwen3, Gemma 3): each head's q and k RMS-normalised on its own;
4. RoPE: each pair (i, i + e/2) of q and k turned by position · θ_i, with
   θ_i = θ^(−2i/e) the model's own (and its scaling: linear, Llama 3);
5. scores Q·Kᵀ of each query head with the K/V head it shares, times the
   model's scale (1/√e; Gemma: query_pre_attn_scalar^(−1/2));
6. the causal mask, or a sliding window (key j seen by query i when
   i − w < j ≤ i; Mistral, some layers of Qwen2/3 and Gemma 3);
7. softmax, A·V, the heads side by side, and ``o_proj``.

Sources: ``transformers``' ``modeling_llama.py`` (``LlamaRMSNorm``,
``LlamaRotaryEmbedding``, ``apply_rotary_pos_emb``, ``repeat_kv``,
``eager_attention_forward``), ``modeling_qwen3.py`` and ``modeling_gemma3.py``
(QK-norm, Gemma's RMSNorm and scale), ``modeling_rope_utils.py`` (linear and
Llama 3 scaling), ``masking_utils.sliding_window_overlay``. The steps reuse
`explorer.modern.attention` (RoPE's turn, the K/V head of each query head, the
masks), the Modern attention page's own functions.

The weights stay in the dtype the model ships in; the layer is computed in
float32 here, from the model's own layer input. `explorer.models.check` checks
every step against the model's own modules.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.trace import Trace
from explorer.models import anatomy
from explorer.models.errors import ModelError
from explorer.models.forward import layer_input
from explorer.models.layer_steps import BY_NAME as STEP
from explorer.models.layer_steps import (
    HEAD,
    HEAD_COLUMNS,
    HEAD_ROWS,
    KV_COLUMNS,
    KV_HEAD,
    LAYER_STEPS,
)
from explorer.models.layer_trace import ModelConfig
from explorer.models.loading import LoadedModel
from explorer.models.tokens import model_input
from explorer.modern import attention as modern

FULL, SLIDING = "full_attention", "sliding_attention"
"""A layer's kind of attention, as transformers' ``config.layer_types`` names them."""


@dataclass(frozen=True)
class DecoderConfig(ModelConfig):
    """What a Llama-family layer trace shows: `ModelConfig` plus the layer's switches.

    ``n_kv_heads`` (K/V heads; each serves n_heads / n_kv_heads query heads),
    ``head_width`` (e, the config's head_dim), ``layer_type`` (`FULL` or
    `SLIDING`), ``window`` (the sliding window's keys, None for full causal
    attention), ``rope_type`` (``"default"``, ``"linear"``, ``"llama3"``),
    ``rope_theta`` and ``rope_scaling`` (the other RoPE parameters: ``factor``
    ...), ``scaling`` (the scores' factor), ``qk_norm``, ``norm_offset``
    (RMSNorm multiplies by offset + weight), ``rms_eps``, ``dtype`` (the
    weights' as shipped; the trace is float32), ``qkv_bias``, ``out_bias``.
    """

    n_kv_heads: int = 1
    head_width: int = 1
    layer_type: str = FULL
    window: int | None = None
    rope_type: str = "default"
    rope_theta: float = modern.DEFAULT_ROPE_BASE
    rope_scaling: tuple[tuple[str, float], ...] = ()
    scaling: float = 1.0
    qk_norm: bool = False
    norm_offset: float = 0.0
    rms_eps: float = 1e-6
    dtype: str = "float32"
    qkv_bias: bool = False  # a field here, fixed True in ModelConfig
    out_bias: bool = False

    @property
    def head_dim(self) -> int:
        """One head's query, key and value width e (Qwen3 and Gemma 3 set it apart
        from d_model / n_heads)."""
        return self.head_width

    @property
    def head_dim_v(self) -> int:
        """One head's value width: e, as its keys."""
        return self.head_width

    @property
    def d_k(self) -> int:
        """Width of Q across all query heads: n_heads · e."""
        return self.n_heads * self.head_width

    @property
    def d_v(self) -> int:
        """Width of the context, the heads side by side: n_heads · e."""
        return self.n_heads * self.head_width

    @property
    def group_size(self) -> int:
        """Query heads per K/V head: n_heads / n_kv_heads."""
        return self.n_heads // self.n_kv_heads

    @property
    def kv_head_of(self) -> tuple[int, ...]:
        """The K/V head each query head reads (``repeat_kv``'s layout: query head
        h reads K/V head h // group_size)."""
        return tuple(modern.kv_head_of(self.n_heads, self.n_kv_heads))

    def kv_head(self, head: int | None = None) -> int:
        """The K/V head query head ``head`` (default: the config's) reads."""
        return self.kv_head_of[self.head if head is None else head]

    def sharing(self, head: int | None = None) -> tuple[int, ...]:
        """Every query head that reads the same K/V head as ``head``, itself included."""
        kv = self.kv_head(head)
        return tuple(h for h, k in enumerate(self.kv_head_of) if k == kv)

    @property
    def input_note(self) -> str:
        """What X is in this architecture, in one sentence."""
        return anatomy.EVERY_ARCHITECTURE[self.architecture].input_note

    @property
    def rope_parameters(self) -> dict[str, float]:
        """``rope_scaling`` as a dict (``{"factor": 8.0, ...}``; empty for plain RoPE)."""
        return dict(self.rope_scaling)


def _need_decoder(model: LoadedModel) -> anatomy.DecoderArchitecture:
    arch = model.anatomy
    if not isinstance(arch, anatomy.DecoderArchitecture):
        raise ModelError("model", f"{model.name!r} is a {arch.label} model, not of the Llama "
                                  "family: use compute_model_trace for it")
    return arch


def decoder_config(model: LoadedModel, layer: int = 0, head: int = 0, *,
                   input_ids: tuple[int, ...] = (), token_pieces: tuple[str, ...] = (),
                   text: str | None = None) -> DecoderConfig:
    """The `DecoderConfig` of ``model``'s layer ``layer``, read from its
    transformers config. Raises `ModelError` for a layer or head outside the model."""
    arch = _need_decoder(model)
    c = model.module.config
    try:
        index = operator.index(layer) if 0 <= operator.index(layer) < model.n_layers else 0
    except TypeError:
        index = 0  # DecoderConfig says what a layer must be
    kind = anatomy.layer_types(c)[index]
    rope = anatomy.rope_parameters(c, kind)
    scaling = tuple(sorted((k, float(v)) for k, v in rope.items()
                           if k not in ("rope_type", "rope_theta") and isinstance(v, (int, float))))
    return DecoderConfig(
        model=model.name, source=model.source, architecture=model.architecture, layer=layer,
        head=head, n_layers=model.n_layers, n_heads=model.n_heads, d_model=model.d_model,
        causal=True, input_ids=tuple(input_ids), token_pieces=tuple(token_pieces), text=text,
        n_kv_heads=model.n_kv_heads, head_width=model.head_dim, layer_type=kind,
        window=c.sliding_window if kind == SLIDING else None,
        rope_type=rope.get("rope_type", "default"), rope_theta=float(rope["rope_theta"]),
        rope_scaling=scaling, scaling=float(arch.scaling(c)), qk_norm=arch.qk_norm,
        norm_offset=arch.norm_offset, rms_eps=float(c.rms_norm_eps), dtype=model.dtype,
        qkv_bias=bool(arch.qkv_bias(c)), out_bias=bool(arch.out_bias(c)))


# ---------------------------------------------------------------------------
# The steps, one function each
# ---------------------------------------------------------------------------
def rms(x: Tensor, eps: float) -> Tensor:
    """Root mean square of each row, √(mean(x²) + eps): (..., d) -> (..., 1)."""
    return torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


def rms_norm(x: Tensor, weight: Tensor, eps: float, offset: float = 0.0) -> Tensor:
    """RMSNorm (Zhang & Sennrich 2019): x / rms(x) · (offset + weight).

    x: (..., d); weight: (d,). offset 0 is ``LlamaRMSNorm``; Gemma's
    ``Gemma3RMSNorm`` stores its weight around 0 and multiplies by 1 + weight.
    As both compute it: ``x * rsqrt(mean(x²) + eps)``, then the weight."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * (offset + weight)


def project(x: Tensor, weight: Tensor, bias: Tensor | None, n_heads: int) -> Tensor:
    """X·W (+ b) cut into heads: x (n, d), weight (d, n_heads·e) -> (n_heads, n, e)."""
    y = att.project(x, weight)  # (n, d) @ (d, h·e) -> (n, h·e)
    return att.split_heads(y if bias is None else y + bias, n_heads)


def rope_frequencies(config: DecoderConfig) -> Tensor:
    """θ_i of each pair i = 0 … e/2 − 1, radians per position: (e/2,).

    ``"default"``: θ^(−2i/e) (RoFormer eq. 15; computed as
    `explorer.modern.attention.rope_frequencies`, as transformers does);
    ``"linear"``: divided by ``factor`` (positions stretched); ``"llama3"``:
    Llama 3.1's rule (transformers' ``_compute_llama3_parameters``): pairs
    turning slower than ``original_max_position_embeddings / low_freq_factor``
    positions a turn are divided by ``factor``, faster than ``… /
    high_freq_factor`` kept, those between blended smoothly.
    """
    e, p = config.head_dim, config.rope_parameters
    inv = modern.rope_frequencies(e, config.rope_theta)  # (e/2,)
    if config.rope_type == "linear":
        return inv / p["factor"]
    if config.rope_type == "llama3":
        factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        old = p["original_max_position_embeddings"]
        wavelength = 2 * math.pi / inv
        slow = torch.where(wavelength > old / low, inv / factor, inv)
        smooth = (old / wavelength - low) / (high - low)
        blended = (1 - smooth) * slow / factor + smooth * slow
        between = ~(wavelength < old / high) & ~(wavelength > old / low)
        return torch.where(between, blended, slow)
    return inv


def rope_tables(positions: Tensor, frequencies: Tensor) -> tuple[Tensor, Tensor]:
    """cos and sin of position · θ_i, each (n, e), the angles of the pair (i,
    i + e/2) repeated in both halves, as ``LlamaRotaryEmbedding.forward`` lays them out.
    positions: (n,) int; frequencies: (e/2,)."""
    angles = positions.to(torch.float32)[:, None] * frequencies[None, :]  # (n, e/2)
    both = torch.cat((angles, angles), dim=-1)                            # (n, e)
    return both.cos(), both.sin()


def attention_mask(n_queries: int, n_keys: int, window: int | None) -> Tensor:
    """(n_queries, n_keys) bool, True = may attend, for the last ``n_queries``
    of ``n_keys`` tokens: causal, and within the sliding ``window`` when given
    (i − window < j ≤ i, `explorer.modern.attention.sliding_window_mask`)."""
    full = (modern.causal_allowed(n_keys) if window is None
            else modern.sliding_window_mask(n_keys, window))
    return full[n_keys - n_queries:]


def shared_keys(keys: Tensor, config: DecoderConfig) -> Tensor:
    """Each query head's keys or values: the K/V head it reads, (n_kv_heads, n, e)
    -> (n_heads, n, e), as ``repeat_kv`` (`DecoderConfig.kv_head_of`)."""
    return keys[list(config.kv_head_of)]


def scores_of(queries: Tensor, keys: Tensor, config: DecoderConfig) -> Tensor:
    """Q·Kᵀ of each query head with its shared K/V head: (h, n_q, e) and (k,
    n_k, e) -> (h, n_q, n_k), before the scale."""
    return queries @ shared_keys(keys, config).transpose(-1, -2)


def token_steps(hidden: Tensor, weights: dict[str, Tensor], config: DecoderConfig,
                positions: Tensor) -> dict[str, Tensor]:
    """Steps 1-4 for tokens at ``positions`` (n,): from the layer's input
    ``hidden`` (n, d) to the rotated queries and keys and the values (see
    `compute_decoder_trace` for the names). What a KV cache keeps of a token
    is its ``keys_rope`` and ``values``."""
    h, k = config.n_heads, config.n_kv_heads
    s: dict[str, Tensor] = {"layer_input": hidden, "input_norm": weights["input_norm"]}
    s["rms"] = rms(hidden, config.rms_eps)[:, 0]                               # (n,)
    x = s["embeddings"] = rms_norm(hidden, weights["input_norm"], config.rms_eps,
                                   config.norm_offset)                          # (n, d)
    for name, w in (("query", "W_query"), ("key", "W_key"), ("value", "W_value")):
        s[w] = weights[w]
        if f"b_{name}" in weights:
            s[f"b_{name}"] = weights[f"b_{name}"]
    q = s["queries"] = project(x, weights["W_query"], weights.get("b_query"), h)  # (h, n, e)
    key = s["keys"] = project(x, weights["W_key"], weights.get("b_key"), k)       # (k, n, e)
    s["values"] = project(x, weights["W_value"], weights.get("b_value"), k)       # (k, n, e)
    if config.qk_norm:
        s["q_norm"], s["k_norm"] = weights["q_norm"], weights["k_norm"]
        q = s["queries_normed"] = qk_norm(q, weights["q_norm"], config)
        key = s["keys_normed"] = qk_norm(key, weights["k_norm"], config)
    s["rope_frequencies"] = rope_frequencies(config)                            # (e/2,)
    s["rope_cos"], s["rope_sin"] = rope_tables(positions, s["rope_frequencies"])  # (n, e)
    s["queries_rope"] = modern.apply_rope(q, s["rope_cos"], s["rope_sin"])
    s["keys_rope"] = modern.apply_rope(key, s["rope_cos"], s["rope_sin"])
    return s


def qk_norm(x: Tensor, weight: Tensor, config: DecoderConfig) -> Tensor:
    """QK-norm (Qwen3, Gemma 3): each head's query or key row RMS-normalised on
    its own e numbers, (heads, n, e), weight (e,) shared by the heads."""
    return rms_norm(x, weight, config.rms_eps, config.norm_offset)


def decoder_steps(hidden: Tensor, weights: dict[str, Tensor], config: DecoderConfig,
                  positions: Tensor | None = None) -> dict[str, Tensor]:
    """One layer's attention on its input ``hidden`` (n, d), every step kept.

    ``weights``: `explorer.models.anatomy.decoder_weights` of the layer;
    ``positions``: the tokens' positions (default 0 … n − 1). Returns the steps
    named as in `compute_decoder_trace`, all float32.
    """
    n = hidden.shape[0]
    s = token_steps(hidden, weights, config, torch.arange(n) if positions is None else positions)
    s["attn_scores"] = scores_of(s["queries_rope"], s["keys_rope"], config)    # (h, n, n)
    s["scaled_scores"] = s["attn_scores"] * config.scaling
    s["causal_mask"] = ~attention_mask(n, n, config.window)  # (n, n) bool, True = hidden
    s["masked_scores"] = s["scaled_scores"].masked_fill(s["causal_mask"], float("-inf"))
    s["attn_weights"] = torch.softmax(s["masked_scores"], dim=-1)               # (h, n, n)
    s["context"] = att.combine_heads(s["attn_weights"] @ shared_keys(s["values"], config))
    s["W_out"] = weights["W_out"]                                               # (h·e, d)
    if "b_out" in weights:
        s["b_out"] = weights["b_out"]
    output = s["context"] @ weights["W_out"]                                    # (n, d)
    s["output"] = output + weights["b_out"] if "b_out" in weights else output
    return s


def compute_decoder_trace(model: LoadedModel, text: str | None = None, *, input_ids: Any = None,
                          layer: int = 0, head: int = 0) -> Trace:
    """One layer of a Llama-family model, every intermediate matrix kept (float32).

    Give ``text`` (the model's tokenizer reads it) or ``input_ids``. With n =
    n_tokens, d = d_model, h = n_heads, k = n_kv_heads, e = head_dim:

    - ``token_ids (n,)``; ``layer_input (n, d)``: the residual stream entering
      the layer (caught from the model's own pass); ``input_norm (d,)``,
      ``rms (n,)`` and ``embeddings (n, d)``: X, its RMSNorm, the attention's input;
    - ``W_query (d, h·e)``, ``W_key``, ``W_value (d, k·e)`` (and ``b_query``,
      ``b_key``, ``b_value`` where the model has biases: Qwen2);
    - ``queries (h, n, e)``, ``keys``, ``values (k, n, e)``;
    - with QK-norm (Qwen3, Gemma 3): ``q_norm``, ``k_norm (e,)``,
      ``queries_normed (h, n, e)``, ``keys_normed (k, n, e)``;
    - ``rope_frequencies (e/2,)``, ``rope_cos``, ``rope_sin (n, e)``,
      ``queries_rope (h, n, e)``, ``keys_rope (k, n, e)``;
    - ``attn_scores (h, n, n)``: each query head's Q·Kᵀ with its K/V head
      (`DecoderConfig.kv_head_of`); ``scaled_scores``; ``causal_mask (n, n)``
      bool, True where the key is hidden from the query (a future key, or one
      outside the window on a sliding layer), as the book's trace has it;
      ``masked_scores``
      (−∞ where masked; the model adds the dtype's minimum instead: the same
      weights); ``attn_weights (h, n, n)``;
    - ``context (n, h·e)``, ``W_out (h·e, d)`` (``b_out``), ``output (n, d)``:
      ``o_proj``'s output, before the residual.

    Key and value steps have one row per K/V head: read a query head's with
    `head_slice`. One forward pass (stopped at the layer) runs under the model's
    lock. Raises `ModelError` for a model outside the Llama family, bad input,
    layer or head.
    """
    _need_decoder(model)
    seq = model_input(model, text, input_ids)
    config = decoder_config(model, layer, head, input_ids=seq.ids, token_pieces=seq.tokens,
                            text=text)
    hidden = layer_input(model, seq.ids, config.layer)                       # (n, d) float32
    block = model.anatomy.blocks(model.module)[config.layer]
    with torch.no_grad():
        steps = decoder_steps(hidden, anatomy.decoder_weights(block), config)
    return Trace(config, list(seq.tokens), {"token_ids": torch.tensor(seq.ids), **steps})


DECODER_STEPS: dict[str, str] = {step.name: step.code for step in LAYER_STEPS if step.in_trace}
"""Every step of `compute_decoder_trace`, in pipeline order, and the line of
transformers' ``eager_attention_forward`` / ``LlamaAttention.forward`` (or its
Qwen3, Gemma 3 variant) that computes it (`explorer.models.layer_steps`): for
the page's click-to-explain and the docs."""


@dataclass(frozen=True)
class HeadSlice:
    """One query head of a decoder trace: ``head``, the ``kv_head`` it reads,
    the query heads ``sharing`` that K/V head (itself included) and ``steps``:

    ``W_query (d, e)``: its columns of W_query; ``W_key``, ``W_value (d, e)``:
    its K/V head's columns (biases likewise); ``queries…``, ``attn_*`` (n, ·):
    its own; ``keys…``, ``values (n, e)``: its K/V head's; ``context (n, e)``:
    A·V; ``W_out (e, d)``: its rows of o_proj; ``head_output (n, d)``: context
    · W_out, the head's share of the output (the heads' shares add up to
    ``output``, less ``b_out``).
    """

    head: int
    kv_head: int
    sharing: tuple[int, ...]
    steps: dict[str, Tensor]


def head_slice(trace: Trace, head: int | None = None) -> HeadSlice:
    """Query head ``head``'s (default: the trace's) slice of every step (see `HeadSlice`).
    Raises `ModelError` for a trace not from `compute_decoder_trace` or a head outside it."""
    c = trace.config
    if not isinstance(c, DecoderConfig):
        raise ModelError("head", "head_slice needs a trace from compute_decoder_trace")
    head = c.replace(head=c.head if head is None else head).head  # checked
    kv, e = c.kv_head(head), c.head_dim
    q_cols, kv_cols = slice(head * e, (head + 1) * e), slice(kv * e, (kv + 1) * e)
    cut = {HEAD: lambda t: t[head], KV_HEAD: lambda t: t[kv],
           HEAD_COLUMNS: lambda t: t[..., q_cols], KV_COLUMNS: lambda t: t[..., kv_cols],
           HEAD_ROWS: lambda t: t[q_cols]}
    steps = {name: cut[STEP[name].cut](trace[name]) for name in trace
             if STEP[name].cut in cut}
    steps["head_output"] = steps["context"] @ steps["W_out"]  # (n, e) @ (e, d) -> (n, d)
    return HeadSlice(head, kv, c.sharing(head), steps)


def decoder_trace_bytes(model: LoadedModel, n_tokens: int, layer: int = 0) -> int:
    """The bytes `compute_decoder_trace` will hold for ``n_tokens`` tokens of
    layer ``layer``, exactly (equal to the finished trace's ``Trace.nbytes``), for
    a memory budget: float32 (4 bytes) except the ids (8) and the mask (1).

    SmolLM2-135M (d 576, 9 heads of 64 sharing 3 K/V heads) at 512 tokens:
    50,078,080 bytes (48 MB, MB = 2**20 bytes), 75% of it the four (h, n, n) score steps.
    """
    c = decoder_config(model, layer)
    n, d, h, k, e = n_tokens, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim
    elements = 3 * n * d + d + n                    # layer_input, embeddings, output; norm; rms
    elements += d * h * e + 2 * d * k * e           # W_query, W_key, W_value
    elements += (h * e + 2 * k * e) if c.qkv_bias else 0
    elements += 2 * (h * n * e + 2 * k * n * e)     # Q, K, V; rotated Q, K; V counted once more
    elements -= k * n * e                           # (values are not rotated)
    elements += (2 * e + h * n * e + k * n * e) if c.qk_norm else 0
    elements += e // 2 + 2 * n * e                  # frequencies, cos, sin
    elements += 4 * h * n * n                       # scores, scaled, masked, weights
    elements += n * h * e + h * e * d + (d if c.out_bias else 0)  # context, W_out, b_out
    return 4 * elements + 8 * n + n * n
