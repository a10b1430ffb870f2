"""The pipeline: `compute_trace` runs attention on a config and keeps every step."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping
from typing import Callable

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core import recipes
from explorer.core.config import AttentionConfig, TraceConfig
from explorer.core.tokenizer import token_ids as ids_of

EmbeddingTable = Callable[[int, int, int], tuple[Tensor, Tensor]]
"""``(seed, vocab_size, d_in) -> (first rows of the table, rng_state_after)``,
see `recipes.embedding_table`."""


class Trace(Mapping):
    """Every intermediate tensor of one attention computation, in pipeline order.

    A read-only mapping from step name (see `explorer.core.steps.STEPS`) to tensor,
    plus ``tokens`` (list of str) and ``config`` (a `TraceConfig`: the
    `AttentionConfig` it was computed from, or a real model's layer).
    Iteration follows pipeline order. Treat the tensors as read-only.
    """

    def __init__(self, config: TraceConfig, tokens: list[str], steps: dict[str, Tensor]):
        self._steps = dict(steps)
        self.config = config
        self.tokens = list(tokens)

    def __getitem__(self, name: str) -> Tensor:
        try:
            return self._steps[name]
        except KeyError:
            raise KeyError(f"no step {name!r} in this trace; it has {list(self._steps)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    # A trace is one computation: equal to itself only (Mapping's == would compare
    # tensors), and hashable by identity, so that derived results can be kept per trace.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self._steps.items())
        return f"Trace(tokens={self.tokens!r}, steps=[{shapes}])"

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def per_head(self, name: str) -> bool:
        """Whether step ``name`` has a leading head axis ``(n_heads, n, ·)``
        (the steps after the split when ``n_heads > 1``)."""
        return self[name].dim() == 3

    def head(self, name: str, head: int = 0) -> Tensor:
        """Step ``name`` as head ``head`` sees it: ``(n, ·)`` of a per-head step,
        the whole step otherwise (the heads share it)."""
        tensor = self[name]
        return tensor[head] if tensor.dim() == 3 else tensor

    @property
    def nbytes(self) -> int:
        """Bytes held by the step tensors (what a cache of traces pays)."""
        return sum(t.element_size() * t.nelement() for t in self._steps.values())

    def to_json(self) -> str:
        """Every step as nested lists, with the tokens and the config, as strict JSON.

        RFC 8259 JSON has no infinities or NaN, so a masked score (−∞) is written
        as the string ``"-Infinity"`` and an overflowed naive softmax (NaN) as
        ``"NaN"`` (``"Infinity"`` for +∞): every parser accepts them, and
        ``float(s)`` in Python or ``Number(s)`` in JavaScript reads them back.
        `read_json` returns the steps as tensors. Finite values keep float32's
        precision (they read back to 1e-6 and better).
        """
        config = {k: v for k, v in dataclasses.asdict(self.config).items() if v is not None}
        return json.dumps({"tokens": self.tokens, "config": json_safe(config),
                           "steps": {name: json_safe(t.tolist())
                                     for name, t in self._steps.items()}},
                          allow_nan=False)


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def json_safe(value):
    """``value`` (numbers, lists, dicts, tensors' ``tolist()``) with every
    non-finite float replaced by its JSON string: ``"-Infinity"``, ``"Infinity"``,
    ``"NaN"``, so that ``json.dumps(..., allow_nan=False)`` writes strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else _NON_FINITE[value]
    if hasattr(value, "tolist"):  # a hand-entered Matrix
        return json_safe(value.tolist())
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def read_json(text: str) -> dict[str, Tensor]:
    """The steps of a `Trace.to_json` document as tensors: booleans (masks) as
    bool, token ids as int64, everything else float32, with ``"-Infinity"``,
    ``"Infinity"`` and ``"NaN"`` read back as those floats."""
    def numbers(value):
        if isinstance(value, list):
            return [numbers(v) for v in value]
        return float(value) if isinstance(value, str) else value

    steps = json.loads(text)["steps"]
    out = {}
    for name, value in steps.items():
        dtype = (torch.long if name == "token_ids" else
                 torch.bool if name == "causal_mask" else torch.float32)
        out[name] = torch.tensor(numbers(value), dtype=dtype)
    return out


def _given(matrix) -> Tensor:
    """A hand-entered `explorer.core.config.Matrix` as a fresh float32 tensor."""
    return matrix.tensor()


def with_embeddings(trace: Trace, embeddings: Tensor) -> AttentionConfig:
    """``trace``'s config with X replaced by ``embeddings`` (n_tokens, d_in) and
    the weights it drew kept: W_query, W_key and W_value are passed in as typed
    ("given"), so that they are not drawn again. A config whose X is "given"
    draws its weights first from the seeded generator, which the table or the
    uniform X drew from before: those would be other weights.

    Kept too: the scaling, mask, normalisation and the dropout mask (its own
    seed). Not kept: ``out_proj``'s weight and bias, drawn again after the
    given weights (steps before ``output`` are the page's). Used by the
    overflow lesson (X × c). Raises `ConfigError` when a cell of
    ``embeddings`` is beyond `explorer.core.config.MAX_ABS_GIVEN`, TypeError for
    a trace that is not the book's (a real model's layer draws no weights).
    """
    config = trace.config
    if not isinstance(config, AttentionConfig):
        raise TypeError(f"with_embeddings needs the book's trace, not {type(config).__name__}'s")
    return config.replace(
        embedding="given", embeddings=embeddings, weight_init="given",
        **{name: trace[name] for name in ("W_query", "W_key", "W_value")})


def embed(config: AttentionConfig, embedding_table: EmbeddingTable = recipes.embedding_table
          ) -> tuple[Tensor, torch.Generator]:
    """Step 1, the embeddings X of ``config``'s tokens: (n_tokens, d_in).

    Returns X and the generator, ready to draw the weights next: ``"table"``
    looks the token ids up in `recipes.embedding_table` (``nn.Embedding(vocab_size,
    d_in)`` after ``torch.manual_seed(seed)``), ``"uniform"`` draws
    ``torch.rand(n_tokens, d_in)``, ``"given"`` takes ``config.embeddings``.
    """
    rng = recipes.seeded_generator(config.seed)
    if config.embedding == "table":
        table, rng_state = embedding_table(config.seed, config.vocab_size, config.d_in)
        rng.set_state(rng_state)
        return table[ids_of(config.tokens)], rng  # row lookup, like nn.Embedding
    if config.embedding == "uniform":
        return recipes.uniform_embeddings(len(config.tokens), config.d_in, rng), rng
    return _given(config.embeddings), rng


def attention_steps(x: Tensor, weights: Mapping[str, Tensor], *, n_heads: int = 1,
                    scale: bool = True, causal: bool = False, normalization: str = "softmax",
                    dropout: float = 0.0, keep_mask: Tensor | None = None,
                    ops=att) -> dict[str, Tensor]:
    """Steps 3 to 7 of the pipeline, from X and given weights to the output.

    x: (..., n, d_in); leading axes (a batch) are kept in every step.
    ``weights``: ``W_query`` and ``W_key`` (d_in, d_k), ``W_value`` (d_in, d_v),
    so that Q = X·W_query; optionally the biases ``b_query``, ``b_key`` (d_k,)
    and ``b_value`` (d_v,) added to Q, K and V (``nn.Linear(..., bias=True)``),
    and the output projection ``W_out`` (d_v, d_out) with ``b_out`` (d_out,)
    (``out_proj.weight`` transposed and ``out_proj.bias``).
    ``keep_mask``: the dropout keep-mask, (..., n_heads, n, n), when dropout > 0.
    ``ops``: where the step functions come from, `explorer.core.attention` unless a
    caller swaps one out (`explorer.checker.mistakes` computes the classic mistakes so).

    Returns, in pipeline order (h = n_heads, hd = d_k / h, hv = d_v / h; the
    head axis is kept even for one head): ``queries``, ``keys`` (..., h, n, hd),
    ``values`` (..., h, n, hv), ``attn_scores`` = Q Kᵀ and ``scaled_scores``
    (..., h, n, n), [``causal_mask`` (n, n) and ``masked_scores`` when causal],
    ``attn_weights``, [``dropout_mask`` and ``dropped_weights`` when dropout > 0],
    ``context`` (..., n, d_v), [``W_out``, ``b_out`` and ``output`` (..., n, d_out)
    with ``W_out``]. Vaswani et al. (2017) eq. 1, as the book's Listings 3.1-3.5.
    """
    # 3. Queries, keys, values: (..., n, d) -> per head (..., h, n, head_dim)
    per_head = {}
    for name, weight, bias in (("queries", "W_query", "b_query"), ("keys", "W_key", "b_key"),
                               ("values", "W_value", "b_value")):
        projected = ops.project(x, weights[weight])  # (..., n, d_in) @ (d_in, d) -> (..., n, d)
        if weights.get(bias) is not None:
            projected = projected + weights[bias]
        per_head[name] = ops.split_heads(projected, n_heads)
    head_dim = per_head["queries"].shape[-1]

    # 4. Scores, scaling, mask, normalisation: (..., h, n, n)
    steps = dict(per_head)
    scores = steps["attn_scores"] = ops.attention_scores(steps["queries"], steps["keys"])
    scaled = steps["scaled_scores"] = ops.scale_scores(scores, head_dim, scale)
    if causal:
        steps["causal_mask"] = ops.causal_mask(x.shape[-2])
        scaled = steps["masked_scores"] = ops.apply_mask(scaled, steps["causal_mask"])
    attn_weights = steps["attn_weights"] = ops.NORMALIZERS[normalization](scaled)

    # 5. Dropout on the weights, with the keep-mask given
    if dropout > 0:
        steps["dropout_mask"] = keep_mask
        attn_weights = steps["dropped_weights"] = ops.apply_dropout(attn_weights, keep_mask,
                                                                    dropout)

    # 6. Context: heads concatenated, (..., n, d_v)
    context = steps["context"] = ops.combine_heads(ops.context_vectors(attn_weights,
                                                                       steps["values"]))

    # 7. Output projection: (..., n, d_v) @ (d_v, d_out) + b_out
    if weights.get("W_out") is not None:
        steps["W_out"], steps["b_out"] = weights["W_out"], weights["b_out"]
        steps["output"] = ops.output_projection(context, weights["W_out"], weights["b_out"])
    return steps


def compute_trace(config: AttentionConfig,
                  embedding_table: EmbeddingTable = recipes.embedding_table) -> Trace:
    """Run scaled dot-product attention on ``config`` and return every step.

    Steps (n = n_tokens; with ``n_heads > 1`` the per-head ones gain a leading
    head axis of size n_heads and use head_dim = d_k / n_heads):

    ``token_ids (n,)``, ``embeddings (n, d_in)``, ``W_query (d_in, d_k)``,
    ``W_key (d_in, d_k)``, ``W_value (d_in, d_v)``, ``queries (n, d_k)``,
    ``keys (n, d_k)``, ``values (n, d_v)``, ``attn_scores (n, n)`` = Q Kᵀ,
    ``scaled_scores (n, n)``, [``causal_mask``, ``masked_scores (n, n)`` when
    causal], ``attn_weights (n, n)``, [``dropout_mask``, ``dropped_weights`` when
    dropout > 0], ``context (n, d_v)``, [``W_out (d_v, d_v)``, ``b_out (d_v,)``,
    ``output (n, d_v)`` with the output projection].

    Randomness: one ``torch.Generator().manual_seed(seed)``, drawn in the order
    embedding table (or uniform embeddings), W_query, W_key, W_value, then
    out_proj's weight and bias; the dropout mask has its own generator seeded
    with ``dropout_seed``. This equals ``torch.manual_seed(seed)`` followed by
    ``002_8c91a21803773e04.txt``'s code. ``embedding_table`` lets the app pass a
    cached `recipes.embedding_table`.
    """
    c = config
    n, h = len(c.tokens), c.n_heads

    # 1. Embeddings X: (n, d_in)
    x, rng = embed(c, embedding_table)
    steps: dict[str, Tensor] = {"token_ids": ids_of(c.tokens), "embeddings": x}

    # 2. Projection weights, drawn in the order W_query, W_key, W_value
    for name, d_out in (("W_query", c.d_k), ("W_key", c.d_k), ("W_value", c.d_v)):
        if c.weight_init == "given":
            steps[name] = _given(getattr(c, name))
        else:
            steps[name] = recipes.projection_weight(c.weight_init, c.d_in, d_out, rng)
    weights = dict(steps)
    if c.has_out_proj:  # nn.Linear(d_v, d_v), drawn next from the same generator
        weights["W_out"] = recipes.linear_weight(c.d_v, c.d_v, rng).T.contiguous()
        weights["b_out"] = recipes.linear_bias(c.d_v, c.d_v, rng)

    # 3-7. Q, K, V, scores, mask, weights, dropout (its own generator), context, output
    keep = recipes.dropout_mask((h, n, n), c.dropout, c.mask_seed) if c.dropout > 0 else None
    computed = attention_steps(x, weights, n_heads=h, scale=c.scale, causal=c.causal,
                               normalization=c.normalization, dropout=c.dropout, keep_mask=keep)
    for name, tensor in computed.items():  # a single head is shown without a head axis
        steps[name] = tensor[0] if h == 1 and tensor.dim() == 3 else tensor
    return Trace(c, c.tokens, steps)
