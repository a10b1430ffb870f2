"""AppTest: the Experiments page, and explaining a clicked cell."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons import experiments as ex
from explorer.lessons.explain import explain_cell
from explorer.lessons.pages import EXPERIMENTS_PAGE, SELF_ATTENTION_PAGE
from explorer.ui.navigation import PAGES
from explorer.ui.state import EXPERIMENT_LABELS
from tests.support.apptest import all_charts, errors, open_link, open_page, page_link, z_values

PAGE = PAGES[EXPERIMENTS_PAGE][0]


def chart(at, key: str) -> dict:
    """The chart with widget key ``key``, as the browser gets it."""
    found = all_charts(at)
    assert key in found, list(found)
    return found[key]


def y_values(spec: dict, trace_index: int = 0) -> list[float]:
    y = spec["data"][trace_index]["y"]
    if isinstance(y, dict):
        import base64
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]).tolist()
    return list(y)


def open_tab(label: str, query: dict[str, str] | None = None):
    """The Experiments page with tab ``label`` open, by its link."""
    return open_link(PAGE, {"experiment": label, **(query or {})})


def test_experiments_page_loads():
    at = open_page(PAGE)
    assert not at.exception and errors(at) == []
    assert at.segmented_control(key="experiment").options == list(EXPERIMENT_LABELS.values())


def test_only_the_open_experiment_is_drawn_and_the_link_names_it():
    first = set(all_charts(open_page(PAGE)))
    assert first and all(key.startswith(("exp-entropy", "exp-max", "exp-scal", "exp-var"))
                         or "scal" in key for key in first), first
    at = open_tab("Permutation")
    assert not at.exception and errors(at) == []
    drawn = set(all_charts(at))
    assert "exp-perm-original" in drawn and not drawn & first
    assert page_link(at) == "?experiment=permutation"
    # The link's short name and the label of older links open the same experiment.
    assert set(all_charts(open_tab("permutation"))) == drawn


def test_a_bad_experiment_in_a_link_gets_a_message():
    at = open_tab("<b>nope</b>")
    assert not at.exception
    assert any("experiment must be one of scaling, temperature" in e and "permutation" in e
               for e in errors(at)), errors(at)
    assert "exp-entropy" in all_charts(at)  # the first tab, as without the parameter


def test_scaling_curves_follow_the_keys_slider():
    at = open_page(PAGE)
    before = y_values(chart(at, "exp-entropy"))
    at.select_slider(key="n_keys").set_value(64).run()
    after = y_values(chart(at, "exp-entropy"))
    curves = ex.scaling_curves(seed=123, n_keys=64)
    np.testing.assert_allclose(after, curves.entropy, rtol=1e-9)
    assert before != after
    # entropy with scaling stays above entropy without, for d_k >= 2
    scaled = y_values(chart(at, "exp-entropy"), 1)
    assert all(s > r for s, r, d in zip(scaled, after, curves.dims) if d >= 2)


def test_temperature_slider_changes_the_weights_and_entropy():
    at = open_tab("Temperature")
    at.select_slider(key="temperature").set_value(0.1).run()
    sharp = z_values(chart(at, "exp-temperature-weights"))
    at.select_slider(key="temperature").set_value(10.0).run()
    flat = z_values(chart(at, "exp-temperature-weights"))
    trace = compute_trace(AttentionConfig())
    expected = torch.softmax(trace["scaled_scores"].double() / 10.0, dim=-1)
    np.testing.assert_allclose(flat, expected.numpy(), atol=1e-9)
    assert sharp.max(axis=1).mean() > flat.max(axis=1).mean()
    entropy = y_values(chart(at, "exp-temperature-entropy"))
    np.testing.assert_allclose(entropy, ex.row_entropy(expected).numpy(), atol=1e-9)
    assert all(e < math.log(6) + 1e-9 for e in entropy)


def test_keepdim_trap_on_symmetric_and_asymmetric_scores():
    at = open_tab("softmax dim & keepdim")
    dim0 = z_values(chart(at, "exp-dim-dim0"))
    dim1 = z_values(chart(at, "exp-dim-dim1"))
    np.testing.assert_array_equal(dim0, dim1)  # X·Xᵀ is symmetric: the bug hides
    np.testing.assert_allclose(dim0.sum(axis=0), 1, atol=1e-9)  # columns, not rows
    assert not np.allclose(dim0.sum(axis=1), 1)
    at.radio(key="dim_scores").set_value(at.radio(key="dim_scores").options[1]).run()
    dim0 = z_values(chart(at, "exp-dim-dim0"))
    dim1 = z_values(chart(at, "exp-dim-dim1"))
    assert not np.allclose(dim0, dim1)  # Q·Kᵀ is not symmetric: the dims differ
    correct = z_values(chart(at, "exp-dim-softmax"))
    np.testing.assert_allclose(correct.sum(axis=1), 1, atol=1e-9)


def test_shuffling_permutes_the_context_and_positions_break_it():
    at = open_tab("Permutation")
    original = chart(at, "exp-perm-original")
    shuffled = chart(at, "exp-perm-shuffled")
    rows = list(original["data"][0]["y"])
    order = [rows.index(label) for label in shuffled["data"][0]["y"]]
    assert sorted(order) == list(range(6)) and order != list(range(6))
    np.testing.assert_allclose(z_values(shuffled), z_values(original)[order], atol=1e-5)
    at.button(key="shuffle").click().run()
    reshuffled = chart(at, "exp-perm-shuffled")["data"][0]["y"]
    assert list(reshuffled) != list(shuffled["data"][0]["y"])
    at.toggle(key="positions").set_value(True).run()
    difference = z_values(chart(at, "exp-perm-difference"))
    assert np.abs(difference).max() > 1e-3


def test_compare_two_configurations():
    at = open_tab("Compare two configurations")
    scaled = compute_trace(AttentionConfig())
    unscaled = compute_trace(AttentionConfig(scale=False))
    diff = z_values(chart(at, "exp-compare-attn_weights-diff"))  # B is unscaled by default
    np.testing.assert_allclose(diff, (unscaled["attn_weights"] - scaled["attn_weights"])
                               .double().numpy(), atol=1e-6)
    np.testing.assert_allclose(z_values(chart(at, "exp-compare-attn_weights-a")),
                               scaled["attn_weights"].numpy(), atol=1e-6)
    np.testing.assert_allclose(z_values(chart(at, "exp-compare-attn_weights-b")),
                               unscaled["attn_weights"].numpy(), atol=1e-6)
    at.toggle(key="b_scale").set_value(True).run()
    assert np.abs(z_values(chart(at, "exp-compare-attn_weights-diff"))).max() == 0
    at.toggle(key="b_causal").set_value(True).run()
    assert np.abs(z_values(chart(at, "exp-compare-context-diff"))).max() > 0
    at.text_input(key="a_seed").set_value("abc").run()
    assert not at.exception
    assert any("seed must be a whole number" in e for e in errors(at))


def test_a_clicked_score_cell_is_explained_with_its_numbers():
    at = open_page(PAGES[SELF_ATTENTION_PAGE][0])
    at.session_state["cell"] = ("attn_scores", 1, 0, 0)  # what a click on (is, Life) stores
    at.run()
    written = [c.value for c in at.code if "·" in c.value]
    assert written == ["(−0.2336)·0.5177 + 1.3464·(−0.3670) = (−0.6150)"]
    assert any(m.value.replace("\\", "") == '**ω["is", "Life"]** (row 1, column 0) = '
               'q["is"] · k["Life"] = Σ_i Q["is", i] · K["Life", i]' for m in at.markdown)


def test_big_matrices_explain_a_cell_picked_by_number():
    at = open_page(PAGES[SELF_ATTENTION_PAGE][0],
                   {"sentence": " ".join(f"w{i}" for i in range(70)), "d_in": "8"})
    assert not at.exception
    at.number_input(key="pick-chart-attn_scores-row").set_value(3)
    at.number_input(key="pick-chart-attn_scores-col").set_value(65)
    at.button(key="pick-chart-attn_scores-explain").click().run()
    trace = compute_trace(AttentionConfig(sentence=" ".join(f"w{i}" for i in range(70)), d_in=8))
    written = [c.value for c in at.code if "·" in c.value]
    assert written == [explain_cell(trace, "attn_scores", 3, 65).written()]
    value = float(trace["attn_scores"][3, 65])
    assert written[0].endswith(f"{abs(value):.4f}" + (")" if value < 0 else ""))


def _covers(spec: dict) -> None:
    """The chart's colour scale covers every finite value it shows, and a scale
    with negative values is the diverging one (white at 0)."""
    from explorer.render.figures import SIGNED_SCALE

    heat = spec["data"][0]
    values = z_values(spec)
    finite = values[np.isfinite(values)]
    assert heat["zmin"] <= finite.min() and heat["zmax"] >= finite.max(), (
        heat["zmin"], heat["zmax"], finite.min(), finite.max())
    if finite.min() < 0:
        assert heat["colorscale"] == SIGNED_SCALE and heat["zmin"] == -heat["zmax"]


def test_compare_with_sum_normalisation_scales_colours_to_the_values_shown():
    """Issue 31, point 5: with B = sum the weights run from −23 to 34; the
    panels' scale stayed 0–1."""
    at = open_tab("Compare two configurations", {"b_normalization": "sum"})
    assert not at.exception and errors(at) == []
    b = z_values(chart(at, "exp-compare-attn_weights-b"))
    assert b.min() < -1 and b.max() > 1  # the case: far outside 0–1
    for key, spec in all_charts(at).items():
        if key.startswith("exp-compare-"):
            _covers(spec)


