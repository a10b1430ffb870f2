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
    causal_why: str = ""
    heads_why: str = ""
    heads_known: bool = True
    dropout_why: str = ""
    sources: list = field(default_factory=list)
    fused: bool = False

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
NAMES = {
    "W_query": ("W_query", "query", "q_proj", "W_q", "to_q", "wq", "q_lin", "toqueries", "q"),
    "W_key": ("W_key", "key", "k_proj", "W_k", "to_k", "wk", "k_lin", "tokeys", "k"),
    "W_value": ("W_value", "value", "v_proj", "W_v", "to_v", "wv", "v_lin", "tovalues", "v"),
}
"""The names each projection goes by, the book's first: ``query`` (BERT, ng-video-lecture's
``Head``), ``q_proj`` (Hugging Face, Llama), ``W_q`` (d2l), ``to_q`` (lucidrains), ``wq``
(Meta's Llama), ``q_lin`` (DistilBERT), ``toqueries`` (Peter Bloem's tutorial)."""
HEAD_ATTRIBUTES = ("num_heads", "n_head", "n_heads", "num_attention_heads", "heads", "nhead",
                   "h")
"""The attributes a head count goes by (the book, nanoGPT, ARENA, Hugging Face BERT's
``num_attention_heads``, lucidrains, nn.Transformer, the annotated transformer's
``self.h``), on the module or its ``config`` object."""
EXPECTED = ("W_query, W_key and W_value (or query/key/value, q_proj/k_proj/v_proj, W_q/W_k/W_v, "
            "to_q/to_k/to_v, wq/wk/wv), each an nn.Linear(d_in, d_out), a GPT-2 Conv1D (weight "
            "(d_in, d_out), x @ W + b), an nn.Sequential holding one of those, or an "
            "nn.Parameter of shape (d_in, d_out) (the book's classes), with any bias added "
            "after them; or one fused layer of width 3 * d_out holding the query, key and value "
            "columns (self.qkv, GPT-2's c_attn, lucidrains' to_qkv); or a list of 3 or 4 such "
            "layers, q, k, v [, out] (the annotated transformer's self.linears); or heads, a "
            "list of single-head modules (MultiHeadAttentionWrapper); or a "
            "torch.nn.MultiheadAttention, or a module that holds one; and the output "
            "projection as out_proj (or proj, c_proj, o_proj, W_o, wo, to_out), or the one "
            "other layer that takes d_out inputs")
EXAMPLE = ("For example: self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias), the same for "
           "W_key and W_value, and in forward queries = self.W_query(x)")
"""What `read_weights` accepts, in the words of its error message."""


def _float(tensor: Tensor) -> Tensor:
    return tensor.detach().to(torch.float32).clone()


_Linear = tuple[Tensor, "Tensor | None", str, list]
"""A layer read as x @ W + b: (W (d_in, d_out), b (d_out,) or None, how it was stored,
the objects read)."""


def _linear(layer) -> _Linear | None:
    """``layer`` read as x @ W + b, or None when it is no linear form.

    - ``nn.Linear``: its weight (d_out, d_in), transposed;
    - a Conv1D (GPT-2's, Hugging Face's ``pytorch_utils.Conv1D``): a module whose
      only parameters are a 2-D ``weight`` (d_in, d_out) and a ``bias`` (d_out,),
      computing ``x @ W + b``; without a bias, only by its class name;
    - an ``nn.Sequential`` whose one layer with parameters is such a layer
      (lucidrains' ``to_out = nn.Sequential(nn.Linear(...), nn.Dropout(p))``);
    - a 2-D tensor (d_in, d_out), used as ``x @ W`` (the book's Listing 3.1).
    """
    if isinstance(layer, nn.Linear):
        bias = None if layer.bias is None else _float(layer.bias)
        return (_float(layer.weight).T, bias, "nn.Linear" + (" with bias" if bias is not None
                                                           else ""), [layer])
    if isinstance(layer, nn.Sequential):
        held = [m for m in layer if any(True for _ in m.parameters())]
        inner = _linear(held[0]) if len(held) == 1 else None
        return None if inner is None else (*inner[:2], f"nn.Sequential({inner[2]}, ...)",
                                           inner[3] + [layer])
    if isinstance(layer, nn.Module) and not isinstance(layer, nn.MultiheadAttention):
        params = dict(layer.named_parameters())
        weight, bias = params.get("weight"), params.get("bias")
        if weight is None or weight.dim() != 2 or set(params) - {"weight", "bias"} or \
                any(True for _ in layer.children()):
            return None
        named = "conv1d" in type(layer).__name__.lower()
        if bias is not None and (bias.dim() != 1 or bias.shape[0] not in weight.shape):
            return None
        if named or (bias is not None and bias.shape[0] == weight.shape[1] != weight.shape[0]):
            return (_float(weight), None if bias is None else _float(bias),
                    "Conv1D (weight (d_in, d_out), x @ W + b)", [layer])
        if bias is not None and bias.shape[0] == weight.shape[0]:
            return (_float(weight).T, _float(bias), "a linear layer (weight (d_out, d_in), "
                                                    "x @ W.T + b)", [layer])
        return None
    if isinstance(layer, Tensor) and layer.dim() == 2:
        return _float(layer), None, "nn.Parameter (d_in, d_out)", [layer]
    return None


def _projection(module: nn.Module, name: str) -> _Linear | None:
    """The projection ``name`` (``W_query``, ``W_key``, ``W_value`` or an out
    projection's name) as (W (d_in, d_out), bias or None, how, objects read): by
    ``name`` itself, or for a projection by any of its `NAMES`."""
    for alias in NAMES.get(name, (name,)):
        found = _linear(getattr(module, alias, None))
        if found is not None:
            return found[0], found[1], found[2] if alias == name else f"{alias}: {found[2]}", \
                found[3]
    return None


