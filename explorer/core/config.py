"""What to compute: `AttentionConfig`, its limits, and the one project exception.

Every limit and every option name lives here, once. The UI reads its widget
bounds and choices from this module, and the backend validates against it, so a
bad value gets the same message whether it came from a widget, a URL parameter
or a notebook call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Sequence, cast, runtime_checkable

import torch

from explorer.core.tokenizer import build_vocab, tokenize

# ---------------------------------------------------------------------------
# Limits and choices (one place)
# ---------------------------------------------------------------------------
MIN_TOKENS, MAX_TOKENS = 1, 512
MAX_SENTENCE_CHARS = 20_000
MIN_DIM, MAX_DIM = 1, 1024
MAX_VOCAB_SIZE = 1_000_000
MAX_TABLE_ELEMENTS = 64 * 2**20  # vocab_size * d_in, i.e. 256 MiB of float32
MIN_SEED, MAX_SEED = 0, 2**63 - 1
MAX_HEADS = MAX_DIM
MAX_ABS_GIVEN = 1e6  # hand-entered matrix entries
MAX_ATTENTION_CELLS = 2**22
"""n_heads × n_tokens², the size of every per-head (n, n) step: 16 MiB of
float32 each. 512 tokens allow 16 heads; 64 tokens allow all 1,024."""

EMBEDDINGS = ("table", "uniform", "given")
WEIGHT_INITS = ("randn", "rand", "linear", "identity", "given")
NORMALIZATIONS = ("softmax", "naive_softmax", "sum")
TOKENIZERS = ("words",)

DEFAULT_SENTENCE = "Life is short, eat dessert first"

OPTION_HELP: dict[str, dict[str, str]] = {
    "embedding": {
        "table": "nn.Embedding(vocab_size, d_in), looked up by token id, as in the "
                 "teaching notebook “Embedding an input sentence”",
        "uniform": "torch.rand(n_tokens, d_in), as in the teaching notebook “Your journey "
                   "starts with one step”",
        "given": "your own numbers, typed into the X table (the book’s hand-picked vectors)",
    },
    "weight_init": {
        "randn": "torch.randn(d_in, d_out), as in the teaching notebook’s SelfAttention",
        "rand": "torch.rand(d_in, d_out), as in SelfAttention_v1",
        "linear": "nn.Linear(d_in, d_out, bias=False) default init, as in SelfAttention_v2, "
                  "shown transposed",
        "identity": "W = I: no trainable weights, Q = K = V = X (simplified attention; "
                    "needs d_k = d_v = d_in)",
        "given": "your own W_query, W_key, W_value, typed into tables",
        "model": "the trained weights, read from the model's checkpoint",  # real models only
    },
    "normalization": {
        "softmax": "torch.softmax(scores, dim=-1), made stable by subtracting each row's max",
        "naive_softmax": "exp(x) / exp(x).sum(dim=-1, keepdim=True): overflows to inf/NaN for "
                         "large scores",
        "sum": "x / x.sum(dim=-1, keepdim=True), the first normalisation the book tries; "
               "a row summing to 0 divides by zero (±inf or NaN)",
    },
}
"""One line per option saying which reference code it matches (UI help texts)."""

GIVEN_MATRICES: dict[str, tuple[str, ...]] = {
    "embedding": ("embeddings",),
    "weight_init": ("W_query", "W_key", "W_value"),
}
"""The hand-entered matrix fields each option reads when it is "given"."""

def head_choices(d_k: int, d_v: int) -> list[int]:
    """The valid ``n_heads`` for these widths: the common divisors of d_k and d_v."""
    return [h for h in range(1, min(d_k, d_v) + 1) if d_k % h == 0 and d_v % h == 0]


def _widths_for(n_heads: int, d_k: int, d_v: int) -> str:
    """The sentence saying which widths would allow ``n_heads`` heads: the
    nearest multiples of it (``4 heads need d_k and d_v divisible by 4: e.g.
    d_v = 8.``); none when ``n_heads`` is out of range anyway."""
    if not 1 <= n_heads <= MAX_HEADS:
        return ""

    def nearest(d: int) -> int:
        up = -(-d // n_heads) * n_heads
        return up if up <= MAX_DIM else d // n_heads * n_heads

    changes = [f"{name} = {nearest(d)}" for name, d in (("d_k", d_k), ("d_v", d_v))
               if d % n_heads]
    return (f"{n_heads} heads need d_k and d_v divisible by {n_heads}: e.g. "
            f"{' and '.join(changes)}.")


class ConfigError(ValueError):
    """The one exception the backend raises for input outside the limits.

    ``field`` names the offending `AttentionConfig` field; the message says what
    is allowed and what was given, e.g. ``d_k must be between 1 and 1024 (got 0)``.
    """

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


# ---------------------------------------------------------------------------
# Field-level checks, shared by the dataclass and by URL/widget parsing
# ---------------------------------------------------------------------------
MAX_SHOWN_CHARS = 60
"""A bad value is quoted in a message up to this many characters."""


def shown(value: Any) -> str:
    """``repr(value)`` for a message, cut to `MAX_SHOWN_CHARS` with its length
    said, so that a 20,000-character sentence does not fill the error box."""
    text = repr(value) if not isinstance(value, str) or len(value) <= MAX_SHOWN_CHARS \
        else repr(value[:MAX_SHOWN_CHARS])
    if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS:
        return f"{text[:-1]}…{text[-1]} ({len(value):,} characters)"
    return text if len(text) <= MAX_SHOWN_CHARS + 2 else f"{text[:MAX_SHOWN_CHARS]}…"


def _is_bool(value: Any) -> bool:
    """A Python, numpy or torch boolean (not a number, though ``int(True)`` is 1)."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def _int_field(name: str, value: Any, low: int, high: int) -> int:
    """Return ``value`` as an int in ``[low, high]`` or raise `ConfigError`.

    Accepts ints, integral floats, numeric text (``"12"``) and numpy / torch
    scalars. Rejects booleans, fractions, NaN, infinities and text that is not
    a whole number, always with `ConfigError`, never ``OverflowError``.
    """
    whole = f"{name} must be a whole number between {low} and {high} (got {shown(value)})"
    if _is_bool(value):
        raise ConfigError(name, whole)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:  # also digit strings past Python's conversion limit
            raise ConfigError(name, whole) from None
    else:
        try:
            value = operator.index(value)  # int, numpy / torch integer scalars
        except TypeError:
            try:
                number = float(value)  # floats, numpy / torch float scalars
            except (TypeError, ValueError, OverflowError):
                raise ConfigError(name, whole) from None
            if not number.is_integer():  # also NaN and ±inf
                raise ConfigError(name, whole)
            value = int(number)
    if not low <= value <= high:
        raise ConfigError(name, f"{name} must be between {low} and {high} (got {shown(value)})")
    return value