def test_the_self_attention_pages_sum_weights_get_a_diverging_scale():
    at = open_link(PAGES[SELF_ATTENTION_PAGE][0], {"normalization": "sum"})
    assert not at.exception and errors(at) == []
    spec = all_charts(at)["chart-attn_weights"]
    assert z_values(spec).min() < -1  # −1.01 was drawn white, as 0.04
    _covers(spec)


def test_the_scaling_stars_are_told_apart_and_say_where_they_come_from():
    """Issue 31, point 9: two identical gold stars "your config (unscaled,
    scaled)" with no hover text; at 256 keys per query the stars still came
    from the sentence's 6 keys, and nothing said so."""
    trace = compute_trace(AttentionConfig())
    point = ex.config_point(trace)
    at = open_page(PAGE)
    for key, values in (("exp-entropy", (point.entropy, point.entropy_scaled)),
                        ("exp-max", (point.max_weight, point.max_weight_scaled))):
        stars = [s for s in chart(at, key)["data"] if "star" in str(s.get("marker", {}))]
        assert len(stars) == 2, key
        names = [s["name"] for s in stars]
        assert len(set(names)) == 2 and "√d_k" in names[1] and "√d_k" not in names[0], names
        assert "6 keys" in names[0] and "6 keys" in names[1], names
        assert stars[0]["marker"] != stars[1]["marker"]
        for star, value in zip(stars, values):
            assert star["hovertemplate"].count("%{y:.4f}") == 1, star
            assert y_values({"data": [star]}) == pytest.approx([value])
    at.select_slider(key="n_keys").set_value(256).run()
    note = " ".join(c.value for c in at.caption)
    assert "The stars are your sentence's own scores: 6 keys per query" in note, note
    assert "the curves use 256" in note, note