DROPOUT_ATTRIBUTES = ("dropout", "dropout_p", "attn_dropout", "attention_dropout", "attn_pdrop",
                      "attn_drop")
"""The attributes an attention dropout goes by (the book, Hugging Face's eager attention's
``dropout_p`` and ``attention_dropout``, nanoGPT's ``attn_dropout``, GPT-2's config
``attn_pdrop``, timm's ``attn_drop``), as an ``nn.Dropout`` or a probability p."""


def dropout_evidence(module: nn.Module) -> tuple[float, str]:
    """The module's attention dropout p as declared, and where it was read: one of
    `DROPOUT_ATTRIBUTES`, on the module or its ``config`` object, else the largest
    ``nn.Dropout`` it holds; (0.0, "") when it declares none."""
    for holder, whose in ((module, "its"), (getattr(module, "config", None), "its config's")):
        for name in DROPOUT_ATTRIBUTES if holder is not None else ():
            p = _declared_p_of(getattr(holder, name, None))
            if p is not None:
                return p, f"{whose} {name}"
    held = [(float(m.p), name) for name, m in module.named_modules() if isinstance(m, nn.Dropout)]
    return max(held) if held else (0.0, "")


def _declared_p_of(value) -> float | None:
    if isinstance(value, nn.Dropout):
        return float(value.p)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None


def _dropout_p(module: nn.Module) -> float:
    """`dropout_evidence`'s p."""
    return dropout_evidence(module)[0]


def _parameters_text(module: nn.Module) -> str:
    """``query.weight (2, 3), key.weight (2, 3)``: what the module does hold."""
    shown = [f"{name} {tuple(p.shape)}" for name, p in module.named_parameters()][:8]
    return ", ".join(shown) if shown else "no parameters at all"


def _found_names(module: nn.Module) -> list[str]:
    """The projections `_projection` finds, each by the attribute that holds it:
    ``to_q (read as W_query)`` for lucidrains' ``to_q``, ``W_query`` for the book's."""
    found = []
    for name in _PROJECTIONS:
        alias = next((a for a in NAMES[name] if _linear(getattr(module, a, None)) is not None), None)
        if alias is not None:
            found.append(name if alias == name else f"{alias} (read as {name})")
    return found


def _missing_names(module: nn.Module) -> CheckError:
    """The refusal: what the check reads, and what ``module`` really holds (its
    projections by their own attribute names, and its parameters with their shapes)."""
    name = type(module).__name__
    have = _found_names(module)
    has = f"has {' and '.join(have)} but no other projection the check can place; it holds " \
        f"{_parameters_text(module)}" if have else f"holds {_parameters_text(module)}"
    return CheckError("module", f"the check finds the projections in one of these forms: "
                                f"{EXPECTED}. {name} {has}. {EXAMPLE}.")


# ---------------------------------------------------------------------------
# What the module means: causal or not, how many heads
# ---------------------------------------------------------------------------
EXACT_DIAGONAL = {"lower": 0, "upper": 1, "masked above": 1, "masked below": -1}
"""Each `triangle` kind's diagonal in the exact causal mask: ``tril(ones)`` (what may be
seen), ``triu(ones, diagonal=1)`` (what is hidden), −∞ above or below the diagonal."""
_DIAGONALS = {"lower": (0, -1, 1), "upper": (1, 0, -1, 2), "masked above": (1, 0, -1, 2),
              "masked below": (-1, 0, 1, -2)}
"""The diagonals each kind is recognised at, the exact one first: a mask one or two
diagonals off (``triu(..., diagonal=-1)`` for ``diagonal=1``, ``tril(ones, diagonal=1)``)
is still a mask: the module means to be causal, and the slip is in the mask."""


def triangle(t: Tensor) -> str | None:
    """Whether the last two axes of ``t`` (square, 2 or more) hold a causal mask's
    pattern, the same in every leading slice: ``"lower"`` (ones or True on and
    below the diagonal: what may be seen, nanoGPT's ``tril``), ``"upper"`` (ones
    or True above it: what is hidden, the book's ``triu(..., diagonal=1)``), or
    an additive mask or masked scores: −∞ (or below −1e4) in one triangle and
    finite numbers elsewhere (``"masked above"`` / ``"masked below"``). A
    diagonal shifted by one or two (`_DIAGONALS`: a slip in the mask) counts too;
    `triangle_diagonal` says which. None otherwise."""
    found = triangle_diagonal(t)
    return None if found is None else found[0]


def triangle_diagonal(t: Tensor) -> tuple[str, int] | None:
    """`triangle`'s kind and the diagonal it was found at (``torch.tril`` /
    ``torch.triu``'s ``diagonal``); `EXACT_DIAGONAL` is the causal one. A shifted
    diagonal is tried only from 3 tokens on, and never where it would make the
    pattern all one value."""
    if t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2 or t.numel() > 2**22:
        return None
    if t.is_complex():
        return None
    n = t.shape[-1]
    flat = t.detach().reshape(-1, n, n)
    ones = torch.ones(n, n, dtype=torch.bool)

    def offsets(kind: str) -> tuple[int, ...]:
        return _DIAGONALS[kind] if n >= 3 else _DIAGONALS[kind][:2]

    def build(kind: str, offset: int) -> Tensor:
        return torch.tril(ones, offset) if kind in ("lower", "masked below") else \
            torch.triu(ones, offset)

    def plain(pattern: Tensor) -> bool:  # neither all True nor all False
        return bool(pattern.any()) and not bool(pattern.all())

    if t.dtype == torch.bool or bool(((flat == 0) | (flat == 1)).all()):
        if not bool((flat == flat[:1]).all()):
            return None
        m = flat[0].bool()
        for kind in ("lower", "upper"):
            for offset in offsets(kind):
                pattern = build(kind, offset)
                if plain(pattern) and bool((m == pattern).all()):
                    return kind, offset
        return None
    if not t.is_floating_point():
        return None
    hidden = flat <= -1e4
    if not bool((hidden == hidden[:1]).all()) or not bool(hidden.any()):
        return None
    hidden = hidden[0]
    if bool(torch.isnan(flat).any()) or not bool(torch.isfinite(flat[:, ~hidden]).all()):
        return None
    for kind in ("masked above", "masked below"):
        for offset in offsets(kind):
            pattern = build(kind, offset)
            if plain(pattern) and bool((hidden == pattern).all()):
                return kind, offset
    return None


