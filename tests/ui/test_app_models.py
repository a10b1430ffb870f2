"""AppTest: the "Real model" page, with tiny random GPT-2 and BERT models saved to
folders (`tests.support.tiny_models`) and opened through the page's local-folder option.

Every expected number comes from the backend (`explorer.models`), which
`tests/models/test_models.py` checks against the models' own numbers. The Hub is never
tried (``HF_HUB_OFFLINE=1``), so "gpt2" has no weights here: that is the
offline message's test. Clicks on charts are simulated by calling the handler
the page gave the chart (`clicked`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import streamlit
import torch
from streamlit.testing.v1 import AppTest

from explorer import AttentionConfig, compute_trace
from explorer.core import literal
from explorer.core.literal import format_value
from explorer.core.steps import STEPS
from explorer.core.tokenizer import token_labels
from explorer.lessons.explain import explain_cell
from explorer.lessons.pages import MODEL_PAGE, SELF_ATTENTION_PAGE
from explorer.models import (
    compute_model_trace,
    download_command,
    folder_message,
    load_model,
    model_sizes,
    packaged,
)
from explorer.models.catalogue import MODEL_CHOICES
from explorer.render import figures
from explorer.server import budget
from explorer.ui import cache, component, real_model
from explorer.ui.navigation import PAGES
from explorer.ui.real_model import DEFAULT_MODEL
from tests.support.apptest import (
    HOSTILE,
    all_charts,
    chart_headers,
    charts,
    errors,
    open_link,
    open_page,
    page_link,
    pick,
    picked,
    z_values,
)
from tests.support.server import ROOT
from tests.support.tiny_models import save_tiny_bert, save_tiny_gpt2, shard_weights

PAGE = PAGES[MODEL_PAGE][0]
SENTENCE = "the cat sat on the mat"
HEAD_DIM = 16  # tiny models: d_model 32, 2 heads


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test waits on the network; each starts with empty model caches. The
    folder option is on, as `make run` turns it on (``EXPLORER_MODEL_FOLDERS=1``,
    read once at import: `tests.server.test_budget` checks that it is off without it).
    The all-MiniLM-L6-v2 package counts as missing, as on a machine without it (the page
    then opens as before; tests/ui/test_app_packaged.py opens it)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(budget, "MODEL_FOLDERS", True)
    monkeypatch.setattr(packaged, "zip_path", lambda: None)  # as where it is not installed
    cache.clear()


@pytest.fixture
def handlers(monkeypatch) -> dict:
    """The click handler the page gives each chart, by chart key."""
    seen: dict = {}
    show = component.show

    def recording(c, key, on_click=None, **more):
        seen[key] = on_click
        show(c, key, on_click, **more)

    monkeypatch.setattr(component, "show", recording)
    return seen


def clicked(handler, cell: dict) -> dict:
    """Run a chart's click handler as Streamlit would, on an empty session:
    returns the session state it set (a callback only sets state; the next
    run writes the link)."""
    state = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(streamlit, "session_state", state)
        handler(cell)
    return state


def open_direct(query: dict | None = None) -> AppTest:
    """Open the page by a link (`tests.support.apptest.open_link`)."""
    return open_link(PAGE, query)


def open_model(folder, query: dict | None = None, sentence: str | None = SENTENCE,
               seen: list | None = None):
    """Open the page (optionally with URL parameters), choose the folder in the
    sidebar and type ``sentence``; ``seen`` collects the error messages of
    every run on the way (a link's problems show until a setting changes)."""
    at = open_direct(query)
    steps = [lambda: at.selectbox(key="model").set_value(real_model.FOLDER),
             lambda: at.text_input(key="folder").set_value(str(folder))]
    if sentence is not None:
        steps.append(lambda: at.text_input(key="sentence").set_value(sentence))
    for step in steps:
        if seen is not None:
            seen += errors(at)
        step().run()
        assert not at.exception
    if seen is not None:
        seen += errors(at)
    return at


def shown_messages(at) -> str:
    return " ".join(errors(at) + [m.value.replace("\\", "") for m in at.success])


def test_gpt2_charts_equal_the_backend_and_the_check_says_so(gpt2_dir):
    at = open_model(gpt2_dir)
    assert errors(at) == []
    trace = compute_model_trace(load_model(gpt2_dir), SENTENCE, layer=0)
    shown = charts(at)
    assert list(shown) == [
        "embeddings", "W_query-head", "W_key-head", "W_value-head", "b_query-head",
        "b_key-head", "b_value-head", "queries", "keys", "values", "attn_scores",
        "scaled_scores", "causal_mask", "masked_scores", "attn_weights", "context-head",
        "context", "W_out", "b_out", "output"]
    head0 = slice(0, HEAD_DIM)
    expected = {
        "embeddings": trace["embeddings"], "W_query-head": trace["W_query"][:, head0],
        "W_value-head": trace["W_value"][:, head0], "b_key-head": trace["b_key"][None, head0],
        "queries": trace["queries"][0], "attn_weights": trace["attn_weights"][0],
        "context-head": trace["context"][:, head0], "context": trace["context"],
        "W_out": trace["W_out"], "output": trace["output"]}
    for name, values in expected.items():
        np.testing.assert_allclose(z_values(shown[name]), values.numpy(), atol=1e-6,
                                   err_msg=name)
    masked = z_values(shown["masked_scores"])
    assert masked[0, 1] == -np.inf and np.isfinite(masked[1, 0])
    assert list(shown["W_query-head"]["data"][0]["x"]) == [str(c) for c in range(HEAD_DIM)]
    title = shown["W_query-head"]["layout"]["title"]["text"]
    assert title == "Query weights: W_query (32×16), head 0"
    assert shown["queries"]["layout"]["title"]["text"].startswith(
        "Queries: Q = X·W_query + b_query")
    # The tokens as the model sees them, with their ids.
    table = at.dataframe[0].value
    assert list(table["token"]) == trace.tokens == ["the", "·cat", "·sat", "·on", "·the",
                                                    "·mat"]
    assert list(table["token id"]) == trace["token_ids"].tolist()
    assert any("ln_1" in c.value for c in at.caption)  # what X is in GPT-2
    assert "✓ Verified against the model" in shown_messages(at)
    assert "matches GPT2Model" in shown_messages(at)


def test_switching_head_and_layer_changes_the_charts(gpt2_dir):
    at = open_model(gpt2_dir)
    model = load_model(gpt2_dir)
    pick(at, "head", 1)
    trace = compute_model_trace(model, SENTENCE, layer=0)
    shown = charts(at)
    head1 = slice(HEAD_DIM, 2 * HEAD_DIM)
    np.testing.assert_allclose(z_values(shown["W_query-head"]), trace["W_query"][:, head1],
                               atol=1e-6)
    assert list(shown["W_query-head"]["data"][0]["x"]) == [str(c) for c in range(16, 32)]
    np.testing.assert_allclose(z_values(shown["b_query-head"]),
                               trace["b_query"][None, head1], atol=1e-6)
    np.testing.assert_allclose(z_values(shown["attn_weights"]), trace["attn_weights"][1],
                               atol=1e-6)
    at.segmented_control(key="layer").set_value(1).run()
    assert not at.exception
    layer1 = compute_model_trace(model, SENTENCE, layer=1)
    shown = charts(at)
    np.testing.assert_allclose(z_values(shown["embeddings"]), layer1["embeddings"], atol=1e-6)
    np.testing.assert_allclose(z_values(shown["attn_weights"]), layer1["attn_weights"][1],
                               atol=1e-6)
    assert not np.allclose(layer1["embeddings"], trace["embeddings"])
    assert "layer 1" in shown_messages(at)  # the check follows the layer


def test_bert_has_no_mask_and_matches_its_model(bert_dir):
    at = open_model(bert_dir, sentence="The cat sat on the mat")
    trace = compute_model_trace(load_model(bert_dir), "The cat sat on the mat", layer=0)
    shown = charts(at)
    assert "causal_mask" not in shown and "masked_scores" not in shown
    assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
    assert list(at.dataframe[0].value["token"]) == trace.tokens
    np.testing.assert_allclose(z_values(shown["attn_weights"]), trace["attn_weights"][0],
                               atol=1e-6)
    np.testing.assert_allclose(z_values(shown["W_key-head"]), trace["W_key"][:, :HEAD_DIM],
                               atol=1e-6)
    assert "✓ Verified against the model" in shown_messages(at)
    assert "matches BertModel" in shown_messages(at)


def test_a_click_on_a_head_slice_explains_its_cell_in_the_whole_matrix(gpt2_dir, handlers):
    at = open_model(gpt2_dir)
    pick(at, "head", 1)
    # A click on row 3, column 4 of head 1's 32×16 slice of W_query is W_query[3, 20].
    state = clicked(handlers["chart-W_query-head"], {"trace": 0, "row": 3, "col": 4})
    assert state["cell"] == ("W_query", 3, 20, 1)
    at.session_state["cell"] = state["cell"]
    at.run()
    link = page_link(at)
    assert "head=1" in link and "cell=W_query:3,20" in link
    trace = compute_model_trace(load_model(gpt2_dir), SENTENCE, layer=0)
    text = " ".join(m.value.replace("\\", "") for m in at.markdown)
    assert f"W_query[3, 20]** (row 3, column 20) = {format_value(trace['W_query'][3, 20])}" in text
    marked = charts(at)["W_query-head"]["layout"]["shapes"][0]
    assert (marked["x0"], marked["y0"]) == (3.5, 2.5)  # column 4 of the slice, row 3
    # A query's cell adds its bias, by its column in the whole matrix too.
    state = clicked(handlers["chart-queries"], {"trace": 0, "row": 2, "col": 5})
    at.session_state["cell"] = state["cell"]
    at.run()
    written = next(c.value for c in at.code if c.value.count("·") > 2)  # the sum written out
    b = trace["b_query"][21].item()
    assert written.endswith(f"{trace['queries'][1, 2, 5].item():.4f}")
    assert f"+ {b:.4f}" in written or f"+ ({b:.4f})".replace("-", "−") in written


def test_a_click_on_the_grid_opens_that_layer_and_head(gpt2_dir, handlers):
    at = open_model(gpt2_dir)
    grid = all_charts(at)["head-overview"]
    assert len(grid["data"]) == 4  # 2 layers × 2 heads
    assert "previous token" in grid["data"][3]["matrix"]["hover"]
    state = clicked(handlers["head-overview"], {"trace": 3, "row": 0, "col": 0})
    assert (state["layer"], state["head"]) == (1, 1)
    at.session_state["layer"], at.session_state["head"] = 1, 1
    at.run()
    assert "layer=1&head=1" in page_link(at)
    assert at.segmented_control(key="layer").value == 1
    assert picked(at, "head") == 1
    trace = compute_model_trace(load_model(gpt2_dir), SENTENCE, layer=1)
    np.testing.assert_allclose(z_values(charts(at)["attn_weights"]), trace["attn_weights"][1],
                               atol=1e-6)
    habits = at.dataframe[1].value
    assert list(habits.columns) == ["previous token", "first token", "itself"]
    assert len(habits) == 4


def test_the_line_view_is_offered_with_the_models_tokens(gpt2_dir):
    # chart.js draws the lines from the weights it holds (tests/browser/test_browser_instant.py);
    # the page sends what it needs: the tokens, the bins, the threshold.
    at = open_model(gpt2_dir)
    spec = chart_headers(at)["chart-attn_weights"]["lines"]
    trace = compute_model_trace(load_model(gpt2_dir), SENTENCE, layer=0)
    assert spec["labels"] == [literal.plotly(s) for s in token_labels(trace.tokens)]
    assert spec["threshold"] == 0 and spec["perHead"] is True
    pick(at, "lines", True)
    assert "lines=true" in page_link(at)


def test_an_example_opens_the_head_found_by_measuring(gpt2_dir):
    at = open_model(gpt2_dir)
    at.button(key="example-coreference").click().run()
    assert not at.exception
    found = [m.value.replace("\\", "") for m in at.success if "Found by measuring" in m.value]
    assert found and "of '·it''s attention on '·animal'" in found[0]
    assert at.text_input(key="sentence").value.startswith("The animal didn't cross")
    layer, head = at.segmented_control(key="layer").value, picked(at, "head")
    assert f"layer {layer}, head {head} puts" in found[0]
    assert at.session_state["cell"][0] == "attn_weights"  # that weight is explained


def test_no_weights_and_no_network_says_so_and_how_to_get_them():
    """Where the all-MiniLM-L6-v2 package is missing (the ``offline`` fixture)."""
    at = open_direct()
    assert not at.exception and errors(at) == []  # offline is expected: said, not an error
    shown = " ".join(errors(at, "info"))
    assert f"No weights for '{DEFAULT_MODEL}' on this machine" in shown
    assert "HF_HUB_OFFLINE is set" in shown
    assert "`" not in shown and f"“{download_command(DEFAULT_MODEL)}”" in shown
    assert download_command(DEFAULT_MODEL) in [c.value for c in at.code]
    assert all_charts(at) == {}


def test_a_model_larger_than_the_budget_gets_the_figures(monkeypatch):
    monkeypatch.setattr(budget, "MODEL_BYTES", 100 * budget.MIB)
    at = open_direct({"model": "gpt2"})
    assert errors(at) == []  # this server's limit: a warning with the setting that lifts it
    assert "GPT-2 small needs about 475 MB; this server allows 100 MB for models" in " ".join(
        errors(at, "warning"))


@pytest.mark.parametrize("query, message", [
    ({"layer": "99"}, "Ignored the link's layer='99': layer must be between 0 and 1 (got 99)"),
    ({"layer": "abc"}, "layer must be a whole number"),
    ({"model": "nope"}, "model must be one of gpt2, distilgpt2, bert-base-uncased"),
    ({"model": "/etc"}, "a folder is opened from the sidebar, never from a link"),
    ({"head": "5"}, "head must be between 0 and 1 (got 5)"),
    ({"cell": "W_query:99,0"}, "cell must be between 0 and 31 (got 99)"),
])
def test_bad_link_values_get_a_message_and_no_exception(gpt2_dir, query, message):
    seen: list[str] = []
    at = open_model(gpt2_dir, {**query, "sentence": SENTENCE}, sentence=None, seen=seen)
    assert any(message in e for e in seen), seen
    assert len(charts(at)) == 20  # the page still draws


def test_a_hostile_sentence_stays_literal(gpt2_dir):
    at = open_model(gpt2_dir, sentence=HOSTILE)
    assert errors(at) == []
    tokens = list(at.dataframe[0].value["token"])
    assert "".join(tokens).replace("·", " ") == HOSTILE  # plain text in the table
    labels = charts(at)["attn_weights"]["data"][0]["y"]
    assert "&lt;" in labels and "<" not in "".join(labels)  # escaped for Plotly


def test_the_offered_models_sizes_are_their_parameter_counts():
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    configs = {"gpt2": GPT2Config(), "distilgpt2": GPT2Config(n_layer=6),
               "bert-base-uncased": BertConfig()}
    with torch.device("meta"):
        built = {"gpt2": GPT2Model(configs["gpt2"]),
                 "distilgpt2": GPT2Model(configs["distilgpt2"]),
                 "bert-base-uncased": BertModel(configs["bert-base-uncased"],
                                                add_pooling_layer=False)}
    for name, model in built.items():
        assert MODEL_CHOICES[name].parameters == sum(
            p.numel() for p in model.parameters()), name
        sizes = model_sizes(configs[name].model_type, configs[name])  # known before building
        assert sizes.parameters == MODEL_CHOICES[name].parameters, name


def test_the_other_pages_never_import_transformers():
    # The declared state names the models (explorer.models.catalogue), but loads none of them.
    script = ("import sys, explorer.ui.sidebar, explorer.ui.render, explorer.ui.multihead, "
              "explorer.ui.experiments, explorer.ui.cache, explorer.render.figures, explorer.render.export; "
              "print(sorted(m for m in sys.modules if m.startswith(('transformers', "
              "'explorer.models'))))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    # The state's decoder_cell names the Llama-family charts (explorer.models.explain, from
    # explorer.models.layer_steps: torch only); the catalogue names the packaged model
    # (explorer.models.packaged: the standard library and explorer.models.errors only).
    assert out.stdout.strip() == ("['explorer.models', 'explorer.models.catalogue', "
                                  "'explorer.models.errors', 'explorer.models.explain', "
                                  "'explorer.models.layer_steps', 'explorer.models.packaged']")


def test_the_line_view_keeps_long_inputs_readable():
    config = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(40)), d_in=4, d_k=4)
    spec = figures.lines_spec(compute_trace(config))
    assert spec["threshold"] == figures.LINES_MIN_WEIGHT  # above 32 tokens, weights ≥ 0.05
    assert spec["showLabels"] and len(spec["labels"]) == 40


