"""The backward pass's figures (`explorer.render.backward`): what the browser is
sent, checked against the backend's numbers and written-out rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons.backward.check import check_gradients
from explorer.lessons.backward.gradients import backward, softmax_jacobian
from explorer.lessons.backward.loss import compute_loss
from explorer.lessons.backward.saturation import (
    gradient_point,
    gradient_scaling_curves,
    saturation_curve,
)
from explorer.lessons.backward.settings import TARGET, LossConfig, TrainingConfig
from explorer.lessons.backward.training import train
from explorer.modern.flash_backward import flash_backward_of
from explorer.render import backward as figures
from explorer.render.payload import decode, encode


@pytest.fixture(scope="module")
def heads():
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4))
    return trace, backward(trace, compute_loss(trace))


def test_each_gradient_chart_carries_the_gradient_on_a_scale_centred_at_zero(heads):
    trace, grads = heads
    for name in grads:
        head = 1 if grads[name].dim() == 3 else 0
        chart = figures.gradient_chart(grads, name, head)
        expected = grads.head(name, head).numpy()
        np.testing.assert_array_equal(chart.matrices[0], expected.reshape(chart.matrices[0].shape))
        spec = chart.figure["data"][0]
        assert spec["zmin"] == -spec["zmax"] and spec["zmax"] >= np.abs(expected).max()
        _, matrices = decode(encode(chart), {})
        np.testing.assert_array_equal(matrices[0], chart.matrices[0])


def test_gradients_of_the_scores_share_one_scale_so_the_root_dk_shows(heads):
    _, grads = heads
    scaled = figures.gradient_chart(grads, "scaled_scores", 0).figure["data"][0]
    raw = figures.gradient_chart(grads, "attn_scores", 0).figure["data"][0]
    assert scaled["zmax"] == raw["zmax"] == pytest.approx(
        float(grads.head("scaled_scores", 0).abs().max()))
    assert float(grads.head("attn_scores", 0).abs().max()) < raw["zmax"] / 1.4  # ÷ √2


def test_titles_say_the_symbol_shape_and_head_and_heads_meet_in_w_querys_columns(heads):
    _, grads = heads
    assert figures.gradient_title(grads, "queries", 1) == \
        "dL/dQ: gradient of the queries (6×2), head 1"
    chart = figures.gradient_chart(grads, "W_query")
    outlines = [s for s in chart.figure["layout"]["shapes"] if s.get("yref") == "paper"]
    assert [(s["x0"], s["x1"]) for s in outlines] == [(-0.5, 1.5), (1.5, 3.5)]  # 2 per head


def test_the_jacobian_chart_is_the_rows_jacobian(heads):
    trace, _ = heads
    chart = figures.jacobian_chart(trace, 3, head=1)
    weights = trace["attn_weights"][1, 3]
    np.testing.assert_allclose(chart.matrices[0],
                               (torch.diag(weights) - torch.outer(weights, weights)).numpy(),
                               atol=1e-7)
    np.testing.assert_array_equal(chart.matrices[0], softmax_jacobian(weights).numpy())
    assert chart.figure["layout"]["title"]["text"].startswith("∂α/∂ω̃ of query “eat”, head 1")


def test_the_default_jacobians_nonzero_cells_do_not_print_as_zero():
    """The walk's Jacobian (issue 51): the old defaults' last query, head 0, whose
    weights are nearly one-hot: its largest entry is about 5e-4, printed 0.00."""
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2))
    chart = figures.jacobian_chart(trace, trace.n_tokens - 1, head=0)
    largest = float(np.abs(chart.matrices[0]).max())
    assert 1e-4 < largest < 5e-3
    allowed = chart.figure["data"][0]["matrix"].get("decimals", [4, 2])  # the browser's choices
    assert allowed and all(float(f"{largest:.{d}f}") != 0 for d in allowed)
    # a Jacobian of ordinary size keeps the default choices
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4))
    chart = figures.jacobian_chart(trace, trace.n_tokens - 1, head=0)
    assert chart.figure["data"][0]["matrix"].get("decimals", [4, 2]) == [4, 2]
    assert figures.showing_decimals(np.array([[0.0, -3e-7]])) == (7,)
    assert figures.showing_decimals(np.zeros((2, 2))) == (4, 2)


def test_the_logits_chart_outlines_each_next_token_and_not_the_last_position():
    trace = compute_trace(AttentionConfig())  # ids [0, 4, 5, 2, 1, 3]
    loss = compute_loss(trace)
    chart = figures.logits_chart(trace, loss)
    np.testing.assert_array_equal(chart.matrices[0], loss.logits.numpy())
    cells = [(round(s["y0"] + 0.5), round(s["x0"] + 0.5))
             for s in chart.figure["layout"]["shapes"]]
    assert cells == [(0, 4), (1, 5), (2, 2), (3, 1), (4, 3)]
    assert chart.figure["data"][0]["x"] == ["Life", "dessert", "eat", "first", "is", "short"]
    with pytest.raises(ValueError, match="no logits"):
        figures.logits_chart(trace, compute_loss(trace, LossConfig(TARGET)))


def test_the_check_table_has_a_row_per_gradient_and_says_where_they_disagree(heads):
    trace, grads = heads
    table = figures.check_table(check_gradients(trace))
    assert list(table["gradient"]) == ["L"] + [figures.SYMBOLS[name] for name in grads]
    assert set(table["agree"]) == {"✓"}
    assert (table["max |hand − autograd|"] < 1e-5).all()


def test_the_training_figures_draw_the_runs_numbers():
    trace = compute_trace(AttentionConfig())
    run = train(trace, training=TrainingConfig("adamw", 0.05, 10))
    curve = figures.loss_curve_figure(run)
    assert list(curve.data[0].y) == list(run.losses) and list(curve.data[0].x) == list(range(11))
    # AdamW as torch.optim spells it, not "ADAMW" (issue 51)
    assert curve.layout.title.text == "Loss over 10 steps of AdamW (lr = 0.05)"
    chart = figures.training_weights_chart(trace, run, 10)
    np.testing.assert_allclose(chart.matrices[0], run.attn_weights[10, 0].numpy(), atol=1e-7)
    with pytest.raises(IndexError):
        figures.training_weights_chart(trace, run, 11)


def test_the_root_dk_figures_draw_the_curves():
    curves = gradient_scaling_curves(seed=0, dims=(1, 16, 256))
    point = gradient_point(compute_trace(AttentionConfig()))
    fig = figures.gradient_scaling_figure(curves, point)
    assert list(fig.data[0].y) == list(curves.jacobian)
    assert list(fig.data[1].y) == list(curves.jacobian_scaled)
    assert fig.data[2].x == (2,) and fig.data[2].y == (point.jacobian,)
    saturated = figures.gradient_scaling_figure(curves, measure="saturated")
    assert list(saturated.data[1].y) == list(curves.saturated_scaled)
    saturation = saturation_curve(seed=0)
    assert list(figures.saturation_figure(saturation).data[0].y) == list(saturation.max_weight)


def test_the_flash_figures_show_the_tiles_walked_and_a_tiles_matrices(heads):
    trace, grads = heads
    result = flash_backward_of(grads, 2, 4)  # 3 query tiles × 2 key tiles
    order = figures.flash_tiles_chart(result, trace.tokens, upto=2).matrices[0]
    assert order[0, 0] == 1 and order[2, 3] == 2 and order[4, 0] == 3
    assert np.isnan(order[:, 4:]).all()  # key tile 1 not reached yet
    tile = result.tiles[4]  # key tile 1, query tile 1
    chart = figures.flash_tile_chart(result, trace.tokens, 4, "dS", head=1)
    np.testing.assert_array_equal(chart.matrices[0], tile.dS[1].numpy())
    weights = figures.flash_tile_chart(result, trace.tokens, 4, "P", head=1).matrices[0]
    np.testing.assert_allclose(weights, trace["attn_weights"][1, 2:4, 4:6].numpy(), atol=1e-6)