def _choice_field(name: str, value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ConfigError(name, f"{name} must be one of {allowed} (got {shown(value)})")
    return value


_BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True,
               "false": False, "0": False, "no": False, "off": False}


def _bool_field(name: str, value: Any) -> bool:
    if _is_bool(value) and getattr(value, "ndim", 0) == 0:
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
        return _BOOL_WORDS[value.strip().lower()]
    raise ConfigError(name, f"{name} must be true or false (got {shown(value)})")


def _probability_field(name: str, value: Any) -> float:
    message = f"{name} must be a number in [0, 1) (got {shown(value)})"
    if _is_bool(value):
        raise ConfigError(name, message)
    try:
        p = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(name, message) from None
    if not 0.0 <= p < 1.0:  # also rejects nan
        raise ConfigError(name, message)
    return p


_INT_LIMITS = {
    "d_in": (MIN_DIM, MAX_DIM),
    "d_k": (MIN_DIM, MAX_DIM),
    "d_v": (MIN_DIM, MAX_DIM),
    "seed": (MIN_SEED, MAX_SEED),
    "dropout_seed": (MIN_SEED, MAX_SEED),
    "vocab_size": (1, MAX_VOCAB_SIZE),
    "n_heads": (1, MAX_HEADS),
}
_CHOICES = {
    "embedding": EMBEDDINGS,
    "weight_init": WEIGHT_INITS,
    "normalization": NORMALIZATIONS,
    "tokenizer": TOKENIZERS,
}
_BOOLS = ("scale", "causal", "out_proj")


def int_bounds(name: str) -> tuple[int, int]:
    """``(lowest, highest)`` allowed for the whole-number field ``name``
    (``d_in``, ``seed``, ``n_heads`` ...), as `parse_field` checks them.
    Raises ``KeyError`` for a field that is not a whole number."""
    return _INT_LIMITS[name]


