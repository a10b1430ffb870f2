"""AppTest: the "Real model" page with Llama-family models, tiny random Llama and
Qwen3 (QK-norm) checkpoints saved to folders (`tests.support.tiny_decoders`),
opened through the page's local-folder option, offline.

Every expected number comes from the backend (`explorer.models`:
`compute_decoder_trace`, `head_slice`, `generate`), which `tests/models/test_llama.py`
checks against the models' own modules. Clicks on charts are simulated by
calling the handler the page gave the chart (`tests.ui.test_app_models.clicked`).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from explorer.core.literal import format_value
from explorer.lessons.pages import MODEL_PAGE
from explorer.models import (
    EVERY_ARCHITECTURE,
    against_full_pass,
    against_model,
    compute_decoder_trace,
    generate,
    head_overview,
    head_slice,
    load_folder,
)
from explorer.models.explain import CHARTS, GENERATION_CHARTS, chart_matrix
from explorer.models.llama import DECODER_STEPS
from explorer.render.decoder_script import decoder_script
from explorer.server import budget
from explorer.ui import real_model
from tests.support.apptest import all_charts, errors, page_link, pick, picked, z_values
from tests.support.tiny_decoders import save_tiny_decoder
from tests.ui.test_app_downloads import offered, sidebar_downloads  # noqa: F401
from tests.ui.test_app_models import clicked, handlers, offline, open_model  # noqa: F401
from tests.ui.test_state import _differences, query_of, undeclared, view_of

SENTENCE = "the cat sat on the mat"
NEW_TOKENS = 8  # the page's default (entry "new_tokens")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return save_tiny_decoder(tmp_path_factory.mktemp("decoders") / "tiny-llama", "llama")


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    return save_tiny_decoder(tmp_path_factory.mktemp("decoders") / "tiny-qwen3", "qwen3")


def decoder_charts(at) -> dict[str, dict]:
    """The page's decoder charts by chart name (keys ``decoder-<chart>``; a chart
    drawn again beside its next step is ``decoder-<chart>-again``)."""
    return {key.removeprefix("decoder-"): figure for key, figure in all_charts(at).items()
            if key.startswith("decoder-")}


def expected(folder, layer: int = 0, head: int = 0, generated: int = 0):
    model = load_folder(folder, architectures=EVERY_ARCHITECTURE)
    trace = compute_decoder_trace(model, SENTENCE, layer=layer)
    run = generate(model, input_ids=list(trace.config.input_ids), max_new_tokens=NEW_TOKENS,
                   layer=layer)
    return trace, head_slice(trace, head), run


def assert_charts_equal_the_backend(at, trace, hs, run, generated: int = 0) -> None:
    shown = decoder_charts(at)
    for name, figure in shown.items():
        chart = name.removesuffix("-again")
        want = chart_matrix(trace, hs, chart, run, generated).to(float).numpy()
        got = z_values(figure)
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=name)
        np.testing.assert_allclose(got[finite], want[finite], atol=1e-6, rtol=1e-6,
                                   err_msg=name)


def test_a_llama_folder_draws_every_step_equal_to_the_backend_and_checks_it(llama_dir):
    at = open_model(llama_dir)
    assert not at.exception and errors(at) == [] and errors(at, "warning") == []
    trace, hs, run = expected(llama_dir)
    shown = decoder_charts(at)
    steps = [c for c in CHARTS if c not in GENERATION_CHARTS
             and (c in hs.steps or c in trace)]
    assert set(steps) <= set(shown)
    assert not {"q_norm", "queries_normed"} & set(shown)  # Llama has no QK-norm
    assert set(GENERATION_CHARTS) <= set(shown)
    assert "head-overview" in all_charts(at)
    assert_charts_equal_the_backend(at, trace, hs, run)
    # Every step's line of transformers under its chart.
    captions = " ".join(c.value for c in at.caption)
    for step in ("queries_rope", "attn_scores", "causal_mask", "W_out"):
        assert DECODER_STEPS[step] in captions.replace("\\", ""), step
    passed = " ".join(s.value.replace("\\", "").replace("\u2060", "") for s in at.success)
    assert "✓ Verified against the model" in passed
    assert (f"✓ The {NEW_TOKENS} generated rows, computed in float32 from the layer's input "
            "in each cached pass, differ from the rows of one full forward pass") in passed
    assert "(output_attentions, float32) by at most" in passed  # a float32 model's own rows
    steps_lines = next(c.value for c in at.code if "against output_attentions" in c.value)
    assert steps_lines.count("✓") == len(steps_lines.splitlines()) >= 10
    # K/V sharing: 4 query heads over 2 K/V heads, head 0 reads K/V head 0 with head 1.
    table = at.dataframe[1].value
    assert list(table["query heads reading it"]) == ["0, 1", "2, 3"]
    assert "query head 0 reads K/V head 0, which query heads 0, 1 all read" in " ".join(
        m.value.replace("\\", "") for m in at.markdown)


def test_a_qwen3_folder_shows_qk_norm_before_and_after(qwen3_dir):
    at = open_model(qwen3_dir)
    assert not at.exception and errors(at) == []
    pick(at, "head", 3)
    assert picked(at, "head") == 3
    trace, hs, run = expected(qwen3_dir, head=3)
    shown = decoder_charts(at)
    assert {"q_norm", "k_norm", "queries_normed", "keys_normed", "queries-again",
            "queries_normed-again", "keys_rope"} <= set(shown)
    title = shown["keys_normed"]["layout"]["title"]["text"].replace("\xa0", " ")
    assert hs.kv_head == 1 and "K of K/V head 1 after QK-norm" in title
    assert "θ = 900" in shown["rope_cos"]["layout"]["title"]["text"]  # the model's own θ
    assert_charts_equal_the_backend(at, trace, hs, run)


def test_a_click_explains_the_cell_with_the_models_numbers(llama_dir, handlers):
    at = open_model(llama_dir)
    trace, hs, run = expected(llama_dir)
    state = clicked(handlers["decoder-queries_rope"], {"trace": 0, "row": 2, "col": 1})
    assert state["decoder_cell"] == ("queries_rope", 2, 1)
    at.session_state["decoder_cell"] = state["decoder_cell"]
    at.run()
    assert "decoder_cell=queries_rope:2,1" in page_link(at)
    text = " ".join(m.value.replace("\\", "") for m in at.markdown)
    value = hs.steps["queries_rope"][2, 1]
    assert f"(head 0, row 2, column 1) = Q_0[" in text
    written = next(c.value for c in at.code if "·" in c.value)
    last = written.rsplit("= ", 1)[1].strip("()").replace("−", "-")
    assert last == f"{value.item():.4f}"
    marked = decoder_charts(at)["queries_rope"]["layout"]["shapes"][0]
    assert (marked["x0"], marked["y0"]) == (0.5, 1.5)
    # A weight of a generated row: the softmax of its scores over the cache.
    state = clicked(handlers["decoder-generated_weights"], {"trace": 0, "row": 0, "col": 3})
    at.session_state["decoder_cell"] = state["decoder_cell"]
    at.run()
    weight = run.generated[0].attn_weights[0, 3].item()
    assert "α_0[6, " in " ".join(m.value.replace("\\", "") for m in at.markdown)
    written = next(c.value for c in at.code if "/" in c.value and "exp" not in c.value)
    assert float(written.rsplit("= ", 1)[1].replace("−", "-")) == pytest.approx(weight, rel=0.02)


def test_generation_shows_each_tokens_row_over_the_cache(llama_dir):
    at = open_model(llama_dir)
    trace, hs, run = expected(llama_dir)
    slider = at.select_slider(key="generated")
    assert slider.options == [f"{i + 1}: {t.token}" for i, t in enumerate(run.generated)]
    slider.set_value(2).run()
    assert_charts_equal_the_backend(at, trace, hs, run, generated=2)
    row = z_values(decoder_charts(at)["generated_weights"])
    assert row.shape == (1, run.generated[2].position + 1)  # one row over the cache
    every_row = decoder_charts(at)["generated_rows"]
    assert z_values(every_row).shape == (len(run.generated), len(run.ids))
    assert len(set(every_row["data"][0]["y"])) == len(run.generated)  # a repeated token too
    # The cache table is static (st.table), so that a phone shows every column: at 390 px
    # the scrolling table hid "without GQA" (issue 51, point 7).
    assert not any("KV cache" in t.value.columns for t in at.dataframe)
    cache = next(t.value for t in at.table if "KV cache" in t.value.columns)
    cache.columns = [c.replace("\\", "") for c in cache.columns]  # Markdown's escapes undone
    assert list(cache.columns) == ["tokens kept (layer 0)", "KV cache", "without GQA"]
    assert [int(n) for n in cache["tokens kept (layer 0)"]] == [len(run.prompt_ids)] + [
        t.position + 1 for t in run.generated]  # a full-attention layer keeps every token
    at.number_input(key="new_tokens").set_value(3).run()
    assert not at.exception
    assert len(at.select_slider(key="generated").options) == 3
    assert "✓ The 3 generated rows" in " ".join(s.value for s in at.success)


def test_the_link_carries_layer_head_cell_tokens_and_the_generated_token(llama_dir):
    at = open_model(llama_dir)
    at.session_state["layer"] = 1
    at.run()
    pick(at, "head", 2)
    at.number_input(key="new_tokens").set_value(4).run()
    at.select_slider(key="generated").set_value(3).run()
    at.session_state["decoder_cell"] = ("attn_weights", 4, 1)
    at.run()
    link = page_link(at)
    query = query_of(link)
    assert {k: query[k] for k in ("layer", "head", "new_tokens", "generated", "decoder_cell")} \
        == {"layer": "1", "head": "2", "new_tokens": "4", "generated": "3",
            "decoder_cell": "attn_weights:4,1"}
    again = open_model(llama_dir, {k: v for k, v in query.items() if k != "model"})
    assert not again.exception and errors(again) == []
    assert page_link(again) == link
    first = {k: (v["layout"]["title"]["text"], repr(z_values(v).tolist()))
             for k, v in decoder_charts(at).items()}
    second = {k: (v["layout"]["title"]["text"], repr(z_values(v).tolist()))
              for k, v in decoder_charts(again).items()}
    assert first == second


def test_the_sidebar_offers_the_layers_script_for_the_head_shown(llama_dir, offered):
    at = open_model(llama_dir, {"layer": "1", "new_tokens": "5"})
    pick(at, "head", 3)
    assert not at.exception and picked(at, "head") == 3
    found = sidebar_downloads(at, offered)
    assert {label: (d.file_name, d.mime) for label, d in found.items()} == {
        "decoder_layer.py": ("decoder_layer.py", "text/x-python"),
        "Every matrix and the generation (JSON)": ("decoder_trace.json", "application/json")}
    model = load_folder(llama_dir, architectures=EVERY_ARCHITECTURE)
    trace = compute_decoder_trace(model, SENTENCE, layer=1)
    link = page_link(at)
    assert "layer=1" in link and "head=3" in link and "new_tokens=5" in link
    assert found["decoder_layer.py"].make() == decoder_script(
        trace.config, model.location, 3, text=SENTENCE, link=link, new_tokens=5)
    data = json.loads(found["Every matrix and the generation (JSON)"].make())  # as clicked
    assert len(data["generation"]["generated"]) == 5 and len(data["head_shares"]["to_self"]) == 2
    assert data["trace"]["config"]["head"] == 3  # the head the page showed (issue 51, 7)
    assert [check["ok"] for check in data["checks"]] == [True, True, True]


def test_the_json_holds_the_trace_the_generation_the_heads_and_the_checks(llama_dir):
    trace, hs, run = expected(llama_dir)
    model = load_folder(llama_dir, architectures=EVERY_ARCHITECTURE)
    overview = head_overview(model, input_ids=list(trace.config.input_ids))
    checks = (against_model(trace, model), against_full_pass(run, model))
    data = json.loads(real_model._decoder_json(trace, run, overview, checks))
    np.testing.assert_allclose(data["trace"]["steps"]["attn_weights"],
                               trace["attn_weights"].numpy(), atol=1e-7)
    assert [t["token_id"] for t in data["generation"]["generated"]] == [
        t.token_id for t in run.generated]
    for name in ("to_first", "to_previous", "to_self"):  # (n_layers, n_heads)
        np.testing.assert_array_equal(data["head_shares"][name], getattr(overview, name).numpy())
    assert [c["ok"] for c in data["checks"]] == [True, True]
    layer = data["checks"][0]
    assert [p["name"] for p in layer["parts"]] == ["attention weights", "output"]
    assert layer["max_abs_diff"] == checks[0].max_abs_diff < 1e-4


def _copy_with_config(source, folder, config: dict):
    folder.mkdir()
    for f in source.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_bad_folders_and_a_model_over_the_budget_get_one_clear_message(llama_dir, tmp_path,
                                                                        monkeypatch):
    config = json.loads((llama_dir / "config.json").read_text())
    cases = {  # config.json -> the one message the page shows
        "code": ({**config, "model_type": "my_llama", "auto_map": {
            "AutoModelForCausalLM": "modeling_my_llama.MyLlama"}},
            "comes with its own code (auto_map in its config.json, for a 'my_llama' model), "
            "which the explorer never runs"),
        "unknown": ({**config, "model_type": "falcon"},
                    "is a 'falcon' model; the explorer opens models of type"),
        "multimodal": ({**config, "model_type": "gemma3"}, "is a multimodal Gemma 3"),
    }
    for name, (changed, message) in cases.items():
        at = open_model(_copy_with_config(llama_dir, tmp_path / name, changed))
        assert not at.exception, name
        shown = errors(at) + errors(at, "warning")
        assert len(shown) == 1 and message in shown[0], (name, shown)
        assert decoder_charts(at) == {}, name
    # The weights missing: the folder's one message, which reveals nothing more.
    broken = _copy_with_config(llama_dir, tmp_path / "no-weights", config)
    (broken / "model.safetensors").unlink()
    at = open_model(broken)
    assert not at.exception and len(errors(at)) == 1 and decoder_charts(at) == {}
    # auto_map beside a supported type is dropped unread: the model opens, no code run.
    at = open_model(_copy_with_config(llama_dir, tmp_path / "llama-map", {
        **config, "auto_map": {"AutoModel": "modeling_evil.Model"}}))
    assert errors(at) == [] and "attn_weights" in decoder_charts(at)
    # Over the memory budget: listed with why, refused with the figures, not loaded.
    monkeypatch.setattr(budget, "MODEL_BYTES", 100 * budget.MIB)
    at = open_model(llama_dir)
    assert "needs a larger memory budget" in at.selectbox(key="model").format_func(
        "smollm2-135m")
    at.selectbox(key="model").set_value("smollm2-135m").run()
    assert not at.exception
    warning = " ".join(errors(at, "warning"))
    assert "SmolLM2-135M needs about 257 MB; this server allows 100 MB for models" in warning
    assert "EXPLORER_MEMORY_BUDGET_MB=" in warning


def test_every_widget_and_session_key_of_a_decoder_page_is_declared(qwen3_dir, handlers):
    at = open_model(qwen3_dir)
    state = clicked(handlers["decoder-attn_weights"], {"trace": 0, "row": 3, "col": 1})
    at.session_state["decoder_cell"] = state["decoder_cell"]
    at.run()
    assert not at.exception
    assert undeclared(at) == set()


@pytest.mark.parametrize("seed", range(3))
def test_a_random_view_survives_the_link(llama_dir, seed):
    """Random values of the page's view (layer, head, tokens, generated token, a
    cell of a random chart): the link reopens the same view (the folder chosen
    again: it is never in a link)."""
    rng = random.Random(seed)
    at = open_model(llama_dir)
    model = load_folder(llama_dir, architectures=EVERY_ARCHITECTURE)
    new_tokens = rng.randrange(1, 6)
    values = {"layer": rng.randrange(model.n_layers), "head": rng.randrange(model.n_heads),
              "new_tokens": new_tokens, "generated": rng.randrange(new_tokens)}
    trace = compute_decoder_trace(model, SENTENCE, layer=values["layer"])
    run = generate(model, input_ids=list(trace.config.input_ids), max_new_tokens=new_tokens,
                   layer=values["layer"])
    hs = head_slice(trace, values["head"])
    chart = rng.choice([c for c in CHARTS if c in hs.steps or c in trace
                        or (c in GENERATION_CHARTS and run.generated)])
    rows, cols = chart_matrix(trace, hs, chart, run, values["generated"]).shape
    values["decoder_cell"] = (chart, rng.randrange(rows), rng.randrange(cols))
    for name, value in values.items():
        at.session_state[name] = value
    at.run()
    assert not at.exception and errors(at) == []
    link = page_link(at)
    query = query_of(link)
    assert query["decoder_cell"] == "{}:{},{}".format(*values["decoder_cell"])
    again = open_model(llama_dir, {k: v for k, v in query.items() if k != "model"})
    assert page_link(again) == link
    assert _differences(view_of(at, MODEL_PAGE), view_of(again, MODEL_PAGE)) == []


def test_the_query_is_outlined_and_a_big_matrix_explains_a_cell_by_number(llama_dir,
                                                                          monkeypatch):
    monkeypatch.setattr(real_model, "BIG_MATRIX_CELLS", 200)  # W_query's 32×8 counts as big
    at = open_model(llama_dir)
    pick(at, "query", 2)
    shown = decoder_charts(at)
    query_rows = {name for name, figure in shown.items()
                  if any(s.get("name") == "query" and s["y0"] == 1.5
                         for s in figure["layout"]["shapes"])}
    assert {"queries", "keys_rope", "attn_weights", "output"} <= query_rows
    assert not {"W_query", "generated_weights"} & query_rows  # their rows are not the tokens
    at.number_input(key="pick-decoder-W_query-row").set_value(30)
    at.number_input(key="pick-decoder-W_query-col").set_value(5)
    at.button(key="pick-decoder-W_query-explain").click().run()
    assert at.session_state["decoder_cell"] == ("W_query", 30, 5)
    trace, hs, run = expected(llama_dir)
    text = " ".join(m.value.replace("\\", "") for m in at.markdown)
    assert f"(head 0, row 30, column 5) = {format_value(hs.steps['W_query'][30, 5])}" in text


def test_a_click_on_the_grid_opens_that_layer_and_head(llama_dir, handlers):
    at = open_model(llama_dir)
    grid = all_charts(at)["head-overview"]
    assert len(grid["data"]) == 8  # 2 layers × 4 query heads
    state = clicked(handlers["head-overview"], {"trace": 6, "row": 0, "col": 0})
    assert (state["layer"], state["head"]) == (1, 2)
    at.session_state["layer"], at.session_state["head"] = 1, 2
    at.run()
    assert "layer=1&head=2" in page_link(at)
    trace, hs, run = expected(llama_dir, layer=1, head=2)
    np.testing.assert_allclose(z_values(decoder_charts(at)["attn_weights"]),
                               hs.steps["attn_weights"], atol=1e-6)
    habits = next(t.value for t in at.dataframe if "first token" in t.value.columns)
    assert len(habits) == 8


def test_fewer_tokens_than_the_generated_token_shown_shows_the_last_and_links_it(llama_dir):
    at = open_model(llama_dir, {"new_tokens": "3", "generated": "7"})
    assert not at.exception
    assert at.select_slider(key="generated").value == 2  # the third and last token
    assert query_of(page_link(at))["generated"] == "2"


def test_the_generation_settings_are_the_backends_bounds():
    from explorer.models.generation import GENERATION_SECONDS, MAX_NEW_TOKENS
    from explorer.ui.state import ENTRIES
    # entries.py cannot import the generation module (it imports transformers): checked here.
    assert ENTRIES["new_tokens"].kind.bounds == (1, MAX_NEW_TOKENS)
    assert ENTRIES["generated"].kind.bounds == (0, MAX_NEW_TOKENS - 1)
    assert f"after {GENERATION_SECONDS:g} seconds" in ENTRIES["new_tokens"].help
