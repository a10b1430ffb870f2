"""STUB of the The sliding window with a ring-buffer cache part: plain causal attention, for building the page
before the real part lands (the integrator replaces this module)."""

from __future__ import annotations

import torch
from torch import Tensor

from explorer.core.agreement import TOLERANCE, Agreement, max_abs_diff
from explorer.modern.frontier import FrontierConfig, Part, Step


def ring(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """STUB: causal attention of X ``(n_tokens, d_in)`` with ``config.n_heads``
    heads of ``config.head_dim``, checked against SDPA."""
    n, d_in = x.shape
    h, d = config.n_heads, config.head_dim
    w = torch.randn(3, d_in, h * d, generator=generator) / d_in ** 0.5
    q, k, v = ((x @ w[i]).view(n, h, d).transpose(0, 1) for i in range(3))  # (h, n, d)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    scores = (q @ k.transpose(1, 2) / d ** 0.5).masked_fill(~mask, float("-inf"))  # (h, n, n)
    weights = scores.softmax(dim=-1)
    out = (weights @ v).transpose(0, 1).reshape(n, h * d)  # (n, h·d)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = ref.transpose(0, 1).reshape(n, h * d)
    check = Agreement("The sliding window with a ring-buffer cache (stub)", "context", "torch SDPA", max_abs_diff(out, ref),
                      TOLERANCE)
    return Part(
        "ring", "The sliding window with a ring-buffer cache (stub)", "A **stub** of this part: plain causal attention.",
        "stub", (
            Step("scores", "scores", r"QK^\top/\sqrt{d}", scores, "tokens", "keys",
                 "Query row's dot product with key column, scaled."),
            Step("weights", "weights", r"\mathrm{softmax}(S)", weights, "tokens", "keys",
                 "Softmax of the row.", signed=False),
            Step("output", "output", "AV", out, "tokens", "dims", "Weighted sum of values."),
        ), (check,), {"cache bytes per token": str(2 * h * d * 4)})