def choices(name: str) -> tuple[str, ...]:
    """The options of the choice field ``name`` (``embedding``, ``weight_init``,
    ``normalization``), as `parse_field` checks them. Raises ``KeyError``."""
    return _CHOICES[name]


def parse_field(name: str, value: Any) -> Any:
    """Check one scalar field of `AttentionConfig` on its own and return it typed.

    ``value`` may be a string, as it arrives from a URL query parameter
    (``"0"``, ``"abc"``, ``"true"``). Raises `ConfigError` naming the field, the
    allowed range and the value given, for any input at all. Cross-field rules
    (token count, divisibility by ``n_heads``, matrix shapes, the size of the
    work) are checked by `AttentionConfig`.
    """
    if name in _INT_LIMITS:
        return _int_field(name, value, *_INT_LIMITS[name])
    if name in _CHOICES:
        return _choice_field(name, value, _CHOICES[name])
    if name in _BOOLS:
        return _bool_field(name, value)
    if name == "dropout":
        return _probability_field(name, value)
    if name == "sentence":
        if not isinstance(value, str):
            raise ConfigError(name, f"sentence must be text (got {type(value).__name__})")
        if len(value) > MAX_SENTENCE_CHARS:
            raise ConfigError(
                name, f"sentence must be at most {MAX_SENTENCE_CHARS:,} characters "
                      f"(got {len(value):,})")
        return value
    raise ConfigError(name, f"unknown setting {shown(name)}")


def sentence_tokens(sentence: Any, tokenizer: str = "words") -> list[str]:
    """The tokens of ``sentence`` (`explorer.core.tokenizer.tokenize`) once it
    meets the sentence's rules: text of at most `MAX_SENTENCE_CHARS`
    characters, split into `MIN_TOKENS` to `MAX_TOKENS` tokens. What every
    config checks, and what a page that writes the sentence elsewhere (the Check
    page's snippets) checks first. Raises `ConfigError` naming ``sentence``
    otherwise, e.g. ``sentence must have between 1 and 512 tokens (got 600)``."""
    tokens = tokenize(parse_field("sentence", sentence), tokenizer)
    if not MIN_TOKENS <= len(tokens) <= MAX_TOKENS:
        raise ConfigError(
            "sentence", f"sentence must have between {MIN_TOKENS} and {MAX_TOKENS} tokens "
                        f"(got {len(tokens)})")
    return tokens


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


