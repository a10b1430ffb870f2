"""Sentence -> tokens -> ids, as in ``002_8c91a21803773e04.txt`` (cells 4-6)."""

from __future__ import annotations

import unicodedata

import torch

PUNCTUATION = "P"
"""The first letter of Unicode's punctuation categories (Pc, Pd, Ps, Pe, Pi, Pf,
Po): a character of these is stripped from both ends of each word."""
RULE = ("The sentence is split on whitespace, and every punctuation mark at a word's "
        "ends is stripped: any character of Unicode's punctuation categories (P*), so "
        "“x” gives x, «Why gives Why and p.m., gives p.m, apostrophes included ('tis gives "
        "tis). Marks inside a word stay (can't), and symbols such as $, € or + are not "
        "punctuation: they stay.")
"""The tokenizer's rule as the pages state it (`tokenize` follows it; a test holds both to it)."""


def is_punctuation(char: str) -> bool:
    """Whether ``char`` (one character) is in a Unicode punctuation category (P*)."""
    return unicodedata.category(char).startswith(PUNCTUATION)


def strip_punctuation(word: str) -> str:
    """``word`` without the punctuation marks (`is_punctuation`) at its two ends."""
    start, end = 0, len(word)
    while start < end and is_punctuation(word[start]):
        start += 1
    while end > start and is_punctuation(word[end - 1]):
        end -= 1
    return word[start:end]


def tokenize(sentence: str, tokenizer: str = "words") -> list[str]:
    """Split ``sentence`` into word tokens.

    The ``"words"`` recipe (`RULE`): split on whitespace, strip every Unicode
    punctuation mark (categories P*) from both ends of each word, drop empty
    pieces, keep case. So ``"Life is short, eat dessert first"`` gives
    ``['Life', 'is', 'short', 'eat', 'dessert', 'first']`` (notebook 002 drops
    its comma), ``can't`` stays one token and ``«Why`` gives ``Why``. Raises
    ``ValueError`` for an unknown tokenizer name.
    """
    if tokenizer != "words":
        raise ValueError(f"unknown tokenizer {tokenizer!r}; the only one is 'words'")
    pieces = (strip_punctuation(word) for word in sentence.split())
    return [p for p in pieces if p]


def token_labels(tokens: list[str]) -> list[str]:
    """One label per token, unique, used wherever a token names a row or column.

    A token that appeared earlier gets its 0-based position in brackets, so
    "the cat saw the dog" is labelled ``the``, ``cat``, ``saw``, ``the (3)``,
    ``dog``. Tokens never hold whitespace, so a label cannot equal another token.
    Charts need this: Plotly merges equal category labels into one row.
    """
    seen: set[str] = set()
    labels = []
    for i, token in enumerate(tokens):
        labels.append(f"{token} ({i})" if token in seen else token)
        seen.add(token)
    return labels


def build_vocab(tokens: list[str]) -> list[str]:
    """The vocabulary: the sorted unique tokens (Python string order, so
    capitals sort before lower case). A token's id is its index here."""
    return sorted(set(tokens))


def token_ids(tokens: list[str]) -> torch.Tensor:
    """Ids of ``tokens`` in `build_vocab` order, shape ``(n_tokens,)``, int64.

    For "Life is short, eat dessert first" this is ``[0, 4, 5, 2, 1, 3]``.
    """
    index = {word: i for i, word in enumerate(build_vocab(tokens))}
    return torch.tensor([index[t] for t in tokens], dtype=torch.long)
