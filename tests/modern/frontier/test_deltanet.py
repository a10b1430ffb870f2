"""The Gated DeltaNet part (`explorer.modern.frontier.deltanet`) against
transformers' pure-torch ``torch_recurrent_gated_delta_rule`` and
``torch_chunk_gated_delta_rule`` on the same q, k, v, g, β, and the delta rule's
own promise written out by hand: with orthonormal keys, β = 1 and no decay, the
state returns each stored value exactly.

The broken variant, the delta rule without its decay, fails its check."""

from __future__ import annotations

import pytest
import torch

from explorer.core.config import ConfigError
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier.deltanet import (
    check_recurrent,
    chunked,
    deltanet,
    draw_weights,
    project,
    recurrent,
    transformers_reference,
)


def sentence(n: int = 6, d_in: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed))


def gen(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_every_check_agrees_at_the_defaults_and_the_steps_have_their_shapes():
    config = FrontierConfig()
    part = deltanet(sentence(), config, gen())
    assert part.key == "deltanet" and "eq. 10" in part.source
    assert [c.ok for c in part.checks] == [True] * 3, [c.line() for c in part.checks]
    h, n, d = config.n_heads, 6, config.head_dim
    shapes = {s.name: tuple(s.values.shape) for s in part.steps}
    assert shapes == {"keys": (h, n, d), "decay": (h, n, 1), "beta": (h, n, 1),
                      "states": (h, n, d * d), "state": (h, d, d), "outputs": (h, n, d),
                      "pseudo_values": (h, n, d), "outputs_chunked": (h, n, d)}
    decay = part.step("decay").values
    assert bool(((decay > 0) & (decay < 1)).all())


def test_the_state_does_not_grow_while_a_kv_cache_does():
    facts = deltanet(sentence(), FrontierConfig(), gen()).facts
    # 2 heads × 4 × 4 float32 = 128 bytes; a KV cache: 2 × 2 heads × 4 × 4 bytes = 64 per token
    assert facts["state bytes per layer (float32, any length)"] == "128"
    assert facts["KV cache bytes per layer, 6 tokens (the sentence)"] == "384"
    assert facts["KV cache bytes per layer, 1,000 tokens"] == "64,000"
    assert facts["KV cache bytes per layer, 100,000 tokens"] == "6,400,000"
    part = deltanet(sentence(20), FrontierConfig(), gen())
    assert part.step("states").values.shape[-1] == 16  # the same 4 × 4 at every token


@pytest.mark.parametrize(("n", "n_heads", "head_dim", "chunk"),
                         [(1, 1, 2, 1), (6, 2, 4, 2), (7, 3, 8, 3), (13, 2, 16, 4), (5, 1, 4, 8)])
def test_both_forms_equal_transformers_functions(n, n_heads, head_dim, chunk):
    config = FrontierConfig(n_heads=n_heads, head_dim=head_dim, chunk=chunk)
    x = sentence(n, d_in=10, seed=n)
    p = project(x, draw_weights(10, config, gen(chunk)), n_heads)
    theirs = transformers_reference(p, chunk)
    out, states = recurrent(p["q"], p["k"], p["v"], p["g"], p["beta"])
    out_c, _, chunk_states = chunked(p["q"], p["k"], p["v"], p["g"], p["beta"], chunk)
    assert float((out - theirs["recurrent"]).abs().max()) < 1e-5
    assert float((states[:, -1] - theirs["recurrent_state"]).abs().max()) < 1e-5
    assert float((out_c - theirs["chunked"]).abs().max()) < 1e-5
    assert float((chunk_states[:, -1] - theirs["chunked_state"]).abs().max()) < 1e-5
    assert float((out_c - out).abs().max()) < 1e-5
    part = deltanet(x, config, gen(chunk))
    assert all(c.ok for c in part.checks), [c.line() for c in part.checks]


def test_the_delta_rule_stores_and_returns_values_exactly():
    # orthonormal keys, β = 1, no decay: S = Σ k_j v_jᵀ and reading with k_j gives v_j
    keys = torch.eye(4)[None, :3]  # (1, 3, 4)
    values = torch.tensor([[[1.0, 2, 3, 4], [-1, 0, 5, 2], [0.5, 0.5, -2, 1]]])
    ones, zeros = torch.ones(1, 3), torch.zeros(1, 3)
    _, states = recurrent(keys, keys, values, zeros, ones)
    assert torch.allclose(states[0, -1].T @ keys[0].T, values[0].T)
    # writing a new value under the same key replaces the old one (β = 1): the delta rule
    again = torch.cat((keys, keys[:, :1]), dim=1)
    new = torch.cat((values, torch.tensor([[[9.0, 9, 9, 9]]])), dim=1)
    out, _ = recurrent(again, again, new, torch.zeros(1, 4), torch.ones(1, 4))
    assert torch.allclose(out[0, -1], torch.tensor([9.0, 9, 9, 9]))


def test_the_delta_rule_without_its_decay_fails_its_check():
    config = FrontierConfig()
    p = project(sentence(), draw_weights(8, config, gen()), config.n_heads)
    theirs = transformers_reference(p, config.chunk)
    out, states = recurrent(p["q"], p["k"], p["v"], p["g"], p["beta"], decay=False)
    broken = check_recurrent(out, states[:, -1], theirs, "without decay")
    assert not broken.ok and broken.max_abs_diff > 0.01
    out, states = recurrent(p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert check_recurrent(out, states[:, -1], theirs).ok


def test_a_chunk_below_one_is_refused():
    with pytest.raises(ConfigError):
        deltanet(sentence(), FrontierConfig(chunk=0), gen())
