"""The gated-attention part (`explorer.modern.frontier.gated`) against
transformers' own ``Qwen3NextAttention`` on a tiny ``Qwen3NextConfig`` with the
same weights, and the gate written out by hand.

Broken variants fail the same check: the gate after o_proj, q_proj split as
all queries then all gates, RoPE on the whole head instead of its first quarter."""

from __future__ import annotations

import pytest
import torch

from explorer.core.config import ConfigError
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier import gated as gated_module
from explorer.modern.frontier.gated import (
    check_against_transformers,
    draw_weights,
    gated,
    gated_attention,
    transformers_gated,
)


def sentence(n: int = 6, d_in: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed))


def gen(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_check_agrees_at_the_defaults_and_the_steps_have_their_shapes():
    config = FrontierConfig()
    part = gated(sentence(), config, gen())
    assert part.key == "gated" and "Qwen3NextAttention" in part.source
    (check,) = part.checks
    assert check.ok and check.max_abs_diff < 1e-5, check.line()
    h, n, d = config.n_heads, 6, config.head_dim
    shapes = {s.name: tuple(s.values.shape) for s in part.steps}
    assert shapes == {"queries": (h, n, d), "gate_scores": (h, n, d), "gate": (h, n, d),
                      "attn_weights": (h, n, n), "context": (h, n, d),
                      "gated_context": (h, n, d), "output": (n, 8)}
    assert part.facts["rotated dimensions per head (partial RoPE)"] == "2 of 4"


@pytest.mark.parametrize(("n_heads", "head_dim", "d_in", "n"),
                         [(1, 2, 3, 1), (2, 4, 8, 6), (3, 8, 5, 9), (4, 16, 12, 4)])
def test_ours_equals_qwen3_next_attention(n_heads, head_dim, d_in, n):
    config = FrontierConfig(n_heads=n_heads, head_dim=head_dim)
    x = sentence(n, d_in, seed=n)
    part = gated(x, config, gen(n_heads))
    assert part.checks[0].ok, part.checks[0].line()
    weights = draw_weights(d_in, config, gen(n_heads))
    theirs, _ = transformers_gated(x, weights, config)
    assert float((part.step("output").values - theirs).abs().max()) < 1e-5


def test_the_gate_is_sigmoid_of_q_projs_second_half_per_head():
    config = FrontierConfig()
    x, weights = sentence(), draw_weights(8, config, gen())
    steps = gated_attention(x, weights, config.n_heads)
    w_q = weights["q_proj"].view(8, 2, 2 * 4)  # (d_in, head, query | gate)
    by_hand = torch.sigmoid(torch.einsum("ni,ihd->hnd", x, w_q[..., 4:]))
    assert torch.allclose(steps["gate"], by_hand, atol=1e-6)
    assert torch.allclose(steps["gated_context"], steps["context"] * by_hand, atol=1e-6)


def test_the_gate_after_o_proj_fails_its_check():
    config = FrontierConfig()
    x, weights = sentence(), draw_weights(8, config, gen())
    theirs, theirs_weights = transformers_gated(x, weights, config)
    broken = gated_attention(x, weights, config.n_heads, gate_after_o_proj=True)
    check = check_against_transformers("gate after o_proj", broken, theirs, theirs_weights)
    assert not check.ok and check.failed == ["gate after o_proj: output"]
    assert check.max_abs_diff > 0.05
    with pytest.raises(ConfigError):
        gated_attention(sentence(6, 5), draw_weights(5, config, gen()), 2, gate_after_o_proj=True)


def test_splitting_q_proj_as_all_queries_then_all_gates_fails():
    config = FrontierConfig()
    x, weights = sentence(), draw_weights(8, config, gen())
    theirs, theirs_weights = transformers_gated(x, weights, config)
    regrouped = dict(weights)  # all queries, then all gates: [q0 q1 | g0 g1]
    regrouped["q_proj"] = weights["q_proj"].view(8, 2, 2, 4).transpose(1, 2).reshape(8, 16)
    wrong = gated_attention(x, regrouped, config.n_heads)
    assert not check_against_transformers("split", wrong, theirs, theirs_weights).ok


def test_rope_on_the_whole_head_fails(monkeypatch):
    config = FrontierConfig(head_dim=8)
    x, weights = sentence(), draw_weights(8, config, gen())
    theirs, theirs_weights = transformers_gated(x, weights, config)
    monkeypatch.setattr(gated_module, "PARTIAL_ROTARY_FACTOR", 1.0)
    wrong = gated_attention(x, weights, config.n_heads)
    assert not check_against_transformers("full RoPE", wrong, theirs, theirs_weights).ok


def test_an_odd_head_dim_is_refused():
    with pytest.raises(ConfigError):
        gated(sentence(), FrontierConfig(head_dim=3), gen())
