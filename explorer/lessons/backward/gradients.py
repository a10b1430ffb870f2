"""The backward pass of scaled dot-product attention, one function per step,
derived by hand: pure torch, no autograd.

The forward pass (`explorer.core.trace.compute_trace`, Vaswani et al. 2017,
eq. 1, as the book's Listings 3.1-3.5) is

    Q = X W_q,  K = X W_k,  V = X W_v           (per head h: columns of W)
    ω = Q Kᵀ,  ω̃ = ω / √d_k,  ω̂ = ω̃ masked,  α = softmax(ω̂),  α′ = α ⊙ D / (1 − p)
    Z = α′ V  (heads side by side),  O = Z W_out + b_out

and the chain rule walks it backwards, from dL/dO (`explorer.lessons.backward.loss`)
to dL/dX. Each step's source is the matrix calculus of a product, Y = A B:
dL/dA = dL/dY · Bᵀ and dL/dB = Aᵀ · dL/dY (Goodfellow et al., "Deep Learning",
§6.5.6), and the softmax's Jacobian (Bishop, "Pattern Recognition and Machine
Learning", eq. 4.106). Leading axes (heads) broadcast, as in the forward pass.
Gradients are keyed by the step they belong to: ``grads["queries"]`` is dL/dQ.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.trace import Trace, json_safe
from explorer.lessons.backward.loss import Loss


# ---------------------------------------------------------------------------
# 7. The output projection: O = Z W_out + b_out
# ---------------------------------------------------------------------------
def out_weight_gradient(context: Tensor, d_output: Tensor) -> Tensor:
    """dL/dW_out = Zᵀ · dL/dO: (d_v, n) @ (n, d_out) -> (d_v, d_out)."""
    return context.T @ d_output


def out_bias_gradient(d_output: Tensor) -> Tensor:
    """dL/db_out = Σ_i dL/dO_i (b_out is added to every row): (n, d_out) -> (d_out,)."""
    return d_output.sum(dim=0)


def context_gradient(d_output: Tensor, w_out: Tensor) -> Tensor:
    """dL/dZ = dL/dO · W_outᵀ: (n, d_out) @ (d_out, d_v) -> (n, d_v)."""
    return d_output @ w_out.T


# ---------------------------------------------------------------------------
# 6. The context: Z = α′ V, per head
# ---------------------------------------------------------------------------
def values_gradient(weights: Tensor, d_context: Tensor) -> Tensor:
    """dL/dV = αᵀ · dL/dZ (α′ after dropout): (h, n, n)ᵀ @ (h, n, hv) -> (h, n, hv).

    Row j gathers every query's gradient, weighted by how much it attended to key j.
    """
    return weights.transpose(-2, -1) @ d_context


def weights_gradient(d_context: Tensor, values: Tensor) -> Tensor:
    """dL/dα = dL/dZ · Vᵀ: (h, n, hv) @ (h, hv, n) -> (h, n, n).

    Cell (i, j) is how much the loss would change if query i took a little
    more of value j: dZ_i · v_j.
    """
    return d_context @ values.transpose(-2, -1)


# ---------------------------------------------------------------------------
# 5. Dropout: α′ = α ⊙ D / (1 − p)
# ---------------------------------------------------------------------------
def dropout_gradient(d_dropped: Tensor, keep_mask: Tensor, p: float) -> Tensor:
    """dL/dα = dL/dα′ ⊙ D / (1 − p): a dropped weight gets no gradient, a kept
    one its gradient scaled by 1/(1 − p). (h, n, n) -> (h, n, n)."""
    return d_dropped * (keep_mask / (1.0 - p))


# ---------------------------------------------------------------------------
# 4. The normalisation: α = softmax(ω̂) row by row
# ---------------------------------------------------------------------------
def softmax_jacobian(weights_row: Tensor) -> Tensor:
    """The softmax's Jacobian of one row, ∂α_j/∂ω̃_k = α_j (δ_jk − α_k):
    J = diag(α) − α αᵀ, (n,) -> (n, n), symmetric (Bishop, PRML, eq. 4.106).

    Its rows sum to 0 (the weights' sum stays 1 whatever the scores do). When
    one weight is near 1 and the others near 0, J is near 0: the saturated
    softmax passes almost no gradient back.
    """
    return torch.diag(weights_row) - weights_row[:, None] * weights_row[None, :]


def softmax_gradient(weights: Tensor, d_weights: Tensor) -> Tensor:
    """dL/dω̃ = α ⊙ (dL/dα − rowsum(α ⊙ dL/dα)): each row is J · dL/dα with J
    the row's `softmax_jacobian`, without forming J. (h, n, n) -> (h, n, n).

    The rowsum term is J's −α αᵀ part: a score's rise takes weight from every
    other key. A masked key (α = 0) gets 0. Used for the stable and the naive
    softmax alike: both compute the same function, so they have the same derivative.
    """
    return weights * (d_weights - (weights * d_weights).sum(dim=-1, keepdim=True))


def sum_normalize_gradient(scores: Tensor, weights: Tensor, d_weights: Tensor) -> Tensor:
    """For α_ij = ω_ij / S_i with S_i = Σ_k ω_ik (``normalization="sum"``):
    ∂α_ik/∂ω_ij = (δ_jk − α_ik) / S_i, so dL/dω_ij = (dL/dα_ij − Σ_k α_ik dL/dα_ik) / S_i.
    Masked (−∞) scores count as 0 in the sum and get 0. (h, n, n) -> (h, n, n).
    """
    masked = scores == float("-inf")
    row_sum = scores.masked_fill(masked, 0.0).sum(dim=-1, keepdim=True)
    d_scores = (d_weights - (weights * d_weights).sum(dim=-1, keepdim=True)) / row_sum
    return d_scores.masked_fill(masked, 0.0)


def row_jacobian(trace: Trace, row: int, head: int = 0) -> Tensor:
    """The Jacobian of one row of ``trace``'s attention weights with respect to
    the scores it normalised (ω̂ when causal, else ω̃), J[j, k] = ∂α_j/∂ω̃_k,
    (n, n): `softmax_jacobian` for the (stable or naive) softmax; for
    ``normalization="sum"``, (δ_jk − α_j) / S with S the row's sum. A masked
    key's row and column are 0 (its score is −∞, its weight a constant 0).
    dL/dω̃ of the row is Jᵀ · dL/dα. Raises ``IndexError`` for a row outside."""
    c = trace.config
    weights = trace.head("attn_weights", head)[row]
    if c.normalization != "sum":
        return softmax_jacobian(weights)
    scores = trace.head("masked_scores" if c.causal else "scaled_scores", head)[row]
    masked = scores == float("-inf")
    total = scores.masked_fill(masked, 0.0).sum()
    jac = (torch.eye(weights.shape[0]) - weights[:, None]) / total
    return jac.masked_fill(masked[:, None] | masked[None, :], 0.0)


def normalization_gradient(normalization: str, scores: Tensor, weights: Tensor,
                           d_weights: Tensor) -> Tensor:
    """dL/d(the normalisation's input) for `AttentionConfig.normalization`:
    `softmax_gradient` for ``"softmax"`` and ``"naive_softmax"``,
    `sum_normalize_gradient` for ``"sum"``. (h, n, n) -> (h, n, n)."""
    if normalization == "sum":
        return sum_normalize_gradient(scores, weights, d_weights)
    return softmax_gradient(weights, d_weights)


# ---------------------------------------------------------------------------
# 4. The causal mask and the scaling
# ---------------------------------------------------------------------------
def mask_gradient(d_masked: Tensor, mask: Tensor) -> Tensor:
    """dL/dω̃ = dL/dω̂ where the key is kept, 0 where the causal mask is: a masked
    score was replaced by −∞, so it has no effect on the loss.
    d_masked (h, n, n); mask (n, n) bool, True = masked -> (h, n, n)."""
    return d_masked.masked_fill(mask, 0.0)


def scale_gradient(d_scaled: Tensor, head_dim: int, scale: bool = True) -> Tensor:
    """dL/dω = dL/dω̃ / √head_dim (unchanged when the scaling is off), since
    ω̃ = ω / √head_dim. (h, n, n) -> (h, n, n)."""
    return d_scaled / math.sqrt(head_dim) if scale else d_scaled


# ---------------------------------------------------------------------------
# 3. The scores: ω = Q Kᵀ
# ---------------------------------------------------------------------------
def queries_gradient(d_scores: Tensor, keys: Tensor) -> Tensor:
    """dL/dQ = dL/dω · K: q_i moves along the keys it should match better,
    dL/dq_i = Σ_j dL/dω_ij k_j. (h, n, n) @ (h, n, hd) -> (h, n, hd)."""
    return d_scores @ keys


def keys_gradient(d_scores: Tensor, queries: Tensor) -> Tensor:
    """dL/dK = dL/dωᵀ · Q: dL/dk_j = Σ_i dL/dω_ij q_i.
    (h, n, n)ᵀ @ (h, n, hd) -> (h, n, hd)."""
    return d_scores.transpose(-2, -1) @ queries


# ---------------------------------------------------------------------------
# 2-1. The projections: Q = X W_query (+ b_query), per head a block of columns
# ---------------------------------------------------------------------------
def weight_gradient(x: Tensor, d_projected: Tensor) -> Tensor:
    """dL/dW = Xᵀ · dL/dQ with the heads side by side: head h's gradient lands
    in W's columns h·hd … (h+1)·hd − 1, the columns it was cut from.
    x (n, d_in); d_projected (h, n, hd) -> (d_in, h·hd)."""
    return x.T @ att.combine_heads(d_projected)


def bias_gradient(d_projected: Tensor) -> Tensor:
    """dL/db = Σ_i dL/dQ_i, heads side by side: (h, n, hd) -> (h·hd,)."""
    return att.combine_heads(d_projected).sum(dim=0)


def input_path(d_projected: Tensor, weight: Tensor) -> Tensor:
    """X's gradient along one path (through Q, K or V): Σ_h dL/dQ_h · W^(h)ᵀ,
    every head's share summed back, W^(h) head h's columns of W.
    d_projected (h, n, hd); weight (d_in, h·hd) -> (n, d_in)."""
    per_head = att.split_heads(weight, d_projected.shape[0])  # (h, d_in, hd)
    return (d_projected @ per_head.transpose(-2, -1)).sum(dim=0)


def input_gradient(paths: Mapping[str, Tensor]) -> Tensor:
    """dL/dX = dL/dQ W_qᵀ + dL/dK W_kᵀ + dL/dV W_vᵀ: X feeds the queries, the
    keys and the values, so its gradient is the sum of the three paths
    (`input_path`), each (n, d_in)."""
    return sum(paths.values())


# ---------------------------------------------------------------------------
# The whole backward pass
# ---------------------------------------------------------------------------
_PROJECTIONS = (("queries", "W_query", "b_query"), ("keys", "W_key", "b_key"),
                ("values", "W_value", "b_value"))


class Gradients(Trace):
    """dL/d(step) for every differentiable step of a `Trace`, in backward order.

    A `Trace` whose tensors are the gradients: a read-only mapping from a step
    name (`explorer.core.steps.STEPS`) to its gradient, shaped as the step
    (per-head steps (n_heads, n, ·), without the head axis for one head), with
    the trace's ``config`` and ``tokens``, so that whatever draws or exports a
    trace's steps (`Trace.head`, `Trace.to_json`) does the same for its
    gradients. ``trace``: the forward pass; ``loss``: the `Loss` it starts
    from; ``paths``: dL/dX's three paths (``"queries"``, ``"keys"``,
    ``"values"``), each (n, d_in).
    """

    def __init__(self, trace: Trace, loss: Loss, grads: dict[str, Tensor],
                 paths: dict[str, Tensor]):
        super().__init__(trace.config, trace.tokens, grads)
        self.trace, self.loss, self.paths = trace, loss, dict(paths)

    def __repr__(self) -> str:
        return "Gradients" + super().__repr__().removeprefix("Trace")

    def to_json(self) -> str:
        """`Trace.to_json` of the gradients, and the ``"loss"`` they start from
        (`explorer.lessons.backward.loss.Loss.description`: its kind, value,
        seed and recipe), so that the file can be reproduced on its own."""
        document = json.loads(super().to_json())
        document["loss"] = json_safe(self.loss.description())
        return json.dumps(document, allow_nan=False)

    @property
    def nbytes(self) -> int:
        """Bytes held by the gradients, their paths and the loss's tensors."""
        tensors = [*self.paths.values(), *(t for t in vars(self.loss).values()
                                           if isinstance(t, Tensor))]
        return super().nbytes + sum(t.element_size() * t.nelement() for t in tensors)


def _heads(tensor: Tensor) -> Tensor:
    """A per-head step with its head axis, (n_heads, n, ·), also for one head."""
    return tensor if tensor.dim() == 3 else tensor[None]


def backward(trace: Trace, loss: Loss) -> Gradients:
    """Every gradient of ``trace``'s forward pass, from ``loss``'s dL/dO back
    to dL/dX, each step by its function above (no autograd).

    Gradients (names as the trace's steps; h = n_heads): [``output``,
    ``W_out``, ``b_out`` with the output projection], ``context`` (n, d_v),
    ``values`` (h, n, hv), [``dropped_weights`` with dropout], ``attn_weights``,
    [``masked_scores`` when causal], ``scaled_scores``, ``attn_scores`` (h, n, n),
    ``queries``, ``keys`` (h, n, hd), ``W_query``, ``W_key``, ``W_value``
    (d_in, ·), [``b_query``, ``b_key``, ``b_value`` where the trace has
    them], ``embeddings`` (n, d_in). Every normalisation is derived: softmax
    and naive softmax share their derivative, ``"sum"`` has its own.
    """
    c = trace.config
    n_heads, grads = c.n_heads, {}

    # 7. Output projection: dL/dO comes from the loss
    d_rows = loss.grad_rows
    if "output" in trace:
        grads["output"] = d_rows
        grads["W_out"] = out_weight_gradient(trace["context"], d_rows)
        grads["b_out"] = out_bias_gradient(d_rows)
        d_rows = context_gradient(d_rows, trace["W_out"])
    grads["context"] = d_rows

    # 6. Context, per head: Z_h = α′_h V_h
    d_context = att.split_heads(d_rows, n_heads)  # (h, n, hv)
    dropped = "dropped_weights" in trace
    mixing = _heads(trace["dropped_weights" if dropped else "attn_weights"])
    grads["values"] = values_gradient(mixing, d_context)
    d_weights = weights_gradient(d_context, _heads(trace["values"]))

    # 5. Dropout
    if dropped:
        grads["dropped_weights"] = d_weights
        d_weights = dropout_gradient(d_weights, _heads(trace["dropout_mask"]), c.dropout)
    grads["attn_weights"] = d_weights

    # 4. Normalisation, mask, scaling
    source = "masked_scores" if c.causal else "scaled_scores"
    d_scaled = grads[source] = normalization_gradient(
        c.normalization, _heads(trace[source]), _heads(trace["attn_weights"]), d_weights)
    if c.causal:
        d_scaled = grads["scaled_scores"] = mask_gradient(d_scaled, trace["causal_mask"])
    d_scores = grads["attn_scores"] = scale_gradient(d_scaled, _heads(trace["queries"]).shape[-1],
                                                     c.scale)

    # 3. Queries and keys
    grads["queries"] = queries_gradient(d_scores, _heads(trace["keys"]))
    grads["keys"] = keys_gradient(d_scores, _heads(trace["queries"]))

    # 2. Weights and biases: the heads' gradients side by side in their columns
    x, paths = trace["embeddings"], {}
    for step, weight, bias in _PROJECTIONS:
        grads[weight] = weight_gradient(x, grads[step])
        if bias in trace:
            grads[bias] = bias_gradient(grads[step])
        paths[step] = input_path(grads[step], trace[weight])

    # 1. The embeddings: the sum of the three paths
    grads["embeddings"] = input_gradient(paths)
    if n_heads == 1:  # a single head is shown without a head axis, as in the trace
        grads = {name: g[0] if g.dim() == 3 else g for name, g in grads.items()}
    return Gradients(trace, loss, _backward_order(grads), paths)


_ORDER = ("output", "W_out", "b_out", "context", "values", "dropped_weights", "attn_weights",
          "masked_scores", "scaled_scores", "attn_scores", "queries", "keys", "W_query",
          "W_key", "W_value", "b_query", "b_key", "b_value", "embeddings")
"""Every gradient's name, in the order the backward pass reaches it."""


def _backward_order(grads: dict[str, Tensor]) -> dict[str, Tensor]:
    return {name: grads[name] for name in _ORDER if name in grads}
