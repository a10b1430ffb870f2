"""Exports: the standalone PyTorch script, one matrix as CSV, the HTML report.

The scripts are run for real (one subprocess each, ``python -I``, in a temporary
directory, two at a time) and their ``--save`` output is compared with
`compute_trace`: the random draws and the given matrices exactly, the computed
steps to 1e-6 (absolute or relative).
"""

from __future__ import annotations

import ast
import base64
import csv
import io
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import AttentionConfig, compute_trace
from explorer.core import verify
from explorer.core.steps import STEPS, visible_steps
from explorer.lessons.presets import PRESETS
from explorer.render import figures
from explorer.render.export import HEADING, html_report, matrix_csv, pytorch_script
from explorer.render.figures import chart_filename
from explorer.render.payload import CHART_JS, decode
from explorer.ui.matrices import parse_csv_matrix

TIMEOUT_S = 180
PLOTLY_JS_SIGNATURE = "* plotly.js v"  # the licence header at the top of plotly.min.js
ALLOWED_IMPORTS = {"torch", "argparse", "sys", "unicodedata"}  # the tokenizer: Unicode punctuation
DRAWN_OR_GIVEN = {"token_ids", "embeddings", "W_query", "W_key", "W_value", "causal_mask",
                  "dropout_mask", "W_out", "b_out"}
"""Steps that are drawn from the seed or typed in: the script must give them bit for bit."""

HOSTILE_SENTENCE = ("it's \"\"\" a \\ back\\slash'); import os; os.system('touch pwned')#\n"
                    "new\tline \r {args} \u2028 \x85 \x0c end''' '\"")
HOSTILE_LINK = ("http://localhost:8501/?x=1\nimport os; os.system('touch pwned')\n"
                "# -*- coding: utf-7 -*-\r\u2028+AAo-import os")

_SMALL = {"vocab_size": 100}
SCRIPT_CONFIGS = {
    **{f"preset-{slug}": preset.config for slug, preset in PRESETS.items()},
    # out_proj is drawn from the seed before the dropout seed is set, as in the book
    "dropout-out-proj": AttentionConfig(dropout=0.3, dropout_seed=7, out_proj=True, **_SMALL),
    "multi-head-causal-dropout": AttentionConfig(
        sentence="the cat sat on the mat", d_in=4, d_k=4, d_v=6, n_heads=2, causal=True,
        dropout=0.2, **_SMALL),
    "three-heads-no-out-proj-sum": AttentionConfig(
        d_in=5, d_k=6, d_v=3, n_heads=3, out_proj=False, normalization="sum", **_SMALL),
    "uniform-rand-scale-off": AttentionConfig(embedding="uniform", weight_init="rand",
                                              scale=False, seed=1),
    "linear-multi-head": AttentionConfig(weight_init="linear", d_in=6, d_k=8, d_v=4, n_heads=4,
                                         seed=3, **_SMALL),
    "identity-table-naive": AttentionConfig(weight_init="identity", d_in=4, d_k=4, d_v=4,
                                            normalization="naive_softmax", **_SMALL),
    "given-all-two-heads": AttentionConfig(
        sentence="a b", d_in=2, d_k=2, d_v=2, n_heads=2, embedding="given",
        embeddings=((0.1, -2.5), (1e-7, 3.0)), weight_init="given",
        W_query=((1, 2), (3, 4)), W_key=((0.5, 0), (0, 0.25)), W_value=((-1, 1), (1, -1))),
    "given-x-randn-causal-sum": AttentionConfig(
        sentence="one two three", d_in=2, d_k=2, d_v=3, embedding="given",
        embeddings=((1, 2), (3, 4), (5, 6)), causal=True, normalization="sum", scale=False),
    "naive-overflow-nan": AttentionConfig(
        sentence="big numbers", d_in=2, d_k=2, d_v=2, weight_init="identity", scale=False,
        normalization="naive_softmax", embedding="given", embeddings=((10, 0), (0, 10))),
    "hostile-sentence": AttentionConfig(sentence=HOSTILE_SENTENCE, **_SMALL),
}
"""Every preset, and configurations covering each option of every setting."""