def slip_text(kind: str, offset: int) -> str:
    """"" for the exact causal diagonal, else the words for a mask whose diagonal is
    off: what it is, as torch would build it, and that the slip is in the mask."""
    exact = EXACT_DIAGONAL[kind]
    if offset == exact:
        return ""
    op = "tril" if kind in ("lower", "masked below") else "triu"
    return (f", but built as {op}(ones, diagonal={offset}) where the causal mask is "
            f"{op}(ones, diagonal={exact}): the module means causal, the slip is in the mask")


def causal_evidence(module: nn.Module) -> str:
    """Why ``module`` is causal attention, in words, or "" when nothing says so:
    a buffer or tensor attribute that holds a triangular mask (`triangle`),
    whatever its name (the book's ``mask``, nanoGPT's ``bias``, ng-video-lecture's
    ``tril``), or "Causal" in its class name. (A mask built in ``forward`` or
    ``scaled_dot_product_attention(..., is_causal=True)`` shows only when it
    runs: `Recording.causal_seen`.)"""
    held = dict(module.named_buffers(recurse=False))
    held.update({k: v for k, v in vars(module).items() if isinstance(v, Tensor)})
    held.update({k: v for k, v in module.named_parameters(recurse=False) if not v.requires_grad})
    for name, tensor in held.items():
        found = triangle_diagonal(tensor)
        if found is not None:
            shape, offset = found
            kind = "buffer" if name in dict(module.named_buffers(recurse=False)) else "tensor"
            what = {"lower": "lower-triangular (what each token may see)",
                    "upper": "upper-triangular (the future it hides)",
                    "masked above": "−∞ above the diagonal",
                    "masked below": "−∞ below the diagonal"}[shape]
            return f"the {kind} `{name}` {tuple(tensor.shape)} is {what}{slip_text(shape, offset)}"
    if "causal" in type(module).__name__.lower():
        return f"the class name {type(module).__name__} says causal"
    return ""


def heads_evidence(module: nn.Module) -> tuple[int, str] | None:
    """The module's head count and where it was read: the first of
    `HEAD_ATTRIBUTES` that holds a whole number, on the module, then on its
    ``config`` object (Hugging Face's ``config.num_attention_heads``); None when
    none does."""
    for holder, whose in ((module, "its"), (getattr(module, "config", None), "its config's")):
        for name in HEAD_ATTRIBUTES if holder is not None else ():
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value, f"{whose} {name} = {value}"
    return None


def _causal(module: nn.Module, causal: bool | None) -> tuple[bool, str]:
    """(causal, why): ``causal`` when given, else the module's evidence."""
    if causal is not None:
        return causal, f"as you said (causal={causal})"
    why = causal_evidence(module)
    return bool(why), why


def _outer_causal(module: nn.Module, causal: bool | None) -> tuple[bool | None, str]:
    """What a module that holds the attention's parts (its heads, its one child)
    says of causal for them: (``causal`` to read them with, why), (None, "") when
    it says nothing and each part speaks for itself."""
    causal, why = _causal(module, causal)
    return (causal, why) if why else (None, "")


def _read_torch_mha(mha: nn.MultiheadAttention, causal: bool | None) -> LearnerWeights:
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
        n_heads=mha.num_heads, causal=bool(causal), dropout=float(mha.dropout),
        dropout_why="torch.nn.MultiheadAttention's dropout",
        training=mha.training, torch_mha=mha,
        causal_why=f"as you said (causal={causal})" if causal is not None else
        "torch.nn.MultiheadAttention is causal only when told (causal=True)",
        heads_why=f"its num_heads = {mha.num_heads}", sources=[mha],
        found=[f"torch.nn.MultiheadAttention(embed_dim={E}, num_heads={mha.num_heads}, "
               f"batch_first={mha.batch_first})", "in_proj_weight split into W_query, W_key, "
               "W_value" + (", in_proj_bias" if biases[0] is not None else ""), "out_proj"])


_FUSED = ("qkv", "c_attn", "in_proj", "W_qkv", "qkv_proj", "to_qkv", "Wqkv", "query_key_value")
"""The names a fused query-key-value layer goes by, tried first."""
_OUT = ("out_proj", "proj", "c_proj", "o_proj", "W_o", "W_out", "out", "wo", "to_out",
        "unifyheads", "dense", "out_lin")
"""The names an output projection goes by, tried first."""


def _linears(module: nn.Module, used: set[str] = frozenset()) -> dict[str, _Linear]:
    """The module's children that are linear forms (`_linear`), by name."""
    out = {}
    for name, child in module.named_children():
        read = None if name in used else _linear(child)
        if read is not None:
            out[name] = read
    return out


def _fused(module: nn.Module) -> tuple[str, _Linear] | None:
    """A fused query-key-value layer: a linear form of width 3 * d_out by one
    of the `_FUSED` names, or the module's only one whose width divides by 3."""
    layers = {name: read for name, read in _linears(module).items()
              if read[0].shape[1] % 3 == 0}
    named = [name for name in _FUSED if name in layers]
    if named:
        return named[0], layers[named[0]]
    return next(iter(layers.items())) if len(layers) == 1 else None


