"""Tests for `explorer.lessons.explain` (how one cell came to be) and
`explorer.lessons.experiments` (the numbers behind the Experiments page).

Reference numbers come from the seed notebooks (file and cell named at each
use), from formulas worked out by hand, or from torch code written here, never
from a run of the code under test.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from explorer import AttentionConfig, compute_trace
from explorer.lessons import experiments as ex
from explorer.lessons.explain import (
    GIVEN,
    MASKED,
    PRODUCT,
    RATIO,
    SCALED,
    SUM,
    Explanation,
    explain_cell,
    number,
)
from explorer.lessons.presets import PRESETS as PRESETS_BY_SLUG
from tests.core.test_seeds import CONFIG_001, EMBEDDED_002, NAIVE_DIM_001, OMEGA_1_002, SCORES_001

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TOL = dict(rtol=1e-5, atol=1e-5)
MINUS = "\u2212"  # the minus sign `written()` uses, not the ASCII hyphen

WORDS = ["Life", "is", "short,", "eat", "dessert", "first", "the", "cat", "sat", "on",
         "mat.", "can't", "(why)", "Your", "journey", "starts", "with", "one", "step!"]

# The seed notebooks' printed numbers, kept once, in the golden tests.
X_002, OMEGA_1 = EMBEDDED_002, OMEGA_1_002
SEED_001, NAIVE_001 = CONFIG_001, NAIVE_DIM_001
PRINTED = 5e-5 + 1e-6  # half a unit in the 4th decimal, plus float32 noise


def divisors(n: int) -> list[int]:
    return [h for h in range(1, n + 1) if n % h == 0]


@st.composite
def configs(draw, **fixed) -> AttentionConfig:
    """A small random valid config (1..6 tokens, dims 1..8); ``fixed`` overrides."""
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    fields = dict(
        sentence=" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))),
        d_in=draw(st.integers(1, 8)),
        d_k=d_k,
        d_v=d_v,
        seed=draw(st.integers(0, 2**63 - 1)),
        vocab_size=100,
        embedding=draw(st.sampled_from(["table", "uniform"])),
        weight_init=draw(st.sampled_from(["randn", "rand", "linear"])),
        scale=draw(st.booleans()),
        normalization=draw(st.sampled_from(["softmax", "naive_softmax", "sum"])),
        causal=draw(st.booleans()),
        dropout=draw(st.sampled_from([0.0, 0.3])),
        n_heads=draw(st.sampled_from(divisors(math.gcd(d_k, d_v)))),
        out_proj=draw(st.booleans()),
    )
    fields.update(fixed)
    return AttentionConfig(**fields)


@pytest.fixture(scope="module")
def default_trace():
    return compute_trace(AttentionConfig())


# ---------------------------------------------------------------------------
# explain_cell: every cell of every step, over random configs
# ---------------------------------------------------------------------------
def cells(trace):
    """(name, head, row, col, value) for every cell of every step of ``trace``."""
    for name, tensor in trace.items():
        per_head = trace.config.n_heads > 1 and tensor.dim() == 3
        for head in range(tensor.shape[0]) if per_head else [0]:
            matrix = tensor[head] if per_head else tensor
            matrix = matrix[None] if matrix.dim() == 1 else matrix
            for row in range(matrix.shape[0]):
                for col in range(matrix.shape[1]):
                    yield name, head, row, col, float(matrix[row, col])


def error_scale(e: Explanation) -> float:
    """How much float32 rounding in the trace can move the cell, relative to 1.

    A sum of float32 products is off by about eps32 · Σ|terms|, not eps32 · |sum|;
    a ratio inherits its denominator's error divided by the denominator."""
    mags = math.fsum(abs(t.value) for t in e.terms)
    if e.combine == SUM:
        return max(1.0, mags + abs(e.offset))
    if e.combine == SCALED:
        return max(1.0, mags / e.divisor)
    if e.combine == RATIO:
        return max(1.0, abs(e.numerator / e.total) * mags / abs(e.total))
    return max(1.0, abs(e.value))


EXPECTED_COMBINE = {"queries": SUM, "keys": SUM, "values": SUM, "attn_scores": SUM,
                    "attn_weights": RATIO, "dropped_weights": PRODUCT, "context": SUM,
                    "output": SUM}


