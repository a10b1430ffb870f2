"""The Frontier page's registry (`explorer.modern.frontier.parts`): the parts in
the page's order, each drawing from its own generator (so no part's numbers
depend on another's), a part's `ConfigError` kept for that part alone, the
sizes' limits in one place, and the generic explanation of a cell. Generic over
`PARTS`: it holds for whichever parts are registered."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from explorer.core.config import ConfigError
from explorer.modern import frontier
from explorer.modern.frontier import FrontierConfig
from explorer.modern.frontier import parts as frontier_parts
from explorer.modern.frontier.parts import (
    PARTS,
    axis_labels,
    compute_parts,
    explain_cell,
    step_heads,
    step_matrix,
)


def x_of(n_tokens: int = 5, d_in: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(n_tokens, d_in, generator=torch.Generator().manual_seed(seed))


def test_the_parts_are_the_six_mechanisms_in_the_pages_order():
    assert list(PARTS) == ["mla", "sparse", "sinks", "ring", "gated", "deltanet"]
    assert list(frontier_parts.NAMES) == list(PARTS)
    trace = compute_parts(x_of(), FrontierConfig(), 7)
    assert trace.errors == {}
    assert [part.key for part in trace.parts.values()] == list(PARTS)
    for part in trace.parts.values():
        names = [step.name for step in part.steps]
        assert names and len(set(names)) == len(names), part.key
        assert all(step.values.dim() in (2, 3) for step in part.steps), part.key
    numbers = sum(s.values.numel() for p in trace.parts.values() for s in p.steps)
    assert numbers <= trace.nbytes <= 8 * numbers  # what the cache counts: every step's bytes


def test_each_part_draws_from_its_own_generator_seeded_with_the_seed(monkeypatch):
    x, config = x_of(), FrontierConfig()
    forward = compute_parts(x, config, 11)
    monkeypatch.setattr(frontier_parts, "PARTS", dict(reversed(PARTS.items())))
    backward = compute_parts(x, config, 11)
    for key, part in forward.parts.items():
        for step, again in zip(part.steps, backward.parts[key].steps):
            assert torch.equal(step.values, again.values), (key, step.name)
    other = compute_parts(x, config, 12)
    assert any(not torch.equal(step.values, again.values)
               for key, part in forward.parts.items()
               for step, again in zip(part.steps, other.parts[key].steps))


def test_a_config_error_of_one_part_is_kept_for_that_part_alone(monkeypatch):
    broken = list(PARTS)[2]

    def refuses(x, config, generator):
        raise ConfigError("window", "window must be at most 2 (got 3)")

    monkeypatch.setitem(frontier_parts.PARTS, broken, refuses)
    trace = compute_parts(x_of(), FrontierConfig(), 0)
    assert trace.errors == {broken: "window must be at most 2 (got 3)"}
    assert list(trace.parts) == [key for key in PARTS if key != broken]


def test_any_other_error_of_a_part_is_not_hidden(monkeypatch):
    def crashes(x, config, generator):
        raise RuntimeError("a bug")

    monkeypatch.setitem(frontier_parts.PARTS, list(PARTS)[0], crashes)
    with pytest.raises(RuntimeError, match="a bug"):
        compute_parts(x_of(), FrontierConfig(), 0)


@pytest.mark.parametrize("field", list(frontier.LIMITS))
def test_each_size_outside_its_limits_says_what_is_allowed_and_what_was_given(field):
    low, high = frontier.LIMITS[field]
    FrontierConfig(**{field: high - high % 2 if field in frontier.EVEN else high}).check(3)
    for bad in (low - 1, high + 1, 2.0, True):
        with pytest.raises(ConfigError) as info:
            dataclasses.replace(FrontierConfig(), **{field: bad}).check(3)
        assert info.value.field == field
        assert str(info.value) == (f"{field} must be a whole number between {low} and {high} "
                                   f"(got {bad!r})")


def test_rope_dim_must_be_even_and_the_sentence_not_empty():
    with pytest.raises(ConfigError, match=r"rope_dim must be even, since RoPE turns pairs of "
                                          r"dimensions \(got 3\)"):
        FrontierConfig(rope_dim=3).check(4)
    with pytest.raises(ConfigError, match=r"at least 1 token \(got 0\)"):
        FrontierConfig().check(0)
    with pytest.raises(ConfigError, match="X must be a matrix"):
        compute_parts(torch.zeros(2, 3, 4), FrontierConfig(), 0)


def test_axis_labels_are_the_tokens_on_token_axes_and_indices_elsewhere():
    tokens = ["a", "b", "c"]
    assert axis_labels("tokens", 3, tokens) == tokens
    assert axis_labels("keys", 2, tokens) == ["a", "b"]
    assert axis_labels("keys", 4, tokens) == ["0", "1", "2", "3"]
    assert axis_labels("slots", 3, tokens) == ["0", "1", "2"]


def test_every_cell_of_every_step_is_explained_with_its_value_and_labels():
    tokens = ["Life", "is", "short", "eat", "dessert"]
    trace = compute_parts(x_of(), FrontierConfig(n_heads=3), 3)
    for part in trace.parts.values():
        for step in part.steps:
            for head in range(step_heads(step)):
                matrix = step_matrix(step, head)
                assert torch.equal(matrix, step.values[head] if step.values.dim() == 3
                                   else step.values)
                row, col = matrix.shape[0] - 1, matrix.shape[1] - 1
                exp = explain_cell(part, step, row, col, head, tokens)
                assert exp.cell == f"{step.name}[{row}, {col}]"
                assert exp.value == float(matrix[row, col]) or (
                    exp.value != exp.value and matrix[row, col].isnan())
                assert exp.position.endswith(f"row {row}, column {col}")
                assert axis_labels(step.rows, matrix.shape[0], tokens)[row] in exp.note
                assert axis_labels(step.cols, matrix.shape[1], tokens)[col] in exp.note
            with pytest.raises(IndexError):
                explain_cell(part, step, *step_matrix(step, 0).shape, 0, tokens)
    assert step_heads(trace.parts[list(PARTS)[0]].steps[0]) >= 1
