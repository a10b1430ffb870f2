"""Tokens as the model sees them, written so that a learner can read them.

The model's own tokenizer splits the text: byte-level BPE for GPT-2 (a word's
leading space is part of its token: ``'Ġcat'``), WordPiece for BERT
(``'walk'``, ``'##ing'``, with ``[CLS]`` and ``[SEP]`` added). `readable_piece`
shows GPT-2's space as ``·`` (``'·cat'``), decodes the other byte-level
characters (``'Ċ'`` is a newline, shown ``↵``) and keeps WordPiece's ``##`` as
is. Labels never hold whitespace, as `explorer.core.tokenizer.token_labels` expects.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from explorer.core.config import MAX_SENTENCE_CHARS, shown
from explorer.models.errors import ModelError

SPACE = "·"
"""How a space inside a token is shown (GPT-2's ``Ġ``)."""

VISIBLE = {" ": SPACE, "\n": "↵", "\t": "⇥", "\r": "␍"}
"""Whitespace shown as a visible mark; other invisible characters are escaped (``\\x0b``)."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: one printable character for each of the 256 bytes.

    From OpenAI's ``gpt-2/src/encoder.py``: printable Latin-1 bytes stand for
    themselves, the others (space, control characters ...) are shifted to
    code points from 256 on, so that the space byte 0x20 becomes ``'Ġ'`` (U+0120)
    and the newline 0x0A becomes ``'Ċ'``.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


BYTE_OF = {char: byte for byte, char in bytes_to_unicode().items()}
"""The inverse of `bytes_to_unicode`: byte-level character -> byte."""


def _visible(char: str) -> str:
    if char in VISIBLE:
        return VISIBLE[char]
    if char.isprintable() and not char.isspace():
        return char
    return char.encode("unicode_escape").decode("ascii")  # e.g. '\x0b', '\u3000'


METASPACE = "▁"
"""SentencePiece's word boundary (Llama 2, Mistral, Gemma tokenizers), shown as `SPACE`."""
BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
"""SentencePiece's byte fallback: a byte with no piece of its own, ``<0x0A>``."""


def readable_piece(piece: str, byte_level: bool) -> str:
    """One token, readable: ``'Ġcat'`` -> ``'·cat'``, ``'Ċ'`` -> ``'↵'``, ``'##ing'`` unchanged.

    With ``byte_level`` (GPT-2, Llama 3, SmolLM2, Qwen), the piece's characters
    are mapped back to bytes and decoded as UTF-8; a piece holding only part of
    a character (``'Ã'``, the first byte of ``é``) shows its bytes as ``\\xc3``.
    Otherwise SentencePiece's ``'▁cat'`` reads ``'·cat'`` and its byte pieces
    (``'<0x0A>'``) the byte itself (``'↵'``). Spaces, newlines and tabs become
    ``·``, ``↵`` and ``⇥``.
    """
    if byte_level and piece and all(char in BYTE_OF for char in piece):
        piece = bytes(BYTE_OF[char] for char in piece).decode("utf-8", errors="backslashreplace")
    elif not byte_level:
        single = BYTE_PIECE.fullmatch(piece)
        piece = (bytes([int(single.group(1), 16)]).decode("utf-8", errors="backslashreplace")
                 if single else piece.replace(METASPACE, " "))
    return "".join(_visible(char) for char in piece) or "∅"


def is_byte_level(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is byte-level BPE (GPT-2's): its decoder is ``ByteLevel``."""
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    return type(decoder).__name__ == "ByteLevel"


def readable_tokens(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The tokens of ``ids`` as the model's tokenizer names them, made readable.

    Special tokens (``[CLS]``, ``<|endoftext|>``) are kept as they are. Without a
    tokenizer, or for an id the tokenizer does not know, a token is shown as
    ``#id`` (e.g. ``#464``).
    """
    if tokenizer is None:
        return [f"#{i}" for i in ids]
    byte_level = is_byte_level(tokenizer)
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    pieces = tokenizer.convert_ids_to_tokens(list(ids))
    return [f"#{i}" if piece is None else piece if piece in special
            else readable_piece(piece, byte_level) for i, piece in zip(ids, pieces)]


@dataclass(frozen=True)
class ModelInput:
    """One sequence for a model: ``ids`` (token ids) and ``tokens`` (readable, one per id)."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]


def _as_ids(input_ids: Any, vocab_size: int) -> list[int]:
    if hasattr(input_ids, "tolist"):  # a tensor or an array
        input_ids = input_ids.tolist()
    if isinstance(input_ids, (str, bytes)) or not isinstance(input_ids, Sequence):
        raise ModelError("input_ids", f"input_ids must be a list of whole numbers "
                                      f"(got {shown(input_ids)})")
    ids = []
    for i, value in enumerate(input_ids):
        try:
            value = operator.index(value) if not isinstance(value, bool) else None
        except TypeError:
            value = None
        if value is None:
            raise ModelError("input_ids", f"input_ids[{i}] must be a whole number "
                                          f"(got {shown(input_ids[i])})")
        if not 0 <= value < vocab_size:
            raise ModelError("input_ids", f"input_ids[{i}] must be between 0 and "
                                          f"{vocab_size - 1}, the model's vocabulary (got {value})")
        ids.append(value)
    return ids


def _tokenize(model: Any, text: Any) -> list[int]:
    if not isinstance(text, str):
        raise ModelError("text", f"text must be a string (got {type(text).__name__})")
    if len(text) > MAX_SENTENCE_CHARS:
        raise ModelError("text", f"text must be at most {MAX_SENTENCE_CHARS:,} characters "
                                 f"(got {len(text):,})")
    if model.tokenizer is None and model.tokenizer_problem:
        raise ModelError("text", f"{model.name!r} has tokenizer files, but they are unusable: "
                                 f"{model.tokenizer_problem}. So it cannot read text: pass "
                                 "input_ids=[...] instead, or replace them with the model's "
                                 "own (tokenizer.json, or vocab.json + merges.txt for GPT-2, "
                                 "vocab.txt for BERT)")
    if model.tokenizer is None:
        raise ModelError("text", f"{model.name!r} was loaded without a tokenizer (no "
                                 "tokenizer files came with its weights), so it cannot read "
                                 "text: pass "
                                 "input_ids=[...] instead, or add the tokenizer files "
                                 "(tokenizer.json, or vocab.json + merges.txt for GPT-2, "
                                 "vocab.txt for BERT) to the folder")
    with model.lock:  # a fast tokenizer is not safe to call from two threads at once
        return list(model.tokenizer(text, verbose=False)["input_ids"])


def model_input(model: Any, text: str | None = None, input_ids: Any = None) -> ModelInput:
    """Tokenise ``text`` with the model's tokenizer, or take ``input_ids`` as given.

    Exactly one of the two must be given. BERT's tokenizer adds ``[CLS]`` and
    ``[SEP]``; GPT-2's adds nothing. Raises `ModelError` for both or neither,
    text without a tokenizer, an id outside the vocabulary, and fewer than 1 or
    more than ``model.max_tokens`` tokens.
    """
    if (text is None) == (input_ids is None):
        raise ModelError("text", "give either text or input_ids (exactly one of them)")
    ids = _tokenize(model, text) if text is not None else _as_ids(input_ids, model.vocab_size)
    if not 1 <= len(ids) <= model.max_tokens:
        raise ModelError("text" if text is not None else "input_ids",
                         f"the input must have between 1 and {model.max_tokens} tokens for "
                         f"{model.name!r} (got {len(ids)}): shorten the text")
    return ModelInput(tuple(ids), tuple(readable_tokens(model.tokenizer, ids)))


def _plain(token: str) -> str:
    """A token without its word-boundary marks, for matching words: '·it' -> 'it'."""
    return token.removeprefix("##").replace(SPACE, "").casefold()


def find_token(tokens: Sequence[str], word: str, occurrence: int = 0) -> int:
    """The index of the first token of ``word``'s ``occurrence``-th appearance (0-based).

    Matching ignores case, GPT-2's ``·`` and BERT's ``##``, and follows a word
    split into several tokens (``'·Priv'``, ``'et'``). Raises `ModelError` when
    the word is not found that many times.
    """
    target, seen = word.casefold(), 0
    for start, token in enumerate(tokens):
        if token.startswith("##") or not _plain(token):  # cannot start a word
            continue
        joined = ""
        for piece in tokens[start:]:
            joined += _plain(piece)
            if joined == target:
                if seen == occurrence:
                    return start
                seen += 1
            if not target.startswith(joined) or joined == target:
                break
    raise ModelError("text", f"the word {shown(word)} does not appear {occurrence + 1} time(s) in "
                             f"the tokens {list(tokens)}")