# ---------------------------------------------------------------------------
# Running the scripts (once per config, two at a time)
# ---------------------------------------------------------------------------
class ScriptRun:
    """One run of a generated script: its source, output and saved steps."""

    def __init__(self, config: AttentionConfig, folder: Path, link: str | None = None):
        self.config, self.folder = config, folder
        self.source = pytorch_script(config, link=link)
        script = folder / "attention.py"
        script.write_text(self.source, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-I", "-X", "utf8", str(script), "--save", "steps.pt"],
            check=False, cwd=folder, capture_output=True, text=True, encoding="utf-8",
            timeout=TIMEOUT_S)
        self.returncode, self.stdout, self.stderr = done.returncode, done.stdout, done.stderr
        saved = folder / "steps.pt"
        self.steps = torch.load(saved, weights_only=True) if saved.exists() else None

    def printed_tokens(self) -> list[str]:
        line = next(line for line in self.stdout.splitlines() if line.startswith("tokens: "))
        return ast.literal_eval(line.removeprefix("tokens: "))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, ScriptRun]:
    """Every config's script, run once; the hostile one with a hostile link too."""
    # The folders are made here, one thread: tmp_path_factory is not thread-safe (two
    # threads making the worker's first temporary folder at once raised FileExistsError
    # in CI).
    folders = {case: tmp_path_factory.mktemp(case) for case in SCRIPT_CONFIGS}

    def run(case: str) -> ScriptRun:
        link = HOSTILE_LINK if case == "hostile-sentence" else None
        return ScriptRun(SCRIPT_CONFIGS[case], folders[case], link)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(SCRIPT_CONFIGS, pool.map(run, SCRIPT_CONFIGS)))


@pytest.mark.parametrize("case", SCRIPT_CONFIGS)
def test_script_saves_the_trace_steps(runs, case):
    run = runs[case]
    assert run.returncode == 0, run.stderr
    trace = compute_trace(run.config)
    assert list(run.steps) == list(trace)
    for name, expected in trace.items():
        got = run.steps[name]
        assert got.shape == expected.shape, name
        assert got.dtype == expected.dtype, name
        if name in DRAWN_OR_GIVEN:
            assert torch.equal(got, expected), name
        else:
            torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6, equal_nan=True,
                                       msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("case", SCRIPT_CONFIGS)
def test_script_prints_every_step_under_a_heading(runs, case):
    run = runs[case]
    trace = compute_trace(run.config)
    for name, tensor in trace.items():
        assert HEADING.format(name=name, shape=tuple(tensor.shape)) in run.stdout
    assert run.printed_tokens() == trace.tokens


def test_overflowing_naive_softmax_really_gives_nan(runs):
    """The NaN case exercises equal_nan, rather than passing by luck."""
    assert torch.isnan(runs["naive-overflow-nan"].steps["attn_weights"]).any()


@pytest.mark.parametrize("changes, names", [
    ({}, ["Embedding an input sentence"]),
    ({"embedding": "uniform", "weight_init": "identity", "d_k": 3, "d_v": 3,
      "normalization": "naive_softmax"}, ["Your journey starts with one step",
                                          "A simple self-attention", "Self-Attention"]),
    ({"normalization": "sum"}, ["section 3.3.1", "Your journey starts with one step"]),
])
def test_script_comments_name_what_the_learner_knows(changes, names):
    # "as seed 002 does" named a file of ours; a learner knows the notebook by its title.
    source = pytorch_script(AttentionConfig(**changes))
    comments = " ".join(line.lstrip("# ") for line in source.splitlines()
                        if line.lstrip().startswith("#"))
    assert not re.search(r"seeds? 0\d\d", source)
    for name in names:
        assert name in comments, name


@pytest.mark.parametrize("case", SCRIPT_CONFIGS)
def test_script_imports_only_torch_and_the_standard_library(case):
    tree = ast.parse(pytorch_script(SCRIPT_CONFIGS[case], link=HOSTILE_LINK))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"eval", "exec", "compile", "__import__", "open"}
    assert imported and imported <= ALLOWED_IMPORTS