@SETTINGS
@given(configs())
def test_every_cell_is_recomputed_from_its_terms(config):
    trace = compute_trace(config)
    # The naive softmax may overflow float32 to NaN; tested on its own below.
    assume(bool(torch.isfinite(trace["attn_weights"]).all()))
    c, n = config, trace.n_tokens
    n_terms = {"queries": c.d_in, "keys": c.d_in, "values": c.d_in, "attn_scores": c.head_dim,
               "scaled_scores": c.head_dim, "masked_scores": c.head_dim, "attn_weights": n,
               "dropped_weights": 1, "context": n, "output": c.d_v}
    checked = set()
    for name, head, row, col, value in cells(trace):
        e = explain_cell(trace, name, row, col, head)
        checked.add(name)
        assert e.step == name
        assert e.value == value, (name, head, row, col)

        if name == "masked_scores" and col > row:
            assert e.combine == MASKED and e.terms == ()
            assert value == e.result() == float("-inf")
            assert e.written() == MINUS + "∞"
            continue
        if name in ("scaled_scores", "masked_scores"):
            assert e.combine == (SCALED if c.scale else SUM)
            if c.scale:
                assert e.divisor == math.sqrt(c.head_dim)
        elif name in EXPECTED_COMBINE:
            assert e.combine == EXPECTED_COMBINE[name], name
        else:  # drawn or typed: nothing to recompute
            assert e.combine == GIVEN and e.terms == () and e.result() == value
            continue
        assert len(e.terms) == n_terms[name], name

        where = (name, head, row, col, e.written())
        assert math.isclose(e.result(), value, rel_tol=1e-5, abs_tol=1e-5 * error_scale(e)), where
        if e.combine == SUM:
            total = math.fsum([t.value for t in e.terms] + [e.offset])
            assert math.isclose(total, value, rel_tol=1e-5, abs_tol=1e-5 * error_scale(e)), where
        if e.combine == RATIO:
            assert e.numerator == e.terms[col].value
            scores = [t.factors[0] for t in e.terms]
            shift = max(scores) if c.normalization == "softmax" else 0.0
            # exp is taken in float32, as the trace does, so overflow shows as inf
            exp_tol = 1e-12 if c.normalization == "sum" else 1e-5
            for s, t in zip(scores, e.terms):
                expected = (0.0 if s == float("-inf") else s) if c.normalization == "sum" \
                    else math.exp(s - shift)
                # below float32's smallest normal number (1.2e-38) exp loses digits
                assert math.isclose(t.value, expected, rel_tol=exp_tol, abs_tol=1e-37), where
        else:  # a term is the product of its factors
            for t in e.terms:
                assert math.isclose(t.value, math.prod(t.factors), rel_tol=1e-12,
                                    abs_tol=1e-300), (where, t)
        if name == "context" and c.n_heads > 1:
            assert e.note == f"Column {col} comes from head {col // c.head_dim_v}."
    assert checked == set(trace)


# ---------------------------------------------------------------------------
# explain_cell: hand-checked on the default config (002_8c91a21803773e04.txt)
# ---------------------------------------------------------------------------
def test_query_cell_is_x_row_times_w_query_column(default_trace):
    e = explain_cell(default_trace, "queries", 1, 0)
    w = default_trace["W_query"]
    assert e.cell == 'Q["is", 0]' and e.position == "row 1, column 0"
    assert e.combine == SUM and len(e.terms) == 3
    for j, t in enumerate(e.terms):
        assert t.label == f'X["is", {j}]·W_query[{j}, 0]'
        assert t.factors[0] == pytest.approx(X_002[1][j], abs=PRINTED)  # cell 9
        assert t.factors[1] == float(w[j, 0])
        assert t.value == pytest.approx(X_002[1][j] * float(w[j, 0]), abs=1e-4)
    q10 = sum(X_002[1][j] * float(w[j, 0]) for j in range(3))
    assert math.fsum(t.value for t in e.terms) == pytest.approx(q10, abs=1e-3)
    assert e.result() == pytest.approx(float(default_trace["queries"][1, 0]), rel=1e-6)


