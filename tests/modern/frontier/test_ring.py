"""The ring-buffer part (`explorer.modern.frontier.ring`) against independent
references: ``F.scaled_dot_product_attention`` with the window's mask,
transformers' own ``DynamicSlidingWindowLayer`` (a tiny ``MistralAttention``
decoding with a ``DynamicCache``), and the slot table written out by hand.

The broken variant, the ring read in slot (write) order, fails its check."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from explorer.core.config import ConfigError
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier import ring as ring_module
from explorer.modern.frontier.ring import EMPTY, ring, ring_decode, slot_order_weights, unrotate


def sentence(n: int = 6, d_in: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed))


def gen(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_every_check_agrees_at_the_defaults_and_the_steps_have_their_shapes():
    config = FrontierConfig()
    part = ring(sentence(), config, gen())
    assert part.key == "ring" and "Mistral" in part.source
    assert [c.ok for c in part.checks] == [True] * 4, [c.line() for c in part.checks]
    h, n, w, d = config.n_heads, 6, config.window, config.head_dim
    shapes = {s.name: tuple(s.values.shape) for s in part.steps}
    assert shapes == {"window_mask": (n, n), "slot_positions": (n, w), "read_positions": (n, w),
                      "attn_weights": (h, n, n), "context": (h, n, d)}
    assert "query's own" in part.summary


def test_the_slots_hold_position_mod_window_written_out_by_hand():
    part = ring(sentence(), FrontierConfig(window=3), gen())
    slots = part.step("slot_positions").values
    by_hand = torch.tensor([[0, EMPTY, EMPTY], [0, 1, EMPTY], [0, 1, 2],
                            [3, 1, 2], [3, 4, 2], [3, 4, 5]], dtype=torch.float32)
    assert torch.equal(slots, by_hand)
    read = part.step("read_positions").values  # unrotate: oldest first
    assert torch.equal(read[3:], torch.tensor([[1., 2, 3], [2, 3, 4], [3, 4, 5]]))
    assert unrotate(4, 3).tolist() == [2, 0, 1]


@pytest.mark.parametrize("window", [1, 2, 3, 4, 6, 9])
def test_all_caches_equal_sdpa_with_the_window_mask(window):
    x, config = sentence(7), FrontierConfig(window=window, n_heads=3, head_dim=4)
    q, k, v, _ = ring_module.rotated_heads(x, config, gen(4))
    mask = modern.sliding_window_mask(7, window)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    for weights, context in (ring_decode(q, k, v, window)[2:],
                             ring_module.transformers_style_decode(q, k, v, window),
                             ring_module.trim_concat_decode(q, k, v, window)):
        assert float((context - sdpa).abs().max()) < 1e-6
        assert torch.all(weights[:, ~mask] == 0)
        assert torch.allclose(weights.sum(-1), torch.ones(3, 7))


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_transformers_own_dynamic_cache_decodes_the_same_context(window):
    x, config = sentence(6, d_in=10, seed=3), FrontierConfig(window=window)
    q, k, v, projections = ring_module.rotated_heads(x, config, gen(2))
    theirs = ring_module.transformers_cache_context(x, projections, config)
    ours = ring_decode(q, k, v, window)[3]
    assert float((theirs - ours).abs().max()) < 1e-5
    # and it is a real check: Mistral's count of the window (one key more) differs
    earlier = modern.grouped_query_attention(
        q, k, v, modern.sliding_window_mask(6, window, modern.WINDOW_EARLIER)).context
    assert float((theirs - earlier).abs().max()) > 1e-3
    causal = modern.grouped_query_attention(q, k, v, modern.causal_allowed(6)).context
    assert float((theirs - causal).abs().max()) > 1e-3  # the cache really dropped old keys


@pytest.mark.parametrize("window", [2, 3, 4, 5])
def test_the_ring_read_in_slot_order_fails_its_check_once_it_wraps(window):
    config = FrontierConfig(window=window)
    broken = slot_order_weights(sentence(), config, gen())
    assert not broken.ok
    assert broken.failed == ["ring buffer read in slot order: attn_weights"]
    assert broken.max_abs_diff > 0.05
    good = ring(sentence(), config, gen())
    assert good.checks[0].ok
    assert float(good.facts["ring read in slot order: max |difference| of weights"]) > 0.05


def test_without_a_wrap_slot_order_is_position_order():
    assert slot_order_weights(sentence(), FrontierConfig(window=6), gen()).ok


def test_a_window_below_one_is_refused():
    with pytest.raises(ConfigError):
        ring(sentence(), FrontierConfig(window=0), gen())
