"""The Modern attention page as a visitor uses it (AppTest): every part drawn
with its check, bad sizes explained, the charts' numbers, and the link."""

from __future__ import annotations

import base64
import json
import random
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer.core import literal
from explorer.core.config import AttentionConfig, shown
from explorer.core.trace import compute_trace
from explorer.lessons.pages import MODERN_PAGE
from explorer.modern import attention as modern
from explorer.modern import explain as modern_explain
from explorer.render.payload import decode
from explorer.ui import state
from explorer.ui.navigation import PAGES
from tests.support.apptest import all_charts, errors, open_link, page_link
from tests.support.server import HOME, ROOT
from tests.ui.test_state import _differences, query_of, view_of

PAGE = PAGES[MODERN_PAGE][0]
PARTS = ("RoPE", "Grouped-query attention", "Sliding window", "KV cache", "Online softmax")


def checks(at) -> list[str]:
    return [s.value for s in at.success]


def test_the_page_draws_every_part_with_its_check():
    at = open_link(PAGE)
    assert not at.exception and errors(at) == []
    found = checks(at)
    assert [line.split(":")[0] for line in found[:5]] == [f"✓ {p}" for p in PARTS]
    assert "Llama layer" in found[5] and found[5].startswith("✓")
    charts = all_charts(at)
    for key in ("modern-cos", "modern-q-after", "modern-scores-after", "modern-mask-window",
                "modern-decode-row", "modern-tile", "modern-tile-output"):
        assert key in charts
    # the default window w = 3 over 6 tokens: each query sees itself and 2 before
    window = np.asarray(charts["modern-mask-window"]["data"][0]["z"])
    assert window.tolist() == modern.sliding_window_mask(6, 3).float().tolist()


def test_the_scores_are_the_backends_for_the_sentence():
    at = open_link(PAGE, {"rope_offset": "1000", "head": "1"})
    assert not at.exception and errors(at) == []
    # the page's X: the shared sentence, d_in and seed (their defaults)
    embeddings = compute_trace(AttentionConfig())["embeddings"]
    trace = modern.modern_attention(embeddings, modern.ModernConfig(rope_offset=1000),
                                    AttentionConfig().seed)
    scores = np.asarray(all_charts(at)["modern-scores-after"]["data"][0]["z"], dtype=np.float32)
    assert np.allclose(scores, trace.scores_rope[1].numpy(), atol=1e-6)
    # the offset moved every angle, yet the scores are those at offset 0
    assert 0 < trace.offset_change < 1e-3
    assert f"at most {trace.offset_change:.1e}" in " ".join(m.value for m in at.main.markdown)
    assert "Shift every position by 1000" in " ".join(m.value for m in at.main.markdown)


def test_interleaved_pairing_turns_neighbours_and_still_agrees():
    at = open_link(PAGE, {"rope_pairing": "interleaved"})
    assert not at.exception
    pairs = at.table[0].value["dimensions turned together"].tolist()
    assert pairs[:2] == ["0 and 1", "2 and 3"]
    assert checks(at)[0].startswith("✓ RoPE")


@pytest.mark.parametrize("params, message", [
    ({"n_kv_heads": "3"}, "n_kv_heads must divide n_heads = 4: one of 1, 2, 4 (got 3)"),
    ({"head_dim": "5"}, "RoPE turns dimensions in pairs, so head_dim must be even (got 5)"),
])
def test_bad_sizes_are_explained_and_draw_nothing(params, message):
    at = open_link(PAGE, params)
    assert not at.exception
    assert any(message in e for e in errors(at)), errors(at)
    assert not any(k.startswith("modern-") for k in all_charts(at))


def test_a_link_outside_the_widgets_bounds_is_noted_and_dropped():
    at = open_link(PAGE, {"window": "0"})
    assert errors(at) == ["Ignored the link's window='0': window must be between 1 and 512 "
                          "(got 0)"]
    assert checks(at)[2].startswith("✓ Sliding window")


def test_picking_a_token_to_decode_shows_its_row_of_full_causal_attention():
    at = open_link(PAGE, {"prefill": "1", "decode_row": "4"})
    assert not at.exception and errors(at) == []
    row = np.asarray(all_charts(at)["modern-decode-row"]["data"][0]["z"], dtype=np.float32)
    embeddings = compute_trace(AttentionConfig())["embeddings"]
    trace = modern.modern_attention(embeddings, modern.ModernConfig(prefill=1),
                                    AttentionConfig().seed)
    assert row.shape == (1, 5)  # keys 0 … 4: key 5 is not in the cache yet, so not shown
    assert np.allclose(row[0], trace.causal.attn_weights[0, 4, :5].numpy(), atol=1e-6)
    at.selectbox(key="decode_row").select(0).run()  # a prefill token
    assert "is in the prefill" in " ".join(m.value for m in at.main.markdown)


