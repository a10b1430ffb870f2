"""Cross-checks of a trace against PyTorch's own attention, and against the book's
second route to causal weights.

`against_pytorch` recomputes the output with ``torch.nn.MultiheadAttention``
(when its shapes allow: d_in = d_k = d_v, scaling on, with the output
projection) or with ``torch.nn.functional.scaled_dot_product_attention``, from
the trace's own weights, and reports the largest absolute difference, judged
against float32 rounding at the size of PyTorch's numbers
(`explorer.core.agreement.relative_tolerance`); `summary` says it in one line.
`second_causal_route` recomputes causal weights the other way the book shows
(softmax first, then zero the future and renormalise) and says where they agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from explorer.core import attention as att
from explorer.core import recipes
from explorer.core.agreement import (
    Agreement,
    largest_abs,
    max_abs_diff,
    relative_tolerance,
    relative_tolerance_text,
)
from explorer.core.config import AttentionConfig
from explorer.core.trace import Trace

TOLERANCE = 1e-4
"""Largest difference between two routes to the same attention weights (all in
[0, 1]) still shown as agreement (float32 rounding)."""


def _verified(reference: str, compared: str, pairs: list[tuple[torch.Tensor, torch.Tensor]],
              note: str) -> Agreement:
    """The check of the page's attention against PyTorch's ``reference``: which
    steps were ``compared``, as (ours, PyTorch's) ``pairs``, and a caveat. Its
    tolerance is float32 rounding at the size of PyTorch's numbers,
    `relative_tolerance` of their largest |value| (its ``scale``)."""
    theirs = [reference_ for _, reference_ in pairs]
    scale = largest_abs(*theirs)
    return Agreement("The page's attention", compared, reference,
                     max(max_abs_diff(ours, reference_) for ours, reference_ in pairs),
                     relative_tolerance(scale), n_values=sum(t.numel() for t in theirs),
                     note=note, scale=scale)


def summary(check: Agreement) -> str:
    """`against_pytorch`'s check in one line for the page (Markdown: the
    reference in backticks), e.g. ``"✓ Verified against PyTorch: `…` gives the
    same output: max |difference| = 1.3e-03, at most the tolerance 1e-04 × 79.9
    = 8.0e-03 (float32 rounding, …)."``; when it does not agree, ``"✗ Not
    verified against PyTorch: `…` gives a different output: max |difference| =
    …, above the tolerance …"``."""
    found = f"{check.compared}: max |difference| = {check.max_abs_diff:.1e}"
    tolerance = relative_tolerance_text(check.scale)
    if check.ok:
        return (f"✓ Verified against PyTorch: `{check.reference}` gives the same {found}, "
                f"at most the tolerance {tolerance}.")
    return (f"✗ Not verified against PyTorch: `{check.reference}` gives a different {found}, "
            f"above the tolerance {tolerance}.")


def _per_head(trace: Trace, name: str) -> torch.Tensor:
    tensor = trace[name]
    return tensor if tensor.dim() == 3 else tensor[None]  # (n_heads, n, head_dim)


def _dropped(weights: torch.Tensor, trace: Trace) -> torch.Tensor:
    """PyTorch's own dropout of ``weights`` (n_heads, n, n), as a learner's code
    draws it: ``torch.manual_seed(dropout seed)`` then ``nn.Dropout(p)`` in
    training mode, inside ``torch.random.fork_rng`` (the process's random state
    is put back). The weights unchanged when dropout is off."""
    c = trace.config
    if c.dropout == 0:
        return weights
    with recipes.global_rng(_mask_seed(trace)):
        return torch.nn.Dropout(c.dropout).train()(weights)


def _mask_seed(trace: Trace) -> int:
    """The seed of the book's trace's dropout mask. Raises TypeError for a trace
    that is not the book's (no other trace has dropout)."""
    if not isinstance(trace.config, AttentionConfig):
        raise TypeError(f"no dropout seed in {type(trace.config).__name__}")
    return trace.config.mask_seed


def _dropout_note(trace: Trace) -> str:
    if trace.config.dropout == 0:
        return ""
    c = trace.config
    return (f"Dropout compared too: PyTorch drew its own mask, torch.manual_seed({_mask_seed(trace)}) "
            f"then nn.Dropout({c.dropout:g}) in training mode, and it is the page's.")


def _ours(trace: Trace) -> torch.Tensor:
    """Our output (with out_proj) or context, after dropout when it is on: (n, d_v)."""
    return trace["output"] if trace.config.has_out_proj else trace["context"]


def _compared(trace: Trace, what: str) -> str:
    return f"{what} (after dropout)" if trace.config.dropout else what


def with_sdpa(trace: Trace) -> Agreement:
    """Per head, ``scaled_dot_product_attention(q, k, v, is_causal=causal,
    scale=...)``, heads concatenated, then ``out_proj`` if it is on. With
    dropout, the weights are PyTorch's softmax of the scores, dropped by
    ``nn.Dropout(p)`` after ``torch.manual_seed(dropout seed)`` (`_dropped`),
    times V (SDPA's own ``dropout_p`` draws its mask another way)."""
    c = trace.config
    q, k, v = (_per_head(trace, name) for name in ("queries", "keys", "values"))
    scale = 1 / math.sqrt(c.head_dim) if c.scale else 1.0
    if c.dropout:
        mask = torch.ones(trace.n_tokens, trace.n_tokens, dtype=torch.bool)
        mask = mask.tril() if c.causal else mask
        scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf"))
        context = _dropped(F.softmax(scores, dim=-1), trace) @ v
    else:
        context = F.scaled_dot_product_attention(q, k, v, is_causal=c.causal, scale=scale)
    reference = att.combine_heads(context)
    compared = "context"
    if c.has_out_proj:
        reference = F.linear(reference, trace["W_out"].T, trace["b_out"])
        compared = "output"
    causal = ", is_causal=True" if c.causal else ""
    name = ("torch.nn.functional.softmax, then nn.Dropout" if c.dropout else
            f"torch.nn.functional.scaled_dot_product_attention(…{causal})")
    return _verified(name, _compared(trace, compared), [(_ours(trace), reference)],
                     _dropout_note(trace))


