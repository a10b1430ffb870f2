"""Every head of a model at a glance, and heads found by measuring.

`head_overview` runs the model once and keeps, for each layer × head, three
shares of attention (to the previous token, to the first token, to itself) and
a thumbnail of its pattern, small enough for a BertViz-like grid of all heads.
`strongest_head` and `previous_token_heads` find heads by measuring them on the
loaded model, and `resolve_example` does so for the curated `EXAMPLES`: which
head does what is never assumed, because it differs between checkpoints.
`standout_heads` measures an encoder's (BERT's) heads that look at the previous,
the next, the first ([CLS]) or the last ([SEP]) token most.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from explorer.models.errors import ModelError
from explorer.models.forward import attention_maps
from explorer.models.loading import LoadedModel
from explorer.models.tokens import find_token, model_input

THUMBNAIL_SIZE = 32
"""Largest side of a head's thumbnail; longer inputs are averaged in blocks of tokens."""


def token_blocks(n_tokens: int, size: int = THUMBNAIL_SIZE) -> tuple[tuple[int, int], ...]:
    """Split ``range(n_tokens)`` into min(n_tokens, size) consecutive blocks of
    (almost) equal length, as ``(start, stop)`` pairs."""
    count = min(n_tokens, size)
    edges = [round(b * n_tokens / count) for b in range(count + 1)]
    return tuple(itertools.pairwise(edges))


def thumbnail(weights: Tensor, blocks: tuple[tuple[int, int], ...]) -> Tensor:
    """Shrink attention patterns (..., n, n) to (..., t, t), one cell per block pair.

    Cell (I, J) is the weight that queries in block I put on keys in block J,
    averaged over the queries and summed over the keys, so each row still sums
    to 1. In matrices: ``R · A · Sᵀ`` with R (t, n) averaging and S (t, n)
    summing the tokens of each block. With n <= t, the pattern is unchanged.
    """
    n = weights.shape[-1]
    member = torch.zeros(len(blocks), n)  # S: 1 where token j is in block b
    for b, (start, stop) in enumerate(blocks):
        member[b, start:stop] = 1.0
    mean = member / member.sum(dim=1, keepdim=True)  # R
    return mean @ weights.to(torch.float32) @ member.T


@dataclass(frozen=True)
class HeadOverview:
    """What every head of a model does on one input.

    ``to_previous``, ``to_first``, ``to_self``: (n_layers, n_heads) float32, the
    mean over queries i >= 1 of A[i, i-1], A[i, 0] and A[i, i] (query 0 is left
    out: in GPT-2 it can only attend to itself). NaN with a single token.
    ``thumbnails``: (n_layers, n_heads, t, t) float32, t = min(n_tokens, 32),
    see `thumbnail`; ``blocks``: the token range (start, stop) behind each
    thumbnail row and column. ``tokens`` and ``input_ids`` as the model saw them.
    """

    model: str
    tokens: tuple[str, ...]
    input_ids: tuple[int, ...]
    to_previous: Tensor
    to_first: Tensor
    to_self: Tensor
    thumbnails: Tensor
    blocks: tuple[tuple[int, int], ...]

    @property
    def nbytes(self) -> int:
        """Bytes held by the tensors: 12 × 12 heads at 32 × 32 is about 0.6 MB."""
        tensors = (self.to_previous, self.to_first, self.to_self, self.thumbnails)
        return sum(t.numel() * t.element_size() for t in tensors)