def test_the_self_attention_page_offers_the_line_view_too():
    at = open_page(PAGES[SELF_ATTENTION_PAGE][0])
    assert chart_headers(at)["chart-attn_weights"]["lines"]["toggle"] == "Show as lines"
    assert not at.exception


def test_a_model_trace_follows_the_steps_order_and_explains_its_biases(gpt2_dir):
    trace = compute_model_trace(load_model(gpt2_dir), SENTENCE, layer=1)
    order = list(STEPS)
    assert [order.index(n) for n in trace] == sorted(order.index(n) for n in trace)
    assert STEPS["b_query"].caption(trace.config).endswith("read from the model's checkpoint.")
    assert "ln_1" in STEPS["embeddings"].caption(trace.config)
    assert STEPS["keys"].expr(trace.config) == "X·W_key + b_key"
    cell = explain_cell(trace, "b_value", 0, 20)
    assert cell.value == trace["b_value"][20].item() and "checkpoint" in cell.formula


def test_the_folder_option_is_offered_only_when_the_server_allows_it(monkeypatch):
    assert "a local folder…" in open_direct().selectbox(key="model").options
    monkeypatch.setattr(budget, "MODEL_FOLDERS", False)  # EXPLORER_MODEL_FOLDERS unset
    monkeypatch.setattr(budget, "MODEL_BYTES", 2**30)
    at = open_direct({"model": "gpt2"})
    assert at.selectbox(key="model").options == [
        "GPT-2 small (gpt2)", "DistilGPT-2 (distilgpt2)", "BERT base (uncased) (bert-base-uncased)",
        "all-MiniLM-L6-v2 (all-minilm-l6-v2)", "SmolLM2-135M (smollm2-135m)",  # 257 MB in bfloat16; Qwen3-0.6B's 1,137 MB: listed, why
        "Qwen3-0.6B (qwen3-0.6b) · needs a larger memory budget"]
    assert "folder" not in [box.key for box in at.text_input]
    assert "local folder" not in " ".join(c.value for c in at.caption)