LAYOUTS = {
    (0, 1, 2): "in that order",
    (1, 0, 2): "head by head (qkv.view(b, n, num_heads, 3 * head_dim))",
    (1, 2, 0): "laid out (num_heads, head_dim, 3)",
    (0, 2, 1): "laid out (3, head_dim, num_heads)",
    (2, 0, 1): "laid out (head_dim, 3, num_heads)",
    (2, 1, 0): "laid out (head_dim, num_heads, 3)",
}
"""How a fused layer's 3 · d_out columns may be laid out, as the order of the
axes (qkv, head, dim) they are read in, in order of likelihood."""


def _read_fused(module: nn.Module, name: str, read: _Linear, causal: bool | None,
                n_heads: int | None) -> LearnerWeights:
    """``module.<name>``, a linear form of width 3 * d_out: its columns hold
    W_query, W_key, W_value; first as `LAYOUTS`' first, (3, num_heads, head_dim),
    as ``qkv.split(d_out, dim=-1)`` reads them; every other layout of (3,
    num_heads, head_dim) is an alternative, tried when the forward's queries
    are not those."""
    w, b, how_stored, objects = read
    d_in, width = w.shape
    d = width // 3
    bias = ", bias" if b is not None else ", bias=False"
    how = (f"the rows of the fused {name} = nn.Linear({d_in}, {width}{bias})"
           if how_stored.startswith("nn.Linear") else
           f"the columns of the fused {name} = {how_stored.split(' ')[0]} ({d_in}, {width}{bias})")

    def columns(order: tuple[int, ...], h: int) -> tuple[list[Tensor], list[Tensor | None]]:
        sizes = {0: 3, 1: h, 2: d // h}
        shape = [sizes[a] for a in order]

        def pick(t: Tensor) -> list[Tensor]:  # (..., 3·d) -> q, k, v (..., d) with heads in order
            t = t.reshape(*t.shape[:-1], *shape)
            t = t.permute(*range(t.dim() - 3), *[t.dim() - 3 + order.index(a) for a in (0, 1, 2)])
            return [t[..., i, :, :].reshape(*t.shape[:-3], d) for i in range(3)]
        return pick(w), [None] * 3 if b is None else pick(b)

    h = n_heads if n_heads is not None else (heads_evidence(module) or (1, ""))[0]
    orders = [o for o in LAYOUTS if h > 1 or o in ((0, 1, 2), (1, 2, 0))]
    first = None
    for order in orders:
        ws, bs = columns(order, h) if isinstance(h, int) and h >= 1 and d % h == 0 \
            else columns((0, 1, 2), 1)
        text = LAYOUTS[order] if h > 1 or order == (0, 1, 2) else "laid out (d_out, 3)"
        reading = _assemble(module, ws, bs, causal,
                            [f"W_query, W_key, W_value as {how}, {text}"], {name}, n_heads)
        reading.sources += objects
        reading.fused = True
        if first is None:
            first = reading
        else:
            first.alternatives.append(reading)
    return first


_FUSED_KV = ("to_kv", "kv", "kv_proj", "W_kv", "wkv", "kv_lin", "c_attn_kv")
"""The names a fused key-value layer goes by (lucidrains' ``to_kv``, Perceiver-style code)."""


def _fused_kv(module: nn.Module, d_in: int, used: set[str]) -> tuple[str, _Linear] | None:
    """A fused key-value layer beside a query projection: a linear form taking
    ``d_in`` inputs, of even width, by one of the `_FUSED_KV` names, or the only
    such layer left that is not the output projection's width."""
    layers = {name: read for name, read in _linears(module, used).items()
              if read[0].shape[0] == d_in and read[0].shape[1] % 2 == 0}
    named = [name for name in _FUSED_KV if name in layers]
    if named:
        return named[0], layers[named[0]]
    return None


def _read_q_kv(module: nn.Module, query: tuple[str, _Linear], kv: tuple[str, _Linear],
               causal: bool | None, n_heads: int | None) -> LearnerWeights:
    """lucidrains' ``to_q`` + ``to_kv``: W_query from the query layer, W_key and
    W_value from the fused layer's two halves, as ``to_kv(x).chunk(2, dim=-1)``
    cuts them (keys first); the head-by-head layout (``(num_heads, 2, head_dim)``)
    is an alternative, tried when the forward's keys are not those."""
    (q_name, (w_q, b_q, how_q, o_q)), (kv_name, (w_kv, b_kv, how_kv, o_kv)) = query, kv
    d = w_kv.shape[1] // 2
    h = n_heads if n_heads is not None else (heads_evidence(module) or (1, ""))[0]
    orders = [(0, 1, 2)] + ([(1, 0, 2)] if isinstance(h, int) and h > 1 and d % h == 0 else [])
    first = None
    for order in orders:
        def pick(t: Tensor, order=order) -> list[Tensor]:  # (..., 2·d) -> k, v (..., d)
            if order == (0, 1, 2):
                return list(t.chunk(2, dim=-1))
            t = t.reshape(*t.shape[:-1], h, 2, d // h)
            return [t[..., i, :].reshape(*t.shape[:-3], d) for i in range(2)]
        w_k, w_v = pick(w_kv)
        b_k, b_v = (None, None) if b_kv is None else pick(b_kv)
        layout = "its two halves, keys first (to_kv(x).chunk(2, dim=-1))" if order == (0, 1, 2) \
            else "head by head (to_kv(x).view(b, n, num_heads, 2 * head_dim))"
        reading = _assemble(module, [w_q, w_k, w_v], [b_q, b_k, b_v], causal,
                            [f"W_query as {q_name} ({how_q.split(': ')[-1]}), W_key and W_value "
                             f"as the fused {kv_name} ({how_kv.split(': ')[-1]}), {layout}"],
                            {q_name, kv_name}, n_heads)
        reading.sources += o_q + o_kv
        if first is None:
            first = reading
        else:
            first.alternatives.append(reading)
    return first


PER_HEAD = {"W_query": ("W_Q", "b_Q"), "W_key": ("W_K", "b_K"), "W_value": ("W_V", "b_V"),
            "W_out": ("W_O", "b_O")}
"""Per-head weights (ARENA's transformer from scratch, TransformerLens): W_Q, W_K, W_V
(n_heads, d_model, d_head) with biases (n_heads, d_head); W_O (n_heads, d_head, d_model)
with b_O (d_model,)."""


def _per_head(module: nn.Module) -> bool:
    """Whether ``module`` holds W_Q, W_K and W_V as 3-D tensors (`PER_HEAD`)."""
    held = [getattr(module, PER_HEAD[name][0], None) for name in _PROJECTIONS]
    return all(isinstance(t, Tensor) and t.dim() == 3 for t in held)


def _read_per_head(module: nn.Module, causal: bool | None, n_heads: int | None) -> LearnerWeights:
    """`PER_HEAD` weights as the book's: W_query (d_model, n_heads · head_dim) with
    head h in columns h·head_dim:(h+1)·head_dim (``W_Q.permute(1, 0, 2)``), biases
    flattened, W_O (n_heads, d_head, d_model) as out_proj's (n_heads · head_dim,
    d_model). The head count is the weights' first axis (declared by their layout)."""
    name = type(module).__name__
    held = {key: getattr(module, PER_HEAD[key][0]) for key in _PROJECTIONS}
    count = held["W_query"].shape[0]
    if any(t.shape[0] != count or t.shape[1] != held["W_query"].shape[1] for t in held.values()):
        raise CheckError("module", f"{name}'s W_Q, W_K, W_V must all be (n_heads, d_model, "
                                   "d_head) with one n_heads and one d_model (got "
                                   + ", ".join(str(tuple(t.shape)) for t in held.values()) + ")")
    if n_heads is not None and n_heads != count:
        raise CheckError("module", f"{name}'s W_Q holds {count} heads on its first axis; "
                                   f"you said n_heads={n_heads}")
    ws = [_float(t).permute(1, 0, 2).reshape(t.shape[1], -1) for t in held.values()]
    bs, sources = [], list(held.values())
    for key, t in held.items():
        b = getattr(module, PER_HEAD[key][1], None)
        ok = isinstance(b, Tensor) and tuple(b.shape) == (t.shape[0], t.shape[2])
        bs.append(_float(b).reshape(-1) if ok else None)
        sources += [b] if ok else []
    weights = _assemble(module, ws, bs, causal,
                        [f"W_query, W_key, W_value as the per-head W_Q, W_K, W_V "
                         f"{tuple(held['W_query'].shape)} (n_heads, d_model, d_head), heads side "
                         "by side"], set(), count)
    weights.heads_why = f"its W_Q's first axis (n_heads, d_model, d_head): {count}"
    weights.sources += sources
    w_o, b_o = getattr(module, "W_O", None), getattr(module, "b_O", None)
    if isinstance(w_o, Tensor) and w_o.dim() == 3 and w_o.shape[:2] == (count, weights.d_v // count):
        weights.W_out = _float(w_o).reshape(weights.d_v, -1)
        d_out = weights.W_out.shape[1]
        ok = isinstance(b_o, Tensor) and tuple(b_o.shape) == (d_out,)
        weights.b_out = _float(b_o) if ok else torch.zeros(d_out)
        weights.sources += [w_o] + ([b_o] if ok else [])
        weights.found.append(f"W_O {tuple(w_o.shape)} (n_heads, d_head, d_model) as out_proj"
                             + (", b_O" if ok else ""))
    return weights


def _wrapped_mha(module: nn.Module) -> tuple[str, nn.MultiheadAttention] | None:
    held = [(name, child) for name, child in module.named_children()
            if isinstance(child, nn.MultiheadAttention)]
    return held[0] if len(held) == 1 else None


def _read_wrapped_mha(module: nn.Module, name: str, mha: nn.MultiheadAttention,
                      causal: bool | None) -> LearnerWeights:
    """A module holding a ``torch.nn.MultiheadAttention`` (the notebook's
    MHAPyTorchClass): its weights, causal when the module holds a mask
    (`causal_evidence`), and any linear layer the module applies after it composed with the
    MHA's own out_proj: (c·W_o + b_o)·W_p + b_p = c·(W_o·W_p) + (b_o·W_p + b_p)."""
    is_causal, why = _causal(module, causal)
    weights = _read_torch_mha(mha, is_causal)
    weights.causal_why = why or "no mask found in the module (one built in forward shows when it runs)"
    weights.torch_mha, weights.inner_mha = None, mha
    weights.training = module.training
    weights.found[0] = f"{name}: " + weights.found[0]
    after = _out_layer(module, mha.embed_dim, set())
    if after is not None:
        after_name, (w_p, b_p, _, objects) = after
        b_p = torch.zeros(w_p.shape[1]) if b_p is None else b_p
        weights.W_out, weights.b_out = weights.W_out @ w_p, weights.b_out @ w_p + b_p
        weights.sources += objects
        weights.found.append(f"then {after_name}, composed with out_proj into one projection")
    return weights


def _read_heads(module: nn.Module, heads, causal: bool | None) -> LearnerWeights:
    """``MultiHeadAttentionWrapper``: each head's W side by side, head h in
    columns ``h*head_dim:(h+1)*head_dim`` (as ``torch.cat(..., dim=-1)`` lays them out)."""
    causal, why = _outer_causal(module, causal)
    read = [read_weights(head, causal, 1) for head in heads]
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
    own_p, own_why = dropout_evidence(module)
    weights = LearnerWeights(
        **{name: side_by_side(name) for name in
           ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value")},
        n_heads=len(read), causal=first.causal, dropout=max(first.dropout, own_p),
        dropout_why=own_why if own_p > first.dropout else
        first.dropout_why and f"each head: {first.dropout_why}",
        training=module.training,
        causal_why=why or (first.causal_why and f"each head: {first.causal_why}"),
        heads_why=f"{len(read)} modules in its heads", sources=[s for r in read for s in r.sources],
        found=[f"heads: {len(read)} × {type(heads[0]).__name__}, each with "
               + ", ".join(first.found), "their weights side by side, as torch.cat(..., dim=-1)"])
    _read_out_proj(module, weights, {"heads"})
    return weights


def _out_layer(module: nn.Module, d_v: int, used: set[str]) -> tuple[str, _Linear] | None:
    """The output projection: ``out_proj`` (a linear form, `_linear`), another of
    the `_OUT` names, or the one linear form left that takes d_v inputs; (its
    name, (W (d_v, d_out), bias, how, objects)) or None."""
    for name in _OUT:
        found = _projection(module, name) if name not in used else None
        if found is not None and found[0].shape[0] == d_v:
            return name, found
    left = [name for name, read in _linears(module, used).items() if read[0].shape[0] == d_v]
    return (left[0], _linears(module, used)[left[0]]) if len(left) == 1 else None


def _read_out_proj(module: nn.Module, weights: LearnerWeights, used: set[str]) -> None:
    """The output projection (`_out_layer`) into ``weights``: W_out (d_v,
    d_out), an nn.Linear's weight transposed, and b_out (d_out,), zeros without
    a bias. ``used``: the names already read as projections."""
    out = _out_layer(module, weights.d_v, used)
    if out is not None:
        name, (w_out, b_out, how, objects) = out
        weights.W_out = w_out
        weights.b_out = torch.zeros(w_out.shape[1]) if b_out is None else b_out
        weights.sources += objects
        weights.found.append("out_proj" if name == "out_proj" else f"{name} as out_proj")


def _assemble(module: nn.Module, w: list[Tensor], b: list[Tensor | None], causal: bool | None,
              found: list[str], used: set[str], n_heads: int | None = None) -> LearnerWeights:
    """W_query, W_key, W_value (d_in, d_out) and their biases, with the
    module's head count (``n_heads`` when given, else `heads_evidence`, else 1,
    a guess: ``heads_known`` False), causal mask (`_causal`), dropout and output
    projection, checked to fit together."""
    (w_q, w_k, w_v), name = w, type(module).__name__
    if not (w_q.shape[0] == w_k.shape[0] == w_v.shape[0]) or w_q.shape[1] != w_k.shape[1]:
        raise CheckError("module", f"{name}'s W_query {tuple(w_q.shape)}, W_key "
                                   f"{tuple(w_k.shape)} and W_value {tuple(w_v.shape)} (as "
                                   "(d_in, d_out)) must share d_in, and W_query and W_key d_out")
    known = True
    if n_heads is not None:
        why = f"as you said (n_heads={n_heads})"
    elif (read := heads_evidence(module)) is not None:
        n_heads, why = read
    else:
        n_heads, why, known = 1, "no head count found in the module", False
    if not isinstance(n_heads, int) or n_heads < 1 or w_q.shape[1] % n_heads \
            or w_v.shape[1] % n_heads:
        raise CheckError("module", f"{name}'s number of heads must be a whole number that divides "
                                   f"d_out = {w_q.shape[1]} (got {n_heads!r}: {why})")
    is_causal, causal_why = _causal(module, causal)
    p, p_why = dropout_evidence(module)
    weights = LearnerWeights(
        w_q, w_k, w_v, *b, n_heads=n_heads, causal=is_causal, causal_why=causal_why,
        heads_why=why, heads_known=known, dropout=p, dropout_why=p_why,
        training=module.training, found=found)
    if n_heads > 1:
        weights.found.append(f"n_heads = {n_heads} (head_dim {weights.head_dim})")
    _read_out_proj(module, weights, used)
    return weights


def _listed(module: nn.Module) -> tuple[str, list[_Linear]] | None:
    """A list of 3 or 4 linear forms taking the same inputs, q, k, v [, out], in
    that order (the annotated transformer's ``self.linears = clones(nn.Linear(d_model,
    d_model), 4)``)."""
    for name, child in module.named_children():
        if isinstance(child, (nn.ModuleList, nn.Sequential)) and len(child) in (3, 4):
            read = [_linear(layer) for layer in child]
            if all(r is not None for r in read) and len({r[0].shape[0] for r in read[:3]}) == 1:
                return name, read
    return None


def _readable_child(module: nn.Module) -> nn.Module | None:
    """The one child that holds every parameter of ``module`` (d2l's decoder block
    holding its ``attention``), or None."""
    children = [c for c in module.children() if any(True for _ in c.parameters())]
    own = any(True for _ in module.parameters(recurse=False))
    return children[0] if len(children) == 1 and not own and not isinstance(
        children[0], (nn.ModuleList, nn.Sequential, nn.MultiheadAttention)) else None


def read_weights(module: nn.Module, causal: bool | None = None,
                 n_heads: int | None = None) -> LearnerWeights:
    """The weights of a learner's attention module, by the book's names and the others'.

    - ``W_query``, ``W_key``, ``W_value`` (or another of their `NAMES`): a linear
      form (`_linear`: ``nn.Linear``, a GPT-2 ``Conv1D``, an ``nn.Sequential``
      holding one, or an ``nn.Parameter`` / tensor of shape (d_in, d_out) used as
      ``x @ W``, the book's Listing 3.1).
    - ``heads``: a list of such single-head modules (``MultiHeadAttentionWrapper``,
      Listing 3.4; ng-video-lecture's ``Head``), whose weights are laid side by side.
    - or one fused linear form of width 3 * d_out (`_FUSED` names: ``qkv``,
      GPT-2's ``c_attn`` ...), `LAYOUTS` of its columns.
    - or a list of 3 or 4 linear forms: q, k, v and the output projection.
    - or a module whose one child with parameters is any of these.
    - the head count: ``n_heads`` when given, else `heads_evidence`; causal:
      ``causal`` when given, else `causal_evidence`; the output projection
      (``out_proj``, another `_OUT` name, or the one linear form left that takes
      d_out inputs) and ``dropout`` (``nn.Dropout`` or a float p).
    - a ``torch.nn.MultiheadAttention``: its ``in_proj_weight`` / ``in_proj_bias``
      and ``out_proj``; causal only when ``causal=True``; or a module holding
      one (`_read_wrapped_mha`).

    Biases a module adds on its own (``Q += self.bias_q`` after an einsum) are
    not read here: `explorer.checker.check` finds them in what the forward computes.

    Raises `CheckError` (field ``"module"``) naming what was expected and what
    the module holds instead, or when the sizes do not fit together.
    """
    if isinstance(module, nn.MultiheadAttention):
        return _read_torch_mha(module, causal)
    heads = getattr(module, "heads", None)
    if isinstance(heads, (nn.ModuleList, list, tuple)) and heads and \
            all(isinstance(h, nn.Module) for h in heads) and _projection(module, "W_query") is None:
        return _read_heads(module, heads, causal)
    read = [_projection(module, name) for name in _PROJECTIONS]
    if read[0] is not None and read[1] is None and read[2] is None:
        q_name = next(a for a in NAMES["W_query"] if _linear(getattr(module, a, None)) is not None)
        kv = _fused_kv(module, read[0][0].shape[0], {q_name})
        if kv is not None:
            return _read_q_kv(module, (q_name, read[0]), kv, causal, n_heads)
    if all(r is None for r in read) and _per_head(module):
        return _read_per_head(module, causal, n_heads)
    if any(r is None for r in read):
        if all(r is None for r in read):
            wrapped = _wrapped_mha(module)
            if wrapped is not None:
                return _read_wrapped_mha(module, *wrapped, causal)
            fused = _fused(module)
            if fused is not None:
                return _read_fused(module, *fused, causal, n_heads)
            listed = _listed(module)
            if listed is not None:
                return _read_listed(module, *listed, causal, n_heads)
            child = _readable_child(module)
            if child is not None:
                return _read_child(module, child, causal, n_heads)
        raise _missing_names(module)
    (w_q, b_q, how, o_q), (w_k, b_k, _, o_k), (w_v, b_v, _, o_v) = read
    used = {alias for name in _PROJECTIONS for alias in NAMES[name]}
    weights = _assemble(module, [w_q, w_k, w_v], [b_q, b_k, b_v], causal,
                        [f"W_query, W_key, W_value as {how}"], used, n_heads)
    weights.sources += o_q + o_k + o_v
    if how.startswith("nn.Parameter") and all(w.shape[0] == w.shape[1] for w in (w_q, w_k, w_v)):
        alt = _assemble(module, [w_q.T, w_k.T, w_v.T], [b_q, b_k, b_v], causal,
                        ["W_query, W_key, W_value as nn.Parameter (d_out, d_in), used as x @ W.T"],
                        used, n_heads)
        alt.sources = list(weights.sources)
        weights.alternatives.append(alt)
    return weights


def _read_listed(module: nn.Module, name: str, read: list[_Linear], causal: bool | None,
                 n_heads: int | None) -> LearnerWeights:
    """`_listed`'s layers: q, k, v and, when there are four, the output projection."""
    weights = _assemble(module, [r[0] for r in read[:3]], [r[1] for r in read[:3]], causal,
                        [f"W_query, W_key, W_value as {name}[0], [1], [2] ({read[0][2]})"],
                        {name}, n_heads)
    weights.sources += [o for r in read[:3] for o in r[3]]
    if len(read) == 4 and read[3][0].shape[0] == weights.d_v:
        weights.W_out = read[3][0]
        weights.b_out = torch.zeros(read[3][0].shape[1]) if read[3][1] is None else read[3][1]
        weights.sources += read[3][3]
        weights.found.append(f"{name}[3] as out_proj")
    return weights


def _read_child(module: nn.Module, child: nn.Module, causal: bool | None,
                n_heads: int | None) -> LearnerWeights:
    """A module whose one child with parameters is the attention (d2l's decoder
    block holding ``self.attention``): the child's weights, with the outer
    module's say on causal and heads first."""
    causal, why = _outer_causal(module, causal)
    outer_heads = heads_evidence(module) if n_heads is None else None
    name = next(k for k, c in module.named_children() if c is child)
    weights = read_weights(child, causal, n_heads if outer_heads is None else outer_heads[0])
    for reading in (weights, *weights.alternatives):
        reading.found[0] = f"{name}: {reading.found[0]}"
        reading.causal_why = why or reading.causal_why
        reading.heads_why = outer_heads[1] if outer_heads else reading.heads_why
        reading.training = module.training
    return weights


def unread_parameters(module: nn.Module, weights: LearnerWeights) -> list[str]:
    """The names of ``module``'s parameters the reading did not take (a layer the
    check could not place): their numbers may change the output unseen."""
    taken = set()
    for source in weights.sources:
        if isinstance(source, nn.Module):
            taken.update(id(p) for p in source.parameters())
        elif isinstance(source, Tensor):
            taken.add(id(source))
    return [name for name, p in module.named_parameters() if id(p) not in taken]


# ---------------------------------------------------------------------------
# Running the forward pass, every tensor recorded
# ---------------------------------------------------------------------------
_DROPOUTS = (torch.nn.functional.dropout, torch.dropout)


@dataclass
class Recording:
    """One forward pass: ``tensors``, every floating-point tensor of 2 or more
    dims it produced (copies, in the order made, in-place results included);
    ``output``: what ``forward`` returned (its first element if a tuple);
    ``notes``: what the report should say about the run; ``causal_seen``: why
    the forward is causal, when it showed it ("" when not): it called
    ``scaled_dot_product_attention`` with ``is_causal=True``, or made a
    triangular mask or scores masked in one triangle (`triangle`) of the
    sentence's size; ``dropped``: the shapes of tensors it applied dropout to
    (p > 0, in training).
    """

    tensors: list[Tensor]
    output: Tensor
    notes: list[str] = field(default_factory=list)
    causal_seen: str = ""
    dropped: list[tuple[int, ...]] = field(default_factory=list)


class _Recorder(TorchFunctionMode):
    """Keeps a copy of every tensor a torch function returns (or changes in
    place), and, given ``keep_masks``, applies those dropout masks instead of
    drawing new ones."""

    def __init__(self, keep_masks: Tensor | None = None, n_heads: int = 1,
                 n_tokens: int = 0):
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
        self.causal_seen = ""  # why the forward is causal (is_causal=True, a mask it made)
        self.n_tokens = n_tokens
        self.dropped: list[tuple[int, ...]] = []  # shapes dropout was applied to
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
        if training and p:
            self.dropped.append(tuple(x.shape))
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
        if func is _SDPA and kwargs.get("is_causal", len(args) > 5 and args[5]) \
                and not self.causal_seen:
            self.causal_seen = "forward calls scaled_dot_product_attention(..., is_causal=True)"
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
        self._look_for_mask(out if isinstance(out, Tensor) else
                            args[0] if out is None and args and isinstance(args[0], Tensor)
                            else None)
        return out

    def _look_for_mask(self, t: Tensor | None) -> None:
        """A causal mask made in forward, of the sentence's size (`triangle`):
        (..., n, n), or (k·n, n) as d2l's ``sequence_mask`` makes it from
        valid_lens 1, 2, ..., n."""
        n = self.n_tokens
        if self.causal_seen or t is None or n < 2 or t.dim() < 2 or t.shape[-1] != n:
            return
        if t.shape[-2] != n:
            if t.dim() != 2 or t.shape[0] % n:
                return
            t = t.reshape(-1, n, n)
        found = triangle_diagonal(t)
        if found is not None:
            shape, offset = found
            what = "a triangular mask" if shape in ("lower", "upper") else \
                f"−∞ {shape.split()[1]} the diagonal (a mask, or masked scores)"
            self.causal_seen = f"forward makes {what}, {tuple(t.shape)}{slip_text(shape, offset)}"


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
        out = module(*inputs_of(module, x))
        return out[0] if isinstance(out, (tuple, list)) else out
    seq_first = x.dim() == 3 and not mha.batch_first
    x = x.transpose(0, 1) if seq_first else x
    mask = att.causal_mask(x.shape[-2] if not seq_first else x.shape[0]) if weights.causal else None
    out, _ = mha(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
    return out.transpose(0, 1) if seq_first else out


def inputs_of(module: nn.Module, x: Tensor) -> tuple:
    """What ``module``'s forward is called with: ``x``, or for a forward that
    needs queries, keys and values apart (the annotated transformer's and
    d2l's ``forward(query, key, value, mask)``) ``x`` for each of the first
    three it needs and None for the rest (a mask, valid_lens)."""
    try:
        parameters = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return (x,)
    needed = [p for p in parameters if p.default is p.empty and
              p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(needed) <= 1:
        return (x,)
    return tuple(x if i < 3 else None for i in range(len(needed)))


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
    recorder = _Recorder(keep_masks, weights.n_heads, x.shape[-2])
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
                     recorder.causal_seen, recorder.dropped)


# ---------------------------------------------------------------------------
# From source code: the command line and the sandbox
# ---------------------------------------------------------------------------
MAX_CLASS_NAME = 100
"""The longest class name the check takes (it is written into the page's snippets)."""


def class_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as the class to check, or None when it is a
    Python identifier that may be written into generated code as it is: not a
    keyword, not a built-in's name, and the same after Unicode's NFKC
    normalisation (which Python applies to identifiers, so ``ｅｘｅｃ`` would be
    ``exec``)."""
    import builtins
    import keyword
    import unicodedata

    shown = repr(name) if len(name) <= 60 else repr(name[:60]) + "…"
    if len(name) > MAX_CLASS_NAME:
        return f"the class name must be at most {MAX_CLASS_NAME} characters (got {len(name):,})"
    if not name.isidentifier() or unicodedata.normalize("NFKC", name) != name:
        return (f"the class name must be a Python identifier: letters, digits and _, not "
                f"starting with a digit, nothing else (got {shown})")
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or hasattr(builtins, name):
        return f"the class name must not be a Python keyword or built-in (got {shown})"
    return None


def load_class(source: str, filename: str, class_name: str) -> type[nn.Module]:
    """Run ``source`` (as if it were the file ``filename``) and return its class
    ``class_name``, an ``nn.Module`` subclass.

    The source is registered with ``linecache``, so tracebacks show its lines.
    Raises `CheckError`: field ``"syntax"`` for a syntax error (with the line and
    a caret); ``"source"`` for a class name that is no identifier
    (`class_name_problem`), an error while running the file (with its
    traceback) or no such class (listing the classes it does define).
    """
    problem = class_name_problem(class_name)
    if problem is not None:
        raise CheckError("source", problem)
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


ALIASES = {"block_size": "context_length", "n_heads": "num_heads", "n_head": "num_heads",
           "nhead": "num_heads", "drop_rate": "dropout"}
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