def _ast_without_sentence(source: str) -> str:
    """The script's syntax tree with the sentence literal blanked (comments are not in it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] \
                == ["sentence"]:
            node.value = ast.Constant("")
    return ast.dump(tree)


def test_hostile_sentence_and_link_stay_data(runs):
    run = runs["hostile-sentence"]
    assert run.returncode == 0, run.stderr
    assert run.printed_tokens() == run.config.tokens
    assert not (run.folder / "pwned").exists()
    # The sentence is one string constant and the link only a comment: the code is
    # the same as for a harmless sentence with as many tokens.
    n_tokens = len(run.config.tokens)
    harmless = run.config.replace(sentence=" ".join(f"w{i}" for i in range(n_tokens)))
    assert _ast_without_sentence(run.source) == _ast_without_sentence(pytorch_script(harmless))
    sentences = [node.value.value for node in ast.walk(ast.parse(run.source))
                 if isinstance(node, ast.Assign)
                 and getattr(node.targets[0], "id", "") == "sentence"]
    assert sentences == [HOSTILE_SENTENCE]
    # Python reads an encoding declaration from the first two lines: they are fixed.
    assert run.source.splitlines()[:2] == pytorch_script(AttentionConfig()).splitlines()[:2]


def test_script_shows_only_the_code_its_config_needs():
    plain = pytorch_script(AttentionConfig())
    for absent in ("Dropout", "triu", "out_proj =", "transpose(0, 1)", "torch.tensor([\n",
                   "torch.exp", "view("):
        assert absent not in plain
    multi = pytorch_script(SCRIPT_CONFIGS["multi-head-causal-dropout"])
    for present in ("torch.nn.Dropout(0.2)", "torch.triu", "out_proj = torch.nn.Linear(d_v, d_v)",
                    ".view(num_tokens, num_heads, head_dim).transpose(0, 1)", "head_dim_v"):
        assert present in multi
    given_all = pytorch_script(SCRIPT_CONFIGS["given-all-two-heads"])
    assert "torch.manual_seed(123)" in given_all  # out_proj is still drawn from the seed
    assert "torch.manual_seed" not in pytorch_script(PRESETS["illustrated"].config)


# ---------------------------------------------------------------------------
# matrix_csv
# ---------------------------------------------------------------------------
def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_of_x_has_token_rows_and_dim_columns():
    trace = compute_trace(AttentionConfig())
    rows = _rows(matrix_csv(trace, "embeddings"))
    assert rows[0] == ["token", "embedding dim 0", "embedding dim 1", "embedding dim 2"]
    assert [row[0] for row in rows[1:]] == trace.tokens
    # 002_8c91a21803773e04.txt, cell 9: embedded_sentence[0] = [0.3374, -0.1778, -0.3035]
    assert [round(float(v), 4) for v in rows[1][1:]] == [0.3374, -0.1778, -0.3035]


def test_csv_numbers_are_the_trace_float32_exactly():
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4, dropout=0.1))
    for name in visible_steps(trace):
        for head in range(trace[name].shape[0] if trace[name].dim() == 3 else 1):
            rows = _rows(matrix_csv(trace, name, head=head))
            numbers = torch.tensor([[float(v) for v in row[1:]] for row in rows[1:]],
                                   dtype=torch.float32)
            expected = trace[name][head] if trace[name].dim() == 3 else trace[name]
            expected = expected.reshape(numbers.shape).to(torch.float32)
            assert torch.equal(numbers.isnan(), expected.isnan()), name
            assert torch.equal(numbers.nan_to_num(), expected.nan_to_num()), name


def test_csv_of_scores_names_queries_and_keys_and_spells_out_minus_infinity():
    trace = compute_trace(AttentionConfig(sentence="the cat saw the dog", causal=True,
                                          vocab_size=10))
    rows = _rows(matrix_csv(trace, "masked_scores"))
    assert rows[0] == ["query", "key: the", "key: cat", "key: saw", "key: the (3)", "key: dog"]
    assert [row[0] for row in rows[1:]] == ["the", "cat", "saw", "the (3)", "dog"]
    assert rows[1][2:] == ["-inf"] * 4


def test_csv_writes_nan_as_nan():
    trace = compute_trace(SCRIPT_CONFIGS["naive-overflow-nan"])
    assert "nan" in [cell for row in _rows(matrix_csv(trace, "attn_weights")) for cell in row]


def test_csv_of_weights_ids_bias_and_one_head():
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=4, vocab_size=10))
    rows = _rows(matrix_csv(trace, "W_query"))
    assert rows[0] == ["input dim", "query dim 0", "query dim 1", "query dim 2", "query dim 3"]
    assert [row[0] for row in rows[1:]] == ["input dim 0", "input dim 1", "input dim 2"]
    assert _rows(matrix_csv(trace, "token_ids")) == [
        ["token", "id"], ["Life", "0"], ["is", "4"], ["short", "5"], ["eat", "2"],
        ["dessert", "1"], ["first", "3"]]
    bias = _rows(matrix_csv(trace, "b_out"))
    assert len(bias) == 2 and bias[1][0] == "b_out" and len(bias[1]) == 5
    head_1 = _rows(matrix_csv(trace, "attn_weights", head=1))
    numbers = torch.tensor([float(v) for v in head_1[2][1:]], dtype=torch.float32)
    assert torch.equal(numbers, trace["attn_weights"][1, 1])
    with pytest.raises(ValueError, match="head must be between 0 and 1"):
        matrix_csv(trace, "attn_weights", head=2)


def test_csv_labels_cannot_run_as_spreadsheet_formulas():
    # @ and - are punctuation, stripped at a word's ends by the tokenizer (issue 40); = and +
    # are symbols, kept, and so quoted
    trace = compute_trace(AttentionConfig(sentence='=1+2 @SUM -x "a,b" plain +y', vocab_size=10))
    rows = _rows(matrix_csv(trace, "embeddings"))
    assert [row[0] for row in rows[1:]] == ["'=1+2", "SUM", "x", "a,b", "plain", "'+y"]


def _round_trip(trace, name: str) -> torch.Tensor:
    data = matrix_csv(trace, name).encode("utf-8")
    return torch.tensor(parse_csv_matrix(data, tuple(trace[name].shape), name),
                        dtype=torch.float32)


ROUND_TRIP_CONFIGS = [AttentionConfig(), SCRIPT_CONFIGS["linear-multi-head"],
                      SCRIPT_CONFIGS["uniform-rand-scale-off"],
                      AttentionConfig(sentence='a"b c,d e\'f -g the the', vocab_size=10),
                      *(p.config for p in PRESETS.values())]


@pytest.mark.parametrize("config", ROUND_TRIP_CONFIGS, ids=lambda c: c.sentence[:20])
@pytest.mark.parametrize("name", ["embeddings", "W_query", "W_key", "W_value"])
def test_csv_reads_back_into_the_importer_exactly(config, name):
    trace = compute_trace(config)
    assert torch.equal(_round_trip(trace, name), trace[name])


FLOAT32 = st.floats(min_value=-1e6, max_value=1e6, width=32, allow_nan=False,
                    allow_infinity=False)


@settings(max_examples=25, deadline=None)
@given(n_tokens=st.integers(1, 4), d_in=st.integers(1, 3), d_k=st.integers(1, 3),
       data=st.data())
def test_any_given_matrix_survives_the_csv_round_trip(n_tokens, d_in, d_k, data):
    def matrix(rows, cols):
        return data.draw(st.lists(st.lists(FLOAT32, min_size=cols, max_size=cols),
                                  min_size=rows, max_size=rows))

    config = AttentionConfig(
        sentence=" ".join(f"t{i}" for i in range(n_tokens)), d_in=d_in, d_k=d_k, d_v=d_k,
        embedding="given", embeddings=matrix(n_tokens, d_in), weight_init="given",
        W_query=matrix(d_in, d_k), W_key=matrix(d_in, d_k), W_value=matrix(d_in, d_k))
    trace = compute_trace(config)
    for name in ("embeddings", "W_query", "W_key", "W_value"):
        assert torch.equal(_round_trip(trace, name), trace[name])


@pytest.mark.parametrize("sentence", ["1 2 3", "NaN is not a number", "1e3 apples"])
def test_csv_round_trip_with_number_like_tokens(sentence):
    """A label column of tokens that parse as numbers is still a label column."""
    trace = compute_trace(AttentionConfig(sentence=sentence, vocab_size=10))
    assert torch.equal(_round_trip(trace, "embeddings"), trace["embeddings"])


# ---------------------------------------------------------------------------
# html_report
# ---------------------------------------------------------------------------
class Page(HTMLParser):
    """What a browser would see: tags with attributes, script bodies, visible text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def all(self, tag: str) -> list[dict]:
        return [attrs for name, attrs in self.tags if name == tag]

    def charts(self) -> dict[str, tuple[dict, list]]:
        """Each chart div's id -> its payload decoded (`explorer.render.payload.decode`)."""
        return {a["id"]: decode(base64.b64decode(a["data-chart"])) for a in self.all("div")
                if "chart" in a.get("class", "").split()}

    def chart_ids(self) -> list[str]:
        return list(self.charts())