def test_score_row_1_totals_are_omega_1(default_trace):
    # 002_8c91a21803773e04.txt, cell 16: omega_1
    for key, omega in enumerate(OMEGA_1):
        e = explain_cell(default_trace, "attn_scores", 1, key)
        assert e.combine == SUM and len(e.terms) == 2
        assert e.total == pytest.approx(omega, abs=PRINTED)
        q, k = default_trace["queries"][1], default_trace["keys"][key]
        assert [t.factors for t in e.terms] == [(float(q[c]), float(k[c])) for c in range(2)]


def test_written_sum_ends_with_its_value_and_uses_a_real_minus(default_trace):
    negative = explain_cell(default_trace, "attn_scores", 1, 0).written()
    assert negative.endswith(f"= ({MINUS}0.6150)")  # omega_1[0] = -0.6150
    assert "-" not in negative
    positive = explain_cell(default_trace, "attn_scores", 1, 1).written()
    assert positive.endswith("= 2.4277")
    assert positive.count(" + ") == 1 and positive.count("·") == 2
    q = explain_cell(default_trace, "queries", 1, 0).written()
    assert q.startswith("0.1794·")  # X[1, 0], cell 9
    assert q.count(" + ") == 2


def test_the_line_under_the_terms_ends_with_the_cell_bias_included():
    # Output (2, 3) with 4 heads: the written line ends with the cell's value, and so
    # must the caption; "Σ of the terms" alone left out the bias b_out[3] = −0.0144.
    trace = compute_trace(AttentionConfig(d_k=4, d_v=4, n_heads=4, causal=True))
    e = explain_cell(trace, "output", 2, 3)
    bias = float(trace["b_out"][3])
    assert e.offset == bias and e.offset_name == "b_out[3]"
    value = number(e.value)
    assert e.written().endswith(f"({value})") and e.total_text().endswith(f"= {value}")
    assert f"+ b_out[3] = {number(e.total)} + ({number(bias)})" in e.total_text()
    for name, row, col in (("queries", 2, 0), ("scaled_scores", 2, 1), ("attn_weights", 3, 1),
                           ("context", 2, 3)):
        e = explain_cell(trace, name, row, col)
        assert e.total_text().endswith(number(e.result())), name
        assert number(e.result()) == number(e.value), name


def test_numbers_are_written_with_one_minus_sign_and_never_as_minus_zero():
    assert number(-0.0) == "0.0000" and number(-0.5) == f"{MINUS}0.5000"
    assert number(-0.00001) == f"{MINUS}1.0e{MINUS}5"  # not 0.0000 (issue 40)
    assert number(-2e7, 2) == f"{MINUS}2.00e+07" and number(float("-inf")) == f"{MINUS}∞"
    assert explain_cell(compute_trace(AttentionConfig()), "attn_scores", 1, 0).written() \
        .startswith(f"({MINUS}0.2336)")


def test_scaled_score_divides_by_sqrt_two(default_trace):
    e = explain_cell(default_trace, "scaled_scores", 1, 4)
    assert e.combine == SCALED and e.divisor == math.sqrt(2)
    assert e.result() == pytest.approx(OMEGA_1[4] / math.sqrt(2), abs=PRINTED)
    assert e.written().endswith(f"= {OMEGA_1[4] / math.sqrt(2):.4f}")


def test_softmax_weight_is_exp_shifted_by_row_max_over_the_sum(default_trace):
    s = [w / math.sqrt(2) for w in OMEGA_1]  # cell 22: softmax(omega_1 / d_k ** 0.5)
    weights = [math.exp(v) / math.fsum(math.exp(u) for u in s) for v in s]
    for key in range(6):
        e = explain_cell(default_trace, "attn_weights", 1, key)
        assert e.combine == RATIO
        assert e.numerator / e.total == pytest.approx(weights[key], abs=1e-4)
        assert e.result() == pytest.approx(float(default_trace["attn_weights"][1, key]), rel=1e-6)
        assert [t.factors[0] for t in e.terms] == pytest.approx(s, abs=PRINTED)
        assert e.terms[1].value == 1.0  # key 1 holds the row max: exp(0)
        assert [t.value for t in e.terms] == pytest.approx(
            [math.exp(v - s[1]) for v in s], abs=1e-4)
        assert float(e.note.split("=")[1]) == pytest.approx(s[1], abs=2e-4)


