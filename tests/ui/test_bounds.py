"""Every declared bound is a bound (issue 41, item 4): each number entry has an
upper bound a link cannot pass, and the permutation experiment's shuffle count,
the seed of its generator, stays inside what ``torch.Generator.manual_seed``
takes (a link with shuffles=2**64 showed an exception box for the session)."""

from __future__ import annotations

import pytest
import torch

from explorer.core.config import ConfigError
from explorer.lessons import experiments as ex
from explorer.lessons.pages import EXPERIMENTS_PAGE
from explorer.ui.navigation import PAGES
from explorer.ui.state import ENTRIES, Number
from tests.support.apptest import errors, open_link
from tests.support.fuzzing import bound_values, open_with

EXPERIMENTS = PAGES[EXPERIMENTS_PAGE][0]
NUMBERS = [name for name, entry in ENTRIES.items() if isinstance(entry.kind, Number)]


def test_a_number_without_an_upper_bound_cannot_be_declared():
    with pytest.raises(ValueError, match="upper bound"):
        Number(low=1)
    assert Number(low=1, high=3).bounds == (1, 3)


@pytest.mark.parametrize("name", NUMBERS)
def test_every_number_entry_refuses_past_its_bounds(name):
    kind = ENTRIES[name].kind
    low, high = kind.bounds
    assert high is not None and low <= high
    assert kind.parse(name, str(low)) == low and kind.parse(name, str(high)) == high
    for raw in (str(low - 1), str(high + 1), str(2**64)):
        with pytest.raises(ConfigError, match=rf"{low:,}|{low}\b"):
            kind.parse(name, raw)


def test_the_shuffle_seed_stays_in_the_generators_range():
    assert torch.Generator().manual_seed(2**64 - 1)  # what torch takes ...
    with pytest.raises((RuntimeError, ValueError), match="Overflow"):
        torch.Generator().manual_seed(2**64)  # ... and the overflow the link reached
    order = ex.permutation(6, ex.MAX_SHUFFLES)
    assert sorted(order) == list(range(6))
    assert order == torch.randperm(6, generator=torch.Generator().manual_seed(
        ex.MAX_SHUFFLES)).tolist()
    for seed in (0, ex.MAX_SHUFFLES + 1, 2**64):
        with pytest.raises(ConfigError, match="shuffles must be between 1 and 1,000,000"):
            ex.permutation(6, seed)


def test_the_shuffle_button_starts_again_after_the_last_shuffle():
    at = open_link(EXPERIMENTS, {"experiment": "permutation",
                                      "shuffles": str(ex.MAX_SHUFFLES)})
    assert not at.exception and errors(at) == []
    at.button(key="shuffle").click().run()
    assert not at.exception
    assert at.session_state["shuffles"] == 1
    assert at.query_params.get("shuffles") in (None, ["1"], "1")


@pytest.mark.parametrize("raw", ["18446744073709551616", "1000001", "0"])
def test_a_link_past_the_shuffle_bound_gets_a_message_not_an_exception(raw):
    at = open_link(EXPERIMENTS, {"experiment": "permutation", "shuffles": raw})
    assert not at.exception, at.exception
    shown = errors(at)
    assert len(shown) == 1 and "shuffles must be between 1 and 1000000" in shown[0], shown
    assert at.session_state["shuffles"] == 1  # the page is drawn from the default


def test_the_fuzzer_tries_every_number_at_its_bounds():
    values = bound_values()
    assert set(values) == set(NUMBERS)
    assert values["shuffles"] == ["1", "1000000", "0", "1000001", str(2**64)]
    assert open_with(EXPERIMENTS, {"experiment": "permutation", "shuffles": str(2**64)}).kind \
        == "clean errors"