def test_the_tile_picked_is_outlined_and_its_stats_tabled():
    at = open_link(PAGE, {"block_q": "3", "block_k": "2", "tile": "3"})  # query tile 1, key tile 1
    # (the walk: (0, 0), (0, 1), (1, 0), (1, 1), (1, 2); (0, 2) is skipped)
    assert not at.exception and errors(at) == []
    shapes = all_charts(at)["modern-tile"]["layout"]["shapes"]
    assert {"x0": 1.5, "x1": 3.5, "y0": 2.5, "y1": 5.5} == {k: shapes[-1][k] for k in
                                                             ("x0", "x1", "y0", "y1")}
    table = next(t.value for t in at.table  # its labels as st.table shows them literally
                 if literal.markdown("exp(m_old − m_new)") in t.value.columns)
    assert len(table) == 3


def _random_values(rng: random.Random) -> dict[str, object]:
    kv = rng.choice((1, 2))
    n_heads = kv * rng.choice((1, 2))
    return {"sentence": rng.choice(("the cat sat on the mat", "a b c d e f g")),
            "d_in": rng.choice((2, 4, 6)), "seed": str(rng.randrange(10**6)),
            "n_query_heads": n_heads, "n_kv_heads": kv, "head_dim": rng.choice((2, 4, 6)),
            "rope_base": rng.choice((100, 10_000, 500_000)),
            "rope_pairing": rng.choice(modern.ROPE_PAIRINGS),
            "rope_offset": rng.choice((0, 7, 1000)), "window": rng.randrange(1, 7),
            "prefill": rng.randrange(0, 6), "block_q": rng.randrange(1, 7),
            "block_k": rng.randrange(1, 7), "decode_row": rng.randrange(0, 6),
            "tile": rng.randrange(0, 4), "head": rng.randrange(n_heads),
            "modern_cell": (rng.choice(modern_explain.CHARTS), rng.randrange(6), rng.randrange(6))}


def test_a_random_value_of_every_setting_survives_the_link():
    changed: set[str] = set()
    for seed in range(4):
        at = open_link(PAGE)
        for name, value in _random_values(random.Random(seed)).items():
            at.session_state[name] = value
        at.run()
        assert not at.exception and errors(at) == [], seed
        link = page_link(at)
        again = open_link(PAGE, query_of(link))
        assert not again.exception
        assert page_link(again) == link
        assert _differences(view_of(at, MODERN_PAGE), view_of(again, MODERN_PAGE)) == [], link
        changed |= set(query_of(link))
    linked = {e.name for e in state.entries_of(MODERN_PAGE) if e.linked}
    assert linked - changed == set()


def test_every_widget_and_session_key_of_the_page_is_declared(monkeypatch):
    from tests.ui.test_state import test_every_widget_and_session_key_is_declared
    test_every_widget_and_session_key_is_declared(MODERN_PAGE, monkeypatch)


