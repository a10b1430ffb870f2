"""A learner's own attention module: read its weights, run its forward, keep every tensor.

`explorer.check.check_module` compares what a learner's ``nn.Module`` computes
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

import inspect
import linecache
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from explorer import attention as att
from explorer.config import ConfigError

MAX_RECORDED_BYTES = 256 * 2**20
"""The tensors one forward pass may leave for comparison; past this the rest
are not kept (the report says so)."""
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

    def __init__(self, field: str, message: str, details: str = "", progress: int = 0):
        super().__init__(field, message)
        self.details = details
        self.progress = progress  # tensors the forward made before it raised


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
    (called as self-attention). ``found`` lists what was read, in words, for
    the report.
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
    found: list[str] = field(default_factory=list)

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
        """The weights by the names `explorer.trace.attention_steps` takes."""
        return {name: getattr(self, name) for name in
                ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value", "W_out", "b_out")}


_PROJECTIONS = ("W_query", "W_key", "W_value")
EXPECTED = ("W_query, W_key and W_value (each an nn.Linear(d_in, d_out) or an "
            "nn.Parameter of shape (d_in, d_out)), as in SelfAttention_v1, SelfAttention_v2, "
            "CausalAttention and MultiHeadAttention; or heads, a list of such modules, as in "
            "MultiHeadAttentionWrapper; or a torch.nn.MultiheadAttention")
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
    return CheckError("module", f"check_module reads the weights by the book's names: "
                                f"{EXPECTED}. {name} {has}. Rename its weights to "
                                f"W_query, W_key and W_value.")


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
    _read_out_proj(module, weights)
    return weights


def _read_out_proj(module: nn.Module, weights: LearnerWeights) -> None:
    """``module.out_proj`` (an nn.Linear(d_v, d_out)) into ``weights``: W_out
    (d_v, d_out), its weight transposed, and b_out (d_out,), zeros without a bias."""
    out = _projection(module, "out_proj")
    if out is not None:
        w_out, b_out, _ = out
        weights.W_out = w_out
        weights.b_out = torch.zeros(w_out.shape[1]) if b_out is None else b_out
        weights.found.append("out_proj")


def read_weights(module: nn.Module, causal: bool | None = None) -> LearnerWeights:
    """The weights of a learner's attention module, by the book's names.

    - ``W_query``, ``W_key``, ``W_value``: an ``nn.Linear(d_in, d_out)`` (its
      weight (d_out, d_in) is transposed to W (d_in, d_out); its bias, if any,
      kept), or an ``nn.Parameter`` / tensor of shape (d_in, d_out) used as
      ``x @ W`` (``SelfAttention_v1``, Listing 3.1).
    - ``heads``: a list of such single-head modules (``MultiHeadAttentionWrapper``,
      Listing 3.4), whose weights are laid side by side.
    - ``num_heads`` (default 1), ``out_proj`` (``nn.Linear``), a ``mask`` buffer
      (then the attention is causal, unless ``causal`` says otherwise), and
      ``dropout`` (``nn.Dropout`` or a float p).
    - a ``torch.nn.MultiheadAttention``: its ``in_proj_weight`` / ``in_proj_bias``
      and ``out_proj``; causal only when ``causal=True``.

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
        raise _missing_names(module)
    (w_q, b_q, how), (w_k, b_k, _), (w_v, b_v, _) = read
    name = type(module).__name__
    if not (w_q.shape[0] == w_k.shape[0] == w_v.shape[0]) or w_q.shape[1] != w_k.shape[1]:
        raise CheckError("module", f"{name}'s W_query {tuple(w_q.shape)}, W_key "
                                   f"{tuple(w_k.shape)} and W_value {tuple(w_v.shape)} (as "
                                   "(d_in, d_out)) must share d_in, and W_query and W_key d_out")
    n_heads = getattr(module, "num_heads", 1)
    if not isinstance(n_heads, int) or n_heads < 1 or w_q.shape[1] % n_heads \
            or w_v.shape[1] % n_heads:
        raise CheckError("module", f"{name}.num_heads must be a whole number that divides "
                                   f"d_out = {w_q.shape[1]} (got {n_heads!r})")
    mask = getattr(module, "mask", None)
    weights = LearnerWeights(
        w_q, w_k, w_v, b_q, b_k, b_v, n_heads=n_heads,
        causal=isinstance(mask, Tensor) if causal is None else causal,
        dropout=_dropout_p(module), training=module.training,
        found=[f"W_query, W_key, W_value as {how}"])
    if n_heads > 1:
        weights.found.append(f"num_heads = {n_heads} (head_dim {weights.head_dim})")
    _read_out_proj(module, weights)
    if isinstance(mask, Tensor):
        weights.found.append(f"the mask buffer {tuple(mask.shape)}")
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
    ``notes``: what the report should say about the run."""

    tensors: list[Tensor]
    output: Tensor
    notes: list[str] = field(default_factory=list)


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

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = self._dropout(args, kwargs) if func in _DROPOUTS else None
        if out is None:
            out = func(*args, **kwargs)
        self._keep(out)
        if out is None and args and isinstance(args[0], Tensor):  # in place: x[mask] = ...
            self._keep(args[0])
        return out


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
    skip = (str(Path(torch.__file__).parent), str(Path(__file__).parent))
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(skip) and "importlib" not in f.filename]
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
        with torch.random.fork_rng(devices=[]), torch.no_grad(), recorder:
            output = _call(module, x, weights)
    except (MemoryError, RecursionError):
        raise
    except Exception as error:  # noqa: BLE001 - any error in the learner's code
        raise CheckError("forward", f"{type(module).__name__}.forward raised "
                                    f"{type(error).__name__} on inputs of shape "
                                    f"{tuple(x.shape)}: {error}",
                         their_traceback(error), len(recorder.tensors)) from error
    if not isinstance(output, Tensor):
        raise CheckError("forward", f"{type(module).__name__}.forward returned "
                                    f"{type(output).__name__}, not a tensor")
    notes = list(recorder.notes)
    if recorder.full:
        notes.append(f"Only the first {MAX_RECORDED_BYTES // 2**20} MB of tensors your "
                     "forward made were kept for comparison.")
    return Recording(recorder.tensors, output.detach().to(torch.float32), notes)


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


def build_module(cls: type[nn.Module], *, d_in: int, d_out: int, context_length: int,
                 num_heads: int = 1, dropout: float = 0.0, qkv_bias: bool = False,
                 seed: int = 123) -> nn.Module:
    """``cls(d_in=..., d_out=..., ...)`` with the book's constructor arguments,
    after ``torch.manual_seed(seed)`` as the book does, inside ``fork_rng``.

    ``d_in`` and ``d_out`` always; ``context_length``, ``dropout``,
    ``num_heads`` and ``qkv_bias`` only where ``cls.__init__`` takes them (by
    name, or through ``**kwargs``). Raises `CheckError` (field ``"__init__"``)
    when it does not take d_in and d_out, or raises (with the traceback).
    """
    parameters = inspect.signature(cls.__init__).parameters
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    offered = {"d_in": d_in, "d_out": d_out, "context_length": context_length,
               "dropout": dropout, "num_heads": num_heads, "qkv_bias": qkv_bias}
    if not {"d_in", "d_out"} <= set(parameters) and not open_ended:
        raise CheckError("__init__", f"{cls.__name__}.__init__ takes "
                                     f"({', '.join(list(parameters)[1:])}); the check passes "
                                     "d_in and d_out by name (and context_length, dropout, "
                                     "num_heads, qkv_bias where __init__ takes them), as the "
                                     "book's classes do")
    kwargs = {k: v for k, v in offered.items() if k in parameters or (
        open_ended and k in ("d_in", "d_out"))}
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

