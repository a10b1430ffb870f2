"""`explorer.core.agreement`: the one result type of every check."""

from __future__ import annotations

import math

import pytest
import torch

from explorer.core.agreement import (
    TOLERANCE,
    Agreement,
    largest_abs,
    max_abs_diff,
    of_all,
    relative_tolerance,
    relative_tolerance_text,
    tolerance_text,
)


def agreement(diff: float, tolerance: float = 1e-4, **more) -> Agreement:
    return Agreement("RoPE", "rotated Q and K", "transformers", diff, tolerance, **more)


def test_it_agrees_up_to_its_tolerance_and_never_with_a_nan():
    assert agreement(1e-4).ok and not agreement(1.0001e-4).ok
    assert not agreement(math.nan).ok and not agreement(math.inf).ok
    assert agreement(0.5, exact=True).ok  # bit for bit: equal whatever the difference says


def test_its_line_says_what_was_compared_with_what():
    assert agreement(1.2e-7).line("`") == (
        "✓ RoPE: verified against `transformers`, same rotated Q and K, max |difference| = "
        "1.2e-07 (agreement: below 1e-04, float32 rounding).")
    assert agreement(1.0).line().startswith("✗ RoPE")


def test_of_all_agrees_when_every_part_does_each_by_its_own_tolerance():
    fine = agreement(0.04, tolerance=0.05, where="weights", n_values=3)
    coarse = agreement(0.3, tolerance=0.5, where="context", n_values=4)
    whole = of_all("example", "every number", "notebook", [fine, coarse])
    assert whole.ok and whole.n_values == 7
    assert (whole.max_abs_diff, whole.where) == (0.3, "context")
    tight = agreement(0.04, tolerance=0.01, where="scores")  # the smaller difference fails
    assert not of_all("example", "every number", "notebook", [coarse, tight]).ok


def test_of_all_reports_a_nan_as_the_worst_part():
    whole = of_all("x", "y", "z", [agreement(1e-9), agreement(math.nan, where="here")])
    assert math.isnan(whole.max_abs_diff) and whole.where == "here" and not whole.ok
    with pytest.raises(ValueError):
        of_all("x", "y", "z", [])


def test_failed_and_part_name_the_parts_and_the_scale_is_the_largest():
    fine = Agreement("weights", "w", "ref", 1e-9, 1e-4, scale=3.0)
    off = Agreement("output", "o", "ref", 1.0, 1e-4, scale=700.0)
    whole = of_all("layer", "both", "model", [fine, off])
    assert whole.failed == ["output"] and whole.part("weights") is fine
    assert whole.scale == 700.0
    with pytest.raises(KeyError):
        whole.part("queries")
    assert agreement(1.0).failed == ["RoPE"] and agreement(0.0).failed == []


def test_a_tolerance_is_shown_as_it_is_used():
    assert tolerance_text(1e-4) == "1e-04"
    assert tolerance_text(1e-4 + 1e-5 * 7) == "1.7e-04"  # not rounded to "2e-04"
    assert "below 1.7e-04" in agreement(0.0, tolerance=1.7e-4).line()


def test_to_dict_holds_every_field_and_the_parts():
    whole = of_all("layer", "both", "model", [agreement(1e-9), agreement(math.inf, where="x")])
    data = whole.to_dict()
    assert (data["ok"], data["max_abs_diff"], data["where"]) == (False, math.inf, "x")
    assert [p["max_abs_diff"] for p in data["parts"]] == [1e-9, math.inf]
    assert data["parts"][0]["parts"] == [] and data["parts"][0]["ok"]


def test_max_abs_diff_is_the_largest_difference_in_float64():
    ours = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float32)
    reference = torch.tensor([[1.0, 2.5], [3.0, 3.75]], dtype=torch.float64)
    assert max_abs_diff(ours, reference) == 0.5
    assert max_abs_diff(reference, ours) == 0.5
    assert max_abs_diff(torch.tensor([1e-9], dtype=torch.float64),
                        torch.tensor([0.0], dtype=torch.float64)) == 1e-9  # no float32 rounding
    assert max_abs_diff(torch.zeros(0, 3), torch.zeros(0, 3)) == 0.0


def test_max_abs_diff_matching_non_finite_numbers_agree_and_one_sided_ones_never():
    nan, inf = math.nan, math.inf
    # NaN and NaN, −∞ and −∞ (a masked score), +∞ and +∞ in the same place: 0.
    assert max_abs_diff(torch.tensor([nan, -inf, inf, 1.0]),
                        torch.tensor([nan, -inf, inf, 1.0])) == 0.0
    # Only one side NaN, either side, or −∞ against a number or +∞: inf, never NaN.
    assert max_abs_diff(torch.tensor([1.0, nan]), torch.tensor([1.0, 2.0])) == inf
    assert max_abs_diff(torch.tensor([1.0, 2.0]), torch.tensor([1.0, nan])) == inf
    assert max_abs_diff(torch.tensor([-inf]), torch.tensor([0.0])) == inf
    assert max_abs_diff(torch.tensor([-inf]), torch.tensor([inf])) == inf
    # The finite part still counts beside a matching NaN.
    assert max_abs_diff(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.25])) == 0.25
    assert not agreement(max_abs_diff(torch.tensor([nan]), torch.tensor([0.0]))).ok


def test_max_abs_diff_of_other_shapes_is_inf_not_broadcast():
    # (2, 3) against (1, 3) would broadcast to a difference of 0: a row of
    # another length never agrees (the generated rows' check relies on it).
    assert max_abs_diff(torch.ones(2, 3), torch.ones(1, 3)) == math.inf
    assert max_abs_diff(torch.ones(3), torch.ones(4)) == math.inf
    assert max_abs_diff(torch.zeros(0), torch.zeros(1)) == math.inf


def test_a_relative_tolerance_grows_with_the_numbers_and_says_how():
    assert relative_tolerance(0.3) == relative_tolerance(1.0) == TOLERANCE
    assert relative_tolerance(80.0) == pytest.approx(8e-3)
    assert relative_tolerance_text(0.3) == "1e-04 (float32 rounding)"
    assert relative_tolerance_text(80.0).startswith("1e-04 × 80 = 8.0e-03 (float32 rounding")
    assert largest_abs(torch.tensor([-3.0, math.inf, math.nan]), torch.tensor([2.0])) == 3.0
    assert largest_abs(torch.tensor([math.nan]), torch.empty(0)) == 0.0
