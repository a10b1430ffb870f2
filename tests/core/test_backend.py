"""Unit tests for the compute backend: tokenizer, limits, recipes, trace.

Reference numbers are built here from torch's own global-RNG code
(``torch.manual_seed`` then ``nn.Embedding`` / ``torch.randn`` / ``nn.Linear`` /
``nn.Dropout``), never copied from a run of the code under test. The global RNG
is always used inside ``torch.random.fork_rng()`` so the tests leave it alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from explorer import STEPS, AttentionConfig, ConfigError, compute_trace
from explorer.core import recipes
from explorer.core.config import Matrix
from explorer.core.tokenizer import build_vocab, token_ids, tokenize
from explorer.core.trace import read_json

SENTENCE = "Life is short, eat dessert first"
TOKENS = ["Life", "is", "short", "eat", "dessert", "first"]
MAX_SEED = 2**63 - 1
TABLE_CAP = 64 * 2**20  # vocab_size * d_in, elements

DEFAULT_STEPS = ["token_ids", "embeddings", "W_query", "W_key", "W_value",
                 "queries", "keys", "values", "attn_scores", "scaled_scores",
                 "attn_weights", "context"]


def words(n: int) -> str:
    """A sentence of ``n`` distinct word tokens."""
    return " ".join(f"w{i}" for i in range(n))


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------
def test_tokenize_the_book_sentence():
    assert tokenize(SENTENCE) == TOKENS


def test_tokenize_splits_on_any_whitespace():
    assert tokenize("  a\tb\nc   d ") == ["a", "b", "c", "d"]


def test_tokenize_strips_only_listed_punctuation_at_the_ends():
    sentence = '"Hello," (she) said: well... ok?! no; yes!'
    assert tokenize(sentence) == ["Hello", "she", "said", "well", "ok", "no", "yes"]


def test_tokenize_keeps_inner_punctuation_and_strips_the_ends_by_the_stated_rule():
    assert tokenize("can't e.g. don't!") == ["can't", "e.g", "don't"]
    # tokenizer.RULE: an apostrophe, a dash and brackets are punctuation (P*) at the ends.
    assert tokenize("'tis rock'n'roll'") == ["tis", "rock'n'roll"]
    assert tokenize("-dash- [x]") == ["dash", "x"]
    # Symbols (S*) are not punctuation: they stay.
    assert tokenize("$5 +x €") == ["$5", "+x", "€"]


def test_tokenize_drops_empty_pieces():
    assert tokenize("hello , world") == ["hello", "world"]
    assert tokenize(",,, !!") == []
    assert tokenize("") == []


def test_tokenize_keeps_case():
    assert tokenize("The the THE") == ["The", "the", "THE"]


def test_tokenize_rejects_unknown_tokenizer():
    with pytest.raises(ValueError, match="bpe"):
        tokenize("a b", "bpe")


def test_vocabulary_is_sorted_and_unique():
    tokens = ["the", "cat", "The", "cat", "sat", "the"]
    assert build_vocab(tokens) == ["The", "cat", "sat", "the"]  # capitals first


def test_token_ids_of_the_book_sentence():
    # 002_8c91a21803773e04.txt: sorted vocab Life, dessert, eat, first, is, short
    ids = token_ids(TOKENS)
    assert ids.dtype == torch.long
    assert ids.tolist() == [0, 4, 5, 2, 1, 3]


def test_token_ids_repeat_for_repeated_words():
    assert token_ids(["b", "a", "b"]).tolist() == [1, 0, 1]


def test_trace_tokens_and_ids():
    trace = compute_trace(AttentionConfig(sentence=SENTENCE))
    assert trace.tokens == TOKENS
    assert trace["token_ids"].tolist() == [0, 4, 5, 2, 1, 3]


# ---------------------------------------------------------------------------
# Limits and messages
# ---------------------------------------------------------------------------
def given_rows(n_rows: int, n_cols: int, value=0.5) -> list[list]:
    return [[value] * n_cols for _ in range(n_rows)]


def with_cell(row: int, col: int, cell) -> list[list]:
    rows = given_rows(6, 3)
    rows[row][col] = cell
    return rows


BAD_CONFIGS = [
    # (kwargs, field, substrings the message must contain)
    pytest.param(dict(d_in=0), "d_in", ["d_in", "between 1 and 1024", "got 0"], id="d_in=0"),
    pytest.param(dict(d_k=1025), "d_k", ["d_k", "between 1 and 1024", "got 1025"], id="d_k=1025"),
    pytest.param(dict(d_v=-1), "d_v", ["d_v", "between 1 and 1024", "got -1"], id="d_v=-1"),
    pytest.param(dict(seed=-1), "seed", ["seed", f"between 0 and {MAX_SEED}", "got -1"],
                 id="seed=-1"),
    pytest.param(dict(seed=2**63), "seed", ["seed", f"between 0 and {MAX_SEED}", f"got {2**63}"],
                 id="seed=2**63"),
    pytest.param(dict(seed="abc"), "seed", ["seed", f"between 0 and {MAX_SEED}", "'abc'"],
                 id="seed=abc"),
    pytest.param(dict(sentence=""), "sentence", ["sentence", "between 1 and 512", "got 0"],
                 id="empty-sentence"),
    pytest.param(dict(sentence=words(561)), "sentence",
                 ["sentence", "between 1 and 512", "got 561"], id="561-words"),
    pytest.param(dict(sentence=",,, !!"), "sentence", ["sentence", "between 1 and 512", "got 0"],
                 id="only-punctuation"),
    pytest.param(dict(vocab_size=5), "vocab_size", ["vocab_size", "(6)", "1,000,000", "got 5"],
                 id="vocab-smaller-than-vocabulary"),
    pytest.param(dict(vocab_size=1_000_000, d_in=100), "vocab_size",
                 ["vocab_size", "d_in", f"{TABLE_CAP:,}", "1,000,000", "100,000,000"],
                 id="table-above-64Mi"),
    pytest.param(dict(weight_init="identity", d_in=3, d_k=2, d_v=3), "weight_init",
                 ["weight_init", "identity", "d_k = d_v = d_in", "d_in=3", "d_k=2"],
                 id="identity-needs-square"),
    pytest.param(dict(normalization="max"), "normalization",
                 ["normalization", "'softmax'", "'naive_softmax'", "'sum'", "'max'"],
                 id="unknown-normalization"),
    pytest.param(dict(n_heads=2, d_k=5), "n_heads",
                 [("n_heads must divide both d_k=5 and d_v=4; choose one of 1 (got 2). 2 heads "
                   "need d_k and d_v divisible by 2: e.g. d_k = 6.")], id="d_k-not-divisible"),
    pytest.param(dict(n_heads=3, d_k=3, d_v=4), "n_heads",
                 [("n_heads must divide both d_k=3 and d_v=4; choose one of 1 (got 3). 3 heads "
                   "need d_k and d_v divisible by 3: e.g. d_v = 6.")], id="d_v-not-divisible"),
    pytest.param(dict(n_heads=3, d_k=1024, d_v=1024), "n_heads",
                 [("(got 3). 3 heads need d_k and d_v divisible by 3: e.g. d_k = 1023 and "
                   "d_v = 1023.")], id="widths-at-the-limit"),
    pytest.param(dict(n_heads=32, sentence=words(400), d_k=32, d_v=32), "n_heads",
                 ["n_heads × n_tokens²", "got 32 × 400²", "use at most 26 heads."],
                 id="too-many-cells"),
    pytest.param(dict(dropout=1.0), "dropout", ["dropout", "[0, 1)", "1.0"], id="dropout=1"),
    pytest.param(dict(dropout=-0.1), "dropout", ["dropout", "[0, 1)", "-0.1"], id="dropout<0"),
    pytest.param(dict(embedding="given", embeddings=given_rows(5, 3)), "embeddings",
                 ["embeddings", "6 rows", "got 5"], id="given-too-few-rows"),
    pytest.param(dict(embedding="given", embeddings=given_rows(6, 2)), "embeddings",
                 ["embeddings", "row 0", "'Life'", "3 columns", "got 2"], id="given-narrow-rows"),
    pytest.param(dict(embedding="given", embeddings=with_cell(2, 1, float("nan"))), "embeddings",
                 ["embeddings", "row 2", "'short'", "dim 1", "finite", "nan"], id="given-nan"),
    pytest.param(dict(embedding="given", embeddings=with_cell(4, 0, None)), "embeddings",
                 ["embeddings", "row 4", "'dessert'", "dim 0", "is empty", "type a number"],
                 id="given-none"),
    pytest.param(dict(embedding="given", embeddings=with_cell(5, 2, "x")), "embeddings",
                 ["embeddings", "row 5", "'first'", "dim 2", "number", "'x'"], id="given-text"),
    pytest.param(dict(embedding="given"), "embeddings", ["embeddings", "required"],
                 id="given-missing"),
    pytest.param(dict(weight_init="given", W_query=given_rows(3, 2), W_key=given_rows(3, 2),
                      W_value=given_rows(2, 4)), "W_value", ["W_value", "3 rows", "got 2"],
                 id="given-W_value-shape"),
]


@pytest.mark.parametrize("kwargs, field, parts", BAD_CONFIGS)
def test_bad_config_raises_config_error_naming_field_range_and_value(kwargs, field, parts):
    with pytest.raises(ConfigError) as info:
        AttentionConfig(**kwargs)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.field == field
    message = str(error)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


@pytest.mark.parametrize("value", [[0.5] * 6, 5, torch.zeros(6)], ids=["flat-list", "scalar", "1-d"])
def test_given_embeddings_that_are_not_a_matrix_raise_config_error(value):
    with pytest.raises(ConfigError) as info:
        AttentionConfig(embedding="given", embeddings=value)
    assert info.value.field == "embeddings"


def test_config_error_is_the_one_value_error_type():
    assert issubclass(ConfigError, ValueError)


def test_table_at_exactly_64Mi_elements_passes_and_one_more_row_fails():
    config = AttentionConfig(d_in=1024, vocab_size=TABLE_CAP // 1024)
    assert config.vocab_size == 65536 and config.vocab_size * config.d_in == TABLE_CAP
    with pytest.raises(ConfigError) as info:
        AttentionConfig(d_in=1024, vocab_size=TABLE_CAP // 1024 + 1)
    assert info.value.field == "vocab_size"


def test_dimension_bounds_pass():
    config = AttentionConfig(d_in=1, d_k=1024, d_v=1024, vocab_size=6)
    assert (config.d_in, config.d_k, config.d_v) == (1, 1024, 1024)


def test_512_tokens_pass_and_compute():
    trace = compute_trace(AttentionConfig(sentence=words(512), vocab_size=512))
    assert len(trace.tokens) == 512
    assert trace["attn_weights"].shape == (512, 512)
    with pytest.raises(ConfigError):
        AttentionConfig(sentence=words(513), vocab_size=513)


def test_largest_seed_passes_and_matches_global_seed():
    config = AttentionConfig(seed=MAX_SEED, vocab_size=10)
    assert config.seed == MAX_SEED
    trace = compute_trace(config)
    with torch.random.fork_rng():
        torch.manual_seed(MAX_SEED)
        table = nn.Embedding(10, 3).weight.detach()
        w_query = torch.randn(3, 2)
    assert torch.equal(trace["embeddings"], table[trace["token_ids"]])
    assert torch.equal(trace["W_query"], w_query)


def test_seed_given_as_text_is_parsed():
    config = AttentionConfig(seed="42")
    assert config.seed == 42 and type(config.seed) is int
    assert torch.equal(compute_trace(config)["context"],
                       compute_trace(AttentionConfig(seed=42))["context"])


def test_config_is_frozen():
    config = AttentionConfig()
    with pytest.raises(AttributeError):
        config.d_k = 5  # type: ignore[misc]


# ---------------------------------------------------------------------------
# Recipes reproduce torch's global-RNG code
# ---------------------------------------------------------------------------
def test_default_reproduces_embedding_table_then_randn_weights():
    # 002_8c91a21803773e04.txt, cells 7 and 11
    trace = compute_trace(AttentionConfig())
    with torch.random.fork_rng():
        torch.manual_seed(123)
        embed = nn.Embedding(50000, 3)
        w_query, w_key, w_value = torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 4)
    ids = torch.tensor([0, 4, 5, 2, 1, 3])
    assert torch.equal(trace["embeddings"], embed(ids).detach())
    assert torch.equal(trace["W_query"], w_query)
    assert torch.equal(trace["W_key"], w_key)
    assert torch.equal(trace["W_value"], w_value)


@pytest.mark.parametrize("vocab_size, d_in, chunk", [
    (50_000, 3, recipes.TABLE_CHUNK), (1, 1, 16), (1, 15, 16), (1, 17, 16), (5, 3, 16),
    (33, 17, 16), (33, 17, 32), (4096, 256, recipes.TABLE_CHUNK), (4097, 256, recipes.TABLE_CHUNK),
    (700, 3, 1024),
])
def test_table_drawn_in_chunks_equals_one_nn_embedding(monkeypatch, vocab_size, d_in, chunk):
    # 002_8c91a21803773e04.txt, cell 7: nn.Embedding(vocab_size, d_in) after torch.manual_seed,
    # then randn draws from the same stream. Chunk sizes cross the 16-value blocks and
    # the final redraw of a tensor whose size is not a multiple of 16.
    monkeypatch.setattr(recipes, "TABLE_CHUNK", chunk)
    rows, state = recipes.embedding_table(7, vocab_size, d_in)
    with torch.random.fork_rng():
        torch.manual_seed(7)
        table = nn.Embedding(vocab_size, d_in).weight.detach()
        after = torch.randn(5)
    assert rows.shape == (min(vocab_size, 512), d_in)
    assert torch.equal(rows, table[: rows.shape[0]])
    assert torch.equal(torch.randn(5, generator=torch.Generator().set_state(state)), after)


def test_uniform_embeddings_are_torch_rand():
    # 001_c475e8729ba8e095.txt, cell 2: torch.rand((6, 3))
    trace = compute_trace(AttentionConfig(embedding="uniform", seed=5, d_in=3, d_k=2, d_v=4))
    with torch.random.fork_rng():
        torch.manual_seed(5)
        x = torch.rand(6, 3)
        w_query, w_key, w_value = torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 4)
    assert torch.equal(trace["embeddings"], x)
    assert torch.equal(trace["W_query"], w_query)
    assert torch.equal(trace["W_key"], w_key)
    assert torch.equal(trace["W_value"], w_value)


def test_rand_weights_are_torch_rand_after_the_table():
    trace = compute_trace(AttentionConfig(weight_init="rand", seed=9, vocab_size=1000,
                                          d_in=4, d_k=3, d_v=5))
    with torch.random.fork_rng():
        torch.manual_seed(9)
        nn.Embedding(1000, 4)
        w_query, w_key, w_value = torch.rand(4, 3), torch.rand(4, 3), torch.rand(4, 5)
    assert torch.equal(trace["W_query"], w_query)
    assert torch.equal(trace["W_key"], w_key)
    assert torch.equal(trace["W_value"], w_value)


def test_linear_weights_are_nn_linear_transposed_after_the_table():
    trace = compute_trace(AttentionConfig(weight_init="linear", seed=11, vocab_size=777,
                                          d_in=5, d_k=3, d_v=7))
    with torch.random.fork_rng():
        torch.manual_seed(11)
        embed = nn.Embedding(777, 5)
        w_query = nn.Linear(5, 3, bias=False).weight.detach().T
        w_key = nn.Linear(5, 3, bias=False).weight.detach().T
        w_value = nn.Linear(5, 7, bias=False).weight.detach().T
    assert torch.equal(trace["embeddings"], embed.weight.detach()[trace["token_ids"]])
    assert torch.equal(trace["W_query"], w_query)
    assert torch.equal(trace["W_key"], w_key)
    assert torch.equal(trace["W_value"], w_value)


def test_identity_weights_make_q_k_v_the_embeddings():
    trace = compute_trace(AttentionConfig(weight_init="identity", d_in=3, d_k=3, d_v=3))
    for name in ("W_query", "W_key", "W_value"):
        assert torch.equal(trace[name], torch.eye(3))
    for name in ("queries", "keys", "values"):
        assert torch.equal(trace[name], trace["embeddings"])


def test_dropout_is_nn_dropout_after_manual_seed():
    trace = compute_trace(AttentionConfig(dropout=0.3, dropout_seed=7))
    weights = trace["attn_weights"]
    with torch.random.fork_rng():
        torch.manual_seed(7)
        expected = nn.Dropout(0.3)(weights)
    assert torch.equal(trace["dropped_weights"], expected)
    assert ((expected == 0) == (trace["dropout_mask"] == 0)).all()
    # The context uses the dropped weights, not the plain ones.
    torch.testing.assert_close(trace["context"], expected @ trace["values"])
    assert not torch.allclose(trace["context"], weights @ trace["values"])


def test_dropout_mask_comes_from_dropout_seed_not_seed():
    a = compute_trace(AttentionConfig(seed=1, dropout=0.5, dropout_seed=99))
    b = compute_trace(AttentionConfig(seed=2, dropout=0.5, dropout_seed=99))
    c = compute_trace(AttentionConfig(seed=2, dropout=0.5))  # dropout_seed defaults to seed
    d = compute_trace(AttentionConfig(seed=2, dropout=0.5, dropout_seed=2))
    assert torch.equal(a["dropout_mask"], b["dropout_mask"])
    assert torch.equal(c["dropout_mask"], d["dropout_mask"])


def test_out_proj_is_nn_linear_drawn_after_w_value():
    config = AttentionConfig(n_heads=2, d_k=4, d_v=6, seed=31, vocab_size=2000)
    assert config.out_proj is None  # default: on when n_heads > 1
    trace = compute_trace(config)
    with torch.random.fork_rng():
        torch.manual_seed(31)
        nn.Embedding(2000, 3)
        w_query, w_key, w_value = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 6)
        out_proj = nn.Linear(6, 6)
    assert torch.equal(trace["W_query"], w_query) and torch.equal(trace["W_key"], w_key)
    assert torch.equal(trace["W_value"], w_value)
    assert torch.equal(trace["W_out"], out_proj.weight.detach().T)
    assert torch.equal(trace["b_out"], out_proj.bias.detach())
    torch.testing.assert_close(trace["output"], out_proj(trace["context"]).detach())


def test_single_head_out_proj_on_request():
    trace = compute_trace(AttentionConfig(out_proj=True))
    assert list(trace)[-3:] == ["W_out", "b_out", "output"]
    plain = compute_trace(AttentionConfig())
    for name in plain:
        assert torch.equal(trace[name], plain[name]), name


def test_compute_trace_leaves_the_global_rng_alone():
    config = AttentionConfig(dropout=0.2, n_heads=2, weight_init="linear")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        expected = torch.rand(5)
        torch.manual_seed(0)
        first = compute_trace(config)
        after = torch.rand(5)
        torch.manual_seed(555)  # a different global seed changes nothing
        second = compute_trace(config)
    assert torch.equal(after, expected)
    for name in first:
        assert torch.equal(first[name], second[name]), name


# ---------------------------------------------------------------------------
# Trace structure
# ---------------------------------------------------------------------------
def test_default_step_order():
    assert list(compute_trace(AttentionConfig())) == DEFAULT_STEPS


def test_causal_adds_mask_steps_before_weights():
    expected = DEFAULT_STEPS.copy()
    expected[expected.index("attn_weights"):expected.index("attn_weights")] = [
        "causal_mask", "masked_scores"]
    assert list(compute_trace(AttentionConfig(causal=True))) == expected


def test_every_option_on_gives_every_step_in_steps_order():
    trace = compute_trace(AttentionConfig(causal=True, dropout=0.1, n_heads=2))
    model_only = ("b_query", "b_key", "b_value")  # biases: real models' traces only
    assert list(trace) == [name for name in STEPS if name not in model_only]


@pytest.mark.parametrize("kwargs", [
    {}, dict(causal=True), dict(dropout=0.2), dict(n_heads=2, causal=True, dropout=0.5),
    dict(n_heads=1, out_proj=True), dict(weight_init="identity", d_k=3, d_v=3),
])
def test_trace_keys_are_steps_in_pipeline_order(kwargs):
    names = list(compute_trace(AttentionConfig(**kwargs)))
    order = list(STEPS)
    assert all(name in STEPS for name in names)
    assert [order.index(name) for name in names] == sorted(order.index(name) for name in names)


def test_shapes_single_head():
    n, d_in, d_k, d_v = 6, 5, 7, 9
    trace = compute_trace(AttentionConfig(d_in=d_in, d_k=d_k, d_v=d_v, causal=True, dropout=0.1,
                                          out_proj=True))
    expected = {
        "token_ids": (n,), "embeddings": (n, d_in), "W_query": (d_in, d_k),
        "W_key": (d_in, d_k), "W_value": (d_in, d_v), "queries": (n, d_k), "keys": (n, d_k),
        "values": (n, d_v), "attn_scores": (n, n), "scaled_scores": (n, n),
        "causal_mask": (n, n), "masked_scores": (n, n), "attn_weights": (n, n),
        "dropout_mask": (n, n), "dropped_weights": (n, n), "context": (n, d_v),
        "W_out": (d_v, d_v), "b_out": (d_v,), "output": (n, d_v),
    }
    assert {name: tuple(t.shape) for name, t in trace.items()} == expected
    assert trace["token_ids"].dtype == torch.long
    assert trace["causal_mask"].dtype == torch.bool


def test_shapes_two_heads():
    n, d_in, d_k, d_v, h = 7, 5, 6, 8, 2
    trace = compute_trace(AttentionConfig(sentence="a b c d e f g", d_in=d_in, d_k=d_k, d_v=d_v,
                                          n_heads=h, causal=True, dropout=0.1))
    expected = {
        "token_ids": (n,), "embeddings": (n, d_in), "W_query": (d_in, d_k),
        "W_key": (d_in, d_k), "W_value": (d_in, d_v),
        "queries": (h, n, d_k // h), "keys": (h, n, d_k // h), "values": (h, n, d_v // h),
        "attn_scores": (h, n, n), "scaled_scores": (h, n, n), "causal_mask": (n, n),
        "masked_scores": (h, n, n), "attn_weights": (h, n, n), "dropout_mask": (h, n, n),
        "dropped_weights": (h, n, n), "context": (n, d_v),
        "W_out": (d_v, d_v), "b_out": (d_v,), "output": (n, d_v),
    }
    assert {name: tuple(t.shape) for name, t in trace.items()} == expected


def test_heads_take_consecutive_column_slices():
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=6))
    q = trace["embeddings"] @ trace["W_query"]
    v = trace["embeddings"] @ trace["W_value"]
    torch.testing.assert_close(trace["queries"][0], q[:, :2])
    torch.testing.assert_close(trace["queries"][1], q[:, 2:])
    torch.testing.assert_close(trace["values"][1], v[:, 3:])


def test_scaling_divides_by_sqrt_head_dim():
    trace = compute_trace(AttentionConfig(d_k=8, n_heads=2, d_v=4))
    torch.testing.assert_close(trace["scaled_scores"], trace["attn_scores"] / 2.0)  # sqrt(8/2)


def test_scale_off_leaves_scores_unchanged():
    trace = compute_trace(AttentionConfig(scale=False))
    assert torch.equal(trace["scaled_scores"], trace["attn_scores"])
    # ... and the weights are the softmax of the raw scores.
    torch.testing.assert_close(trace["attn_weights"], torch.softmax(trace["attn_scores"], dim=-1))


def test_scores_are_q_times_k_transposed():
    trace = compute_trace(AttentionConfig())
    q, k = trace["queries"], trace["keys"]
    for i in range(6):
        for j in range(6):
            assert trace["attn_scores"][i, j].item() == pytest.approx(
                sum(q[i, c].item() * k[j, c].item() for c in range(2)), rel=1e-5, abs=1e-6)


def test_causal_masked_scores_are_minus_inf_above_the_diagonal():
    trace = compute_trace(AttentionConfig(causal=True))
    above = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert torch.equal(trace["causal_mask"], above)
    assert torch.isneginf(trace["masked_scores"][above]).all()
    assert torch.equal(trace["masked_scores"][~above], trace["scaled_scores"][~above])
    assert (trace["attn_weights"][above] == 0).all()
    assert trace["attn_weights"][0, 0].item() == 1.0  # the first token sees only itself


def big_given(normalization: str) -> AttentionConfig:
    return AttentionConfig(embedding="given", embeddings=given_rows(6, 3, 10.0), d_in=3, d_k=3,
                           d_v=3, weight_init="identity", scale=False, normalization=normalization)


def test_naive_softmax_overflows_where_softmax_does_not():
    naive = compute_trace(big_given("naive_softmax"))
    stable = compute_trace(big_given("softmax"))
    assert (naive["scaled_scores"] > 89).all()  # exp(89) > float32 max
    assert not torch.isfinite(naive["attn_weights"]).all()
    assert torch.isfinite(stable["attn_weights"]).all()
    torch.testing.assert_close(stable["attn_weights"], torch.full((6, 6), 1 / 6))


def test_naive_softmax_equals_softmax_for_small_scores():
    naive = compute_trace(AttentionConfig(normalization="naive_softmax"))
    stable = compute_trace(AttentionConfig(normalization="softmax"))
    torch.testing.assert_close(naive["attn_weights"], stable["attn_weights"])


def test_sum_normalization_divides_by_row_sum():
    # 001_c475e8729ba8e095.txt, cell 14: attn_scores / attn_scores.sum(dim=-1)
    trace = compute_trace(AttentionConfig(normalization="sum", embedding="uniform",
                                          weight_init="rand", scale=False))
    scores, weights = trace["scaled_scores"], trace["attn_weights"]
    assert (scores > 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(6))
    for i in range(6):
        row_sum = sum(scores[i, j].item() for j in range(6))
        for j in range(6):
            assert weights[i, j].item() == pytest.approx(scores[i, j].item() / row_sum, rel=1e-5)


def test_sum_normalization_counts_masked_scores_as_zero():
    trace = compute_trace(AttentionConfig(normalization="sum", embedding="uniform",
                                          weight_init="rand", causal=True))
    weights = trace["attn_weights"]
    assert torch.isfinite(weights).all()
    assert (weights.triu(1) == 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(6))


# ---------------------------------------------------------------------------
# Trace is read-only
# ---------------------------------------------------------------------------
def test_trace_has_no_item_assignment():
    trace = compute_trace(AttentionConfig())
    assert not hasattr(trace, "__setitem__")
    with pytest.raises(TypeError):
        trace["context"] = torch.zeros(6, 4)  # type: ignore[index]
    with pytest.raises(TypeError):
        del trace["context"]  # type: ignore[attr-defined]


def test_unknown_step_key_error_lists_available_steps():
    trace = compute_trace(AttentionConfig())
    with pytest.raises(KeyError) as info:
        trace["output"]
    message = str(info.value)
    assert "'output'" in message
    for name in DEFAULT_STEPS:
        assert repr(name) in message


def test_trace_mapping_basics():
    trace = compute_trace(AttentionConfig())
    assert len(trace) == len(DEFAULT_STEPS)
    assert "context" in trace and "output" not in trace
    assert trace.n_tokens == 6
    assert trace.config == AttentionConfig()


FIRST_IMPORTS = """
import importlib, sys, threading
names = sys.argv[1:]
barrier = threading.Barrier(len(names))
errors = []
def load(name):
    barrier.wait()
    try:
        importlib.import_module(name)
    except Exception as error:
        errors.append(f"{name}: {type(error).__name__}: {error}")