def _shares(weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For (n_heads, n, n): mean over queries i >= 1 of A[i, i-1], A[i, 0], A[i, i]."""
    n = weights.shape[-1]
    rows = torch.arange(1, n)
    previous = weights[:, rows, rows - 1].mean(dim=-1)  # (n_heads,)
    first = weights[:, rows, 0].mean(dim=-1)
    itself = weights[:, rows, rows].mean(dim=-1)
    return previous, first, itself


def head_overview(model: LoadedModel, text: str | None = None, *,
                  input_ids: Any = None) -> HeadOverview:
    """Run the model once (``output_attentions=True``) and summarise every head.

    Works for every architecture; for the Llama family ``to_first`` is the
    share of weight on the first token, the "attention sink" (Xiao et al.,
    "Efficient Streaming Language Models with Attention Sinks", 2023).

    Reads one layer's (n_heads, n, n) weights at a time and keeps only the
    shares and thumbnails (see `HeadOverview`), never the whole (n_layers,
    n_heads, n, n) stack. Raises `ModelError` for bad input.
    """
    seq = model_input(model, text, input_ids)
    blocks = token_blocks(len(seq.ids))
    shares, thumbs = [], []
    for weights in attention_maps(model, seq.ids):  # each (n_heads, n, n)
        weights = weights.to(torch.float32)  # a bfloat16 model's weights, upcast exactly
        shares.append(torch.stack(_shares(weights)))  # (3, n_heads)
        thumbs.append(thumbnail(weights, blocks))   # (n_heads, t, t)
    previous, first, itself = torch.stack(shares).unbind(dim=1)  # each (n_layers, n_heads)
    return HeadOverview(model.name, seq.tokens, seq.ids, previous.clone(), first.clone(),
                        itself.clone(), torch.stack(thumbs).clone(), blocks)


@dataclass(frozen=True)
class HeadScore:
    """One head and the number it was picked by (a weight or a share in [0, 1])."""

    layer: int
    head: int
    score: float


def _ranked(scores: Tensor, top: int) -> list[HeadScore]:
    """The ``top`` best heads of a (n_layers, n_heads) table, best first."""
    n_heads = scores.shape[1]
    values, flat = scores.flatten().nan_to_num(-1.0).topk(min(top, scores.numel()))
    return [HeadScore(int(i) // n_heads, int(i) % n_heads, float(v))
            for v, i in zip(values, flat)]


def _check_index(name: str, index: int, n: int) -> None:
    if not 0 <= index < n:
        raise ModelError(name, f"{name} must be between 0 and {n - 1}, a token position "
                               f"(got {index})")


def strongest_head(model: LoadedModel, text: str | None = None, *, input_ids: Any = None,
                   query_index: int, key_index: int) -> HeadScore:
    """The head, over all layers, that puts the most weight A[query, key] from
    token ``query_index`` on token ``key_index`` (0-based positions).

    Raises `ModelError` for bad input, a position outside the tokens, or (in a
    causal model) a key after the query, which no head can see.
    """
    seq = model_input(model, text, input_ids)
    _check_index("query_index", query_index, len(seq.ids))
    _check_index("key_index", key_index, len(seq.ids))
    if model.causal and key_index > query_index:
        raise ModelError("key_index", f"in {model.name!r} a token attends only to itself and "
                                      f"earlier tokens: key_index must be at most "
                                      f"query_index={query_index} (got {key_index})")
    scores = torch.stack([w[:, query_index, key_index] for w in attention_maps(model, seq.ids)])
    return _ranked(scores, 1)[0]


def previous_token_heads(model: LoadedModel, text: str | None = None, *, input_ids: Any = None,
                         top: int = 5) -> list[HeadScore]:
    """The ``top`` heads with the largest mean share of weight on the previous
    token (`HeadOverview.to_previous`), best first. Needs at least 2 tokens."""
    overview = head_overview(model, text, input_ids=input_ids)
    if len(overview.tokens) < 2:
        raise ModelError("text", "a previous-token head needs at least 2 tokens (got 1)")
    return _ranked(overview.to_previous, top)


# ---------------------------------------------------------------------------
# Curated examples, resolved by measuring on the loaded model
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class HeadExample:
    """A sentence and the attention to look for in it.

    ``query``: the word whose row to look at and which occurrence (0-based).
    ``key``: the word it should attend to, or None for "the token just before
    the query" (a previous-token head, found by its mean share over all tokens).
    """

    name: str
    title: str
    text: str
    query: tuple[str, int]
    key: tuple[str, int] | None
    about: str


EXAMPLES: tuple[HeadExample, ...] = (
    HeadExample(
        "coreference", "Who is “it”?",
        "The animal didn't cross the street because it was too tired",
        query=("it", 0), key=("animal", 0),
        about="Some heads link a pronoun to the noun it stands for: here “it” to "
              "“animal” (the Transformer paper's own example)."),
    HeadExample(
        "previous-token", "The token just before",
        "Mr and Mrs Dursley, of number four, Privet Drive, were proud to say that they "
        "were perfectly normal, thank you very much",
        query=("Drive", 0), key=None,
        about="A previous-token head sends almost every token's attention to the token "
              "right before it: a diagonal just below the main one."),
    HeadExample(
        "induction", "Copying a repeat",
        "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the "
        "lazy dog.",
        query=("quick", 1), key=("brown", 0),
        about="An induction head, at the second “quick”, looks at what followed the first "
              "“quick” (“brown”), the better to predict it comes next."),
)
"""Examples for the model page; `resolve_example` finds their heads by measuring."""


@dataclass(frozen=True)
class ResolvedExample:
    """An example measured on a model: the head found and the cell to look at.

    ``query_index`` / ``key_index``: token positions in ``tokens``; ``weight``:
    that head's A[query, key]; ``score``: what the head was picked by (A[query,
    key] itself, or the mean previous-token share); ``measure`` names it.
    """

    example: HeadExample
    tokens: tuple[str, ...]
    input_ids: tuple[int, ...]
    query_index: int
    key_index: int
    layer: int
    head: int
    weight: float
    score: float
    measure: str

    def describe(self) -> str:
        """One sentence, e.g. ``"Found by measuring: layer 5, head 1 puts 0.62 of
        '·it''s attention on '·animal'."``"""
        q, k = self.tokens[self.query_index], self.tokens[self.key_index]
        line = (f"Found by measuring: layer {self.layer}, head {self.head} puts "
                f"{self.weight:.2f} of {q!r}'s attention on {k!r}")
        if self.measure != "weight":
            line += f" ({self.measure} {self.score:.2f})"
        return line + "."