class Matrix(Sequence):
    """A validated hand-entered matrix, held as a read-only float32 tensor.

    float32 is what the trace computes with, so a config holds exactly the
    numbers it draws. A `Matrix` is immutable, compares by value, hashes once
    (a 512×1024 matrix is not rehashed on every cache look-up) and costs 4
    bytes a cell, not a Python float's 32. It reads like a list of rows:
    ``len``, indexing, iteration and ``tolist()`` give floats. Only
    `matrix_field` makes one, so holding a `Matrix` means its cells were checked.
    """

    __slots__ = ("_values", "_hash")

    def __init__(self, values: torch.Tensor):
        self._values = values.to(torch.float32).contiguous()
        self._hash: int | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, columns)``."""
        return cast(tuple[int, int], tuple(self._values.shape))

    def tensor(self) -> torch.Tensor:
        """A fresh float32 copy, shape ``(rows, columns)``."""
        return self._values.clone()

    def tolist(self) -> list[list[float]]:
        return self._values.tolist()

    def __len__(self) -> int:
        return self._values.shape[0]

    def __getitem__(self, index):
        rows = self._values[index].tolist()
        return tuple(rows) if isinstance(index, int) else tuple(tuple(r) for r in rows)

    def __iter__(self):
        return (tuple(row) for row in self._values.tolist())

    def __array__(self, dtype=None, copy=None):
        array = self._values.numpy()
        return array.astype(dtype) if dtype is not None else array.copy()

    def __eq__(self, other) -> bool:
        if isinstance(other, Matrix):
            return self.shape == other.shape and torch.equal(self._values, other._values)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            digest = hashlib.blake2b(self._values.numpy().tobytes(), digest_size=16).digest()
            self._hash = hash((self.shape, digest))
        return self._hash

    def __repr__(self) -> str:
        return f"Matrix({self.shape[0]}×{self.shape[1]})"

    def __deepcopy__(self, memo) -> "Matrix":
        return self  # immutable (dataclasses.asdict deep-copies fields)

    def __reduce__(self):
        return Matrix, (self._values,)


def matrix_cell(name: str, where: str, cell: Any) -> float:
    """One hand-entered cell as a float, or `ConfigError` saying ``where`` it is
    (e.g. ``"embeddings row 1 ('is'), dim 0"``) and what is wrong: empty, not a
    number, not finite or beyond ±`MAX_ABS_GIVEN`. Used by `AttentionConfig`
    and by the CSV importer, so both say the same."""
    if cell is None or (isinstance(cell, str) and not cell.strip()):
        raise ConfigError(name, f"{where} is empty: type a number")
    try:
        number = float(cell)
    except (TypeError, ValueError):
        raise ConfigError(name, f"{where} must be a number (got {shown(cell)})") from None
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(name, f"{where} must be a finite number (got {shown(cell)})")
    if abs(number) > MAX_ABS_GIVEN:
        raise ConfigError(name, f"{where} must be between {-MAX_ABS_GIVEN:g} and "
                                f"{MAX_ABS_GIVEN:g} (got {number:g})")
    return number


def matrix_field(name: str, value: Any, shape: tuple[int, int], row_labels: Sequence[str],
                 col_label: str) -> Matrix:
    """Convert a nested sequence / array / tensor to a `Matrix` of finite floats.

    Raises `ConfigError` if the shape is not ``shape`` or a cell is empty,
    non-numeric, NaN or infinite; the message names the cell. A `Matrix` of the
    right shape is returned as it is: it was checked when it was made.
    """
    if isinstance(value, Matrix) and value.shape == shape:
        return value
    if value is None:
        raise ConfigError(name, f"{name} is required when it is 'given' (shape {shape[0]}×{shape[1]})")
    fast = _as_float_tensor(value)
    if fast is not None and tuple(fast.shape) == shape and bool(torch.isfinite(fast).all()) \
            and (fast.numel() == 0 or float(fast.abs().max()) <= MAX_ABS_GIVEN):
        return Matrix(fast)
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not _is_sequence(value) or not all(_is_sequence(row) for row in value):
        raise ConfigError(name, f"{name} must be a {shape[0]}×{shape[1]} matrix: a list of "
                                f"rows of numbers (got {type(value).__name__})")
    rows = list(value)
    if len(rows) != shape[0]:
        raise ConfigError(name, f"{name} must have {shape[0]} rows (got {len(rows)})")
    out = []
    for i, row in enumerate(rows):
        row = list(row)
        if len(row) != shape[1]:
            raise ConfigError(
                name, f"{name} row {i} ({shown(row_labels[i])}) must have {shape[1]} columns "
                      f"(got {len(row)})")
        out.append([matrix_cell(name, f"{name} row {i} ({shown(row_labels[i])}), "
                                      f"{col_label} {j}", cell)
                    for j, cell in enumerate(row)])
    return Matrix(torch.tensor(out, dtype=torch.float64).reshape(shape))


def _as_float_tensor(value: Any) -> torch.Tensor | None:
    """``value`` as a float64 tensor if it converts cleanly (a tensor, an array,
    rows of numbers), else None, and the cell-by-cell check finds what is wrong."""
    if getattr(getattr(value, "flags", None), "writeable", True) is False:
        value = value.copy()  # a read-only numpy array (torch warns about those)
    try:
        tensor = torch.as_tensor(value)  # tensors and arrays without a copy
        if tensor.is_complex():
            return None
        tensor = tensor.to(torch.float64)
    except Exception:  # noqa: BLE001 - any failure means "check it cell by cell"
        return None
    return tensor if tensor.dim() == 2 else None


# ---------------------------------------------------------------------------
# The config
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AttentionConfig:
    """Everything that determines a trace of scaled dot-product attention.

    Fields (defaults reproduce ``002_8c91a21803773e04.txt``):

    - ``sentence``: the text to attend over, tokenised by `explorer.core.tokenizer.tokenize`
      into 1 to 512 tokens.
    - ``d_in``: embedding dim of X, ``(n_tokens, d_in)``.
    - ``d_k``: width of the queries and keys (total across heads).
    - ``d_v``: width of the values and the context (total across heads).
    - ``seed``: seeds the one local ``torch.Generator`` all recipes draw from,
      0 <= seed < 2**63.
    - ``vocab_size``: rows of the ``nn.Embedding`` table when ``embedding="table"``;
      at least the vocabulary length, and ``vocab_size * d_in <= 64 Mi`` elements.
    - ``embedding``: ``"table"`` (``nn.Embedding(vocab_size, d_in)`` looked up by
      token id), ``"uniform"`` (``torch.rand(n_tokens, d_in)``) or ``"given"``
      (the ``embeddings`` field).
    - ``weight_init``: ``"randn"`` (``torch.randn(d_in, d_out)``), ``"rand"``
      (``torch.rand``), ``"linear"`` (``nn.Linear(d_in, d_out, bias=False)``'s init,
      transposed), ``"identity"`` (W = I; needs ``d_k = d_v = d_in``) or ``"given"``
      (the ``W_query`` / ``W_key`` / ``W_value`` fields).
    - ``scale``: divide the scores by ``sqrt(head_dim)``.
    - ``normalization``: ``"softmax"`` (stable), ``"naive_softmax"``
      (``exp(x) / exp(x).sum()``, may overflow to inf/NaN) or ``"sum"``
      (``x / x.sum()``, as in ``001_c475e8729ba8e095.txt``).
    - ``causal``: mask future keys with -inf before normalising.
    - ``dropout``: probability p in [0, 1) of zeroing an attention weight;
      ``dropout_seed`` seeds its mask (default: ``seed``).
    - ``n_heads``: number of heads; ``d_k`` and ``d_v`` must divide by it.
    - ``out_proj``: apply ``nn.Linear(d_v, d_v)`` to the concatenated heads;
      ``None`` means "on when n_heads > 1".
    - ``embeddings``, ``W_query``, ``W_key``, ``W_value``: hand-entered matrices of
      shape ``(n_tokens, d_in)``, ``(d_in, d_k)``, ``(d_in, d_k)``, ``(d_in, d_v)``,
      used by ``"given"``. Stored as nested tuples of floats.

    Raises `ConfigError` (naming the field, what is allowed and what was given)
    for anything outside the limits in this module.
    """

    sentence: str = DEFAULT_SENTENCE
    d_in: int = 3
    d_k: int = 2
    d_v: int = 4
    seed: int = 123
    vocab_size: int = 50_000
    tokenizer: str = "words"
    embedding: str = "table"
    weight_init: str = "randn"
    scale: bool = True
    normalization: str = "softmax"
    causal: bool = False
    dropout: float = 0.0
    dropout_seed: int | None = None
    n_heads: int = 1
    out_proj: bool | None = None
    embeddings: Matrix | None = field(default=None, repr=False)
    W_query: Matrix | None = field(default=None, repr=False)
    W_key: Matrix | None = field(default=None, repr=False)
    W_value: Matrix | None = field(default=None, repr=False)
    if TYPE_CHECKING:  # per config, set once by __post_init__; not a field (the JSON writes those)
        _tokens: ClassVar[tuple[str, ...]]

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in GIVEN_MATRICES["embedding"] + GIVEN_MATRICES["weight_init"]:
                continue
            if value is None and f.name in ("dropout_seed", "out_proj"):
                continue
            set_(f.name, parse_field(f.name, value))

        tokens = sentence_tokens(self.sentence, self.tokenizer)
        set_("_tokens", tuple(tokens))  # once per config: every reader of `tokens` shares it
        if self.d_k % self.n_heads or self.d_v % self.n_heads:
            raise ConfigError(
                "n_heads", f"n_heads must divide both d_k={self.d_k} and d_v={self.d_v}; "
                           f"choose one of {', '.join(map(str, head_choices(self.d_k, self.d_v)))} "
                           f"(got {self.n_heads}). {_widths_for(self.n_heads, self.d_k, self.d_v)}")
        if self.n_heads * len(tokens) ** 2 > MAX_ATTENTION_CELLS:
            most = max(1, MAX_ATTENTION_CELLS // len(tokens) ** 2)
            raise ConfigError(
                "n_heads", f"n_heads × n_tokens² must be at most {MAX_ATTENTION_CELLS:,} "
                           f"(got {self.n_heads} × {len(tokens)}² = "
                           f"{self.n_heads * len(tokens) ** 2:,}); with {len(tokens)} tokens "
                           f"use at most {most} heads.")
        if self.embedding == "table":
            n_vocab = len(build_vocab(tokens))
            if not n_vocab <= self.vocab_size <= MAX_VOCAB_SIZE:
                raise ConfigError(
                    "vocab_size", f"vocab_size must be between the vocabulary length "
                                  f"({n_vocab}) and {MAX_VOCAB_SIZE:,} (got {self.vocab_size:,})")
            if self.vocab_size * self.d_in > MAX_TABLE_ELEMENTS:
                raise ConfigError(
                    "vocab_size", f"vocab_size × d_in must be at most {MAX_TABLE_ELEMENTS:,} "
                                  f"elements (got {self.vocab_size:,} × {self.d_in} = "
                                  f"{self.vocab_size * self.d_in:,})")
        if self.weight_init == "identity" and not self.d_k == self.d_v == self.d_in:
            raise ConfigError(
                "weight_init", f"weight_init='identity' needs d_k = d_v = d_in "
                               f"(got d_in={self.d_in}, d_k={self.d_k}, d_v={self.d_v})")

        dims = [str(c) for c in range(max(self.d_in, 1))]
        if self.embedding == "given":
            set_("embeddings", matrix_field("embeddings", self.embeddings,
                                          (len(tokens), self.d_in), tokens, "dim"))
        if self.weight_init == "given":
            for name, d_out in (("W_query", self.d_k), ("W_key", self.d_k),
                                ("W_value", self.d_v)):
                set_(name, matrix_field(name, getattr(self, name), (self.d_in, d_out),
                                      dims, "column"))

    @property
    def tokens(self) -> list[str]:
        """The sentence's tokens, see `explorer.core.tokenizer.tokenize` (split once,
        when the config is made)."""
        return list(self._tokens)

    @property
    def mask_seed(self) -> int:
        """Seed of the dropout mask's generator: ``dropout_seed``, else ``seed``."""
        return self.seed if self.dropout_seed is None else self.dropout_seed

    @property
    def has_out_proj(self) -> bool:
        """Whether the output projection runs: ``out_proj``, else ``n_heads > 1``."""
        return self.n_heads > 1 if self.out_proj is None else self.out_proj

    @property
    def head_dim(self) -> int:
        """Per-head width of the queries and keys, ``d_k // n_heads``."""
        return self.d_k // self.n_heads

    @property
    def head_dim_v(self) -> int:
        """Per-head width of the values, ``d_v // n_heads``."""
        return self.d_v // self.n_heads

    def replace(self, **changes: Any) -> "AttentionConfig":
        """A copy with ``changes`` applied (and validated again)."""
        return dataclasses.replace(self, **changes)