def test_every_unusable_folder_gets_one_message_that_reveals_nothing(tmp_path, gpt2_dir):
    huge = tmp_path / "huge"
    huge.mkdir()
    for name in ("config.json", "model.safetensors"):
        (huge / name).write_bytes((gpt2_dir / name).read_bytes())
    (huge / "config.json").write_text(json.dumps(
        {**json.loads((huge / "config.json").read_text()), "n_layer": 10**6}))
    typed = ["/etc", "/root", "/proc/self/cwd", "/nonexistent", "~", "~/models",
             "/etc/" + "x" * 5_000, "x" * 300, str(gpt2_dir / "config.json")]
    at = open_model(typed[0], sentence=None)
    for path in typed:
        at.text_input(key="folder").set_value(path).run()
        assert not at.exception, path[:40]
        assert errors(at) == [folder_message(path).replace("\\", "")], path[:40]
        assert all_charts(at) == {}
    assert os.path.expanduser("~") not in folder_message("~/models")
    at.text_input(key="folder").set_value(str(huge)).run()
    assert any("n_layer in the config.json of the model in" in e and
               "must be a whole number from 1 to 128 (got 1000000)" in e for e in errors(at))
    (huge / "config.json").write_text(json.dumps(
        {**json.loads((huge / "config.json").read_text()), "n_layer": 128, "n_embd": 4096,
         "n_head": 32}))
    at.text_input(key="folder").set_value(str(huge) + "/").run()
    assert any("needs about" in e and "this server allows 320 MB for models" in e
               for e in errors(at, "warning")), errors(at, "warning")
    at.text_input(key="folder").set_value(str(gpt2_dir)).run()
    assert errors(at) == [] and len(charts(at)) == 20  # the page recovers