threads = [threading.Thread(target=load, args=(name,)) for name in names]
for thread in threads: thread.start()
for thread in threads: thread.join()
print("\\n".join(errors))
"""
"""Imports ``argv``'s modules all at once, one thread each, as Streamlit does when
several visitors open their first pages together; prints what failed."""


def test_first_imports_from_many_threads_at_once_all_succeed():
    modules = ["explorer", "explorer.core.trace", "explorer.lessons.presets", "explorer.ui.navigation",
               "explorer.ui.sidebar", "explorer.models", "explorer.ui.experiments"]
    root = Path(__file__).resolve().parents[2]
    for _ in range(3):  # with an import cycle through explorer/__init__, every try failed
        result = subprocess.run([sys.executable, "-c", FIRST_IMPORTS, *modules],
                                capture_output=True, text=True, timeout=120, cwd=root)
        assert result.returncode == 0 and result.stdout.strip() == "", (
            result.stdout + result.stderr)


def _strict_json(text: str):
    """Parse as RFC 8259 JSON: Python's json would otherwise accept NaN and Infinity."""
    import json

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_trace_exports_every_step_as_strict_json():
    trace = compute_trace(AttentionConfig(causal=True, d_in=4))
    exported = _strict_json(trace.to_json())
    assert exported["tokens"] == trace.tokens
    assert exported["config"]["d_in"] == 4 and exported["config"]["causal"] is True
    assert list(exported["steps"]) == list(trace)
    assert exported["steps"]["masked_scores"][0][1] == "-Infinity"  # the causal mask
    back = read_json(trace.to_json())
    for name in trace:
        assert back[name].dtype == trace[name].dtype, name
        torch.testing.assert_close(back[name], trace[name], rtol=0, atol=1e-6)


