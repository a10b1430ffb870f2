"""Fuzzing in `make test`: the backend with 2,000 hostile configs and the pages
with 300 hostile URLs (see `tests.support.fuzzing`; `make fuzz` runs ten times more)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer import AttentionConfig, ConfigError
from explorer.core.config import MAX_SHOWN_CHARS
from explorer.lessons.pages import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from explorer.ui.navigation import PAGES
from tests.support.apptest import charts, errors, open_link, z_values
from tests.support.fuzzing import (
    BUILT,
    CLEAN_ERROR,
    CRASH,
    NAN_UNDOCUMENTED,
    classify,
    fuzz_backend,
    fuzz_pages,
    open_with,
)

BACKEND_EXAMPLES = 2_000
URL_EXAMPLES = 300


def test_backend_fuzz_raises_only_config_errors_and_no_unexplained_nan():
    counts, problems = fuzz_backend(BACKEND_EXAMPLES)
    assert problems == []
    assert counts[CRASH] == 0 and counts[NAN_UNDOCUMENTED] == 0
    # The strategy reaches both outcomes: otherwise it would test nothing.
    assert counts[BUILT] > 100 and counts[CLEAN_ERROR] > 100
    assert sum(counts.values()) >= BACKEND_EXAMPLES


@pytest.mark.parametrize("field, value", [
    ("d_v", float("inf")), ("d_k", np.float32("inf")), ("d_in", -math.inf), ("seed", 1e309),
    ("vocab_size", 10**400), ("n_heads", np.float64("nan")), ("d_in", True),
    ("d_in", np.bool_(True)), ("dropout", 10**400), ("dropout", True), ("seed", "9" * 5000),
    ("embedding", np.array(["table"])), ("scale", "maybe"), ("causal", torch.tensor([1, 0])),
])
def test_every_bad_field_is_a_config_error(field, value):
    # Findings of the hosted-demo probe: these raised OverflowError or TypeError.
    with pytest.raises(ConfigError) as info:
        AttentionConfig(**{field: value})
    assert info.value.field == field
    assert len(str(info.value)) < 2 * MAX_SHOWN_CHARS + 120  # the value is shortened


def test_numpy_and_torch_scalars_are_accepted_as_numbers():
    config = AttentionConfig(d_in=np.int64(5), seed=torch.tensor(7), scale=np.bool_(False),
                             dropout=np.float32(0.25), d_k=np.float64(4.0))
    assert (config.d_in, config.seed, config.scale, config.d_k) == (5, 7, False, 4)
    assert type(config.d_in) is int and type(config.scale) is bool


def test_huge_integer_in_a_given_matrix_is_a_config_error():
    with pytest.raises(ConfigError, match=r"embeddings row 0 \('Life'\), dim 0 must be a finite"):
        AttentionConfig(embedding="given", embeddings=[[10**400, 1, 2]] + [[0, 0, 0]] * 5)


def test_classify_tells_a_crash_from_a_clean_error():
    # The fuzz counts are only as good as this: a non-ConfigError must count as a crash.
    assert classify({"d_in": 0}).kind == CLEAN_ERROR
    assert classify({}).kind == BUILT
    assert classify({"nonexistent_field": 1}).kind == CRASH  # TypeError from the dataclass


@pytest.mark.slow
def test_random_urls_on_every_page_get_messages_never_a_crash():
    counts, problems = fuzz_pages(URL_EXAMPLES)
    assert problems == []
    assert counts[CRASH] == 0
    assert counts[CLEAN_ERROR] > 50 and counts[BUILT] > 10  # both outcomes are reached
    assert sum(counts.values()) >= URL_EXAMPLES


@pytest.mark.parametrize("params, message", [
    ({"vocab_size": "1e309"},
     "vocab_size must be a whole number between 1 and 1000000 (got '1e309')"),
    ({"d_k": "-inf"}, "d_k must be a whole number between 1 and 1024 (got '-inf')"),
    ({"d_in": "-inf"}, "d_in must be a whole number between 1 and 1024 (got '-inf')"),
    # the probe's crashes: Streamlit's widget read int(inf)
    ({"d_k": ["1", "2", "1e309"]}, "Ignored the link's d_k='1e309': it is given 3 times"),
    ({"n_heads": "56", "d_k": "56", "d_v": "56"}, None),  # valid: a 14-row heads grid, drawn
    ({"sentence": "w " * 100_000}, "(200,000 characters): sentence must be at most 20,000 char"),
    ({"seed": "9" * 5000}, "(5,000 characters): seed must be a whole number between 0 and"),
])
def test_the_urls_that_crashed_a_page_now_get_a_message(params, message):
    for page in (PAGES[SELF_ATTENTION_PAGE][0], PAGES[MULTI_HEAD_PAGE][0]):
        at = open_link(page, params)
        assert not at.exception, at.exception
        shown = errors(at)
        assert [e for e in shown if "Traceback" in e] == []
        # Its message, once, and the page drawn from the defaults in place of the bad value.
        assert len(shown) == (0 if message is None else 1), shown
        assert message is None or message in shown[0], shown
        assert z_values(charts(at)["attn_weights"]).shape == (6, 6)
    assert at.number_input(key="n_heads").value == (56 if message is None else 2)


def test_open_with_counts_an_exception_as_a_crash(monkeypatch):
    # The URL counts are only as good as this: a page that raises must count as a crash.
    import explorer.ui.sidebar as sidebar
    monkeypatch.setattr(sidebar, "settings", lambda *a, **k: 1 / 0)
    assert open_with("pages/2_Self_attention.py", {}).kind == CRASH