def test_sum_normalisation_is_score_over_row_sum():
    trace = compute_trace(AttentionConfig(normalization="sum"))
    for key in range(6):
        e = explain_cell(trace, "attn_weights", 1, key)
        assert e.combine == RATIO
        assert e.numerator == pytest.approx(OMEGA_1[key] / math.sqrt(2), abs=PRINTED)
        # The √2 cancels: omega_1[key] / Σ omega_1.
        assert e.result() == pytest.approx(OMEGA_1[key] / sum(OMEGA_1), abs=1e-4)
        assert e.result() == pytest.approx(float(trace["attn_weights"][1, key]), rel=1e-5)


def test_context_cell_is_weights_times_value_column(default_trace):
    a, v = default_trace["attn_weights"], default_trace["values"]
    e = explain_cell(default_trace, "context", 1, 3)
    assert e.combine == SUM and e.note == ""
    tokens = default_trace.tokens
    for j, t in enumerate(e.terms):
        assert t.label == f'α["is", "{tokens[j]}"]·V["{tokens[j]}", 3]'
        assert t.factors == (float(a[1, j]), float(v[j, 3]))
    expected = math.fsum(float(a[1, j]) * float(v[j, 3]) for j in range(6))
    assert e.result() == pytest.approx(expected, rel=1e-12)
    assert e.result() == pytest.approx(float(default_trace["context"][1, 3]), rel=1e-5)


def test_two_heads_second_half_of_context_comes_from_head_1():
    trace = compute_trace(AttentionConfig(n_heads=2))  # head_dim 1, head_dim_v 2
    x, w_v = trace["embeddings"], trace["W_value"]
    e = explain_cell(trace, "context", 2, 3)
    assert e.note == "Column 3 comes from head 1."
    assert e.formula == 'Σ_j α_1["short", j] · V_1[j, 1]'
    v_col3 = x @ w_v[:, 3]  # the full V's column 3 is head 1's local column 1
    for j, t in enumerate(e.terms):
        assert t.factors[0] == float(trace["attn_weights"][1, 2, j])
        assert t.factors[1] == pytest.approx(float(v_col3[j]), rel=1e-5, abs=1e-6)
    assert e.result() == pytest.approx(float(trace["context"][2, 3]), rel=1e-5)
    assert explain_cell(trace, "context", 2, 1).note == "Column 1 comes from head 0."


def test_two_heads_query_of_head_1_uses_its_own_w_query_column():
    trace = compute_trace(AttentionConfig(n_heads=2))
    x, w_q = trace["embeddings"], trace["W_query"]
    e = explain_cell(trace, "queries", 4, 0, head=1)
    assert e.cell == 'Q_1["dessert", 0]' and e.position == "head 1, row 4, column 0"
    assert [t.label for t in e.terms] == [f'X["dessert", {j}]·W_query[{j}, 1]' for j in range(3)]
    assert [t.factors[1] for t in e.terms] == [float(w_q[j, 1]) for j in range(3)]
    assert e.result() == pytest.approx(float(x[4] @ w_q[:, 1]), rel=1e-5)
    head0 = explain_cell(trace, "queries", 4, 0, head=0)
    assert [t.factors[1] for t in head0.terms] == [float(w_q[j, 0]) for j in range(3)]


def test_masked_scores_above_the_diagonal_are_minus_infinity():
    trace = compute_trace(AttentionConfig(causal=True))
    for row in range(6):
        for col in range(6):
            e = explain_cell(trace, "masked_scores", row, col)
            if col > row:
                assert e.combine == MASKED and e.result() == float("-inf") == e.value
                tokens = trace.tokens
                assert (f'Key "{tokens[col]}" (position {col}) comes after query '
                        f'"{tokens[row]}" (position {row})') in e.note
            else:
                assert e.combine == SCALED
                assert e.result() == pytest.approx(float(trace["scaled_scores"][row, col]),
                                                   rel=1e-5, abs=1e-6)
    e = explain_cell(trace, "masked_scores", 1, 0)
    assert e.result() == pytest.approx(OMEGA_1[0] / math.sqrt(2), abs=PRINTED)


