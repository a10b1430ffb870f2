"""Click-to-explain on the Modern attention page (`explorer.modern.explain`):
every cell of every chart, over random sizes, recomputed from its terms equals
the number the page draws, and the terms are the recipe's own (checked against
the RoPE formula written out, F.softmax and the online softmax's final O)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.lessons.explain import GIVEN, MASKED, SCALED, SUM
from explorer.modern import attention as modern
from explorer.modern.attention import INTERLEAVED, ROTATE_HALF, ModernConfig
from explorer.modern.explain import CHARTS, explain_modern_cell

FLOAT32 = 2e-5


def _trace(n: int, d_in: int, n_kv: int, group: int, head_dim: int, pairing: str, seed: int,
           tile_step: int = 0, offset: int = 0):
    x = torch.randn(n, d_in, generator=torch.Generator().manual_seed(seed))
    block = max(1, n // 2)
    config = ModernConfig(n_heads=n_kv * group, n_kv_heads=n_kv, head_dim=head_dim,
                          rope_pairing=pairing, rope_offset=offset, window=min(2, n),
                          prefill=min(2, n), block_q=block, block_k=block)
    walked = modern.causal_tiles(n, block, block)
    tile = walked[tile_step % len(walked)]
    return modern.modern_attention(x, config, seed, tile), [f"t{i}" for i in range(n)]


def _cells(trace, chart: str, head: int):
    """Every (row, col) the chart draws, rows by token position."""
    n, d = trace.n_tokens, trace.config.head_dim
    if chart == "tile-output":
        step = next(s for s in trace.flash.steps if s.O is not None)
        return [(r, c) for r in step.rows for c in range(d)]
    if chart == "decode-row":  # the keys in the cache: 0 … row
        return [(r, c) for r in range(n) for c in range(r + 1)]
    cols = d if chart in ("cos", "sin", "q-before", "q-after", "k-shared") else n
    return [(r, c) for r in range(n) for c in range(cols)]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), d_in=st.integers(1, 6), n_kv=st.integers(1, 2),
       group=st.integers(1, 3), half=st.integers(1, 3), pairing=st.sampled_from(
           modern.ROPE_PAIRINGS), seed=st.integers(0, 2**31), tile=st.integers(0, 20),
       offset=st.integers(0, 40))
def test_every_cell_of_every_chart_is_recomputed_from_its_terms(n, d_in, n_kv, group, half,
                                                                 pairing, seed, tile, offset):
    trace, labels = _trace(n, d_in, n_kv, group, 2 * half, pairing, seed, tile, offset)
    for chart in CHARTS:
        head = seed % trace.config.n_heads
        for row, col in _cells(trace, chart, head):
            e = explain_modern_cell(trace, chart, row, col, head, labels)
            assert math.isclose(e.result(), e.value, rel_tol=FLOAT32, abs_tol=FLOAT32), (
                chart, row, col, e)


def test_the_values_are_the_ones_the_page_draws():
    trace, labels = _trace(5, 4, 2, 2, 4, ROTATE_HALF, 7)
    c = trace.config
    head, kv = 3, modern.kv_head_of(c.n_heads, c.n_kv_heads)[3]
    assert kv == 1
    e = explain_modern_cell(trace, "scores-after", 4, 2, head, labels)
    assert e.value == float(trace.scores_rope[head, 4, 2]) and e.combine == SCALED
    q, k = trace.queries_rope[head, 4], trace.keys_rope[kv, 2]
    assert math.isclose(e.result(), float(q @ k) / 2, rel_tol=1e-6)
    assert e.position == "head 3, row 4, column 2"
    e = explain_modern_cell(trace, "k-shared", 1, 0, head, labels)
    assert e.value == float(trace.keys_rope[kv, 1, 0]) and e.position.startswith("K/V head 1")
    e = explain_modern_cell(trace, "gqa-weights", 3, 1, head, labels)
    softmax = torch.softmax(trace.scores_rope[head, 3, :4], dim=-1)
    assert math.isclose(e.result(), float(softmax[1]), rel_tol=1e-6)
    assert len(e.terms) == 5 and e.terms[4].value == 0  # key 4 comes after: −∞, exp → 0


@pytest.mark.parametrize("pairing, col, partner, sign", [
    (ROTATE_HALF, 0, 2, -1), (ROTATE_HALF, 3, 1, 1), (INTERLEAVED, 0, 1, -1),
    (INTERLEAVED, 3, 2, 1)])
def test_a_rotated_number_names_its_partner_and_turns_it_the_right_way(pairing, col, partner,
                                                                        sign):
    """q′[c] = q[c]·cos + sign·q[partner]·sin: rotate-half pairs (i, i + d/2),
    interleaved (2i, 2i + 1); the first of a pair takes −partner·sin."""
    trace, labels = _trace(4, 3, 1, 1, 4, pairing, 3, offset=5)
    e = explain_modern_cell(trace, "q-after", 2, col, 0, labels)
    q, cos, sin = trace.queries[0, 2], trace.cos[2, col], trace.sin[2, col]
    assert e.combine == SUM and len(e.terms) == 2
    assert e.terms[1].factors == (sign * float(q[partner]), float(sin))
    assert math.isclose(e.result(), float(q[col] * cos + sign * q[partner] * sin), rel_tol=1e-6)
    assert f"dimension {partner}" in e.note


def test_interleaved_pairs_explained_as_rotate_half_do_not_add_up():
    """The broken variant: the terms of the other pairing miss the page's number."""
    trace, labels = _trace(5, 4, 1, 1, 6, INTERLEAVED, 11, offset=3)
    wrong = replace(trace, config=replace(trace.config, rope_pairing=ROTATE_HALF))
    misses = [abs(explain_modern_cell(wrong, "q-after", r, c, 0, labels).result()
                  - float(trace.queries_rope[0, r, c])) > 1e-4
              for r in range(1, 5) for c in range(6)]
    assert sum(misses) > 10