def test_the_script_and_the_json_reproduce_every_step_of_the_page(tmp_path):
    import json
    import subprocess
    import sys

    import torch

    from explorer.render.modern import export as modern_export
    params = {"rope_pairing": "interleaved", "rope_offset": "9", "n_kv_heads": "1",
              "prefill": "3", "block_q": "4", "block_k": "3", "window": "2"}
    at = open_link(PAGE, params)
    assert not at.exception and errors(at) == []
    buttons = {b.proto.label: b for b in at.get("download_button")}
    assert set(buttons) >= {"Reproduce in PyTorch", "Every matrix (JSON)"}
    config = modern.ModernConfig(rope_pairing="interleaved", rope_offset=9, n_kv_heads=1,
                                 prefill=3, block_q=4, block_k=3, window=2)
    embeddings = compute_trace(AttentionConfig())["embeddings"]
    trace = modern.modern_attention(embeddings, config, AttentionConfig().seed)
    from explorer.ui.modern import _build
    x_config = AttentionConfig()
    script = _build(x_config, config, (0, 0), "http://localhost/Modern_attention", "script")
    (tmp_path / "modern.py").write_text(script)
    run = subprocess.run([sys.executable, str(tmp_path / "modern.py"), "--save",
                          str(tmp_path / "steps.pt")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    saved = torch.load(tmp_path / "steps.pt")
    for name, value in modern_export.modern_steps(trace).items():
        assert torch.equal(saved[name], value), name
    steps = json.loads(_build(x_config, config, (0, 0), "", "json"))["steps"]
    assert np.allclose(steps["scores_rope"], trace.scores_rope.numpy(), atol=1e-6)
    assert steps["window_mask"] == trace.window_mask.tolist()


def test_the_report_holds_every_chart_table_and_check_of_the_view():
    from explorer.ui.modern import _build
    x_config = AttentionConfig()
    report = _build(x_config, modern.ModernConfig(), (0, 0), "http://localhost/Modern_attention",
                    "report", 2, 3)
    for key in modern_explain.CHARTS:
        assert f'id="chart-{key}"' in report, key
    payload = re.search(r'id="chart-decode-row" data-chart="([^"]+)"', report).group(1)
    header, matrices = decode(base64.b64decode(payload), {})
    assert "head 2: token 3's one row" in json.dumps(header, ensure_ascii=False)
    x = compute_trace(x_config)["embeddings"]
    trace = modern.modern_attention(x, modern.ModernConfig(), x_config.seed, (0, 0))
    assert np.array_equal(matrices[0], modern.decoded_weights(trace.decoding, 6)[2, 3:4, :4].numpy())
    assert report.count('<p class="check">✓') == 5
    assert "RoPE&#x27;s frequencies" in report or "RoPE's frequencies" in report
    assert 'href="http://localhost/Modern_attention"' in report


def test_a_click_on_a_score_with_rope_explains_it():
    at = open_link(PAGE, {"head": "1", "rope_offset": "50"})
    assert "Click any cell of a chart" in " ".join(m.value for m in at.main.markdown)
    # what a chart's click callback (`_clicked`) stores for the cell clicked
    at.session_state["modern_cell"] = ("scores-after", 3, 1)
    at.run()
    text = " ".join(m.value for m in at.main.markdown).replace("\\", "")  # Markdown escapes
    assert 'S′_1["eat", "is"]' in text, text
    assert "m − n = 2" in " ".join(c.value for c in at.caption).replace("\\", "")
    embeddings = compute_trace(AttentionConfig())["embeddings"]
    trace = modern.modern_attention(embeddings, modern.ModernConfig(rope_offset=50),
                                    AttentionConfig().seed)
    terms = next(t.value for t in at.dataframe if "product" in t.value.columns)
    products = terms["product"].astype(str).str.replace("−", "-").astype(float)
    assert np.isclose(products.sum() / np.sqrt(8), float(trace.scores_rope[1, 3, 1]), atol=1e-3)
    shapes = all_charts(at)["modern-scores-after"]["layout"]["shapes"]
    assert any(s.get("name") == "cell" and s["x0"] == 0.5 and s["y0"] == 2.5 for s in shapes)
    assert "modern_cell=scores-after%3A3%2C1" in page_link(at) or \
        "modern_cell=scores-after:3,1" in page_link(at)


@pytest.mark.parametrize("chart, cell, words", [
    ("decode-row", (0, 2), "exp(S′"),          # the decoded token's row: row 0 is token 5
    ("tile-output", (1, 0), "over keys 0 … 1"),  # the default tile: query tile 0 × key tile 0
    ("mask-window", (4, 1), "4 − 3 < 1 ≤ 4 is false"),
    ("k-shared", (2, 5), "turns with dimension 1"),
])
def test_a_click_on_any_chart_explains_its_cell(chart, cell, words):
    at = open_link(PAGE)
    at.session_state["modern_cell"] = (chart, *cell)
    at.run()
    assert not at.exception and errors(at) == []
    shown = " ".join([m.value for m in at.main.markdown] + [c.value for c in at.caption]
                     + [c.value for c in at.code]).replace("\\", "")  # Markdown escapes
    assert words in shown, shown[-2000:]
    shapes = all_charts(at)[f"modern-{chart}"]["layout"]["shapes"]
    assert any(s.get("name") == "cell" for s in shapes)


def test_a_linked_cell_outside_its_chart_explains_nothing():
    at = open_link(PAGE, {"modern_cell": "tile-output:40,0"})
    assert not at.exception and errors(at) == []
    at = open_link(PAGE, {"modern_cell": "nowhere:1,0"})
    assert not at.exception
    assert any("modern_cell must name a chart" in e for e in errors(at) + [
        w.value for w in at.warning])


# ---------------------------------------------------------------------------
# Issue 40: a part's bad setting stays in its part; sentences as exact as the numbers
# ---------------------------------------------------------------------------
def _text(at) -> str:
    return " ".join(m.value for m in at.main.markdown)


@pytest.mark.parametrize("params, part, message, missing", [
    ({"block_q": "50"}, "5. FlashAttention's online softmax",
     "block_q must be between 1 and the 6 tokens (got 50)", ("modern-tile",)),
    ({"block_k": "9"}, "5. FlashAttention's online softmax",
     "block_k must be between 1 and the 6 tokens (got 9)", ("modern-tile",)),
    ({"prefill": "9"}, "4. The KV cache, one token at a time",
     "prefill must be between 0 and the 6 tokens (got 9)", ("modern-decode-row",)),
])
def test_a_bad_setting_of_one_part_keeps_the_pages_other_parts(params, part, message, missing):
    at = open_link(PAGE, params)
    assert not at.exception
    found = errors(at)
    assert any(message in e for e in found), found
    charts = all_charts(at)
    for key in missing:
        assert key not in charts
    for key in ("modern-cos", "modern-scores-after", "modern-gqa-weights"):
        assert key in charts  # RoPE and grouped-query attention are drawn all the same
    # RoPE's and GQA's checks shown, and passed
    assert [c.split(":")[0] for c in checks(at)[:2]] == [f"✓ {p}" for p in PARTS[:2]]
    # the message sits under its part's heading, before the next part's
    seq = [(type(n).__name__, n.value.replace("\\", "")) for n in at.main
           if type(n).__name__ in ("Header", "Error")]
    at_part = seq.index(("Header", part))
    assert seq[at_part + 1][0] == "Error" and message in seq[at_part + 1][1], seq
    assert sum(kind == "Error" for kind, _ in seq) == len(params)


def test_the_window_names_both_counts_and_draws_both():
    at = open_link(PAGE, {"window": "2"})
    assert not at.exception and errors(at) == []
    text = _text(at)
    assert "Off by one" not in text and "off by one" not in text
    assert "sliding_window_overlay" in text and "diagonal=-sliding_window" in text
    assert "#29623" in text and "#39408" in text
    charts = all_charts(at)
    ours = np.asarray(charts["modern-mask-window"]["data"][0]["z"])
    mistral = np.asarray(charts["modern-mask-window-earlier"]["data"][0]["z"])
    assert ours.sum(axis=1).tolist() == [1, 2, 2, 2, 2, 2]     # 2 keys, the query among them
    assert mistral.sum(axis=1).tolist() == [1, 2, 3, 3, 3, 3]  # the query and 2 earlier


def test_the_online_softmax_walks_and_says_it_walks_the_causal_tiles():
    at = open_link(PAGE)  # 6 tokens, tiles of 2 × 2: 9 tiles, 6 of them walked
    assert not at.exception
    text = _text(at)
    assert "it takes 6 of the 9 tiles, 3 skipped" in text
    assert "roughly halves the work" in text
    options = at.selectbox(key="tile").options
    assert options == [f"query tile {q}, key tile {k}" for q, k in
                       ((0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2))]


def test_each_parts_own_bad_setting_is_set_aside_and_a_shared_one_is_not():
    from explorer.core.config import ConfigError
    from explorer.ui.modern import checked_config

    bad = modern.ModernConfig(window=0, prefill=9, block_q=50)
    config, found = checked_config(bad, 6)
    assert dict(found).keys() == {"Sliding window", "KV cache", "Online softmax"}
    assert "window must be at least 1" in dict(found)["Sliding window"]
    config.check(6)  # the stand-ins fit, and the shared sizes are the visitor's
    assert (config.n_heads, config.head_dim) == (bad.n_heads, bad.head_dim)
    with pytest.raises(ConfigError, match="head_dim must be even"):
        checked_config(modern.ModernConfig(head_dim=5, block_q=50), 6)


FORGED_TILES = ["abc", "1e400", "-3", "2", 2.5, -3, float("inf"), True, [1]]
"""Values no tile picker or link ever puts in the session (issue 52)."""


@pytest.mark.parametrize("forged", FORGED_TILES, ids=repr)
def test_a_forged_tile_in_the_session_gets_a_message_and_the_first_tile(forged):
    at = AppTest.from_file(str(ROOT / HOME), default_timeout=60)
    at.session_state["tile"] = forged  # as a forged session value would
    at.switch_page(PAGE).run()
    assert not at.exception
    message = next((e for e in errors(at) if "Tile step" in e), None)
    assert message is not None, errors(at)
    assert shown(forged) in message, message
    assert at.selectbox(key="tile").value == 0  # the first tile, "query tile 0, key tile 0"
    at.run()  # the next run keeps the first tile and says nothing more
    assert not at.exception and at.session_state["tile"] == 0


@pytest.mark.parametrize("raw, message", [
    ("abc", "tile must be a whole number, 0-based (got 'abc')"),
    ("1e400", "tile must be a whole number, 0-based (got '1e400')"),
    ("-3", "tile must be at least 0 (got -3)"),
    ("7", "tile must be between 0 and 5 (got 7)"),
])
def test_a_bad_tile_in_the_link_gets_a_message(raw, message):
    at = open_link(PAGE, {"tile": raw})
    assert not at.exception
    assert f"Ignored the link's tile='{raw}': {message}" in errors(at)
    assert at.selectbox(key="tile").value == 0  # the first tile, "query tile 0, key tile 0"