def test_cells_outside_the_matrix_raise_index_error(default_trace):
    for name, row, col in [("queries", 6, 0), ("queries", 0, 2), ("queries", -1, 0),
                           ("attn_scores", 0, 6), ("values", 0, 4), ("token_ids", 1, 0)]:
        with pytest.raises(IndexError, match=name):
            explain_cell(default_trace, name, row, col)
    with pytest.raises(KeyError):
        explain_cell(default_trace, "no_such_step", 0, 0)


def test_explained_naive_softmax_overflow_matches_the_trace():
    # scores [[100, 10], [10, 1]]: exp(100) is inf in float32, inf/inf = NaN
    trace = compute_trace(AttentionConfig(
        sentence="a b", d_in=1, d_k=1, d_v=1, embedding="given", embeddings=[[10.0], [1.0]],
        weight_init="identity", scale=False, normalization="naive_softmax"))
    assert math.isnan(float(trace["attn_weights"][0, 0]))
    e = explain_cell(trace, "attn_weights", 0, 0)
    assert math.isnan(e.result())


def test_explained_sum_normalisation_with_zero_row_sum_matches_the_trace():
    # X = [[1], [-1]], W = I: scores [[1, -1], [-1, 1]], every row sums to 0
    trace = compute_trace(AttentionConfig(
        sentence="a b", d_in=1, d_k=1, d_v=1, embedding="given", embeddings=[[1.0], [-1.0]],
        weight_init="identity", scale=False, normalization="sum"))
    assert float(trace["attn_weights"][0, 0]) == math.inf
    e = explain_cell(trace, "attn_weights", 0, 0)
    assert e.result() == math.inf
    assert e.written().endswith("+∞")


# ---------------------------------------------------------------------------
# Experiments: why divide by √d_k
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def curves():
    return ex.scaling_curves(seed=0)


def slope(xs, ys) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
            / sum((x - mx) ** 2 for x in xs))


def test_unscaled_score_variance_is_d_k_at_every_d_k(curves):
    assert curves.dims == tuple(2**i for i in range(11)) and curves.n_keys == 16
    # Var(q·k) = d_k for N(0, 1) entries. 4,096 independent pairs per d_k put the
    # estimate within a few percent (standard error about 4.5% at d_k = 1), so
    # the plot agrees with the page's text everywhere, d_k = 1 included.
    for d, v in zip(curves.dims, curves.variance):
        assert 0.88 < v / d < 1.12, (d, v)
    fit = slope([math.log(d) for d in curves.dims], [math.log(v) for v in curves.variance])
    assert abs(fit - 1) < 0.02
    few_keys = ex.scaling_curves(seed=3, n_keys=6)  # a 6-token sentence: more rows, same pairs
    for d, v in zip(few_keys.dims, few_keys.variance):
        assert 0.85 < v / d < 1.15, (d, v)


def test_scaled_variance_stays_near_one(curves):
    for d, v, vs in zip(curves.dims, curves.variance, curves.variance_scaled):
        assert 0.88 < vs < 1.12, (d, vs)
        assert vs == pytest.approx(v / d, rel=1e-9)  # Var(s / √d) = Var(s) / d


def test_scaling_keeps_softmax_from_saturating(curves):
    log_n = math.log(curves.n_keys)
    for i, d in enumerate(curves.dims):
        assert 0 <= curves.entropy[i] <= log_n + 1e-9
        assert 1 / 16 <= curves.max_weight_scaled[i] < 0.5
        if d == 1:  # √1 = 1: nothing changes
            assert curves.entropy_scaled[i] == pytest.approx(curves.entropy[i])
        else:
            assert curves.entropy_scaled[i] > curves.entropy[i], d
    assert curves.max_weight[-1] > 0.9
    assert curves.max_weight[-1] > curves.max_weight[0] + 0.5
    assert curves.entropy[-1] < 0.25 * log_n


def test_scaling_curves_are_seeded_and_leave_the_global_rng_alone(curves):
    before = torch.get_rng_state()
    again = ex.scaling_curves(seed=0)
    assert torch.equal(torch.get_rng_state(), before)
    assert again == curves
    other = ex.scaling_curves(seed=1)
    assert other.variance != curves.variance and other.entropy != curves.entropy


