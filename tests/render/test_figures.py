"""Figures and chart payloads: what the browser is sent, checked without a browser."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons import explain
from explorer.render import figures
from explorer.render.payload import decode, encode, matrix_hash

LONG = " ".join(f"w{i}" for i in range(40))


def test_raw_and_scaled_scores_share_one_colour_scale():
    # Dividing by √d_k must look smaller: both charts use the raw scores' range.
    trace = compute_trace(AttentionConfig(d_k=8, d_in=8))
    raw = figures.heatmap_chart(trace, "attn_scores").figure["data"][0]
    scaled = figures.heatmap_chart(trace, "scaled_scores").figure["data"][0]
    bound = float(trace["attn_scores"].abs().max())
    assert raw["zmin"] == scaled["zmin"] == -bound and raw["zmax"] == scaled["zmax"] == bound
    assert float(trace["scaled_scores"].abs().max()) < bound / 2  # ÷ √8


def test_the_causal_mask_is_two_named_categories_without_a_colour_bar():
    trace = compute_trace(AttentionConfig(causal=True))
    chart = figures.heatmap_chart(trace, "causal_mask")
    trace_spec = chart.figure["data"][0]
    assert trace_spec["showscale"] is False
    assert trace_spec["matrix"]["words"] == ["allowed", "future"]
    np.testing.assert_array_equal(chart.matrices[0], np.triu(np.ones((6, 6)), k=1))


def test_weights_use_a_fixed_zero_to_one_scale_and_non_finite_values_travel_as_such():
    trace = compute_trace(AttentionConfig(causal=True))
    weights = figures.heatmap_chart(trace, "attn_weights").figure["data"][0]
    assert (weights["zmin"], weights["zmax"]) == (0.0, 1.0)
    masked = figures.heatmap_chart(trace, "masked_scores").matrices[0]
    assert masked[0, 1] == -np.inf and np.isfinite(masked[1, 0])


def test_payloads_round_trip_and_leave_out_the_matrices_the_page_holds():
    trace = compute_trace(AttentionConfig())
    chart = figures.heatmap_chart(trace, "attn_weights", highlight_row=2)
    known: dict = {}
    header, matrices = decode(encode(chart), known)
    np.testing.assert_array_equal(matrices[0], trace["attn_weights"].numpy())
    assert header["figure"]["layout"]["shapes"][0]["y0"] == 1.5  # the highlighted query row
    # The same numbers with another highlight: only the header travels.
    moved = figures.heatmap_chart(trace, "attn_weights", highlight_row=4)
    small = encode(moved, {matrix_hash(chart.matrices[0])})
    assert len(small) < len(encode(moved)) - 100
    header, matrices = decode(small, known)
    assert header["blocks"][0]["cached"] is True
    np.testing.assert_array_equal(matrices[0], trace["attn_weights"].numpy())


def test_a_grid_of_56_heads_fits_in_the_page():
    # Plotly's facet spacing refused 14 rows or more: the grid lays itself out.
    trace = compute_trace(AttentionConfig(sentence="a b c", d_in=4, d_k=56, d_v=56, n_heads=56))
    chart = figures.heads_grid_chart(trace)
    assert len(chart.figure["data"]) == 56 and len(chart.matrices) == 56
    layouts = [chart.figure["layout"]] + [n["layout"] for n in chart.size["narrower"]]
    for columns, layout in zip(range(4, 0, -1), layouts, strict=True):  # and on a phone
        panels = [(layout[f"xaxis{s}"]["domain"], layout[f"yaxis{s}"]["domain"])
                  for s in ["", *map(str, range(2, 57))]]
        assert all(0 <= a < b <= 1 for panel in panels for a, b in panel)
        for i, ((ax0, ax1), (ay0, ay1)) in enumerate(panels):  # no two panels share a point
            for (bx0, bx1), (by0, by1) in panels[i + 1:]:
                assert min(ax1, bx1) < max(ax0, bx0) or min(ay1, by1) < max(ay0, by0), (
                    columns, i)
        assert len({tuple(y) for _, y in panels}) == -(-56 // columns)  # rows
        # Each head's title sits on its panel's top edge, in the gap below the row above.
        tops = sorted({y1 for _, (_, y1) in panels})
        bottoms = sorted({y0 for _, (y0, _) in panels})
        assert all(top < above for top, above in zip(tops, bottoms[1:]))
        assert [a["y"] for a in layout["annotations"]] == [y1 for _, (_, y1) in panels]


def test_image_files_are_named_by_step_head_and_sentence():
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=4))
    assert figures.chart_filename(trace, "attn_weights", 1) == "attn_weights_head1_life-is-short-eat-dessert-first"
    hostile = compute_trace(AttentionConfig(sentence="<b>../x</b> é"))
    assert figures.chart_filename(hostile, "context") == "context_b-x-b"


def test_per_query_tables_of_a_long_sentence_keep_the_heaviest_keys_and_the_sums():
    trace = compute_trace(AttentionConfig(sentence=LONG, d_in=16, d_k=16, d_v=16))
    query = 7
    table = figures.query_table(trace, query)
    weights = trace["attn_weights"][query]
    assert len(table) == figures.MAX_TABLE_KEYS
    assert set(table["weight α"].round(6)) == set(torch.topk(weights, 16).values.double()
                                                  .numpy().round(6))
    assert all("Σ of 16 products" in text for text in table["dot product q·k"])
    context = figures.context_table(trace, query)
    assert context.index[-2] == "the other 24 keys together"
    np.testing.assert_allclose(context.iloc[:-1].sum().to_numpy(),
                               trace["context"][query].double().numpy(), atol=1e-5)


def _line_and_bar_figures():
    from explorer.lessons import experiments as ex

    trace = compute_trace(AttentionConfig())
    curves, point = ex.scaling_curves(n_keys=6, dims=(1, 2, 4)), ex.config_point(trace)
    return {"variance": figures.scaling_variance_figure(curves, point),
            "entropy": figures.scaling_softmax_figure(curves, point, "entropy"),
            "largest weight": figures.scaling_softmax_figure(curves, point, "max"),
            "bars": figures.row_bars([0.5, 1.5], ["a", "b"], "Row entropy", "entropy")}


def test_line_and_bar_charts_carry_real_distinct_colours_whatever_the_default_template():
    # Streamlit makes its own template the default, whose colorway is stand-ins
    # (#000001, #000002 ...) that only st.plotly_chart replaces: the app's own
    # component drew every series black.
    import plotly.io as pio
    import streamlit  # noqa: F401 (registers and activates the "streamlit" template)

    assert pio.templates.default == "streamlit"
    for name, fig in _line_and_bar_figures().items():
        payload = figures.figure_chart(fig, name).figure
        colours = [spec.get("line", {}).get("color") or spec.get("marker", {}).get("color")
                   for spec in payload["data"]]
        assert all(isinstance(c, str) and not c.startswith("#0000") for c in colours), name
        assert len(set(colours)) == len(colours), (name, colours)
        assert "#000001" not in str(payload["layout"]), name


def test_line_and_bar_charts_make_room_for_their_tick_labels_and_titles():
    # A fixed 10 px left margin cut "1024" to "24" and put the axis title on the ticks.
    for name, fig in _line_and_bar_figures().items():
        layout = figures.figure_chart(fig, name).figure["layout"]
        assert layout["xaxis"]["automargin"] and layout["yaxis"]["automargin"], name
        assert layout["title"]["x"] == 0 and layout["title"]["xanchor"] == "left", name


def test_a_narrow_heads_grid_takes_fewer_columns():
    # At 390 px four 6×6 panels in a row were ~70 px wide: their labels ran together.
    trace = compute_trace(AttentionConfig(d_k=4, d_v=4, n_heads=4))
    size = figures.heads_grid_chart(trace).size
    layout = figures.heads_grid_chart(trace).figure["layout"]
    assert len({tuple(layout[f"xaxis{s}"]["domain"]) for s in ("", "2", "3", "4")}) == 4
    narrower = size["narrower"]
    assert [len({round(alt["layout"][f"xaxis{s}"]["domain"][0], 6) for s in ("", "2", "3", "4")})
            for alt in narrower] == [3, 2, 1]
    belows = [alt["below"] for alt in narrower]
    assert belows == sorted(belows, reverse=True)
    # Two columns need at least two panels of 6 labelled tokens of 22 px, plus the chrome.
    assert belows[-1] >= 2 * 6 * figures.GRID_CELL_PX + narrower[-1]["size"]["chrome"]
    one = narrower[-1]["layout"]
    assert all(one[f"yaxis{s}"]["showticklabels"] for s in ("", "2", "3", "4"))
    assert [one[f"xaxis{s}"]["showticklabels"] for s in ("", "2", "3", "4")] == [
        False, False, False, True]  # the tokens under the last panel only
    assert narrower[-1]["size"]["rows"] == 40 and narrower[-1]["size"]["cols"] == 10


def test_the_split_caption_counts_columns_in_the_singular_and_plural():
    one = figures.head_split_caption(compute_trace(AttentionConfig(n_heads=2, d_k=2, d_v=4)))
    assert "its own 1 column (head_dim = d_k / n_heads = 2 / 2)" in one
    assert "(2 columns of V each)" in one
    two = figures.head_split_caption(compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=2)))
    assert "its own 2 columns" in two and "(1 column of V each)" in two


def test_tables_write_numbers_as_the_formulas_do():
    # The tables showed "-0.0000" and an ASCII minus under a formula written with "−".
    import pandas as pd

    frame = pd.DataFrame({"value": [-1e-9, -0.61504, 0.5, float("-inf"), float("nan")],
                          "label": ["a", "b", "c", "d", "e"]})
    text = figures.table_text(frame)
    # (issue 40: a nonzero value is never written as 0.0000 but as −1.0e−9)
    assert list(text["value"]) == ["\u22121.0e\u22129", "\u22120.6150", "0.5000", "\u2212∞",
                                   "NaN"]
    assert figures.table_text(pd.DataFrame({"v": [-0.0]}))["v"].tolist() == ["0.0000"]
    assert list(text["label"]) == list(frame["label"]) and frame["value"].dtype.kind == "f"
    trace = compute_trace(AttentionConfig())
    written = figures.query_table(trace, 1)["dot product q·k"].iloc[0]
    assert written.endswith("= \u22120.6150") and "-" not in written  # ω["is", "Life"]
    shown = figures.table_text(figures.terms_table(
        explain.explain_cell(trace, "attn_scores", 1, 0)))
    assert not [v for v in shown.to_numpy().ravel() if str(v).startswith("-")]


def test_the_sums_table_is_two_narrow_columns():
    # Four columns named "softmax(dim=-1): column sums" scrolled sideways on a phone.
    trace = compute_trace(AttentionConfig())
    weights = trace["attn_weights"]
    table = figures.sums_table({"naive dim=0": weights.T, "softmax(dim=-1)": weights})
    assert list(table.columns) == ["row sum", "column sum"] and len(table) == 12
    np.testing.assert_allclose(table.loc["softmax(dim=-1)", "row sum"], 1.0, atol=1e-6)
    np.testing.assert_allclose(table.loc["naive dim=0", "column sum"], 1.0, atol=1e-6)


def test_matrices_without_negative_values_use_a_scale_from_zero():
    # The journey's X and everything made from it are ≥ 0: a scale centred at 0 left
    # its blue half unused. A whole scale group changes together, or not at all.
    from explorer.lessons.presets import PRESETS

    journey = compute_trace(PRESETS["journey"].config)
    for name in ("embeddings", "attn_scores", "context"):
        spec = figures.heatmap_chart(journey, name).figure["data"][0]
        assert spec["zmin"] == 0 and spec["colorscale"] == figures.POSITIVE_SCALE, name
        assert spec["zmax"] == float(journey[name].max()), name
    assert figures.POSITIVE_SCALE[0] == [0.0, "rgb(247,247,247)"]  # white at 0, as signed
    assert figures.POSITIVE_SCALE[-1] == figures.SIGNED_SCALE[-1]  # up to the darkest red
    rand = compute_trace(PRESETS["self-attention-v1"].config)  # torch.rand weights
    specs = [figures.heatmap_chart(rand, n).figure["data"][0] for n in ("W_query", "W_key",
                                                                         "W_value")]
    assert {s["zmin"] for s in specs} == {0.0} and len({s["zmax"] for s in specs}) == 1
    # One negative weight in W_key: the whole group goes back to the signed scale.
    w = [[0.5, 0.2], [0.1, 0.3], [0.4, 0.6]]
    mixed = compute_trace(AttentionConfig(
        weight_init="given", d_k=2, d_v=2, W_query=w, W_value=w,
        W_key=[[0.5, -0.2], [0.1, 0.3], [0.4, 0.6]]))
    for name in ("W_query", "W_key", "W_value"):
        spec = figures.heatmap_chart(mixed, name).figure["data"][0]
        assert spec["zmin"] == -spec["zmax"] == pytest.approx(-0.6) and spec["colorscale"] == \
            figures.SIGNED_SCALE, name
    weights = figures.heatmap_chart(journey, "attn_weights").figure["data"][0]
    assert weights["colorscale"] == figures.WEIGHTS_SCALE  # weights keep their own


def test_a_given_cell_and_a_notebook_figure_write_numbers_as_the_formulas_do():
    assert figures.format_value(-1e-7) == "0.0000"
    assert figures.format_value(-0.61504) == "\u22120.6150"
    figure = figures.heatmap(compute_trace(AttentionConfig()), "attn_scores")
    assert figure.data[0].customdata[1][0] == "\u22120.6150"  # ω["is", "Life"]
