"""The tokenizer against the rule the pages state (`explorer.core.tokenizer.RULE`):
every Unicode punctuation mark (categories P*) at a word's ends is stripped,
marks inside a word and symbols stay (issue 40)."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.core import tokenizer
from explorer.core.tokenizer import RULE, tokenize

PUNCTUATION = [chr(c) for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)).startswith("P")]
"""Every character of Unicode's punctuation categories (Python's own database)."""


def test_every_unicode_punctuation_mark_at_a_words_ends_is_stripped():
    assert len(PUNCTUATION) > 700  # not the 11 ASCII marks the rule used to cover
    kept = [mark for mark in PUNCTUATION if tokenize(f"{mark}{mark}word{mark}") != ["word"]]
    assert kept == []
    inner = [mark for mark in PUNCTUATION if tokenize(f"a{mark}b") != [f"a{mark}b"]]
    assert inner == []


@pytest.mark.parametrize("sentence, tokens", [
    ("“x” «Why not?» p.m., ¿qué? ¡sí! can't 'tis…", ["x", "Why", "not", "p.m", "qué", "sí",
                                                    "can't", "tis"]),
    ("Life is short, eat dessert first", ["Life", "is", "short", "eat", "dessert", "first"]),
    ("costs $5 + €3 — fine", ["costs", "$5", "+", "€3", "fine"]),  # symbols are not P*
])
def test_the_rules_examples(sentence, tokens):
    assert tokenize(sentence) == tokens


def test_the_stated_rule_names_the_examples_it_gives():
    """The sentence the pages show says what `tokenize` does with its own examples."""
    for written, token in (("“x”", "x"), ("«Why", "Why"), ("p.m.,", "p.m"), ("'tis", "tis")):
        assert f"{written} gives {token}" in RULE and tokenize(written) == [token]
    assert "(can't)" in RULE and tokenize("can't") == ["can't"]
    for symbol in ("$", "€", "+"):
        assert symbol in RULE and tokenize(symbol) == [symbol]
    assert "P*" in RULE and tokenizer.PUNCTUATION == "P"


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30))
def test_a_token_never_starts_or_ends_with_punctuation_nor_holds_whitespace(sentence):
    for token in tokenize(sentence):
        assert token and not token[0] in PUNCTUATION and token[-1] not in PUNCTUATION
        assert token == token.strip() and not any(c.isspace() for c in token)
