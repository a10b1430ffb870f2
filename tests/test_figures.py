"""Figures and chart payloads: what the browser is sent, checked without a browser."""

from __future__ import annotations

import numpy as np
import torch

from explorer import AttentionConfig, compute_trace, figures
from explorer.charts import decode, encode, matrix_hash

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
    domains = [chart.figure["layout"][f"yaxis{'' if i == 0 else i + 1}"]["domain"]
               for i in range(56)]
    assert all(0 <= y0 < y1 <= 1 for y0, y1 in domains)
    assert len({tuple(d) for d in domains}) == 14  # 14 rows of 4, none overlapping


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
