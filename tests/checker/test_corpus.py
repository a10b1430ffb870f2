"""The checker on code written elsewhere: `tests/checker/corpus.py`, 41 attention modules
in the styles of nanoGPT, minGPT, ng-video-lecture, d2l, vit-pytorch, GPT-2's Conv1D,
the annotated transformer, llama, BERT, timm, Peter Bloem's tutorial, einsum and SDPA
code, lucidrains' to_q + to_kv (plain and memory-efficient chunked) and ARENA's per-head
weights, and entries only a scaled X or other sizes can tell, half right and half broken (`tests/checker/corpus_cases.py`).

Each entry's truth comes first, without the checker: its weights copied into the
book's ``MultiHeadAttention`` (Listing 3.5), both run on a batch of two different
sentences; right means the same output. Then the check, through the API
(`check_module` on the class built as the command line builds it) and the command
line (`explorer.__main__.main`, in this process; one real subprocess), gives each the
right verdict, each broken one its first step and its mistake's name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from explorer.__main__ import CANNOT_CHECK, DIFFERS, OK, main
from explorer.checker.check import check_module
from explorer.checker.learner import build_module, inputs_of
from explorer.checker.listings import CONTEXT_MARGIN
from explorer.core.tokenizer import tokenize
from explorer.lessons.presets import JOURNEY_SENTENCE
from tests.checker.corpus_cases import BY_NAME, CASES, FILE, Case
from tests.support.learner_modules import MultiHeadAttention

N_TOKENS = len(tokenize(JOURNEY_SENTENCE))
CONTEXT = N_TOKENS + CONTEXT_MARGIN


def build(case: Case, seed: int = 123, qkv_bias: bool = False) -> torch.nn.Module:
    """The case's class as the command line builds it (`build_module`), weights redrawn
    N(0, 0.5²) from a local generator so that no bias is 0 by chance, in eval() mode."""
    sizes = case.build_sizes()
    module = build_module(case.cls, d_in=sizes["d_in"], d_out=sizes["d_out"],
                          num_heads=sizes["num_heads"], context_length=CONTEXT, seed=seed,
                          qkv_bias=qkv_bias)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return module.eval()


def book_twin(case: Case, module: torch.nn.Module) -> torch.nn.Module:
    """The book's MultiHeadAttention holding ``module``'s weights (by the case's own
    map, `Case.layers`): biases zero where the module has none, out_proj the identity
    where it has none, the mask emptied where the attention is not causal."""
    sizes = case.build_sizes()
    layers = case.layers(module)
    book = MultiHeadAttention(sizes["d_in"], sizes["d_out"], CONTEXT, 0.0, sizes["num_heads"],
                              qkv_bias=True).eval()
    with torch.no_grad():
        for name, key in (("W_query", "q"), ("W_key", "k"), ("W_value", "v")):
            weight, bias = layers[key]
            getattr(book, name).weight.copy_(weight)
            getattr(book, name).bias.copy_(torch.zeros(weight.shape[0]) if bias is None else bias)
        if layers["out"] is None:
            book.out_proj.weight.copy_(torch.eye(sizes["d_out"]))
            book.out_proj.bias.zero_()
        else:
            weight, bias = layers["out"]
            book.out_proj = torch.nn.Linear(weight.shape[1], weight.shape[0])
            book.out_proj.weight.copy_(weight)
            book.out_proj.bias.copy_(torch.zeros(weight.shape[0]) if bias is None else bias)
        if not case.causal:
            book.mask.zero_()
    return book


def two_sentences(d_in: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    return torch.randn((2, N_TOKENS, d_in), generator=g)


def run(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor | None:
    with torch.no_grad():
        try:
            out = module(*inputs_of(module, x))
        except RuntimeError:
            return None
    return out[0] if isinstance(out, tuple) else out


def test_the_corpus_is_half_right_half_broken_and_names_its_styles():
    right = [c for c in CASES if c.right]
    assert len(CASES) >= 30 and abs(len(right) - (len(CASES) - len(right))) <= 2
    assert len({c.name for c in CASES}) == len(CASES) and len({c.style for c in CASES}) >= 12
    assert all(c.seen and (c.right or c.mistake or c.cannot_tell) for c in CASES)


@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no bias", "qkv_bias"])
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_each_entrys_truth_is_the_books_class_with_its_weights(name, qkv_bias):
    case = BY_NAME[name]
    module = build(case, qkv_bias=qkv_bias)
    book = book_twin(case, module)
    x = two_sentences(case.build_sizes()["d_in"])
    theirs, ours = run(module, x), run(book, x)
    assert ours is not None
    same = theirs is not None and theirs.shape == ours.shape and torch.allclose(
        theirs, ours, atol=1e-5)
    assert same == (case.right or case.cannot_tell), (theirs, ours)
    if case.cannot_tell:  # the bug is real: at the check's default sizes it differs
        default = Case(**{**case.__dict__, "sizes": {}})
        module = build(default, qkv_bias=qkv_bias)
        x = two_sentences(default.build_sizes()["d_in"])
        assert not torch.allclose(run(module, x), run(book_twin(default, module), x), atol=1e-5)
    if case.right:  # a second seed, and a longer sentence than the first: the same
        module = build(case, seed=5, qkv_bias=qkv_bias)
        x = torch.randn((2, N_TOKENS + 2, case.build_sizes()["d_in"]),
                        generator=torch.Generator().manual_seed(8))
        assert torch.allclose(run(module, x), run(book_twin(case, module), x), atol=1e-5)


def expect(case: Case, report) -> None:
    """The report's verdict, first step and mistake are the case's; for a case no
    input can tell at its sizes, "? Cannot tell at these sizes" with sizes that would."""
    if case.cannot_tell:
        assert not report.ok and report.mistake is None, report.text()
        assert report.summary().startswith("? Cannot tell at these sizes"), report.text()
        assert "sizes that would tell: d_in 3, d_out 10, num_heads 2" in report.summary()
        return
    assert not report.uncertain, report.text()
    assert report.ok == case.right, report.text()
    if case.right:
        assert report.first_difference is None and report.mistake is None
        return
    assert report.mistake == case.mistake, report.text()
    if case.step is None:
        assert report.first_difference is None and report.raised, report.text()
    else:
        assert report.first_difference.step == case.step, report.text()
        assert report.first_difference.since == case.since, report.text()


@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no bias", "qkv_bias"])
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_the_api_gives_each_entry_its_verdict_and_first_step(name, qkv_bias):
    case = BY_NAME[name]
    expect(case, check_module(build(case, qkv_bias=qkv_bias)))


def cli_args(case: Case, *more: str) -> list[str]:
    sizes = case.build_sizes()
    return ["check", f"{FILE}:{case.name}", "--d_in", str(sizes["d_in"]), "--d_out",
            str(sizes["d_out"]), "--num_heads", str(sizes["num_heads"]), *more]


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_the_command_line_gives_each_entry_the_same_verdict(name, capsys):
    """The command line builds the class itself (torch.manual_seed(123)): its
    verdict and exit status are the case's, and the API's on the same module."""
    case = BY_NAME[name]
    status = main(cli_args(case, "--json"))
    printed = capsys.readouterr()
    assert status == (OK if case.right else CANNOT_CHECK if case.cannot_tell else DIFFERS), \
        printed
    from explorer.checker.report import result_from_json

    report = result_from_json(printed.out)
    expect(case, report)
    sizes = case.build_sizes()
    built = build_module(case.cls, d_in=sizes["d_in"], d_out=sizes["d_out"],
                         num_heads=sizes["num_heads"], context_length=CONTEXT, seed=123)
    api = check_module(built, interface="cli")
    assert (api.ok, api.first_step, api.mistake, api.summary()) == (
        report.ok, report.first_step, report.mistake, report.summary())


@pytest.mark.slow
def test_the_command_line_in_its_own_process_on_a_sample(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(FILE.parents[2])}
    for name in ("NanoCausalSelfAttention", "GPT2SplitWithView", "D2LDecoderSelfAttention"):
        case = BY_NAME[name]
        done = subprocess.run([sys.executable, "-m", "explorer", *cli_args(case, "--json")],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == (OK if case.right else DIFFERS), done.stderr
        report = json.loads(done.stdout)["report"]
        assert report["ok"] == case.right and report["mistake"] == case.mistake


def corpus_counts(qkv_bias: bool = False) -> dict[str, float]:
    """The corpus through the API (each case built as `build` builds it): how many
    verdicts are right (✓ / ✗ / "? Cannot tell" as the case says), how many broken
    entries get their first step and their mistake's name, how many "cannot tell"
    answers and refusals (CheckError) come back, and the median seconds of a check."""
    import statistics
    import time

    from explorer.checker.learner import CheckError

    counts = dict.fromkeys(("cases", "right verdicts", "broken", "right first steps",
                            "named mistakes", "cannot tell", "refusals"), 0)
    times = []
    for case in CASES:
        counts["cases"] += 1
        counts["broken"] += not case.right and not case.cannot_tell
        start = time.perf_counter()
        try:
            report = check_module(build(case, qkv_bias=qkv_bias))
        except CheckError:
            counts["refusals"] += 1
            continue
        finally:
            times.append(time.perf_counter() - start)
        counts["cannot tell"] += bool(report.uncertain)
        if case.cannot_tell:
            counts["right verdicts"] += bool(report.uncertain) and not report.ok
            continue
        counts["right verdicts"] += report.ok == case.right and not report.uncertain
        if not case.right:
            counts["named mistakes"] += report.mistake == case.mistake
            counts["right first steps"] += report.first_step == case.step
    counts["median seconds"] = round(statistics.median(times), 3)
    return counts


def test_the_corpus_counts_are_all_right(capsys):
    """Issue 45's closing numbers, printed (``pytest -s``): every verdict right, every
    broken entry's first step and name right, no refusal."""
    counts = corpus_counts()
    with capsys.disabled():
        print("\ncorpus:", counts)
    assert counts["right verdicts"] == counts["cases"] and counts["refusals"] == 0
    assert counts["right first steps"] == counts["named mistakes"] == counts["broken"]
    assert counts["cannot tell"] == sum(c.cannot_tell for c in CASES)
