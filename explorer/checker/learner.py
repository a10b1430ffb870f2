"""A learner's own attention module: read its weights, run its forward, keep every tensor.

`explorer.checker.check.check_module` compares what a learner's ``nn.Module`` computes
with the explorer's reference. This module does the learner's side:

- `read_weights`: the weights by the book's names (chapter 3 of "Build a Large
  Language Model (From Scratch)"): ``W_query``, ``W_key``, ``W_value`` as
  ``nn.Linear`` or ``nn.Parameter``, ``out_proj``, ``num_heads``, the ``mask``
  buffer and ``dropout``; ``heads`` (``MultiHeadAttentionWrapper``); or a
  ``torch.nn.MultiheadAttention``.
- `run_forward`: one forward pass with every tensor it produces recorded, by a
  ``torch.overrides.TorchFunctionMode``: the learner changes nothing in their code.
- `load_class`, `build_module`, `their_traceback`: for the command line and the
  sandbox, which start from source code.

Pure torch. Nothing here touches the global random state: the forward runs
inside ``torch.random.fork_rng``, and a module is built inside it too.
"""

from __future__ import annotations

import difflib
import inspect
import linecache
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from explorer.core import attention as att
from explorer.core.config import ConfigError

MAX_RECORDED_BYTES = 256 * 2**20
"""The tensors one forward pass may leave for comparison; past this the rest
are not kept (the report says so)."""
TIMEOUT_S = 20.0
"""Default wall-clock limit of a check (`explorer.checker.limits.limits`, and
`explorer.checker.sandbox.check_source`'s child, importing torch included)."""
MEMORY_MB = 1024
"""Default memory limit of a check: address space it may add beyond what the
process holds when it starts (MB = 2²⁰ bytes)."""
TRACEBACK_LINES = 12
"""How many lines of the learner's traceback an error message keeps (the last)."""


class CheckError(ConfigError):
    """The check could not run: the module, its inputs or its code.

    ``field`` says where: ``"module"`` (weights not found by the book's names),
    ``"inputs"``, ``"sentence"``, ``"__init__"`` or ``"forward"`` (the
    learner's code raised; ``details`` then holds the last lines of their
    traceback), ``"source"`` (syntax error, no such class). A `ConfigError`, so
    the UI shows it like any other bad input.
    """

    def __init__(self, field: str, message: str, details: str = "", progress: int = 0,
                 reversed_shapes: list[tuple[int, ...]] = ()):
        super().__init__(field, message)
        self.details = details
        self.progress = progress  # tensors the forward made before it raised
        self.reversed_shapes = list(reversed_shapes)  # x.T on tensors of these shapes