def test_the_tile_output_is_the_online_sum_rescaled_to_the_running_maximum():
    """O after the last key tile, divided by ℓ, is the attention output: the
    explanation's terms over every key read give the context row."""
    trace, labels = _trace(6, 4, 1, 2, 4, ROTATE_HALF, 5, tile_step=2)  # query tile 1, key tile 1
    step = next(s for s in trace.flash.steps if s.O is not None)
    assert (step.q_tile, step.k_tile) == (1, 1)
    row, head = 4, 1
    es = [explain_modern_cell(trace, "tile-output", row, c, head, labels) for c in range(4)]
    l = float(step.l[head, row - step.rows.start])
    context = trace.causal.context[head, row]
    for c, e in enumerate(es):
        assert len(e.terms) == row + 1  # keys 0 … 4: causal, tiles 0 and 1
        assert math.isclose(e.result() / l, float(context[c]), rel_tol=1e-5, abs_tol=1e-6)
    with pytest.raises(IndexError):  # row 0 is in query tile 0, not shown
        explain_modern_cell(trace, "tile-output", 0, 0, head, labels)


def test_decoded_rows_masks_and_tables_say_where_their_numbers_come_from():
    trace, labels = _trace(5, 3, 1, 1, 4, ROTATE_HALF, 2, offset=7)
    with pytest.raises(IndexError):  # key 4 is not in the cache yet: not on the chart
        explain_modern_cell(trace, "decode-row", 3, 4, 0, labels)
    e = explain_modern_cell(trace, "decode-row", 3, 1, 0, labels)
    assert len(e.terms) == 4  # the cache holds keys 0 … 3
    assert math.isclose(e.result(), float(trace.causal.attn_weights[0, 3, 1]), rel_tol=1e-5)
    e = explain_modern_cell(trace, "mask-window", 4, 2, 0, labels)
    assert e.value == 0 and e.formula == "hidden: 4 − 2 < 2 ≤ 4 is false"
    e = explain_modern_cell(trace, "mask-window", 4, 3, 0, labels)
    assert e.value == 1 and e.formula.startswith("seen")
    e = explain_modern_cell(trace, "cos", 2, 1, 0, labels)
    theta = float(modern.rope_frequencies(4)[1])
    assert math.isclose(e.value, math.cos(9 * theta), rel_tol=1e-5)
    assert f"9 × {theta:.6g}" in e.formula
    e = explain_modern_cell(trace, "tile", 1, 3, 0, labels)
    assert e.combine == MASKED and e.result() == float("-inf")


def test_cells_outside_a_chart_are_refused():
    trace, labels = _trace(4, 3, 1, 2, 4, ROTATE_HALF, 1)
    for chart, row, col, head in (("scores-after", 4, 0, 0), ("q-after", 0, 4, 0),
                                  ("gqa-weights", 0, 0, 2), ("cos", -1, 0, 0)):
        with pytest.raises(IndexError):
            explain_modern_cell(trace, chart, row, col, head, labels)
    with pytest.raises(KeyError):
        explain_modern_cell(trace, "no-such-chart", 0, 0, 0, labels)