def test_row_entropy_of_one_hot_and_uniform_rows():
    assert torch.equal(ex.row_entropy(torch.eye(5, dtype=torch.float64)), torch.zeros(5))
    for n in (1, 2, 5, 16):
        uniform = torch.full((3, n), 1 / n, dtype=torch.float64)
        torch.testing.assert_close(ex.row_entropy(uniform), torch.full((3,), math.log(n),
                                                                        dtype=torch.float64))
    zeros = torch.tensor([[0.5, 0.5, 0.0, 0.0]], dtype=torch.float64)  # 0 · log 0 = 0
    assert ex.row_entropy(zeros).item() == pytest.approx(math.log(2))
    # -(1/4 ln 1/4 + 3/4 ln 3/4), by hand
    assert ex.row_entropy(torch.tensor([0.25, 0.75])).item() == pytest.approx(0.5623351, abs=1e-6)
    assert ex.row_entropy(torch.rand(2, 3, 7)).shape == (2, 3)


# ---------------------------------------------------------------------------
# Temperature
# ---------------------------------------------------------------------------
def test_temperature_sharpens_and_flattens():
    scores = torch.tensor([[1.0, 2.0, 3.0], [0.3, -0.2, 0.1]], dtype=torch.float64)
    cold = ex.with_temperature(scores, 0.01)
    assert (cold.max(dim=-1).values > 0.99).all()
    assert cold.argmax(dim=-1).tolist() == [2, 0]
    hot = ex.with_temperature(scores, 1e6)
    torch.testing.assert_close(hot, torch.full_like(scores, 1 / 3), rtol=0, atol=1e-5)
    for t in (0.01, 0.5, 1.0, 7.0, 1e6):
        torch.testing.assert_close(ex.with_temperature(scores, t).sum(dim=-1),
                                   torch.ones(2, dtype=torch.float64))
    # By hand: scores [0, ln 3] -> T = 1: [1, 3] / 4; T = 0.5: [1, 9] / 10
    pair = torch.tensor([0.0, math.log(3)], dtype=torch.float64)
    torch.testing.assert_close(ex.with_temperature(pair, 1.0),
                               torch.tensor([0.25, 0.75], dtype=torch.float64))
    torch.testing.assert_close(ex.with_temperature(pair, 0.5),
                               torch.tensor([0.1, 0.9], dtype=torch.float64))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_temperature_must_be_positive(bad):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        ex.with_temperature(torch.zeros(2, 2), bad)


# ---------------------------------------------------------------------------
# Softmax's dim and the keepdim trap (001_c475e8729ba8e095.txt, cells 15-29)
# ---------------------------------------------------------------------------
def test_naive_softmax_without_keepdim_divides_each_column_by_one_number():
    # exps [[1, 2], [3, 1]]: row sums [3, 4], column sums [4, 3], both broadcast
    # along the last axis, so element (i, j) is divided by sums[j].
    x = torch.tensor([[1.0, 2.0], [3.0, 1.0]], dtype=torch.float64).log()
    torch.testing.assert_close(ex.softmax_naive_no_keepdim(x, 1),
                               torch.tensor([[1 / 3, 2 / 4], [3 / 3, 1 / 4]], dtype=torch.float64))
    torch.testing.assert_close(ex.softmax_naive_no_keepdim(x, 0),
                               torch.tensor([[1 / 4, 2 / 3], [3 / 4, 1 / 3]], dtype=torch.float64))


def test_keepdim_trap_on_the_symmetric_x_x_transpose():
    scores = compute_trace(SEED_001)["attn_scores"]
    torch.testing.assert_close(scores, torch.tensor(SCORES_001), rtol=0, atol=PRINTED)  # cell 15
    trap = ex.keepdim_trap(scores)
    assert trap.symmetric and trap.dims_agree
    torch.testing.assert_close(trap.naive_dim0, trap.naive_dim1, rtol=0, atol=1e-12)
    ones = torch.ones(6, dtype=torch.float64)
    for naive in (trap.naive_dim0, trap.naive_dim1):
        torch.testing.assert_close(naive.sum(dim=0), ones)  # columns sum to 1 (cells 22, 24)
        assert not torch.allclose(naive.sum(dim=1), ones, atol=1e-3)
        assert abs(naive[0].sum().item() - 1) > 0.1
        # On a symmetric matrix the column softmax is the row softmax, transposed.
        torch.testing.assert_close(naive, trap.correct.T)
    torch.testing.assert_close(trap.correct.sum(dim=1), ones)
    torch.testing.assert_close(trap.naive_dim1, torch.tensor(NAIVE_001, dtype=torch.float64),
                               rtol=0, atol=PRINTED)  # cell 20
    assert round(trap.naive_dim1[0, 0].item(), 4) == 0.1748
    torch.testing.assert_close(trap.difference, trap.naive_dim0 - trap.correct, rtol=0, atol=0)


