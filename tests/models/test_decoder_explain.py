"""`explorer.models.explain`: every cell of every chart of a Llama-family layer
and its generation, explained, recomputes to the number the chart draws; on tiny
random models of each architecture (`tests.support.tiny_decoders`), offline."""

from __future__ import annotations

import math

import pytest

from explorer.lessons.explain import GIVEN, MASKED
from explorer.models import (
    EVERY_ARCHITECTURE,
    compute_decoder_trace,
    generate,
    head_slice,
    load_folder,
)
from explorer.models.explain import (
    CHARTS,
    GENERATION_CHARTS,
    STEP_CHARTS,
    chart_matrix,
    explain_decoder_cell,
)
from explorer.models.llama import DECODER_STEPS
from tests.support.tiny_decoders import TINY_DECODERS, save_tiny_decoder

SENTENCE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders")
    return {name: save_tiny_decoder(root / name, name) for name in TINY_DECODERS}


def test_the_charts_are_the_steps_of_the_trace_and_the_heads_share():
    assert set(STEP_CHARTS) == set(DECODER_STEPS) - {"token_ids"} | {"head_output"}
    assert CHARTS == STEP_CHARTS + GENERATION_CHARTS


@pytest.mark.parametrize("architecture", list(TINY_DECODERS))
def test_every_cell_recomputes_from_its_terms(folders, architecture):
    model = load_folder(folders[architecture], architectures=EVERY_ARCHITECTURE)
    for layer in range(model.n_layers):  # Gemma 3: a sliding layer, then a full one
        trace = compute_decoder_trace(model, SENTENCE, layer=layer)
        run = generate(model, input_ids=list(trace.config.input_ids), max_new_tokens=3,
                       layer=layer)
        labels = list(run.tokens)
        hs = head_slice(trace, model.n_heads - 1)  # the last K/V head's group
        drawn = 0
        for chart in CHARTS:
            try:
                matrix = chart_matrix(trace, hs, chart, run, 1)
            except KeyError:  # a step this architecture has not (biases, QK-norm)
                continue
            drawn += 1
            for row in range(matrix.shape[0]):
                for col in range(matrix.shape[1]):
                    exp = explain_decoder_cell(trace, hs, chart, row, col, labels, run, 1)
                    value = float(matrix[row, col])
                    if exp.combine == MASKED:
                        assert value == -math.inf, (chart, row, col)
                    elif exp.combine != GIVEN:
                        assert exp.result() == pytest.approx(value, rel=1e-4, abs=1e-5), (
                            architecture, layer, chart, row, col)
        assert drawn >= 27, architecture  # Llama: no biases, no QK-norm


def test_a_cell_outside_its_chart_is_an_index_error(folders):
    model = load_folder(folders["llama"], architectures=EVERY_ARCHITECTURE)
    trace = compute_decoder_trace(model, SENTENCE)
    hs = head_slice(trace, 0)
    with pytest.raises(IndexError, match="attn_weights has no cell"):
        explain_decoder_cell(trace, hs, "attn_weights", 6, 0, list(trace.tokens))
    with pytest.raises(KeyError):
        explain_decoder_cell(trace, hs, "q_norm", 0, 0, list(trace.tokens))  # no QK-norm
    with pytest.raises(KeyError):
        explain_decoder_cell(trace, hs, "generated_weights", 0, 0, list(trace.tokens))