def test_overflowed_naive_softmax_is_strict_json_and_reads_back_as_nan():
    # Scores of 30,000: exp overflows float32, inf / inf = NaN (seed 001's naive softmax).
    config = AttentionConfig(embedding="given", embeddings=[[100.0] * 3] * 6,
                             normalization="naive_softmax")
    trace = compute_trace(config)
    assert trace["attn_weights"].isnan().all()
    exported = _strict_json(trace.to_json())
    assert exported["steps"]["attn_weights"][0][0] == "NaN"
    assert exported["config"]["embeddings"][0] == [100.0, 100.0, 100.0]
    assert read_json(trace.to_json())["attn_weights"].isnan().all()


def test_a_given_matrix_is_kept_as_float32_and_never_checked_twice():
    rows = [[0.43, 0.15, 0.89]] * 6
    config = AttentionConfig(embedding="given", embeddings=rows)
    assert isinstance(config.embeddings, Matrix) and config.embeddings.shape == (6, 3)
    # Lists, tensors and arrays of the same numbers make equal configs with equal hashes.
    from_tensor = AttentionConfig(embedding="given", embeddings=torch.tensor(rows))
    assert from_tensor == config and hash(from_tensor) == hash(config)
    assert config.embeddings[0] == tuple(torch.tensor(rows[0]).tolist())  # float32 values
    # A changed copy shares the checked matrix instead of validating it again.
    assert config.replace(seed=1).embeddings is config.embeddings
    assert AttentionConfig(embedding="given", embeddings=[[0.43, 0.15, 0.5]] * 6) != config


def test_a_big_given_config_costs_float32_bytes_not_python_floats():
    x = torch.rand(512, 1024)
    config = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(512)), d_in=1024,
                             embedding="given", embeddings=x)
    assert torch.equal(config.embeddings.tensor(), x)
    assert config.embeddings.tensor().element_size() == 4