MULTI_HEAD = AttentionConfig(n_heads=2, d_k=4, d_v=4, causal=True, vocab_size=10)
PER_HEAD = ["queries", "keys", "values", "attn_scores", "scaled_scores", "masked_scores",
            "attn_weights"]
MULTI_HEAD_CHARTS = [
    "chart-embeddings", "chart-W_query", "chart-W_key", "chart-W_value", "chart-causal_mask",
    "chart-queries-split", "chart-keys-split", "chart-values-split",
    *(f"chart-{name}-head-0" for name in PER_HEAD), "chart-second-route-head-0",
    *(f"chart-{name}-head-1" for name in PER_HEAD), "chart-second-route-head-1",
    "chart-heads-grid", "chart-context", "chart-W_out", "chart-b_out", "chart-output"]
"""The multi-head page's charts, grouped as the report draws them: the steps before
the heads and the mask (shared by every head), how Q, K and V are split, each
head's steps with its weights by the second causal route, every head at a
glance, then the rest."""


@pytest.fixture(scope="module")
def default_report() -> tuple[object, str]:
    trace = compute_trace(AttentionConfig())
    return trace, html_report(trace, link="http://localhost:8501/Self_attention?seed=123")


def test_report_inlines_plotly_and_chart_js_once_and_draws_every_shown_step(default_report):
    trace, text = default_report
    page = Page(text)
    assert text.count(PLOTLY_JS_SIGNATURE) == 1  # one inlined copy of plotly.js
    assert text.count(CHART_JS.read_text()) == 1  # and of the app's chart.js, unchanged
    assert [a.get("type") for a in page.all("script")] == [None, "module"]
    assert page.chart_ids() == [f"chart-{name}" for name in visible_steps(trace)]
    assert "scaled_scores" in visible_steps(trace) and "token_ids" not in visible_steps(trace)
    assert all("src" not in attrs for attrs in page.all("script"))  # offline: nothing fetched
    assert not [a for a in page.all("link") if a.get("rel") == "stylesheet"]


