"""The √d_k experiment promises two stars on each of its charts, q·k and
q·k / √d_k, at the sentence's own numbers (issue 40: the variance chart drew one)."""

from __future__ import annotations

import math

import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons import experiments as ex
from explorer.render import figures


@pytest.mark.parametrize("config", [AttentionConfig(), AttentionConfig(d_in=8, d_k=16)])
def test_every_chart_of_the_experiment_draws_both_stars_at_the_sentences_numbers(config):
    trace = compute_trace(config)
    curves, point = ex.scaling_curves(n_keys=6, dims=(1, 2, 4, 16)), ex.config_point(trace)
    scores = trace["attn_scores"].double()
    assert math.isclose(point.variance_scaled, float((scores / math.sqrt(config.d_k)).var()),
                        rel_tol=1e-9)
    expected = {
        "variance": (point.variance, point.variance_scaled),
        "entropy": (point.entropy, point.entropy_scaled),
        "max": (point.max_weight, point.max_weight_scaled),
    }
    for name, fig in (("variance", figures.scaling_variance_figure(curves, point)),
                      ("entropy", figures.scaling_softmax_figure(curves, point, "entropy")),
                      ("max", figures.scaling_softmax_figure(curves, point, "max"))):
        stars = {t.name: t for t in fig.data if t.name and t.name.startswith("your sentence")}
        raw = next(t for n, t in stars.items() if "√d_k" not in n)
        scaled = next(t for n, t in stars.items() if "√d_k" in n)
        assert raw.marker.symbol == "star" and scaled.marker.symbol == "star-diamond", name
        assert list(raw.x) == list(scaled.x) == [config.d_k], name
        assert raw.y[0] == pytest.approx(max(expected[name][0], 1e-3)), name
        assert scaled.y[0] == pytest.approx(max(expected[name][1], 1e-3)), name
    assert torch.isfinite(scores).all()
