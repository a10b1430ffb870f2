"""The Backward pass page as a visitor uses it (AppTest): every part drawn, its
numbers the backend's, a click explains a gradient's cell, a bad setting gets
its message in its own part while the rest stays, and the link."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import numpy as np
import pytest
import streamlit

from explorer import AttentionConfig, compute_trace
from explorer.core import literal
from explorer.core.trace import read_json
from explorer.lessons.backward.check import check_gradients
from explorer.lessons.backward.gradients import backward
from explorer.lessons.backward.loss import compute_loss
from explorer.lessons.backward.settings import (
    DEFAULT_LEARNING_RATE,
    MAX_LEARNING_RATE,
    MAX_TRAINING_CELLS,
    MAX_TRAINING_SECONDS,
    LossConfig,
    TrainingConfig,
    step_seconds,
)
from explorer.lessons.backward.terms import SYMBOLS, explain_gradient
from explorer.lessons.backward.training import train
from explorer.lessons.pages import BACKWARD_PAGE
from explorer.ui import backward as page_parts
from explorer.ui import backward_data, state
from explorer.ui.navigation import PAGES
from tests.support.apptest import all_charts, errors, open_link, page_link, read_numbers, z_values
from tests.ui.test_app_downloads import offered, sidebar_downloads  # noqa: F401 (a fixture)
from tests.ui.test_state import _differences, query_of, view_of

PAGE = PAGES[BACKWARD_PAGE][0]
HEADERS = ("1. The loss", "2. Every gradient, backwards",
           "3. Derived by hand, checked against autograd", "4. A few steps of training",
           "5. Why √d_k, from the gradient's side",
           "6. FlashAttention's backward pass, tile by tile")
DEFAULT = AttentionConfig(causal=True, n_heads=2, d_k=4)  # the page's defaults (entries)


def headers(at) -> list[str]:
    return [h.value for h in at.main.header]


@pytest.fixture(scope="module")
def opened():
    at = open_link(PAGE)
    assert not at.exception
    return at


def test_the_page_opens_with_every_part_and_no_error(opened):
    at = opened
    assert errors(at) == [] and errors(at, "warning") == []
    assert headers(at) == list(HEADERS)
    found = [s.value for s in at.success]
    assert found[0].startswith("✓ Every gradient equals `torch.autograd.grad`")
    assert found[1].startswith("✓ FlashAttention's dQ, dK and dV equal")
    keys = set(all_charts(at))
    grads = backward(compute_trace(DEFAULT), compute_loss(compute_trace(DEFAULT)))
    assert {f"backward-grad-{n}" for n in grads} | {f"chart-{n}" for n in grads} \
        <= keys
    assert {"backward-logits", "backward-grad-logits", "backward-jacobian",
            "backward-loss-curve", "backward-train-weights", "backward-scaling-jacobian",
            "backward-scaling-gradient", "backward-saturation", "backward-flash-tiles",
            "backward-flash-P", "backward-flash-dP", "backward-flash-dS"} <= keys


def test_the_numbers_are_the_backends(opened):
    at = opened
    trace = compute_trace(DEFAULT)
    loss = compute_loss(trace)
    grads = backward(trace, loss)
    charts = all_charts(at)
    np.testing.assert_array_equal(z_values(charts["backward-logits"]), loss.logits.numpy())
    for name in grads:  # head 0 shown, the default
        expected = grads.head(name, 0).numpy()
        np.testing.assert_array_equal(z_values(charts[f"backward-grad-{name}"]),
                                      expected.reshape(-1, expected.shape[-1]), err_msg=name)
    assert any(f"= {loss.value:.6f}" in latex.value for latex in at.latex)
    # The check table: one row per gradient, the loss first, each difference autograd's
    table = at.table[0].value  # labelled by its first column, the gradient
    checks = check_gradients(trace, LossConfig(), grads).parts
    assert list(table.index) == [literal.markdown(SYMBOLS.get(c.name, "L")) for c in checks]
    assert list(table["agree"]) == ["✓"] * len(checks)
    np.testing.assert_allclose(read_numbers(table[literal.markdown("largest |value|")]),
                               [c.scale for c in checks], atol=5e-5)
    # Training: the loss curve is train()'s, its loss falls, the weights are its last step's
    run = train(trace, LossConfig(), TrainingConfig())
    curve = charts["backward-loss-curve"]["data"][0]
    np.testing.assert_allclose(curve["y"], run.losses, rtol=1e-6)
    assert run.losses[-1] < run.losses[0]
    np.testing.assert_allclose(z_values(charts["backward-train-weights"]),
                               run.attn_weights[-1, 0].numpy(), atol=1e-6)


def test_a_click_on_a_gradient_cell_explains_it_with_the_tokens_names():
    # what the chart's click callback stores: the cell, and the query of a token row
    session: dict = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(streamlit, "session_state", session)
        page_parts._clicked("queries", 1, {"row": 3, "col": 0})
    assert session["grad_cell"] == ("queries", 3, 0, 1) and session["query"] == 3
    at = open_link(PAGE)
    at.session_state["head"] = 1
    at.session_state["grad_cell"] = ("queries", 3, 0, 1)
    at.run()
    assert not at.exception and errors(at) == []
    trace = compute_trace(DEFAULT)
    exp = explain_gradient(backward(trace, compute_loss(trace)), "queries", 3, 0, 1)
    assert exp.cell == 'dL/dQ_1["eat", 0]'
    assert any(exp.cell.replace('"', "") in m.value.replace("\\", "").replace('"', "")
               for m in at.main.markdown)
    assert exp.written() in [c.value for c in at.code]
    assert exp.result() == pytest.approx(exp.value, abs=1e-6)
    shapes = all_charts(at)["backward-grad-queries"]["layout"]["shapes"]
    assert any(s.get("x0") == -0.5 and s.get("y0") == 2.5 for s in shapes)  # outlined
    link = page_link(at)
    assert query_of(link)["grad_cell"] == "queries:3,0" and query_of(link)["head"] == "1"
    again = open_link(PAGE, query_of(link))
    assert exp.written() in [c.value for c in again.code]


def test_a_bad_learning_rate_gets_a_message_in_training_and_the_rest_stays():
    at = open_link(PAGE, {"learning_rate": "100"})
    assert not at.exception
    assert errors(at) == [f"learning_rate must be a number between 1e-06 and "
                          f"{MAX_LEARNING_RATE:g} (got '100')"]
    assert headers(at) == list(HEADERS)
    keys = set(all_charts(at))
    assert "backward-loss-curve" not in keys and "backward-train-weights" not in keys
    assert {"backward-grad-queries", "backward-flash-tiles", "backward-saturation"} <= keys
    # Typed in the box, the same; an empty box is the optimizer's default
    at.text_input(key="learning_rate").input("fast").run()
    assert "learning_rate must be a number" in errors(at)[0] and "(got 'fast')" in errors(at)[0]
    at.text_input(key="learning_rate").input("").run()
    assert errors(at) == []
    assert f"lr = {DEFAULT_LEARNING_RATE['sgd']:g}" in \
        all_charts(at)["backward-loss-curve"]["layout"]["title"]["text"]


def test_too_many_steps_for_the_size_say_how_many_fit():
    long = " ".join(f"w{i}" for i in range(300))
    at = open_link(PAGE, {"sentence": long, "n_heads": "1", "train_steps": "200"})
    assert not at.exception
    message = [e for e in errors(at) if "train_steps" in e]
    most = MAX_TRAINING_CELLS // 300 ** 2 - 1  # (steps + 1) × 1 head × 300² cells at most
    assert message and f"use at most {most} steps" in message[0]
    assert "backward-grad-queries" in all_charts(at)


def test_a_link_past_the_servers_cpu_is_refused_before_training(monkeypatch):
    """The most work a link could ask for before the bound (issue 52, item 10):
    288 tokens (the most that allow 200 steps), every dimension 1,024, 200
    AdamW steps, out_proj on; 53-82 s of the page's CPU then, 3.7 s now."""
    def never(*args, **kwargs):
        raise AssertionError("the training run was computed")
    monkeypatch.setattr(backward_data, "train", never)
    long = " ".join(f"w{i}" for i in range(288))
    link = {"sentence": long, "n_heads": "1", "d_in": "1024", "d_k": "1024", "d_v": "1024",
            "out_proj": "on", "optimizer": "adamw", "train_steps": "200"}
    start = time.process_time()
    at = open_link(PAGE, link)
    took = time.process_time() - start
    assert not at.exception
    config = AttentionConfig(sentence=long, d_in=1024, d_k=1024, d_v=1024, out_proj=True,
                             causal=True)
    most = int(MAX_TRAINING_SECONDS // step_seconds(config)) - 1
    message = [e for e in errors(at) if "training run" in e]
    assert message and "of the server's CPU" in message[0]
    assert f"this server allows {MAX_TRAINING_SECONDS:g} s" in message[0]
    assert f"use at most {most} steps" in message[0]
    assert "backward-loss-curve" not in all_charts(at)
    assert "backward-grad-queries" in all_charts(at)  # the other parts stay
    assert took < 20, f"{took:.1f} s of CPU"


@pytest.mark.slow
def test_the_largest_training_link_admitted_runs():
    """The same link with the most steps the bound admits (45): measured 21.6 s of
    the page's CPU on a busy 2-core machine (the training 5 s by its estimate)."""
    long = " ".join(f"w{i}" for i in range(288))
    config = AttentionConfig(sentence=long, d_in=1024, d_k=1024, d_v=1024, out_proj=True,
                             causal=True)
    most = int(MAX_TRAINING_SECONDS // step_seconds(config)) - 1
    link = {"sentence": long, "n_heads": "1", "d_in": "1024", "d_k": "1024", "d_v": "1024",
            "out_proj": "on", "optimizer": "adamw", "train_steps": str(most),
            "flash_block_q": "18", "flash_block_k": "18"}
    start = time.process_time()
    at = open_link(PAGE, link)
    took = time.process_time() - start
    assert not at.exception and errors(at) == []
    assert "backward-loss-curve" in all_charts(at)
    assert took < 120, f"{took:.1f} s of CPU"


def test_a_loss_that_cannot_be_computed_is_said_in_the_loss_part_and_the_rest_stays():
    at = open_link(PAGE, {"sentence": "alone"})
    assert not at.exception
    assert len(errors(at)) == 1 and "needs at least 2 tokens" in errors(at)[0]
    assert headers(at) == list(HEADERS)
    assert "backward-saturation" in all_charts(at)  # part 5 needs no loss


def test_the_target_loss_and_flash_tiles_follow_their_settings():
    at = open_link(PAGE, {"loss": "target", "target_seed": "9", "flash_block_q": "3",
                          "flash_block_k": "4", "flash_tile": "1", "causal": "false"})
    assert not at.exception and errors(at) == []
    config = AttentionConfig(n_heads=2, d_k=4)
    trace = compute_trace(config)
    loss = compute_loss(trace, LossConfig("target", 9))
    assert any(f"= {loss.value:.6f}" in latex.value for latex in at.latex)
    np.testing.assert_array_equal(z_values(all_charts(at)["backward-target"]),
                                  loss.targets.numpy())
    tiles = z_values(all_charts(at)["backward-flash-tiles"])
    # key tiles outside (4 keys), query tiles inside (3 queries): step 1 is rows 3-5, keys 0-3
    assert np.nanmax(tiles) == 2 and (tiles[3:, :4] == 2).all() and np.isnan(tiles[:, 4:]).all()
    at = open_link(PAGE, {"flash_block_q": "7"})
    assert [e for e in errors(at)] == ["block_q must be between 1 and the 6 tokens (got 7)"]
    assert "backward-loss-curve" in all_charts(at)


def _random_values(rng: random.Random) -> dict:
    """Valid values of every linked entry of the page, for sentences of 6 tokens."""
    n_heads = rng.choice((1, 2))
    block_q, block_k = rng.randrange(1, 7), rng.randrange(1, 7)
    tiles = -(-6 // block_q) * -(-6 // block_k)
    steps = rng.randrange(1, 12)
    return {"sentence": rng.choice(("the cat sat on the mat", "Life is short, eat dessert first")),
            "d_in": rng.choice((2, 4)), "d_k": rng.choice((2, 4)), "d_v": rng.choice((2, 4)),
            "seed": str(rng.randrange(10**6)), "causal": rng.random() < 0.5,
            "n_heads": n_heads, "dropout": 0.0,
            "dropout_seed": str(rng.randrange(100)),
            "out_proj": rng.choice(("auto", "on", "off")),
            "embedding": rng.choice(("table", "uniform")), "weight_init": "randn",
            "vocab_size": 1000, "scale": True, "normalization": "softmax",
            "loss": rng.choice(("next_token", "target")), "target_seed": str(rng.randrange(99)),
            "optimizer": rng.choice(("sgd", "adamw")),
            "learning_rate": rng.choice(("0.01", "0.2", "0.05")), "train_steps": steps,
            "train_step": rng.randrange(steps + 1), "flash_block_q": block_q,
            "flash_block_k": block_k, "flash_tile": rng.randrange(tiles),
            "head": n_heads - 1, "query": rng.randrange(6), "n_keys": rng.choice((4, 6, 16)),
            "grad_cell": ("attn_weights", rng.randrange(6), rng.randrange(6), 0),
            "csv_step": "attn_weights"}


DRAWS = 5


@pytest.mark.slow
def test_a_random_value_of_every_setting_survives_the_link():
    changed: set[str] = set()
    for seed in range(DRAWS):
        at = open_link(PAGE)
        values = _random_values(random.Random(seed))
        values["grad_cell"] = (*values["grad_cell"][:3], values["head"])
        for name, value in values.items():
            at.session_state[name] = value
        at.run()
        assert not at.exception and errors(at) == [], (seed, values)
        link = page_link(at)
        again = open_link(PAGE, query_of(link))
        assert not again.exception
        assert page_link(again) == link
        assert _differences(view_of(at, BACKWARD_PAGE), view_of(again, BACKWARD_PAGE)) == [], \
            link
        changed |= set(query_of(link))
    linked = {e.name for e in state.entries_of(BACKWARD_PAGE) if e.linked}
    untried = {"preset", "dropout", "weight_init", "vocab_size", "scale", "normalization",
               "embeddings", "W_query", "W_key", "W_value", "csv_step"}  # other pages' tests
    assert linked - untried - changed == set()


def test_every_widget_and_session_key_of_the_page_is_declared(monkeypatch):
    from tests.ui.test_state import test_every_widget_and_session_key_is_declared
    test_every_widget_and_session_key_is_declared(BACKWARD_PAGE, monkeypatch)


def test_the_downloads_run_and_print_the_pages_numbers(offered, tmp_path):  # noqa: F811
    at = open_link(PAGE, {"seed": "7"})
    assert not at.exception
    found = sidebar_downloads(at, offered)
    script, gradients = found["backward.py"], found["Every gradient (JSON)"]
    assert (script.file_name, script.mime) == ("backward.py", "text/x-python")
    assert (gradients.file_name, gradients.mime) == ("gradients.json", "application/json")
    path = tmp_path / "backward.py"
    path.write_text(script.make(), encoding="utf-8")
    done = subprocess.run([sys.executable, "-I", "-X", "utf8", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("loss = ")]
    shown = [latex.value for latex in at.latex if r"\log \mathrm{softmax}" in latex.value]
    assert printed and shown and f"&= {printed[0][7:]}" in shown[0]
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, seed=7))
    grads = backward(trace, compute_loss(trace))
    checked = [line.split()[0] for line in done.stdout.splitlines()
               if "max |hand - autograd|" in line and line.endswith("ok")]
    assert checked == ["loss", *grads]
    data = json.loads(gradients.make())
    assert list(data["steps"]) == list(grads)
    for name, grad in grads.items():
        np.testing.assert_allclose(np.array(data["steps"][name], dtype=np.float32), grad.numpy(),
                                   atol=1e-7, err_msg=name)
    saved = read_json(gradients.make())  # the trace's own reader reads it back
    assert list(saved) == list(grads)


# ---------------------------------------------------------------------------
# Issue 51: what the walk found
# ---------------------------------------------------------------------------
def _captions(at) -> list[str]:
    return [c.value.replace("\\", "").replace(literal.WORD_JOINER, "") for c in at.caption]


def test_the_default_head_dim_shows_the_scaling_in_the_scores_gradients(opened):
    """The old defaults gave head_dim 1: dL/dω, dL/dω̃ and dL/dω̂ were one chart three times."""
    assert DEFAULT.head_dim == 2
    charts = all_charts(opened)
    unscaled = z_values(charts["backward-grad-attn_scores"])
    scaled = z_values(charts["backward-grad-scaled_scores"])
    assert not np.array_equal(unscaled, scaled)
    np.testing.assert_allclose(unscaled, scaled / np.sqrt(2), rtol=1e-6)


def test_head_dim_one_carried_from_another_page_is_said_to_hide_the_scaling(opened):
    """The multi-head page's d_k = 2 over 2 heads, carried over in the session."""
    assert not any("head_dim is 1 here" in c for c in _captions(opened))
    at = open_link(PAGE, {"d_k": "2"})
    assert not at.exception and errors(at) == []
    said = [c for c in _captions(at) if c.startswith("head_dim is 1 here")]
    assert said == ["head_dim is 1 here (d_k = 2 over 2 heads), so ÷√1 changes nothing and "
                    "dL/dω equals dL/dω̃. Set d_k to 4 or n_heads to 1 to see the scaling at work."]
    charts = all_charts(at)
    np.testing.assert_array_equal(z_values(charts["backward-grad-attn_scores"]),
                                  z_values(charts["backward-grad-scaled_scores"]))


def test_the_scaling_stars_and_curves_use_the_same_keys_and_say_the_mask_is_not_applied(opened):
    """The stars took the sentence's 6 keys, the curves 16 (issue 51); as on the
    Experiments page, the curves follow the keys per query, the sentence's by default."""
    at = opened
    title = all_charts(at)["backward-saturation"]["layout"]["title"]["text"]
    assert "(6 keys)" in title
    assert at.select_slider(key="n_keys").value == 6
    assert any("6 keys per query, as the curves" in c and "without the causal mask" in c
               for c in _captions(at))
    at.select_slider(key="n_keys").set_value(16).run()
    assert "(16 keys)" in all_charts(at)["backward-saturation"]["layout"]["title"]["text"]
    assert any("while the curves use 16" in c for c in _captions(at))
    assert query_of(page_link(at))["n_keys"] == "16"


def test_a_learning_rate_that_blows_the_loss_up_is_warned_about():
    at = open_link(PAGE, {"learning_rate": "10"})
    assert not at.exception and errors(at) == []
    run = train(compute_trace(DEFAULT), LossConfig(), TrainingConfig("sgd", 10.0))
    warned = errors(at, "warning")
    assert len(warned) == 1 and warned[0].startswith(f"Training diverged at step {run.diverged_at}")
    assert "learning rate 10 is too large" in warned[0] and "0.5 is SGD's default" in warned[0]
    lost = next(i for i, x in enumerate(run.losses) if not np.isfinite(x))  # inf at last
    assert f"from step {lost} it is no longer a number" in warned[0]
    assert all_charts(at)["backward-loss-curve"]["layout"]["title"]["text"].startswith(
        f"Loss over {TrainingConfig().steps} steps of SGD (lr = 10)")
    at = open_link(PAGE, {"optimizer": "adamw"})
    assert errors(at, "warning") == []  # AdamW's default rate learns
    assert " steps of AdamW (lr = " in \
        all_charts(at)["backward-loss-curve"]["layout"]["title"]["text"]


def test_flashattentions_memory_is_counted_per_head_and_masked_tiles_are_named(opened):
    captions = _captions(opened)
    memory = [c for c in captions if c.startswith("At most one 2 × 2 tile per head")]
    assert memory == ["At most one 2 × 2 tile per head at a time: 16 bytes of float32 per head, "
                      "32 bytes for the 2 heads together, instead of the 6 × 6 weights "
                      "(144 bytes per head, 288 for the 2 heads)."]
    from explorer.modern.attention import SKIPPED_TILE
    masked = [c for c in captions if "hold only keys after their queries" in c]
    assert len(masked) == 1 and masked[0].startswith("3 of these 9 tiles (number 4, 7 and 8 "
                                                     "in the grid)")
    assert SKIPPED_TILE[1:] in masked[0] and "a real kernel walks 6 of the 9" in masked[0]


def test_a_clicked_dq_cell_prints_a_quotient_that_checks():
    at = open_link(PAGE)
    trace = compute_trace(DEFAULT)
    grads = backward(trace, compute_loss(trace))
    # the smallest dQ cell of head 0: four decimals would hide its sum
    values = grads.head("queries", 0).abs()
    row, col = divmod(int(values.argmin()), values.shape[1])
    at.session_state["grad_cell"] = ("queries", row, col, 0)
    at.run()
    written = explain_gradient(grads, "queries", row, col, head=0).written()
    assert written in [c.value for c in at.code]
    *_, quotient, result = written.replace("\u2212", "-").split(" = ")
    a, b = (float(x.strip("()")) for x in quotient.split(" / "))
    assert float(result.strip("()")) == pytest.approx(a / b, rel=1e-3)


def test_a_wholly_masked_tile_shown_is_said_to_be_zero():
    at = open_link(PAGE, {"flash_tile": "3"})  # key tile 1, query tile 0: above the diagonal
    assert not at.exception and errors(at) == []
    masked = [c for c in _captions(at) if "hold only keys after their queries" in c]
    assert "The tile shown is one of them: its P and dS are all 0" in masked[0]
    for which in ("P", "dS"):
        assert not np.any(z_values(all_charts(at)[f"backward-flash-{which}"])), which
    assert np.any(z_values(all_charts(at)["backward-flash-dP"]))  # dO·Vᵀ: not masked


def test_flashattention_for_another_computation_is_a_note_not_an_error():
    at = open_link(PAGE, {"dropout": "0.1"})
    assert not at.exception and errors(at) == []
    notes = errors(at, "info")
    assert any(n.startswith("FlashAttention's backward pass is shown for softmax") and
               "dropout=0.1" in n for n in notes)
    assert "backward-flash-tiles" not in all_charts(at)
