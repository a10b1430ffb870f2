"""AppTest: the lessons beside the attention pages (`explorer.ui.lessons`)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer.ui.navigation import PAGES
from tests.support.apptest import all_charts, charts, errors, open_link, z_values
from tests.ui.test_app_presets import _upload


@pytest.mark.parametrize("page_name, query", [
    ("Self-attention", {"overflow": "true"}),  # the defaults
    ("Self-attention", {"overflow": "true", "d_in": "5", "d_k": "4", "n_heads": "2",
                        "seed": "9", "embedding": "uniform", "weight_init": "linear"}),
    ("Simplified attention", {"overflow": "true"}),  # W = I
])
def test_the_overflow_demo_at_c_1_is_the_pages_own_weights(page_name, query):
    """Issue 31, point 1: "softmax, X × 1" is the weights just above it, and the
    largest |score| it names is the page's (the demo once redrew the weights
    as the generator's first draws)."""
    at = open_link(PAGES[page_name][0], query)
    assert not at.exception
    shown = all_charts(at)
    page = charts(at)
    for name in ("overflow-demo-softmax", "overflow-demo-naive-softmax"):
        np.testing.assert_allclose(z_values(shown[name]), z_values(page["attn_weights"]),
                                   atol=1e-6)
    scores = page.get("scaled_scores", page["attn_scores"])  # the Simplified page: unscaled
    largest = float(np.abs(z_values(scores)).max())
    said = next(m.value for m in at.markdown if m.value.startswith("Largest |score"))
    assert re.search(r"\*\*([\d,.]+)\*\*", said)[1] == f"{largest:,.1f}", said


def test_an_x_too_large_to_multiply_is_said_not_raised():
    """Typed-in X may reach ±1e6, and X × 50 then leaves the typed range: the
    demo says so where it would draw (it raised ConfigError to the visitor)."""
    at = open_link(PAGES["Self-attention"][0], {"preset": "illustrated", "overflow": "true"})
    _upload(at, "embeddings", b"1e6,2,3,4\n0,0,0,1\n2,2,2,2\n")
    at.select_slider(key="overflow_c").set_value(50).run()
    assert not at.exception
    assert any("X × 50" in e and "1e+06" in e for e in errors(at)), errors(at)