def test_report_charts_are_the_page_charts(default_report):
    """Each payload is what the page sends for that step: the same figure (title,
    colours, sizes) and the trace's numbers as float32, one colour bar per scale."""
    trace, text = default_report
    charts = Page(text).charts()
    for name in visible_steps(trace):
        header, (matrix,) = charts[f"chart-{name}"]
        title = header["figure"]["layout"]["title"]["text"]
        assert STEPS[name].label in title, (name, title)
        assert f"({'×'.join(map(str, trace[name].shape))})" in title, (name, title)
        assert header["filename"] == chart_filename(trace, name)
        expected = trace[name].to(torch.float32).reshape(matrix.shape).numpy()
        assert matrix.shape[0] == (trace[name].shape[0] if trace[name].dim() > 1 else 1)
        np.testing.assert_array_equal(matrix, expected)
    # W_query, W_key and W_value share a row and a scale: only W_value shows the bar.
    bars = {name: charts[f"chart-{name}"][0]["figure"]["data"][0]["showscale"]
            for name in ("W_query", "W_key", "W_value", "attn_weights")}
    assert bars == {"W_query": False, "W_key": False, "W_value": True, "attn_weights": True}
    assert charts["chart-W_key"][0]["columns"] == 3 and charts["chart-context"][0]["columns"] == 1


def test_report_lists_settings_tokens_ids_and_the_link(default_report):
    trace, text = default_report
    page = Page(text)
    visible = " ".join(page.text)
    for token in trace.tokens:
        assert token in visible
    assert "d_in, d_k, d_v" in visible and "3, 2, 4" in visible
    assert [a["href"] for a in page.all("a")] == ["http://localhost:8501/Self_attention?seed=123"]
    cells = [t.strip() for t in page.text if t.strip()]
    assert cells[cells.index("position") + 3:][:3] == ["0", "Life", "0"]


def test_report_of_several_heads_draws_each_head_or_those_asked():
    trace = compute_trace(MULTI_HEAD)
    page = Page(html_report(trace))
    assert page.chart_ids() == MULTI_HEAD_CHARTS
    head_1 = page.charts()["chart-attn_weights-head-1"]
    np.testing.assert_array_equal(head_1[1][0], trace["attn_weights"][1].numpy())
    assert head_1[0]["figure"]["layout"]["title"]["text"].endswith(", head 1")
    only = html_report(trace, steps=["attn_weights", "context"], heads=[1])
    assert Page(only).chart_ids() == ["chart-attn_weights-head-1", "chart-context"]
    assert only.count(PLOTLY_JS_SIGNATURE) == 1
    with pytest.raises(KeyError, match="dropout_mask"):
        html_report(trace, steps=["dropout_mask"])
    with pytest.raises(ValueError, match="head must be between 0 and 1"):
        html_report(trace, heads=[2])


