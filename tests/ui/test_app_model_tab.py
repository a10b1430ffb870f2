"""AppTest: the Real model page's share of the browser tab (issue 41). What the
page draws is counted before anything is computed (`explorer.ui.real_model.drawn`)
and estimated as every page is (`explorer.server.budget.tab_bytes_drawn`); a page
past `BROWSER_BUDGET_BYTES` is refused with the figures, drawing nothing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from explorer import models
from explorer.models import EVERY_ARCHITECTURE, load_model
from explorer.render.payload import decode
from explorer.server import budget
from explorer.server.budget import MIB, tab_bytes_drawn
from explorer.ui import real_model
from tests.support.apptest import _MATRICES, all_charts, errors
from tests.support.tiny_decoders import save_tiny_decoder
from tests.support.tiny_models import save_tiny_bert, save_tiny_gpt2
from tests.ui.test_app_models import SENTENCE, offline, open_model  # noqa: F401

LONG = " ".join([SENTENCE] * 36)  # 216 tokens: 16 heads' (n, n) variants no longer fit


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tab")
    return {"gpt2": save_tiny_gpt2(root / "gpt2", n_layer=3, n_head=4),
            "gpt2-16-heads": save_tiny_gpt2(root / "gpt2-16", n_layer=2, n_head=16),
            "bert": save_tiny_bert(root / "bert"),
            "llama": save_tiny_decoder(root / "llama", "llama"),
            "qwen3": save_tiny_decoder(root / "qwen3", "qwen3")}


def sent(at) -> dict[str, list[tuple[int, ...]]]:
    """Every chart's matrices' shapes, by the chart's key, as the browser gets them."""
    shapes = {}
    for element in at.get("bidi_component"):
        if element.proto.bytes:  # a chart (a picker is JSON alone)
            _, matrices = decode(element.proto.bytes, _MATRICES)
            shapes[element.proto.id.split("-", 2)[2]] = [m.shape for m in matrices]
    return shapes


@pytest.mark.parametrize("case, sentence", [
    ("gpt2", SENTENCE), ("gpt2-16-heads", SENTENCE), ("gpt2-16-heads", LONG),
    ("bert", SENTENCE), ("llama", SENTENCE), ("qwen3", SENTENCE)])
def test_the_count_is_every_number_the_page_sends(folders, case, sentence):
    at = open_model(folders[case], sentence=sentence)
    assert not at.exception and errors(at) == []  # a tiny model's page is not refused
    shapes = sent(at)
    assert "head-overview" in shapes and len(shapes) > 15
    model = load_model(folders[case], architectures=EVERY_ARCHITECTURE)
    n = len(models.model_input(model, sentence).ids)
    numbers = sum(int(np.prod(shape)) for matrices in shapes.values() for shape in matrices)
    if model.family == "decoder":  # the count takes the last generated token's scores and
        g = shapes["decoder-generated_rows"][0][0]  # weights (n + g keys), the page the first's
        assert shapes["decoder-generated_weights"] == [(1, n + 1)] and g > 1
        numbers += 2 * (g - 1)
    else:
        g = None
    assert real_model.drawn(model, n, 0, g) == (numbers, model.n_layers * model.n_heads)


def _model(layers: int, heads: int, d: int, causal: bool = True) -> SimpleNamespace:
    return SimpleNamespace(n_layers=layers, n_heads=heads, d_model=d, head_dim=d // heads,
                           causal=causal, family="classic")


def test_the_estimate_of_gpt2_sizes_at_the_longest_text():
    # 512 tokens (explorer.core.config.MAX_TOKENS, a model's max_tokens at most).
    cells, panels = real_model.drawn(_model(12, 12, 768), 512)  # GPT-2 small
    assert panels == 144
    # X, context, output (n, d); W_out (d, d); b_out; head 0's slices of W_query, W_key,
    # W_value (d, e: every head's would be 2.25 MiB, past HEADS_IN_BROWSER_BYTES), every
    # head's of the biases (e) and of Q, K, V and the context (n, e: 1.5 MiB); one head's
    # four (n, n) steps and the mask; the overview's 144 thumbnails of 32 × 32.
    n, d, e = 512, 768, 64
    assert cells == (3 * n * d + d * d + d + 3 * d * e + 3 * 12 * e + 4 * n * d + 5 * n * n
                     + 144 * 32 * 32)
    costs = budget.MODEL_TAB  # the page's own (real_model.tab_costs)
    assert 900 * MIB < tab_bytes_drawn(cells, panels, costs) < budget.BROWSER_BUDGET_BYTES
    # GPT-2 medium (24 × 16) fits; large (36 × 20): its overview alone is past it.
    assert tab_bytes_drawn(*real_model.drawn(_model(24, 16, 1024), 6), costs) < \
        budget.BROWSER_BUDGET_BYTES
    assert tab_bytes_drawn(*real_model.drawn(_model(36, 20, 1280), 6), costs) > \
        budget.BROWSER_BUDGET_BYTES


def test_a_model_with_many_heads_is_refused_with_the_figures_and_nothing_computed(
        tmp_path, monkeypatch):
    folder = save_tiny_gpt2(tmp_path / "wide", n_layer=36, n_head=20, n_embd=40)
    computed = []
    for name in ("compute_model_trace", "head_overview", "against_model"):
        monkeypatch.setattr(models, name, lambda *a, name=name, **k: computed.append(name))
    at = open_model(folder)
    assert not at.exception, at.exception
    shown = errors(at)
    assert len(shown) == 1, shown
    assert "of your browser's memory to draw (6 tokens, 36 layers × 20 heads," in shown[0]
    assert "at most 1,536 MB in a tab" in shown[0] and "fewer layers and heads" in shown[0]
    assert all_charts(at) == {} and computed == []


def test_a_decoder_past_a_small_budget_is_refused_too(folders, monkeypatch):
    monkeypatch.setattr(budget, "BROWSER_BUDGET_BYTES", budget.LESSON_TAB.base)
    at = open_model(folders["llama"])
    assert not at.exception, at.exception
    shown = errors(at)
    assert len(shown) == 1 and "(6 tokens, 2 layers × 4 heads," in shown[0], shown
    assert all_charts(at) == {}