# ---------------------------------------------------------------------------
# Reading the weights
# ---------------------------------------------------------------------------
@dataclass
class LearnerWeights:
    """What `read_weights` found, in the explorer's convention Q = X·W_query + b_query.

    ``W_query``, ``W_key``: (d_in, d_k); ``W_value``: (d_in, d_v); the biases
    (d_k,) / (d_v,) or None; ``W_out`` (d_v, d_out) and ``b_out`` (d_out,) when
    the module has an ``out_proj``. ``n_heads``; ``causal`` (it has a ``mask``
    buffer); ``dropout``: its p; ``training``: ``module.training``;
    ``torch_mha``: the module when it is a ``torch.nn.MultiheadAttention``
    (called as self-attention); ``inner_mha``: the one it wraps, when it
    wraps one (its dropout draws inside one function). ``found`` lists what
    was read, in words, for the report. ``alternatives``: other readings of
    the same weights the forward may use instead (`_alternatives`).
    """

    W_query: Tensor
    W_key: Tensor
    W_value: Tensor
    b_query: Tensor | None = None
    b_key: Tensor | None = None
    b_value: Tensor | None = None
    W_out: Tensor | None = None
    b_out: Tensor | None = None
    n_heads: int = 1
    causal: bool = False
    dropout: float = 0.0
    training: bool = False
    torch_mha: nn.MultiheadAttention | None = None
    inner_mha: nn.MultiheadAttention | None = None
    found: list[str] = field(default_factory=list)
    alternatives: list[LearnerWeights] = field(default_factory=list)

    @property
    def d_in(self) -> int:
        """The inputs' width: W_query's rows."""
        return self.W_query.shape[0]

    @property
    def d_k(self) -> int:
        """The queries' and keys' width, all heads together: W_query's columns."""
        return self.W_query.shape[1]

    @property
    def d_v(self) -> int:
        """The values' width, all heads together: W_value's columns."""
        return self.W_value.shape[1]

    @property
    def head_dim(self) -> int:
        """One head's query and key width, d_k / n_heads."""
        return self.d_k // self.n_heads

    def params(self) -> dict[str, Tensor | None]:
        """The weights by the names `explorer.core.trace.attention_steps` takes."""
        return {name: getattr(self, name) for name in
                ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value", "W_out", "b_out")}


_PROJECTIONS = ("W_query", "W_key", "W_value")
EXPECTED = ("W_query, W_key and W_value, each an nn.Linear(d_in, d_out) or an nn.Parameter of "
            "shape (d_in, d_out) (SelfAttention_v1 and v2, CausalAttention, "
            "MultiHeadAttention), with any bias added after them; or one fused "
            "nn.Linear(d_in, 3 * d_out) holding the query, key and value rows in that order "
            "(self.qkv as in the notebook's MultiHeadAttentionCombinedQKV, GPT-2's c_attn); "
            "or heads, a list of such modules (MultiHeadAttentionWrapper); or a "
            "torch.nn.MultiheadAttention, or a module that holds one; and the output "
            "projection as out_proj, or the one other nn.Linear(d_out, ...)")
EXAMPLE = ("For example: self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias), the same for "
           "W_key and W_value, and in forward queries = self.W_query(x)")
"""What `read_weights` accepts, in the words of its error message."""


def _float(tensor: Tensor) -> Tensor:
    return tensor.detach().to(torch.float32).clone()


def _projection(module: nn.Module, name: str) -> tuple[Tensor, Tensor | None, str] | None:
    """``module.<name>`` as (W (d_in, d_out), bias or None, how it was stored)."""
    layer = getattr(module, name, None)
    if isinstance(layer, nn.Linear):
        bias = None if layer.bias is None else _float(layer.bias)
        return _float(layer.weight).T, bias, "nn.Linear" + (" with bias" if bias is not None else "")
    if isinstance(layer, Tensor) and layer.dim() == 2:
        return _float(layer), None, "nn.Parameter (d_in, d_out)"
    return None


def _dropout_p(module: nn.Module) -> float:
    dropout = getattr(module, "dropout", None)
    if isinstance(dropout, nn.Dropout):
        return float(dropout.p)
    return float(dropout) if isinstance(dropout, (int, float)) else 0.0


def _parameters_text(module: nn.Module) -> str:
    """``query.weight (2, 3), key.weight (2, 3)``: what the module does hold."""
    shown = [f"{name} {tuple(p.shape)}" for name, p in module.named_parameters()][:8]
    return ", ".join(shown) if shown else "no parameters at all"


def _missing_names(module: nn.Module) -> CheckError:
    name = type(module).__name__
    have = [p for p in _PROJECTIONS if _projection(module, p) is not None]
    has = f"has {' and '.join(have)} but not the rest" if have else \
        f"holds {_parameters_text(module)}"
    return CheckError("module", f"the check finds the projections in one of these forms: "
                                f"{EXPECTED}. {name} {has}. {EXAMPLE}.")


def _read_torch_mha(mha: nn.MultiheadAttention, causal: bool) -> LearnerWeights:
    """``torch.nn.MultiheadAttention``: in_proj_weight (3E, E) holds W_query,
    W_key, W_value as nn.Linear weights (transposed here), in_proj_bias their biases."""
    if mha.bias_k is not None or mha.add_zero_attn:
        raise CheckError("module", "torch.nn.MultiheadAttention with add_bias_kv or "
                                   "add_zero_attn adds keys the book's attention does not have")
    E = mha.embed_dim
    if mha.in_proj_weight is not None:
        weights = [_float(w).T for w in mha.in_proj_weight.chunk(3)]
    else:
        weights = [_float(w).T for w in (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)]
    biases = [None] * 3 if mha.in_proj_bias is None else [_float(b) for b in mha.in_proj_bias.chunk(3)]
    out_bias = mha.out_proj.bias
    return LearnerWeights(
        *weights, *biases, W_out=_float(mha.out_proj.weight).T,
        b_out=torch.zeros(E) if out_bias is None else _float(out_bias),
        n_heads=mha.num_heads, causal=causal, dropout=float(mha.dropout), training=mha.training,
        torch_mha=mha,
        found=[f"torch.nn.MultiheadAttention(embed_dim={E}, num_heads={mha.num_heads}, "
               f"batch_first={mha.batch_first})", "in_proj_weight split into W_query, W_key, "
               "W_value" + (", in_proj_bias" if biases[0] is not None else ""), "out_proj"])


_FUSED = ("qkv", "c_attn", "in_proj", "W_qkv", "qkv_proj", "to_qkv")
"""The names a fused query-key-value nn.Linear goes by, tried first."""
_OUT = ("out_proj", "proj", "c_proj", "o_proj", "W_o", "W_out", "out")
"""The names an output projection goes by, tried first."""


def _linears(module: nn.Module, used: set[str] = frozenset()) -> dict[str, nn.Linear]:
    return {name: child for name, child in module.named_children()
            if isinstance(child, nn.Linear) and name not in used}


def _fused(module: nn.Module) -> tuple[str, nn.Linear] | None:
    """A fused query-key-value layer: an ``nn.Linear(d_in, 3 * d_out)`` by one
    of the `_FUSED` names, or the module's only nn.Linear whose width divides by 3."""
    layers = {name: layer for name, layer in _linears(module).items()
              if layer.out_features % 3 == 0}
    named = [name for name in _FUSED if name in layers]
    if named:
        return named[0], layers[named[0]]
    return next(iter(layers.items())) if len(layers) == 1 else None


def _read_fused(module: nn.Module, name: str, layer: nn.Linear, causal: bool | None
                ) -> LearnerWeights:
    """``module.<name>``, an ``nn.Linear(d_in, 3 * d_out)``: its weight's rows
    are W_query, W_key, W_value (as ``qkv.view(b, n, 3, num_heads, head_dim)``
    and ``qkv.split(d_out, dim=-1)`` read them), each transposed to (d_in, d_out)."""
    weights = [_float(w).T for w in layer.weight.chunk(3)]
    biases = [None] * 3 if layer.bias is None else [_float(b) for b in layer.bias.chunk(3)]
    how = (f"the fused {name} = nn.Linear({layer.in_features}, {layer.out_features}"
           f"{', bias' if layer.bias is not None else ', bias=False'})")
    read = _assemble(module, weights, biases, causal, [
        f"W_query, W_key, W_value as the rows of {how}, in that order"], {name})
    h, hd = read.n_heads, read.head_dim

    def per_head(t: Tensor) -> list[Tensor]:  # rows (h, 3, hd, ...) -> q, k, v (h·hd, ...)
        t = _float(t).reshape(h, 3, hd, *t.shape[1:])
        return [t[:, i].reshape(h * hd, *t.shape[3:]) for i in range(3)]

    if h > 1:
        alt = _assemble(module, [w.T for w in per_head(layer.weight)],
                        [None] * 3 if layer.bias is None else per_head(layer.bias), causal,
                        [f"W_query, W_key, W_value as the rows of {how}, head by head "
                         "(qkv.view(b, n, num_heads, 3 * head_dim))"], {name})
        read.alternatives.append(alt)
    return read


def _wrapped_mha(module: nn.Module) -> tuple[str, nn.MultiheadAttention] | None:
    held = [(name, child) for name, child in module.named_children()
            if isinstance(child, nn.MultiheadAttention)]
    return held[0] if len(held) == 1 else None


def _read_wrapped_mha(module: nn.Module, name: str, mha: nn.MultiheadAttention,
                      causal: bool | None) -> LearnerWeights:
    """A module holding a ``torch.nn.MultiheadAttention`` (the notebook's
    MHAPyTorchClass): its weights, causal when the module has a ``mask``
    buffer, and any nn.Linear the module applies after it composed with the
    MHA's own out_proj: (c·W_o + b_o)·W_p + b_p = c·(W_o·W_p) + (b_o·W_p + b_p)."""
    mask = getattr(module, "mask", None)
    weights = _read_torch_mha(mha, isinstance(mask, Tensor) if causal is None else causal)
    weights.torch_mha, weights.inner_mha = None, mha
    weights.training = module.training
    weights.found[0] = f"{name}: " + weights.found[0]
    after = _out_layer(module, mha.embed_dim, set())
    if after is not None:
        after_name, (w_p, b_p) = after[0], after[1][:2]
        b_p = torch.zeros(w_p.shape[1]) if b_p is None else b_p
        weights.W_out, weights.b_out = weights.W_out @ w_p, weights.b_out @ w_p + b_p
        weights.found.append(f"then {after_name}, composed with out_proj into one projection")
    if isinstance(mask, Tensor):
        weights.found.append(f"the mask buffer {tuple(mask.shape)}")
    return weights


def _read_heads(module: nn.Module, heads, causal: bool | None) -> LearnerWeights:
    """``MultiHeadAttentionWrapper``: each head's W side by side, head h in
    columns ``h*head_dim:(h+1)*head_dim`` (as ``torch.cat(..., dim=-1)`` lays them out)."""
    read = [read_weights(head, causal) for head in heads]
    if any(r.n_heads != 1 for r in read) or len({(r.d_in, r.d_k, r.d_v) for r in read}) != 1:
        raise CheckError("module", f"{type(module).__name__}.heads must hold single-head modules "
                                   "of equal sizes, as MultiHeadAttentionWrapper's CausalAttention")

    def side_by_side(name: str) -> Tensor | None:
        parts = [getattr(r, name) for r in read]
        if all(p is None for p in parts):
            return None
        return torch.cat([torch.zeros(getattr(r, "d_v" if name.endswith("value") else "d_k"))
                          if p is None else p for p, r in zip(parts, read)], dim=-1)

    first = read[0]
    weights = LearnerWeights(
        **{name: side_by_side(name) for name in
           ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value")},
        n_heads=len(read), causal=first.causal, dropout=first.dropout,
        training=module.training,
        found=[f"heads: {len(read)} × {type(heads[0]).__name__}, each with "
               + ", ".join(first.found), "their weights side by side, as torch.cat(..., dim=-1)"])
    _read_out_proj(module, weights, {"heads"})
    return weights


def _out_layer(module: nn.Module, d_v: int, used: set[str]
               ) -> tuple[str, tuple[Tensor, Tensor | None, str]] | None:
    """The output projection: ``out_proj`` (an nn.Linear or a (d_v, d_out)
    tensor), another of the `_OUT` names, or the one nn.Linear left that
    takes d_v inputs; (its name, (W (d_v, d_out), bias, how)) or None."""
    for name in _OUT:
        found = _projection(module, name) if name not in used else None
        if found is not None and found[0].shape[0] == d_v:
            return name, found
    left = [name for name, layer in _linears(module, used).items() if layer.in_features == d_v]
    return (left[0], _projection(module, left[0])) if len(left) == 1 else None


def _read_out_proj(module: nn.Module, weights: LearnerWeights, used: set[str]) -> None:
    """The output projection (`_out_layer`) into ``weights``: W_out (d_v,
    d_out), an nn.Linear's weight transposed, and b_out (d_out,), zeros without
    a bias. ``used``: the names already read as projections."""
    out = _out_layer(module, weights.d_v, used)
    if out is not None:
        name, (w_out, b_out, _) = out
        weights.W_out = w_out
        weights.b_out = torch.zeros(w_out.shape[1]) if b_out is None else b_out
        weights.found.append("out_proj" if name == "out_proj" else f"{name} as out_proj")


def _assemble(module: nn.Module, w: list[Tensor], b: list[Tensor | None], causal: bool | None,
              found: list[str], used: set[str]) -> LearnerWeights:
    """W_query, W_key, W_value (d_in, d_out) and their biases, with the
    module's ``num_heads`` (or ``n_heads``), mask buffer, dropout and output
    projection, checked to fit together."""
    (w_q, w_k, w_v), name = w, type(module).__name__
    if not (w_q.shape[0] == w_k.shape[0] == w_v.shape[0]) or w_q.shape[1] != w_k.shape[1]:
        raise CheckError("module", f"{name}'s W_query {tuple(w_q.shape)}, W_key "
                                   f"{tuple(w_k.shape)} and W_value {tuple(w_v.shape)} (as "
                                   "(d_in, d_out)) must share d_in, and W_query and W_key d_out")
    n_heads = getattr(module, "num_heads", getattr(module, "n_heads", 1))
    if not isinstance(n_heads, int) or n_heads < 1 or w_q.shape[1] % n_heads \
            or w_v.shape[1] % n_heads:
        raise CheckError("module", f"{name}.num_heads must be a whole number that divides "
                                   f"d_out = {w_q.shape[1]} (got {n_heads!r})")
    mask = getattr(module, "mask", None)
    weights = LearnerWeights(
        w_q, w_k, w_v, *b, n_heads=n_heads,
        causal=isinstance(mask, Tensor) if causal is None else causal,
        dropout=_dropout_p(module), training=module.training, found=found)
    if n_heads > 1:
        weights.found.append(f"num_heads = {n_heads} (head_dim {weights.head_dim})")
    _read_out_proj(module, weights, used)
    if isinstance(mask, Tensor):
        weights.found.append(f"the mask buffer {tuple(mask.shape)}")
    return weights


def read_weights(module: nn.Module, causal: bool | None = None) -> LearnerWeights:
    """The weights of a learner's attention module, by the book's names.

    - ``W_query``, ``W_key``, ``W_value``: an ``nn.Linear(d_in, d_out)`` (its
      weight (d_out, d_in) is transposed to W (d_in, d_out); its bias, if any,
      kept), or an ``nn.Parameter`` / tensor of shape (d_in, d_out) used as
      ``x @ W`` (``SelfAttention_v1``, Listing 3.1).
    - ``heads``: a list of such single-head modules (``MultiHeadAttentionWrapper``,
      Listing 3.4), whose weights are laid side by side.
    - or one fused ``nn.Linear(d_in, 3 * d_out)`` (`_FUSED` names: ``qkv``,
      GPT-2's ``c_attn`` ...), its rows W_query, W_key, W_value in that order.
    - ``num_heads`` (or ``n_heads``; default 1), the output projection
      (``out_proj``, another `_OUT` name, or the one nn.Linear left that takes
      d_out inputs), a ``mask`` buffer (then the attention is causal, unless
      ``causal`` says otherwise), and ``dropout`` (``nn.Dropout`` or a float p).
    - a ``torch.nn.MultiheadAttention``: its ``in_proj_weight`` / ``in_proj_bias``
      and ``out_proj``; causal only when ``causal=True``; or a module holding
      one (`_read_wrapped_mha`).

    Biases a module adds on its own (``Q += self.bias_q`` after an einsum) are
    not read here: `explorer.checker.check` finds them in what the forward computes.

    Raises `CheckError` (field ``"module"``) naming what was expected and what
    the module holds instead, or when the sizes do not fit together.
    """
    if isinstance(module, nn.MultiheadAttention):
        return _read_torch_mha(module, bool(causal))
    heads = getattr(module, "heads", None)
    if isinstance(heads, (nn.ModuleList, list, tuple)) and heads and \
            all(isinstance(h, nn.Module) for h in heads) and _projection(module, "W_query") is None:
        return _read_heads(module, heads, causal)
    read = [_projection(module, name) for name in _PROJECTIONS]
    if any(r is None for r in read):
        if all(r is None for r in read):
            wrapped = _wrapped_mha(module)
            if wrapped is not None:
                return _read_wrapped_mha(module, *wrapped, causal)
            fused = _fused(module)
            if fused is not None:
                return _read_fused(module, *fused, causal)
        raise _missing_names(module)
    (w_q, b_q, how), (w_k, b_k, _), (w_v, b_v, _) = read
    weights = _assemble(module, [w_q, w_k, w_v], [b_q, b_k, b_v], causal,
                        [f"W_query, W_key, W_value as {how}"], set(_PROJECTIONS))
    if how.startswith("nn.Parameter") and all(w.shape[0] == w.shape[1] for w in (w_q, w_k, w_v)):
        weights.alternatives.append(_assemble(
            module, [w_q.T, w_k.T, w_v.T], [b_q, b_k, b_v], causal,
            ["W_query, W_key, W_value as nn.Parameter (d_out, d_in), used as x @ W.T"],
            set(_PROJECTIONS)))
    return weights


# ---------------------------------------------------------------------------
# Running the forward pass, every tensor recorded
# ---------------------------------------------------------------------------
_DROPOUTS = (torch.nn.functional.dropout, torch.dropout)


@dataclass
class Recording:
    """One forward pass: ``tensors``, every floating-point tensor of 2 or more
    dims it produced (copies, in the order made, in-place results included);
    ``output``: what ``forward`` returned (its first element if a tuple);
    ``notes``: what the report should say about the run; ``causal_call``: it
    called ``scaled_dot_product_attention`` with ``is_causal=True``."""

    tensors: list[Tensor]
    output: Tensor
    notes: list[str] = field(default_factory=list)
    causal_call: bool = False


class _Recorder(TorchFunctionMode):
    """Keeps a copy of every tensor a torch function returns (or changes in
    place), and, given ``keep_masks``, applies those dropout masks instead of
    drawing new ones."""

    def __init__(self, keep_masks: Tensor | None = None, n_heads: int = 1):
        super().__init__()
        self.tensors: list[Tensor] = []
        self.bytes = 0
        self.full = False
        self.keep_masks = keep_masks  # (B, H, n, n) or None
        self.n_heads = n_heads
        self.dropout_calls = 0
        self.notes: list[str] = []
        self.reversed_shapes: list[tuple[int, ...]] = []  # x.T on a tensor of 3+ dims
        self.caught: list[warnings.WarningMessage] = []  # filled by run_forward
        self.causal_call = False  # scaled_dot_product_attention(..., is_causal=True)
        self.warned: list[tuple] = []  # (warning, (file, line, globals) of theirs or None)

    def _keep(self, value) -> None:
        if isinstance(value, (tuple, list)):
            for item in value:
                self._keep(item)
            return
        if not isinstance(value, Tensor) or not value.is_floating_point() or value.dim() < 2:
            return
        size = value.numel() * 4
        if self.bytes + size > MAX_RECORDED_BYTES:
            self.full = True
            return
        self.bytes += size
        self.tensors.append(value.detach().to(torch.float32).clone())

    def _dropout(self, args, kwargs):
        """A dropout call with our keep-mask: ``att.apply_dropout``; None to let it run."""
        x = args[0]
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
        if self.keep_masks is None or not training or not p:
            return None
        masks = self.keep_masks
        if x.numel() == masks.numel():  # (b, num_heads, n, n), (b*num_heads, n, n) ...
            keep = masks.reshape(x.shape)
        elif x.numel() * self.n_heads == masks.numel() and self.dropout_calls < self.n_heads:
            keep = masks[:, self.dropout_calls].reshape(x.shape)  # one head at a time (wrapper)
        else:
            self.notes.append(f"A dropout call on a tensor of shape {tuple(x.shape)} was left "
                              "to draw its own mask.")
            return None
        self.dropout_calls += 1
        return att.apply_dropout(x, keep.to(x.dtype), float(p))

    def _attention_forward(self, func, args, kwargs):
        """``F.multi_head_attention_forward`` (inside ``nn.MultiheadAttention``),
        run asking for each head's weights, so that they are recorded; it
        returns what the caller asked for (None, or the weights averaged)."""
        try:
            out, per_head = func(*args, **{**kwargs, "need_weights": True,
                                           "average_attn_weights": False})
        except Exception:  # noqa: BLE001 - a call that needs its own settings
            return func(*args, **kwargs)
        self._keep(per_head)
        if not kwargs.get("need_weights", True):
            return out, None
        return out, per_head.mean(dim=-3) if kwargs.get("average_attn_weights", True) \
            else per_head

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is _TRANSPOSE_ALL and args \
                and isinstance(args[0], Tensor) and args[0].dim() > 2:
            self.reversed_shapes.append(tuple(args[0].shape))
        if func is _SDPA and kwargs.get("is_causal", len(args) > 5 and args[5]):
            self.causal_call = True
        before = len(self.caught)
        out = self._dropout(args, kwargs) if func in _DROPOUTS else None
        if out is None:
            out = self._attention_forward(func, args, kwargs) \
                if func is _MHA_FORWARD else func(*args, **kwargs)
        if len(self.caught) > before:  # a warning: remember the learner's line that called
            frame = _their_frame()
            self.warned += [(w, frame and (frame.f_code.co_filename, frame.f_lineno,
                                           frame.f_globals)) for w in self.caught[before:]]
        self._keep(out)
        if out is None and args and isinstance(args[0], Tensor):  # in place: x[mask] = ...
            self._keep(args[0])
        return out


_TRANSPOSE_ALL = torch._C.TensorBase.T
"""The ``.T`` attribute (its ``__get__`` is what a torch function mode sees)."""
_MHA_FORWARD = torch.nn.functional.multi_head_attention_forward
_SDPA = torch.nn.functional.scaled_dot_product_attention
_OURS = (str(Path(torch.__file__).parent), str(Path(__file__).parents[1]))
"""Where frames are torch's or the explorer's, not the learner's."""


def _their_frame():
    """The innermost frame of the learner's code on the stack (None when none)."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith(_OURS)
                                 or "importlib" in frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _warn_at_their_line(caught: list[warnings.WarningMessage], warned: list[tuple]) -> None:
    """Warn again with every warning the forward gave (``caught``, in order):
    those of a torch function at the line of the learner's code that called it
    (``warned``), not at the recorder's own call; the others where they were."""
    theirs = {id(warning): where for warning, where in warned}
    for warning in caught:
        where = theirs.get(id(warning))
        if where is None:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
        else:
            filename, lineno, globals_ = where
            warnings.warn_explicit(warning.message, warning.category, filename, lineno,
                                   module=globals_.get("__name__"),
                                   registry=globals_.setdefault("__warningregistry__", {}))


def _call(module: nn.Module, x: Tensor, weights: LearnerWeights) -> Tensor:
    """``module(x)``; a ``torch.nn.MultiheadAttention`` as self-attention,
    asking for its attention weights per head (its function returns them with
    the output, so they are recorded), with the causal mask when causal, and
    (batch_first=False) the batch moved to axis 1 and back."""
    mha = weights.torch_mha
    if mha is None:
        out = module(x)
        return out[0] if isinstance(out, (tuple, list)) else out
    seq_first = x.dim() == 3 and not mha.batch_first
    x = x.transpose(0, 1) if seq_first else x
    mask = att.causal_mask(x.shape[-2] if not seq_first else x.shape[0]) if weights.causal else None
    out, _ = mha(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
    return out.transpose(0, 1) if seq_first else out


def their_traceback(error: BaseException, limit: int = TRACEBACK_LINES) -> str:
    """The last ``limit`` lines of ``error``'s traceback, keeping only the frames
    of the learner's code (not torch's nor the explorer's), and the error line."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(_OURS) and "importlib" not in f.filename]
    lines = "".join(traceback.format_list(frames) + traceback.format_exception_only(error))
    return "\n".join(lines.rstrip().splitlines()[-limit:])


def run_forward(module: nn.Module, x: Tensor, weights: LearnerWeights,
                keep_masks: Tensor | None = None) -> Recording:
    """Run ``module`` on ``x`` once, recording every tensor its forward makes.

    x: (n, d_in) or (b, n, d_in), as given. ``keep_masks`` (b, n_heads, n, n):
    dropout keep-masks to use instead of the module's own random draws (the
    k-th dropout call of a single head gets head k's). Runs without gradients,
    inside ``torch.random.fork_rng`` (a dropout that draws leaves the global
    random state as it was). Raises `CheckError` (field ``"forward"``) when the
    forward raises, with the last lines of the learner's traceback.
    """
    recorder = _Recorder(keep_masks, weights.n_heads)
    try:
        with warnings.catch_warnings(record=True) as recorder.caught:
            warnings.simplefilter("always")
            with torch.random.fork_rng(devices=[]), torch.no_grad(), recorder:
                output = _call(module, x, weights)
    except (MemoryError, RecursionError):
        raise
    except Exception as error:  # noqa: BLE001 - any error in the learner's code
        raise CheckError("forward", f"{type(module).__name__}.forward raised "
                                    f"{type(error).__name__} on inputs of shape "
                                    f"{tuple(x.shape)}: {error}",
                         their_traceback(error), len(recorder.tensors),
                         recorder.reversed_shapes) from error
    _warn_at_their_line(recorder.caught, recorder.warned)
    if not isinstance(output, Tensor):
        raise CheckError("forward", f"{type(module).__name__}.forward returned "
                                    f"{type(output).__name__}, not a tensor")
    notes = list(recorder.notes)
    if recorder.full:
        notes.append(f"Only the first {MAX_RECORDED_BYTES // 2**20} MB of tensors your "
                     "forward made were kept for comparison.")
    return Recording(recorder.tensors, output.detach().to(torch.float32), notes,
                     recorder.causal_call)


# ---------------------------------------------------------------------------
# From source code: the command line and the sandbox
# ---------------------------------------------------------------------------
def load_class(source: str, filename: str, class_name: str) -> type[nn.Module]:
    """Run ``source`` (as if it were the file ``filename``) and return its class
    ``class_name``, an ``nn.Module`` subclass.

    The source is registered with ``linecache``, so tracebacks show its lines.
    Raises `CheckError`: field ``"syntax"`` for a syntax error (with the line and
    a caret); ``"source"`` for an error while running the file (with its
    traceback) or no such class (listing the classes it does define).
    """
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as error:
        raise CheckError("syntax", f"{filename} does not compile: "
                                   f"{type(error).__name__}: {error.msg} (line {error.lineno})",
                         "".join(traceback.format_exception_only(error)).rstrip()) from None
    namespace = {"__name__": Path(filename).stem or "learner", "__file__": filename}
    try:
        exec(code, namespace)  # noqa: S102 - the learner's own code, on purpose
    except (MemoryError, RecursionError):
        raise
    except Exception as error:  # noqa: BLE001
        raise CheckError("source", f"running {filename} raised {type(error).__name__}: {error}",
                         their_traceback(error)) from None
    cls = namespace.get(class_name)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        modules = sorted(k for k, v in namespace.items()
                         if isinstance(v, type) and issubclass(v, nn.Module) and
                         v.__module__ == namespace["__name__"])
        raise CheckError("source", f"{filename} defines no nn.Module class named {class_name!r}"
                                   f"; it defines {', '.join(modules) or 'none'}")
    return cls


ALIASES = {"block_size": "context_length", "n_heads": "num_heads", "drop_rate": "dropout"}
"""Other names of the book's constructor arguments: ``block_size`` is
``context_length``'s older name (the book repository's first chapter-3 code)."""
HOW_TO_SET = {
    "api": "then pass it to check_code by that name",
    "cli": "then set it with its flag: --d_in, --d_out, --context_length, --dropout, "
           "--num_heads or --qkv_bias",
    "app": "then set it in the sidebar's d_in, d_out, num_heads or qkv_bias field "
           "(context_length is the sentence's number of tokens, dropout 0)",
}
"""How to set a constructor argument, by where the check runs."""


def build_module(cls: type[nn.Module], *, d_in: int, d_out: int, context_length: int,
                 num_heads: int = 1, dropout: float = 0.0, qkv_bias: bool = False,
                 seed: int = 123, interface: str = "api") -> nn.Module:
    """``cls(d_in=..., d_out=..., ...)`` with the book's constructor arguments,
    after ``torch.manual_seed(seed)`` as the book does, inside ``fork_rng``.

    ``d_in`` and ``d_out`` always; ``context_length``, ``dropout``,
    ``num_heads`` and ``qkv_bias`` only where ``cls.__init__`` takes them (by
    name, by an `ALIASES` name such as ``block_size``, or through
    ``**kwargs``). Raises `CheckError` (field ``"__init__"``) when it does not
    take d_in and d_out, needs an argument the check does not know (the message
    says how to set the ones it knows, `HOW_TO_SET` [``interface``]), or raises
    (with the traceback).
    """
    parameters = inspect.signature(cls.__init__).parameters
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    offered = {"d_in": d_in, "d_out": d_out, "context_length": context_length,
               "dropout": dropout, "num_heads": num_heads, "qkv_bias": qkv_bias}
    known = ", ".join(list(offered)[2:])
    how = HOW_TO_SET.get(interface, HOW_TO_SET["api"])
    if not {"d_in", "d_out"} <= set(parameters) and not open_ended:
        raise CheckError("__init__", f"{cls.__name__}.__init__ takes "
                                     f"({', '.join(list(parameters)[1:])}); the check passes "
                                     f"d_in and d_out by name (and {known} where __init__ "
                                     "takes them), as the book's classes do")
    kwargs = {k: v for k, v in offered.items() if k in parameters or (
        open_ended and k in ("d_in", "d_out"))}
    kwargs.update({alias: offered[name] for alias, name in ALIASES.items()
                   if alias in parameters and name not in parameters})
    unknown = [name for name, p in list(parameters.items())[1:]
               if name not in kwargs and p.default is p.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if unknown:
        names = ", ".join(unknown)
        close = [f"{name} → {match[0]}" for name in unknown
                 if (match := difflib.get_close_matches(name, [*offered, *ALIASES], 1, 0.6))]
        guess = f" (did you mean {', '.join(close)}?)" if close else ""
        raise CheckError("__init__", f"{cls.__name__}.__init__ needs {names}, which the check "
                                     f"does not know{guess}: it passes d_in, d_out, {known} by "
                                     f"name (context_length also as block_size). Give {names} "
                                     f"a default, or rename it to the one it stands for; "
                                     f"{how}.")
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the book's torch.manual_seed(123) before building
            return cls(**kwargs)
    except (MemoryError, RecursionError):
        raise
    except Exception as error:  # noqa: BLE001
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise CheckError("__init__", f"{cls.__name__}({args}) raised "
                                     f"{type(error).__name__}: {error}",
                         their_traceback(error)) from None
