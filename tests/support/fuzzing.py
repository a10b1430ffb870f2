"""Hostile input for the backend and for the pages' URLs, shared by
`tests/ui/test_fuzz.py` (in `make test`) and `python -m tests.support.fuzzing`
(`make fuzz`, ten times as many examples).

- Backend: every value a visitor or a notebook could hand to `AttentionConfig`:
  ints, floats, text, numpy and torch scalars, booleans, infinities, NaN, huge
  integers, None, containers and unicode digits. A config must either build
  (and then `compute_trace` must give finite numbers, but for the documented
  cases) or raise `ConfigError`; anything else is a crash.
- Pages: random URL parameter sets (known and unknown names; non-numbers, inf,
  nan, 1e309, huge and negative integers, each number entry's bound + 1 and
  2**64 (`bound_values`), repeated parameters, 200,000-character
  values, control and bidi characters) opened on every page with Streamlit's
  AppTest. A page must show a clear message or draw normally; an exception
  ("This app has encountered an error") is a crash.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import AttentionConfig, ConfigError, compute_trace
from explorer.ui.navigation import PAGES
from explorer.ui.state import ENTRIES, EXPERIMENT_LABELS

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the Real model page must not wait on a network

CLEAN_ERROR, BUILT, CRASH = "clean errors", "built", "crashes"
NAN_DOCUMENTED, NAN_UNDOCUMENTED = "NaN, documented cause", "NaN from finite input"

_WEIRD_NUMBERS = st.sampled_from([
    float("inf"), float("-inf"), float("nan"), 1e309, -0.0, 2.5, 3.0, 10**400, -(10**30),
    2**63, 2**63 - 1, -1, 0, np.float32("inf"), np.float64("nan"), np.int64(4), np.int8(-3),
    np.float32(2.0), np.bool_(True), torch.tensor(3), torch.tensor(2.5), True, False, None,
    [4], (1, 2), {"a": 1}, 1j])
_WEIRD_TEXT = st.sampled_from([
    "", " ", "abc", "1e309", "inf", "-inf", "nan", " 7 ", "0x10", "1_000", "٣", "3.0", "-5",
    "9" * 5000, "true", "yes", "maybe", "\x00", "\u202e12", "2**10"])


def _small_ints(low: int, high: int):
    return st.integers(low, high) | st.sampled_from([low, high]).map(str)


_VALID = {
    "sentence": st.one_of(st.sampled_from(["Life is short, eat dessert first", "a b a b",
                                           "<b>x</b> **y** :red[z] $a$", "x " * 512]),
                          st.text(min_size=1, max_size=40).filter(str.split)),
    "d_in": _small_ints(1, 6),
    "d_k": _small_ints(1, 6),
    "d_v": _small_ints(1, 6),
    "seed": st.integers(0, 2**63 - 1),
    "vocab_size": st.integers(1, 2000),
    "embedding": st.sampled_from(["table", "uniform", "given"]),
    "weight_init": st.sampled_from(["randn", "rand", "linear", "identity", "given"]),
    "scale": st.booleans(),
    "normalization": st.sampled_from(["softmax", "naive_softmax", "sum"]),
    "causal": st.booleans(),
    "dropout": st.sampled_from([0.0, 0.1, 0.5, 0.95]),
    "dropout_seed": st.none() | st.integers(0, 100),
    "n_heads": _small_ints(1, 3),
    "out_proj": st.none() | st.booleans(),
}
_HOSTILE = st.one_of(_WEIRD_NUMBERS, _WEIRD_TEXT, st.text(max_size=30),
                     st.sampled_from(["x " * 600, "y" * 20_001]))


def _cell():
    return st.one_of(st.floats(-3, 3, width=32), st.integers(-3, 3),
                     st.sampled_from([None, "", "x", float("nan"), float("inf"), 10**400, 1e7]))


@st.composite
def _matrix(draw, rows: int, cols: int):
    """A matrix of the right shape with good cells, sometimes a bad cell, or junk."""
    good = st.floats(-3, 3, width=32)
    matrix = draw(st.lists(st.lists(good, min_size=cols, max_size=cols),
                           min_size=rows, max_size=rows))
    if draw(st.integers(0, 3)) == 0:
        matrix[draw(st.integers(0, rows - 1))][draw(st.integers(0, cols - 1))] = draw(_cell())
    if draw(st.integers(0, 7)) == 0:
        return draw(st.sampled_from([None, [], [[1.0]], "1,2;3,4", 5, matrix[:-1]]))
    return matrix


@st.composite
def configs(draw) -> dict:
    """Keyword arguments for `AttentionConfig`: a valid config (fields sometimes
    left out) with up to two fields replaced by hostile values, and hand-entered
    matrices of the shapes the config asks for, sometimes broken."""
    kwargs = {name: draw(strategy) for name, strategy in _VALID.items()
              if draw(st.integers(0, 4)) > 0}
    for name in draw(st.lists(st.sampled_from(list(_VALID)), max_size=2, unique=True)):
        kwargs[name] = draw(_HOSTILE)
    try:  # shapes for the given matrices, when the sizes themselves are sane
        n = len(AttentionConfig(sentence=kwargs.get("sentence", "a")).tokens)
        d_in, d_k, d_v = (int(kwargs.get(k, AttentionConfig.__dataclass_fields__[k].default))
                          for k in ("d_in", "d_k", "d_v"))
        if not all(1 <= size <= 512 for size in (n, d_in, d_k, d_v)):
            raise ValueError("sizes out of range")
    except Exception:  # noqa: BLE001 - hostile sizes: any junk matrix will do
        n = d_in = d_k = d_v = 2
    if kwargs.get("embedding") == "given" or draw(st.integers(0, 9)) == 0:
        kwargs["embeddings"] = draw(_matrix(n, d_in))
    if kwargs.get("weight_init") == "given" or draw(st.integers(0, 9)) == 0:
        for name, d_out in (("W_query", d_k), ("W_key", d_k), ("W_value", d_v)):
            kwargs[name] = draw(_matrix(d_in, d_out))
    return kwargs


def _documented_nan(config: AttentionConfig, trace) -> bool:
    """NaN the docs explain, and only where its cause is really there: the naive
    softmax's exp overflowing float32 (a score above ~88.7) or underflowing to 0
    in a whole row (0/0), or the row-sum normalisation dividing by a row that
    sums to 0."""
    scores = trace["masked_scores"] if config.causal else trace["scaled_scores"]
    if config.normalization == "naive_softmax":
        exps = torch.exp(scores)
        return bool(torch.isinf(exps).any() or (exps.sum(dim=-1) == 0).any())
    if config.normalization == "sum":
        sums = torch.nan_to_num(scores, neginf=0.0).sum(dim=-1)
        return bool((sums == 0).any())
    return False


@dataclass
class Outcome:
    kind: str
    detail: str = ""


def classify(kwargs: dict) -> Outcome:
    """Build a config from ``kwargs`` and trace it; say what happened."""
    try:
        config = AttentionConfig(**kwargs)
    except ConfigError:
        return Outcome(CLEAN_ERROR)
    except Exception as error:  # noqa: BLE001 - counting anything else is the point
        return Outcome(CRASH, f"{type(error).__name__}: {str(error)[:200]} for {kwargs!r:.300}")
    try:
        trace = compute_trace(config)
    except Exception as error:  # noqa: BLE001
        return Outcome(CRASH, f"compute_trace {type(error).__name__}: {str(error)[:200]}")
    finite = all(not t.is_floating_point() or bool(torch.isfinite(t).all())
                 for name, t in trace.items() if name != "masked_scores")
    if finite:
        return Outcome(BUILT)
    return Outcome(NAN_DOCUMENTED if _documented_nan(config, trace) else NAN_UNDOCUMENTED,
                   repr(config))


def fuzz_backend(examples: int) -> tuple[Counter, list[str]]:
    """Run ``examples`` hypothesis examples; return the counts and the crashes."""
    counts: Counter = Counter()
    problems: list[str] = []

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(configs())
    def run(kwargs):
        outcome = classify(kwargs)
        counts[outcome.kind] += 1
        if outcome.kind in (CRASH, NAN_UNDOCUMENTED):
            problems.append(outcome.detail)

    run()
    return counts, problems


_URL_KEYS = list(ENTRIES)  # every declared entry, settings and view values alike
_URL_VALUES = st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "1e309", "-1e309", "9" * 400, "-5", "0", "", "abc",
                     "4", "2", "true", "false", "yes", "0.5", "1.5", "\u202e7", "\x00", "\x07",
                     "<b>x</b>", ":red[x]", "attn_scores:1,0", "attn_scores:99,0", "x:1,1",
                     "1,2;3,4", "life-is-short", "journey", "nope", "auto", "randn", "given",
                     "2**63", "٣", " 3 ", "18446744073709551616", "1000001", "-1e3",
                     "1e6", "9223372036854775808"]),
    st.text(max_size=12))
_HUGE = "w " * 100_000  # 200,000 characters


_VALID_URL_VALUES = {
    "sentence": ["the cat sat on the mat", "a b a b", "<b>x</b> **y** :red[z]"],
    "d_in": ["2", "4", "8"], "d_k": ["2", "4", "8"], "d_v": ["2", "4", "8"],
    "seed": ["0", "7", "123"], "embedding": ["table", "uniform", "given"],
    "weight_init": ["randn", "rand", "linear", "given"], "scale": ["true", "false"],
    "normalization": ["softmax", "naive_softmax", "sum"], "causal": ["true", "false"],
    "n_heads": ["1", "2"], "dropout": ["0.1", "0.5"], "dropout_seed": ["3"],
    "out_proj": ["on", "off"], "vocab_size": ["100", "2000"],
    "preset": ["journey", "life-is-short", "illustrated"], "head": ["0", "1"],
    "query": ["0", "2"], "cell": ["attn_scores:1,0", "queries:0,1"], "embeddings": ["1,2;3,4"],
    "experiment": [*EXPERIMENT_LABELS, *EXPERIMENT_LABELS.values()], "temperature": ["0.05"],
    "model": ["gpt2"], "layer": ["1"], "csv_step": ["context"], "n_keys": ["64"],
    "shuffles": ["1", "1000000"],
}


def bound_values() -> dict[str, list[str]]:
    """Per number entry, the link values at and just past its declared bounds
    (and 2**64, past what ``torch.Generator.manual_seed`` takes): a page must
    refuse the last three with a message, and never crash."""
    from explorer.ui.state import Number

    out = {}
    for name, entry in ENTRIES.items():
        if isinstance(entry.kind, Number):
            low, high = entry.kind.bounds
            out[name] = [str(low), str(high), str(low - 1), str(high + 1), str(2**64)]
    return out


_BOUND_VALUES = bound_values()


@st.composite
def url_params(draw) -> dict[str, str | list[str]]:
    """A URL's parameters: mostly known names with valid values (so that pages
    are drawn and links' view parameters used), often hostile values, sometimes
    unknown names, repeated parameters or one 200,000-character value."""
    keys = draw(st.lists(st.sampled_from(_URL_KEYS), max_size=6, unique=True))
    if draw(st.integers(0, 4)) == 0:
        keys.append(draw(st.text(min_size=1, max_size=8)))
    params: dict[str, str | list[str]] = {}
    for key in keys:
        valid = _VALID_URL_VALUES.get(key)
        value = (st.sampled_from(valid) if valid and draw(st.integers(0, 2)) > 0
                 else st.sampled_from(_BOUND_VALUES[key]) if key in _BOUND_VALUES
                 and draw(st.integers(0, 2)) == 0 else _URL_VALUES)
        if draw(st.integers(0, 7)) == 0:
            params[key] = draw(st.lists(value, min_size=2, max_size=3))
        else:
            params[key] = draw(value)
    if keys and draw(st.integers(0, 20)) == 0:
        params[keys[0]] = _HUGE
    return params


def open_with(page: str, params: dict) -> Outcome:
    """Open ``page`` (a script of `explorer.ui.navigation.PAGES`) with URL
    ``params`` in AppTest; say whether it crashed, showed a message or drew."""
    from streamlit.testing.v1 import AppTest

    from explorer.lessons.pages import HOME_PAGE

    at = AppTest.from_file(str(ROOT / PAGES[HOME_PAGE][0]), default_timeout=120)
    at.query_params.update(params)
    if page != PAGES[HOME_PAGE][0]:
        at.switch_page(page)
    try:
        at.run()
    except Exception as error:  # noqa: BLE001 - a run that cannot finish is a crash
        return Outcome(CRASH, f"{type(error).__name__}: {str(error)[:200]} on {page} "
                              f"with {params!r:.300}")
    if at.exception:
        return Outcome(CRASH, f"{at.exception[0].message[:200]} on {page} with {params!r:.300}")
    shown = " ".join(e.value for e in at.error)
    if "Traceback" in shown:
        return Outcome(CRASH, f"a traceback in a message on {page} with {params!r:.300}")
    return Outcome(CLEAN_ERROR if at.error else BUILT)


def fuzz_pages(examples: int) -> tuple[Counter, list[str]]:
    """Open ``examples`` random URL parameter sets, spread over every page."""
    counts: Counter = Counter()
    problems: list[str] = []
    pages = [script for script, _ in PAGES.values()]

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(pages), url_params())
    def run(page, params):
        outcome = open_with(page, params)
        counts[outcome.kind] += 1
        if outcome.kind == CRASH:
            problems.append(outcome.detail)

    run()
    return counts, problems


def print_counts(title: str, counts: Counter) -> None:
    inputs = sum(counts.values())
    print(f"\n{title}")
    print(f"  {'inputs':24s} {inputs:8d}")
    for kind in (BUILT, CLEAN_ERROR, CRASH, NAN_UNDOCUMENTED, NAN_DOCUMENTED):
        print(f"  {kind:24s} {counts.get(kind, 0):8d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=20_000, help="backend configs")
    parser.add_argument("--urls", type=int, default=3_000, help="URL parameter sets")
    args = parser.parse_args()
    counts, problems = fuzz_backend(args.examples)
    print_counts(f"Backend: AttentionConfig + compute_trace ({args.examples:,} examples asked)",
                 counts)
    url_problems: list[str] = []
    if args.urls:  # --urls 0: the backend alone
        url_counts, url_problems = fuzz_pages(args.urls)
        print_counts(f"Pages: random URL parameters in AppTest ({args.urls:,} sets asked)",
                     url_counts)
    for problem in (problems + url_problems)[:20]:
        print("  !", problem)
    raise SystemExit(1 if problems or url_problems else 0)


if __name__ == "__main__":
    main()
