"""The pipeline: `compute_trace` runs attention on a config and keeps every step."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping
from typing import Callable

import torch
from torch import Tensor

from explorer import attention as att
from explorer import recipes
from explorer.config import AttentionConfig
from explorer.tokenizer import token_ids as ids_of

EmbeddingTable = Callable[[int, int, int], tuple[Tensor, Tensor]]
"""``(seed, vocab_size, d_in) -> (first rows of the table, rng_state_after)``,
see `recipes.embedding_table`."""


class Trace(Mapping):
    """Every intermediate tensor of one attention computation, in pipeline order.

    A read-only mapping from step name (see `explorer.steps.STEPS`) to tensor,
    plus ``tokens`` (list of str) and ``config`` (the `AttentionConfig`).
    Iteration follows pipeline order. Treat the tensors as read-only.
    """

    def __init__(self, config: AttentionConfig, tokens: list[str], steps: dict[str, Tensor]):
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
        return json.dumps({"tokens": self.tokens, "config": _json_safe(config),
                           "steps": {name: _json_safe(t.tolist())
                                     for name, t in self._steps.items()}},
                          allow_nan=False)


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _json_safe(value):
    """``value`` with every non-finite float replaced by its JSON string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else _NON_FINITE[value]
    if hasattr(value, "tolist"):  # a hand-entered Matrix
        return _json_safe(value.tolist())
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
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
    """A hand-entered `explorer.config.Matrix` as a fresh float32 tensor."""
    return matrix.tensor()


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
    tokens = c.tokens
    n = len(tokens)
    steps: dict[str, Tensor] = {"token_ids": ids_of(tokens)}

    # 1. Embeddings X: (n, d_in)
    rng = recipes.seeded_generator(c.seed)
    if c.embedding == "table":
        table, rng_state = embedding_table(c.seed, c.vocab_size, c.d_in)
        rng.set_state(rng_state)
        steps["embeddings"] = table[steps["token_ids"]]  # row lookup, like nn.Embedding
    elif c.embedding == "uniform":
        steps["embeddings"] = recipes.uniform_embeddings(n, c.d_in, rng)
    else:
        steps["embeddings"] = _given(c.embeddings)
    x = steps["embeddings"]

    # 2. Projection weights, drawn in the order W_query, W_key, W_value
    for name, d_out in (("W_query", c.d_k), ("W_key", c.d_k), ("W_value", c.d_v)):
        if c.weight_init == "given":
            steps[name] = _given(getattr(c, name))
        else:
            steps[name] = recipes.projection_weight(c.weight_init, c.d_in, d_out, rng)

    # 3. Queries, keys, values: (n, d) -> per head (n_heads, n, head_dim)
    h = c.n_heads
    queries = att.split_heads(att.project(x, steps["W_query"]), h)
    keys = att.split_heads(att.project(x, steps["W_key"]), h)
    values = att.split_heads(att.project(x, steps["W_value"]), h)

    # 4. Scores, scaling, mask, normalisation: (n_heads, n, n)
    scores = att.attention_scores(queries, keys)
    scaled = att.scale_scores(scores, c.head_dim, c.scale)
    per_head = {"queries": queries, "keys": keys, "values": values,
                "attn_scores": scores, "scaled_scores": scaled}
    if c.causal:
        steps_mask = att.causal_mask(n)
        per_head["causal_mask"] = steps_mask
        scaled = per_head["masked_scores"] = att.apply_mask(scaled, steps_mask)
    weights = per_head["attn_weights"] = att.NORMALIZERS[c.normalization](scaled)

    # 5. Dropout on the weights, from its own generator
    if c.dropout > 0:
        keep = recipes.dropout_mask(tuple(weights.shape), c.dropout, c.mask_seed)
        per_head["dropout_mask"] = keep
        weights = per_head["dropped_weights"] = att.apply_dropout(weights, keep, c.dropout)

    # 6. Context: heads concatenated, (n, d_v)
    context = att.combine_heads(att.context_vectors(weights, values))

    squeeze = h == 1  # a single head is shown without a head axis
    for name, tensor in per_head.items():
        steps[name] = tensor[0] if squeeze and tensor.dim() == 3 else tensor
    steps["context"] = context

    # 7. Output projection nn.Linear(d_v, d_v), drawn last from the same generator
    if c.has_out_proj:
        steps["W_out"] = recipes.linear_weight(c.d_v, c.d_v, rng).T.contiguous()
        steps["b_out"] = recipes.linear_bias(c.d_v, c.d_v, rng)
        steps["output"] = att.output_projection(context, steps["W_out"], steps["b_out"])
    return Trace(c, tokens, steps)