def resolve_example(model: LoadedModel, example: HeadExample) -> ResolvedExample:
    """Find the head that does what ``example`` describes, on this model.

    One forward pass. With a ``key``, the head with the largest A[query, key];
    without, the head with the largest mean previous-token share. Needs the
    model's tokenizer; raises `ModelError` when the words are not in the tokens.
    """
    seq = model_input(model, example.text)
    query = find_token(seq.tokens, *example.query)
    maps = attention_maps(model, seq.ids)
    if example.key is None:
        key = query - 1
        scores = torch.stack([_shares(weights)[0] for weights in maps])
        measure = "mean previous-token share"
    else:
        key = find_token(seq.tokens, *example.key)
        scores = torch.stack([weights[:, query, key] for weights in maps])
        measure = "weight"
    best = _ranked(scores, 1)[0]
    weight = float(maps[best.layer][best.head, query, key])
    return ResolvedExample(example, seq.tokens, seq.ids, query, key, best.layer, best.head,
                           weight, best.score, measure)


# ---------------------------------------------------------------------------
# An encoder's heads that stand out, measured (the Real model page's all-MiniLM-L6-v2)
# ---------------------------------------------------------------------------
STANDOUT_SENTENCE = "The quick brown fox jumps over the lazy dog because it was bored."
"""The fixed sentence an encoder's standing-out heads are measured on (`standout_heads`)."""

HABITS = {"previous": "the previous token", "next": "the next token",
          "first": "the first token", "last": "the last token"}
"""What `standout_heads` measures: a word's share of weight on each of these."""


@dataclass(frozen=True)
class Standout:
    """An encoder's heads that stand out on one sentence, measured.

    ``best``: for each habit of `HABITS`, the head whose words (every token but
    the first and the last, which are [CLS] and [SEP] in BERT) put the largest
    mean share of their weight on that token, with that share (`HeadScore`).
    ``mean_first`` / ``mean_last``: that share on the first / last token,
    averaged over every head; ``heads_on_first``: how many heads give the first
    token more than half; ``n_heads_total``: layers × heads.
    """

    tokens: tuple[str, ...]
    best: dict[str, HeadScore]
    mean_first: float
    mean_last: float
    heads_on_first: int
    n_heads_total: int

    def describe(self) -> str:
        """The measurements in sentences, e.g. ``"layer 0, head 2 puts 1.00 of a
        word's weight on the previous token; ..."``, tokens named as the model reads them."""
        first, last = self.tokens[0], self.tokens[-1]
        names = {**HABITS, "first": f"{first} (the first token)",
                 "last": f"{last} (the last token)"}
        heads = "; ".join(f"layer {s.layer}, head {s.head} puts {s.score:.2f} of a word's "
                          f"weight on {names[habit]}" for habit, s in self.best.items())
        return (f"Measured on “{' '.join(self.tokens[1:-1])}”: {heads}. Over all "
                f"{self.n_heads_total} heads, a word puts {self.mean_first:.2f} of its weight "
                f"on {first} on average ({self.heads_on_first} heads give it more than "
                f"half) and {self.mean_last:.2f} on {last}.")


def standout_heads(model: LoadedModel, text: str = STANDOUT_SENTENCE, *,
                   input_ids: Any = None) -> Standout:
    """Measure which heads of an encoder (every token sees every other: BERT)
    stand out on ``text``: one forward pass (``output_attentions``).

    For each layer's weights A (n_heads, n, n), over the words i = 1 … n-2
    (leaving out the first and last tokens, [CLS] and [SEP]): the mean of
    A[i, i-1], A[i, i+1], A[i, 0] and A[i, n-1] (`HABITS`). Clark et al.,
    "What Does BERT Look At?" (2019), measured the same habits in BERT base.
    Raises `ModelError` for a causal model (it cannot look at the next token)
    or fewer than 3 words.
    """
    if model.causal:
        raise ModelError("model", f"{model.name!r} is causal: its heads cannot look at the "
                                  "next token; standout_heads measures encoders (BERT)")
    seq = model_input(model, text, input_ids)
    n = len(seq.ids)
    if n < 5:
        raise ModelError("text", f"standout_heads needs at least 3 words between the first "
                                 f"and last tokens (got {n - 2})")
    words = torch.arange(1, n - 1)
    measured: dict[str, list[Tensor]] = {habit: [] for habit in HABITS}
    for weights in attention_maps(model, seq.ids):  # each (n_heads, n, n)
        w = weights.to(torch.float32)
        measured["previous"].append(w[:, words, words - 1].mean(dim=-1))  # (n_heads,)
        measured["next"].append(w[:, words, words + 1].mean(dim=-1))
        measured["first"].append(w[:, words, 0].mean(dim=-1))
        measured["last"].append(w[:, words, n - 1].mean(dim=-1))
    tables = {habit: torch.stack(rows) for habit, rows in measured.items()}  # (L, n_heads)
    return Standout(seq.tokens, {habit: _ranked(t, 1)[0] for habit, t in tables.items()},
                    float(tables["first"].mean()), float(tables["last"].mean()),
                    int((tables["first"] > 0.5).sum()), tables["first"].numel())