def test_keepdim_trap_on_non_symmetric_q_k_transpose(default_trace):
    scores = default_trace["attn_scores"]
    trap = ex.keepdim_trap(scores)
    assert not trap.symmetric and not trap.dims_agree
    ones = torch.ones(6, dtype=torch.float64)
    torch.testing.assert_close(trap.correct.sum(dim=1), ones)
    torch.testing.assert_close(trap.correct, torch.softmax(scores.double(), dim=-1))
    torch.testing.assert_close(trap.naive_dim0.sum(dim=0), ones)
    assert not torch.allclose(trap.naive_dim1.sum(dim=1), ones, atol=1e-3)


# ---------------------------------------------------------------------------
# Permutation symmetry, frozen and permuted configs, positional encodings
# ---------------------------------------------------------------------------
@SETTINGS
@given(configs(causal=False, dropout=0.0, normalization="softmax"),
       st.integers(1, ex.MAX_SHUFFLES), st.sampled_from(["softmax", "naive_softmax"]))
def test_permuting_tokens_permutes_the_context(config, order_seed, normalization):
    trace = compute_trace(config.replace(normalization=normalization))
    assume(bool(torch.isfinite(trace["context"]).all()))
    n = trace.n_tokens
    order = ex.permutation(n, order_seed)
    assert sorted(order) == list(range(n))
    assert ex.permutation(n, order_seed) == order

    base = compute_trace(ex.frozen(trace))
    torch.testing.assert_close(base["context"], trace["context"], rtol=0, atol=1e-6)
    moved = compute_trace(ex.permuted(trace, order))
    assert moved.tokens == [trace.tokens[i] for i in order]
    torch.testing.assert_close(moved["embeddings"], trace["embeddings"][order], rtol=0, atol=0)
    torch.testing.assert_close(moved["context"], base["context"][order], **TOL)


PERMUTATIONS = [[1, 0, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 0, 1, 3, 4, 5], [0, 1, 2, 3, 5, 4]]


@pytest.mark.parametrize("order", PERMUTATIONS)
def test_positional_encodings_break_permutation_symmetry(default_trace, order):
    assert len(set(default_trace.tokens)) == 6
    pe = ex.sinusoidal_positions(6, 3)
    with_pe = compute_trace(ex.frozen(default_trace, positions=True))
    torch.testing.assert_close(with_pe["embeddings"], default_trace["embeddings"] + pe)
    # The identity order changes nothing: positions are added by position.
    same = compute_trace(ex.permuted(default_trace, list(range(6)), positions=True))
    torch.testing.assert_close(same["context"], with_pe["context"], rtol=0, atol=1e-6)

    moved = compute_trace(ex.permuted(default_trace, order, positions=True))
    torch.testing.assert_close(moved["embeddings"], default_trace["embeddings"][order] + pe)
    assert not torch.allclose(moved["context"], with_pe["context"][order], atol=1e-3)
    assert not torch.allclose(moved["context"], default_trace["context"][order], atol=1e-3)
    # Without positions the same order is a pure reordering.
    plain = compute_trace(ex.permuted(default_trace, order))
    torch.testing.assert_close(plain["context"], default_trace["context"][order], **TOL)