def test_the_multi_head_report_draws_the_pages_split_route_and_grid():
    # The page shows them; the report left them out.
    trace = compute_trace(MULTI_HEAD)
    page = Page(html_report(trace))
    charts = page.charts()
    split, (matrix,) = charts["chart-keys-split"]
    assert split["figure"] == figures.head_split_chart(trace, "keys").figure
    np.testing.assert_array_equal(matrix, figures.combine_heads_np(trace["keys"]))
    route = verify.second_causal_route(trace)
    header, (weights,) = charts["chart-second-route-head-1"]
    np.testing.assert_array_equal(weights, route.weights[1].numpy())
    assert header["figure"]["layout"]["title"]["text"].endswith(", head 1")
    grid, matrices = charts["chart-heads-grid"]
    assert len(matrices) == 2 and len(grid["figure"]["data"]) == 2
    text = " ".join(page.text)
    assert figures.head_split_caption(trace) in text and route.explanation() in text
    # One head, causal: the route still follows the weights; nothing to split.
    single = Page(html_report(compute_trace(AttentionConfig(causal=True)))).chart_ids()
    assert single[single.index("chart-attn_weights") + 1] == "chart-second-route-head-0"
    assert not [c for c in single if "split" in c or "grid" in c]
    plain = Page(html_report(compute_trace(AttentionConfig(n_heads=2, d_k=4)))).chart_ids()
    assert "chart-heads-grid" in plain and not [c for c in plain if "route" in c]


def test_the_reports_links_and_long_values_wrap_instead_of_widening_the_page():
    # A 200-character link does not break by itself: the page grew to 1,772 px.
    text = html_report(compute_trace(AttentionConfig()), link="http://x/?" + "a" * 200)
    assert "a, code, td { overflow-wrap: anywhere; }" in text


def test_report_escapes_the_visitor_text():
    sentence = "<script>alert(1)</script> <img src=x onerror=alert(1)> \"quoted\" & 'so'"
    link = 'https://example.org/?s=<b>x</b>&d_in=3" onmouseover="alert(1)'
    trace = compute_trace(AttentionConfig(sentence=sentence, vocab_size=10))
    page = Page(html_report(trace, link=link))
    assert not page.all("img") and not page.all("b")
    assert [a for a in page.all("a")] == [{"href": link}]
    assert sentence in page.text  # shown literally, as one piece of text
    for script in page.scripts:
        assert "<script" not in script.lower() and "<img" not in script.lower()
    assert len(page.scripts) == 2  # plotly.js; chart.js with its bootstrap
    # In the charts the tokens are labels that Plotly shows as text.
    header, _ = page.charts()["chart-embeddings"]
    assert header["figure"]["data"][0]["y"][0] == "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_report_with_lone_surrogates_is_written_as_utf8_with_them_escaped(tmp_path):
    # A visitor's text may hold lone surrogates, which no UTF-8 file can: the report
    # writes each as its escape, as the script's comments do (`literal.comment`).
    sentence = "\ud800 x \udfff"
    trace = compute_trace(AttentionConfig(sentence=sentence))
    assert trace.tokens == ["\ud800", "x", "\udfff"]
    text = html_report(trace, link="https://example.org/?sentence=\udbff")
    (tmp_path / "report.html").write_text(text, encoding="utf-8")  # no UnicodeEncodeError
    page = Page((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert "\\ud800 x \\udfff" in page.text  # the sentence, shown with its escapes
    assert [a["href"] for a in page.all("a")] == ["https://example.org/?sentence=\\udbff"]
    assert pytorch_script(trace.config).count("\\ud800 x \\udfff") >= 1  # the same spelling
    header, _ = page.charts()["chart-embeddings"]  # the charts keep the tokens themselves
    assert header["figure"]["data"][0]["y"][0] == "\ud800"


@pytest.mark.parametrize("link", ["javascript:alert(1)", " JavaScript:alert(1)",
                                  "data:text/html,<script>alert(1)</script>", "http://[::1"])
def test_report_shows_a_non_http_link_as_text_only(link):
    trace = compute_trace(AttentionConfig())
    page = Page(html_report(trace, link=link, steps=["attn_weights"]))
    assert not page.all("a")
    assert link in page.text


def test_a_header_of_numbers_is_recognised_by_the_row_count():
    # pandas' DataFrame.to_csv of a frame with integer column names writes "0,1,2".
    data = b",0,1,2\nLife,1,2,3\nis,4,5,6\n"
    assert parse_csv_matrix(data, (2, 3), "embeddings") == [[1, 2, 3], [4, 5, 6]]
