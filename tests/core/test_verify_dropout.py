"""The multi-head page's check against PyTorch compares dropout too (issue 40):
the page draws its mask as ``torch.manual_seed(dropout seed); nn.Dropout(p)``
does, so PyTorch's own dropout (``nn.MultiheadAttention(dropout=p)`` in
training mode, or ``nn.Dropout``) must give the page's numbers, and a page whose
mask were drawn otherwise must fail the check."""

from __future__ import annotations

import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.core import recipes, verify

MHA = dict(d_in=4, d_k=4, d_v=4, n_heads=2, causal=True)
"""d_in = d_k = d_v with out_proj: nn.MultiheadAttention applies."""
SDPA = dict(d_in=3, d_k=2, d_v=4, n_heads=2, causal=True)
"""Other widths: softmax, nn.Dropout, times V."""


@pytest.mark.parametrize("sizes, reference", [(MHA, "MultiheadAttention"), (SDPA, "Dropout")])
@pytest.mark.parametrize("p, seed", [(0.2, 9), (0.5, 123), (0.9, 0)])
def test_the_check_compares_the_weights_after_dropout(sizes, reference, p, seed):
    trace = compute_trace(AttentionConfig(**sizes, dropout=p, dropout_seed=seed))
    result = verify.against_pytorch(trace)
    assert reference in result.reference and "after dropout" in result.compared
    assert result.max_abs_diff < 1e-5
    assert "Dropout compared too" in result.note and "compared off" not in result.note


@pytest.mark.parametrize("sizes", [MHA, SDPA])
def test_a_mask_pytorch_would_not_draw_fails_the_check(sizes, monkeypatch):
    """Our trace with every weight kept (a mask of ones): PyTorch's dropout drops
    some, so the check must see the difference (it used to compare without dropout)."""
    monkeypatch.setattr(recipes, "dropout_mask", lambda shape, p, seed: torch.ones(shape))
    trace = compute_trace(AttentionConfig(**sizes, dropout=0.5, dropout_seed=4))
    assert verify.against_pytorch(trace).max_abs_diff > 0.01


def test_the_check_leaves_the_processs_random_state_as_it_was():
    state = torch.random.get_rng_state()
    verify.against_pytorch(compute_trace(AttentionConfig(**MHA, dropout=0.5)))
    verify.against_pytorch(compute_trace(AttentionConfig(**SDPA, dropout=0.5)))
    assert torch.equal(torch.random.get_rng_state(), state)