def mha_applies(trace: Trace) -> bool:
    """nn.MultiheadAttention projects to embed_dim = d_in for Q, K and V, scales
    by 1/sqrt(head_dim) and always has an output projection."""
    c = trace.config
    return c.d_in == c.d_k == c.d_v and c.scale and c.has_out_proj


def with_multihead_attention(trace: Trace) -> Agreement:
    """``torch.nn.MultiheadAttention(d_in, n_heads, dropout=p, batch_first=True)``
    with our W_query, W_key, W_value as its in-projection (zero bias) and our
    out_proj; compares the output and the per-head attention weights. With
    dropout it runs in training mode after ``torch.manual_seed(dropout seed)``
    (inside ``torch.random.fork_rng``), so it draws its own mask, as a learner's
    notebook does, and the weights compared are the dropped ones."""
    c = trace.config
    # skip_init: no random init (it would draw from the global RNG), our weights go in.
    mha = torch.nn.utils.skip_init(torch.nn.MultiheadAttention, c.d_in, c.n_heads, bias=True,
                                   batch_first=True, dropout=c.dropout)
    mha.train()  # its dropout (p = 0 when off) draws as in training
    with torch.no_grad(), recipes.global_rng(_mask_seed(trace)):
        mha.in_proj_weight.copy_(torch.cat([trace["W_query"].T, trace["W_key"].T,
                                            trace["W_value"].T]))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(trace["W_out"].T)
        mha.out_proj.bias.copy_(trace["b_out"])
        x = trace["embeddings"][None]  # (1, n, d_in)
        mask = att.causal_mask(trace.n_tokens) if c.causal else None
        output, weights = mha(x, x, x, attn_mask=mask, need_weights=True,
                              average_attn_weights=False)
    ours = _per_head(trace, "dropped_weights" if c.dropout else "attn_weights")
    return _verified("torch.nn.MultiheadAttention(batch_first=True)",
                     _compared(trace, "output and attention weights"),
                     [(_ours(trace), output[0]), (ours, weights[0])], _dropout_note(trace))


def against_pytorch(trace: Trace) -> Agreement | None:
    """The best available PyTorch reference for ``trace``; None when PyTorch has
    no equivalent (a normalisation other than softmax)."""
    if trace.config.normalization != "softmax":
        return None
    return with_multihead_attention(trace) if mha_applies(trace) else with_sdpa(trace)


@dataclass(frozen=True)
class SecondRoute:
    """The book's second route to causal weights (§3.5.1): softmax over every
    key, then the future zeroed and each row divided by its new sum.

    ``weights``: shaped like the trace's ``attn_weights`` ((n_heads, n, n) or
    (n, n)); NaN in a row whose allowed weights all underflowed to 0 in the
    softmax over all keys (renormalising divides 0 by 0). ``lost_rows``: how
    many such rows, over every head. ``agreement``: how far the other rows are
    from the trace's weights (its largest difference NaN when none is left).
    """

    weights: torch.Tensor
    lost_rows: int
    agreement: Agreement

    def explanation(self) -> str:
        """What the route does and how it compares, in words, for the page and the report."""
        text = ("The book first computes the softmax over all keys, then zeroes the future and "
                "divides each row by its new sum. The masked terms just drop out of the "
                "softmax's denominator, so both routes agree: largest difference "
                f"{self.agreement.max_abs_diff:.1e}")
        if not self.lost_rows:
            return text + " over all heads."
        return text + (
            f" on the other rows. In {self.lost_rows} row(s) they do not: a future key's "
            "score is so much larger that, in the softmax over all keys, every allowed weight "
            "underflows to 0 in float32, and renormalising divides 0 by 0 (NaN, shown as "
            "gaps). Masking with −∞ before the softmax never loses them: it is the route the "
            "book and PyTorch keep.")


def second_causal_route(trace: Trace) -> SecondRoute | None:
    """`explorer.core.attention.mask_after_softmax` of the trace's scaled scores,
    compared with its weights (before dropout). None unless the trace is causal
    with the softmax (the route is the book's for that case alone)."""
    c = trace.config
    if not c.causal or c.normalization != "softmax":
        return None
    rerouted = att.mask_after_softmax(trace["scaled_scores"], trace["causal_mask"])
    lost = torch.isnan(rerouted).any(dim=-1)  # rows whose allowed weights all underflowed
    kept = ~lost
    difference = (rerouted[kept] - trace["attn_weights"][kept]).abs()
    largest = float(difference.max()) if difference.numel() else math.nan
    return SecondRoute(rerouted, int(lost.sum()), Agreement(
        "The book's second route", "the weights of the rows it keeps",
        "masking with −∞ before the softmax (the page's weights)", largest, TOLERANCE,
        n_values=difference.numel()))