def test_a_folder_whose_index_names_a_pickle_or_a_file_elsewhere_is_refused_by_name(tmp_path):
    for name, shards in (("bin", ["pytorch_model.bin"]),
                         ("outside", ["model-00001-of-00001.safetensors", "../x.safetensors"])):
        folder = save_tiny_gpt2(tmp_path / name)
        shard_weights(folder, shards)
        at = open_model(folder, sentence=None)
        assert not at.exception and all_charts(at) == {}
        why = "is not a safetensors file" if name == "bin" else "lies outside the folder"
        assert any(f"'{shards[-1]}' {why}" in e and "pickled weights are never read" in e
                   for e in errors(at)), errors(at)


def test_on_the_default_budget_the_page_opens_on_the_model_that_fits():
    # 1024 MB: 320 MB for models holds DistilGPT-2 (312 MB), not GPT-2 small (475 MB).
    assert budget.MODEL_BYTES == 320 * budget.MIB and DEFAULT_MODEL == "distilgpt2"
    options = open_direct().selectbox(key="model").options
    assert options[0] == "GPT-2 small (gpt2) · needs a larger memory budget"
    assert options[1] == "DistilGPT-2 (distilgpt2)"


def test_an_empty_sentence_says_what_is_allowed_and_the_page_recovers(gpt2_dir):
    at = open_model(gpt2_dir, sentence="")
    assert any("the input must have between 1 and 256 tokens" in e for e in errors(at))
    assert all_charts(at) == {}
    at.text_input(key="sentence").set_value(SENTENCE).run()
    assert errors(at) == [] and len(charts(at)) == 20