@runtime_checkable
class TraceConfig(Protocol):
    """What a `Trace`'s ``config`` tells every reader of the trace (the pages,
    `explorer.lessons.explain`, `explorer.core.verify`, the figures): the
    book's `AttentionConfig` and a real model's layer
    (`explorer.models.layer_trace.ModelConfig`) alike.

    ``tokens`` (n_tokens labels); the widths ``d_in`` (of X), ``d_k`` (of Q and
    K, all heads), ``d_v`` (of V and the context, all heads), ``head_dim`` and
    ``head_dim_v`` (one head's, ``d_k // n_heads`` and ``d_v // n_heads``);
    ``n_heads``; how the weights were computed: ``causal``, ``scale`` (scores
    ÷ √head_dim), ``normalization`` (``"softmax"``, ``"naive_softmax"``,
    ``"sum"``), ``dropout`` (p), ``has_out_proj``, ``weight_init`` (a recipe's
    name, ``"given"``, or ``"model"`` for trained weights). Every implementation
    is a dataclass (the JSON writes its fields), which ``__dataclass_fields__``
    declares.
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def tokens(self) -> list[str]: ...
    @property
    def d_in(self) -> int: ...
    @property
    def d_k(self) -> int: ...
    @property
    def d_v(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def head_dim_v(self) -> int: ...
    @property
    def n_heads(self) -> int: ...
    @property
    def causal(self) -> bool: ...
    @property
    def scale(self) -> bool: ...
    @property
    def normalization(self) -> str: ...
    @property
    def dropout(self) -> float: ...
    @property
    def has_out_proj(self) -> bool: ...
    @property
    def weight_init(self) -> str: ...
