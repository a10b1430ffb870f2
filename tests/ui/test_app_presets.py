"""AppTest: notebook presets, the recipe settings and hand-entered matrices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons.presets import PRESETS
from explorer.ui.navigation import PAGES
from tests.support.apptest import all_charts, charts, errors, open_page, picked, z_values
from tests.support.server import HOME


def successes(at) -> list[str]:
    return [s.value for s in at.success]


@pytest.mark.parametrize("slug", list(PRESETS))
def test_each_preset_url_loads_its_setup_and_matches_the_notebook(slug):
    preset = PRESETS[slug]
    at = open_page(PAGES[preset.page][0], {"preset": slug})
    assert not at.exception
    assert errors(at) == []
    assert any(s.startswith(f"✓ Matches the numbers printed in {preset.source}")
               for s in successes(at)), successes(at)
    assert at.text_input(key="sentence").value == preset.config.sentence
    assert at.selectbox(key="embedding").value == preset.config.embedding
    trace = compute_trace(preset.config)
    np.testing.assert_allclose(z_values(charts(at)["attn_weights"]),
                               trace["attn_weights"].numpy(), atol=1e-6)


def test_changing_a_preset_says_so_and_reset_brings_the_check_back():
    at = open_page(PAGES[PRESETS["light-switch"].page][0], {"preset": "light-switch"})
    at.text_input(key="seed").set_value("5").run()  # irrelevant to given X, but a change
    assert not successes(at)
    assert any("You have changed the setup" in i.value for i in at.info)
    at.button[0].click().run()
    assert at.text_input(key="seed").value == "123"
    assert any(s.startswith("✓") for s in successes(at))


def test_open_button_on_home_loads_the_preset_and_its_page():
    at = open_page(HOME)
    at.button(key="open-illustrated").click().run()
    assert not at.exception
    assert at.title[0].value == "Self-attention"
    assert at.selectbox(key="preset").value == "illustrated"
    assert any(s.startswith("✓") for s in successes(at))


def test_unknown_preset_in_the_url_is_reported():
    at = open_page(HOME, {"preset": "nope"})
    assert not at.exception
    assert any("preset must be one of journey" in e and "(got 'nope')" in e for e in errors(at))


def test_recipe_settings_reach_the_backend():
    at = open_page(PAGES["Self-attention"][0])
    at.selectbox(key="weight_init").set_value("linear").run()
    at.selectbox(key="normalization").set_value("sum").run()
    at.toggle(key="scale").set_value(False).run()
    assert not at.exception
    trace = compute_trace(AttentionConfig(weight_init="linear", normalization="sum",
                                          scale=False))
    shown = charts(at)
    assert "scaled_scores" not in shown  # equal to the scores when scaling is off
    for name in ("W_query", "attn_weights", "context"):
        np.testing.assert_allclose(z_values(shown[name]), trace[name].numpy(), atol=1e-6)


def _edit(at, field: str, row: int, column: str, value) -> None:
    """Type ``value`` into one cell of the ``field`` table, as the grid reports it."""
    editor = next(e for e in at.data_editor if e.key.startswith(f"editor:{field}:"))
    at.session_state[editor.key] = {"edited_rows": {row: {column: value}}, "added_rows": [],
                                    "deleted_rows": []}
    at.run()


def test_editing_one_cell_of_x_changes_the_downstream_heatmaps():
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    before = {k: z_values(v) for k, v in charts(at).items()}
    _edit(at, "embeddings", 0, "dim 1", 3.0)
    assert not at.exception and errors(at) == []
    after = {k: z_values(v) for k, v in charts(at).items()}
    x = torch.tensor(PRESETS["illustrated"].config.embeddings)
    x[0, 1] = 3.0
    expected = compute_trace(PRESETS["illustrated"].config.replace(embeddings=x.tolist()))
    for name in ("embeddings", "queries", "attn_scores", "attn_weights", "context"):
        assert not np.allclose(before[name], after[name]), name
        np.testing.assert_allclose(after[name], expected[name].numpy(), atol=1e-6)
    # An edited preset is no longer the notebook's setup.
    assert any("You have changed the setup" in i.value for i in at.info)


def test_an_empty_cell_shows_an_error_naming_the_cell():
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    _edit(at, "W_key", 2, "dim 0", None)
    assert not at.exception
    assert any("W_key row 2 ('2'), column 0 is empty" in e for e in errors(at)), errors(at)
    assert charts(at) == {}
    _edit(at, "W_key", 2, "dim 0", 1.5)
    assert errors(at) == [] and charts(at)


def test_tables_resize_with_the_sentence_keeping_what_fits():
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    at.text_input(key="sentence").set_value("v_1 v_2 v_3 v_4").run()
    assert not at.exception and errors(at) == []
    x = z_values(charts(at)["embeddings"])
    np.testing.assert_array_equal(x[:3], np.array(PRESETS["illustrated"].config.embeddings))
    np.testing.assert_array_equal(x[3], np.zeros(4))
    at.number_input(key="d_in").set_value(2).run()
    assert z_values(charts(at)["W_query"]).shape == (2, 3)
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"])[:3],
                                  np.array(PRESETS["illustrated"].config.embeddings)[:, :2])


def test_naive_softmax_overflow_is_shown_not_hidden():
    at = open_page(PAGES["Self-attention"][0], {"normalization": "naive_softmax"})
    at.select_slider(key="overflow_c").set_value(50).run()
    assert not at.exception
    shown = all_charts(at)
    naive, stable = z_values(shown["overflow-demo-naive-softmax"]), z_values(
        shown["overflow-demo-softmax"])
    assert np.isnan(naive).any()  # inf/inf: shown as gaps, labelled NaN
    assert np.isfinite(stable).all()
    np.testing.assert_allclose(stable.sum(axis=1), 1, atol=1e-5)


def _upload(at, field: str, content: bytes) -> None:
    uploader = next(u for u in at.get("file_uploader") if f"upload:{field}:" in u.proto.id)
    uploader.upload(f"{field}.csv", content, "text/csv")
    at.run()


def test_importing_a_csv_fills_the_table_and_the_heatmaps():
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    _upload(at, "embeddings", b"token,a,b,c,d\nv_1,1,2,3,4\nv_2,0,0,0,1\nv_3,2,2,2,2\n")
    assert not at.exception and errors(at) == []
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"]),
                                  [[1, 2, 3, 4], [0, 0, 0, 1], [2, 2, 2, 2]])
    expected = compute_trace(PRESETS["illustrated"].config.replace(
        embeddings=[[1, 2, 3, 4], [0, 0, 0, 1], [2, 2, 2, 2]]))
    np.testing.assert_allclose(z_values(charts(at)["context"]), expected["context"].numpy(),
                               atol=1e-5)


@pytest.mark.parametrize("content, message", [
    (b"1,2,3\n4,5,6\n", "embeddings must be 3×4 here (the file holds 2×3 numbers)"),
    (b"1,2,3,4\n1,2,x,4\n1,2,3,4\n", "cell C2 (row 2, column 3) must be a number (got 'x')"),
    (b"1,2,3,4\n1,2,inf,4\n1,2,3,4\n", "cell C2 (row 2, column 3) must be a finite number"),
    (b"\x00\xff\xfe", "not a CSV table of numbers"),
])
def test_a_bad_csv_is_refused_with_a_message_and_the_table_kept(content, message):
    at = open_page(PAGES["Self-attention"][0], {"preset": "illustrated"})
    before = z_values(charts(at)["embeddings"])
    _upload(at, "embeddings", content)
    assert not at.exception
    assert any(message in e for e in errors(at)), errors(at)
    np.testing.assert_array_equal(z_values(charts(at)["embeddings"]), before)


def test_the_overflow_demo_is_drawn_only_when_opened():
    at = open_page(PAGES["Self-attention"][0])
    assert not any(key.startswith("overflow-demo") for key in all_charts(at))
    at.toggle(key="overflow").set_value(True).run()
    assert {"overflow-demo-naive-softmax", "overflow-demo-softmax"} <= set(all_charts(at))


def test_a_matrix_too_big_to_edit_by_hand_is_imported_not_drawn_as_a_table():
    at = open_page(PAGES["Self-attention"][0], {"embedding": "given", "d_in": "1024"})
    assert not at.exception and errors(at) == []
    assert [e.key for e in at.data_editor] == []  # 6×1024 cells: no table sent to the page
    assert any("Too many cells (6,144) to edit by hand" in c.value for c in at.caption)
    # The starting numbers (the drawn embeddings) are kept and drawn.
    x = compute_trace(AttentionConfig(d_in=1024))["embeddings"].numpy()
    np.testing.assert_allclose(z_values(charts(at)["embeddings"]), x, atol=1e-6)


def test_a_links_query_wins_over_the_presets_own_query_token():
    # The example looks at "is" (1); the link says "eat" (3): explicit parameters come last.
    at = open_page(PAGES["Self-attention"][0], {"preset": "life-is-short", "query": "3"})
    assert picked(at, "query") == 3
    at = open_page(PAGES["Self-attention"][0], {"preset": "life-is-short"})
    assert picked(at, "query") == PRESETS["life-is-short"].query


def test_picking_an_example_in_the_sidebar_opens_its_page():
    at = open_page(HOME)
    picker = at.selectbox(key="preset")
    assert "Illustrated self-attention: whole-number inputs and weights" in picker.options
    picker.set_value("illustrated").run()
    assert not at.exception
    assert at.title[0].value == "Self-attention"
    assert any(s.startswith("✓ Matches the numbers printed in") for s in successes(at))


def test_the_upload_limit_is_the_importers_own():
    import tomllib

    from explorer.ui.matrices import MAX_IMPORT_MB
    from tests.support.server import ROOT
    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert server["maxUploadSize"] == MAX_IMPORT_MB