def test_sinusoidal_positions_match_the_formula():
    pe = ex.sinusoidal_positions(3, 4)
    assert pe.shape == (3, 4) and pe.dtype == torch.float32
    # pos 0: sin 0 = 0, cos 0 = 1; pos 1, d = 4: angles 1 and 1 / 10000^(2/4) = 1/100
    expected = torch.tensor([[0.0, 1.0, 0.0, 1.0],
                             [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
                             [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]])
    torch.testing.assert_close(pe, expected, rtol=0, atol=1e-6)


def test_sinusoidal_positions_with_odd_width():
    pe = ex.sinusoidal_positions(3, 5)
    assert pe.shape == (3, 5)
    # d = 5: 10000^(2/5) = 10^1.6, 10000^(4/5) = 10^3.2; the last column is a sine
    a1, a2 = 2 / 10**1.6, 2 / 10**3.2
    expected = [math.sin(2), math.cos(2), math.sin(a1), math.cos(a1), math.sin(a2)]
    torch.testing.assert_close(pe[2], torch.tensor(expected), rtol=0, atol=1e-6)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0]), rtol=0, atol=0)
    torch.testing.assert_close(ex.sinusoidal_positions(4, 1)[:, 0],
                               torch.tensor([math.sin(p) for p in range(4)]), rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------
# Comparing two configurations
# ---------------------------------------------------------------------------
def test_difference_is_b_minus_a(default_trace):
    unscaled = compute_trace(AttentionConfig(scale=False))
    diff = ex.difference(unscaled, default_trace, "scaled_scores")
    assert diff.dtype == torch.float64
    # ω/√2 − ω on row 1, from 002_8c91a21803773e04.txt cell 16
    expected = [w * (1 / math.sqrt(2) - 1) for w in OMEGA_1]
    torch.testing.assert_close(diff[1], torch.tensor(expected, dtype=torch.float64),
                               rtol=0, atol=PRINTED)
    torch.testing.assert_close(ex.difference(default_trace, unscaled, "scaled_scores"), -diff)
    assert not ex.difference(default_trace, default_trace, "context").any()


def test_difference_rejects_different_shapes(default_trace):
    wider = compute_trace(AttentionConfig(d_v=5))
    with pytest.raises(ValueError, match=r"context has shape \(6, 4\).*\(6, 5\)"):
        ex.difference(default_trace, wider, "context")
    shorter = compute_trace(AttentionConfig(sentence="Life is short"))
    with pytest.raises(ValueError, match="attn_weights"):
        ex.difference(default_trace, shorter, "attn_weights")


def test_scores_are_named_by_their_tokens_and_repeats_by_position():
    trace = compute_trace(AttentionConfig(sentence="the cat saw the dog"))
    e = explain_cell(trace, "attn_scores", 3, 0)
    assert e.cell == 'ω["the (3)", "the"]'
    assert e.formula == 'q["the (3)"] · k["the"] = Σ_i Q["the (3)", i] · K["the", i]'
    weights = explain_cell(compute_trace(AttentionConfig(causal=True)), "attn_weights", 2, 1)
    assert weights.formula.startswith('exp(ω̂["short", "is"] − m)')  # the masked scores' symbol


def test_a_drawn_weight_names_its_recipe_generator_and_seed(default_trace):
    e = explain_cell(default_trace, "W_key", 1, 0)
    assert e.combine == GIVEN
    assert e.formula == ("drawn by torch.randn(3, 2) from torch.Generator().manual_seed(123), "
                         "after the embedding table and W_query: the same number as "
                         "torch.manual_seed(123) followed by these draws in this order")
    x = explain_cell(default_trace, "embeddings", 1, 0)
    assert x.formula.startswith('row 4 of the embedding table (token "is" has id 4)')
    typed = compute_trace(PRESETS_BY_SLUG["illustrated"].config)
    assert explain_cell(typed, "W_value", 0, 1).formula.startswith("typed in")


def test_rounding_noise_in_a_difference_is_zero_but_a_real_difference_is_kept():
    values = torch.tensor([[1000.0, -3.0], [2.0, 0.5]], dtype=torch.float64)
    diff = torch.tensor([[1e-5, 2e-4], [-3e-4, 0.7]], dtype=torch.float64)
    cleaned = ex.without_noise(diff, values)  # noise: below 1e-6 × 1000 = 1e-3
    assert cleaned.tolist() == [[0.0, 0.0], [0.0, 0.7]]
    # The permutation experiment's case: rows that only moved differ by rounding alone.
    trace = compute_trace(AttentionConfig(d_in=8, d_k=8, d_v=8))
    order = ex.permutation(trace.n_tokens, seed=2)
    moved = compute_trace(ex.frozen(trace))["context"][order].double()
    shuffled = compute_trace(ex.permuted(trace, order))["context"].double()
    assert torch.count_nonzero(ex.without_noise(shuffled - moved, moved)) == 0
