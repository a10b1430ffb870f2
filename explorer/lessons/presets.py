"""The seed notebooks' exact setups, and the numbers they print.

A `Preset` is data: the `AttentionConfig` that reproduces a notebook, the page
it belongs on, and `Reference` numbers copied from the notebook's output. While
a learner keeps a preset unchanged, `check` compares the trace with those
numbers, to the printed precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from explorer.core.agreement import Agreement, of_all
from explorer.core.config import AttentionConfig
from explorer.core.trace import Trace, compute_trace
from explorer.lessons.pages import SELF_ATTENTION_PAGE, SIMPLIFIED_PAGE

NOTEBOOKS = {"000": "A simple self-attention", "001": "Your journey starts with one step",
             "002": "Embedding an input sentence", "003": "Self-Attention", "004": "Attention"}
"""The seed notebooks (``shared/seeds/00N_*.txt``) by the titles a learner knows them
by: the presets' sources and the generated script's comments name them so."""


@dataclass(frozen=True)
class Reference:
    """Numbers a notebook prints for one step (or one row of it).

    ``row``: compare only this row of the step. ``changes``: config fields that
    differ for this printout (e.g. ``normalization="sum"`` for a variant the
    notebook computes on the side). ``decimals``: printed precision; a value
    matches when it is within half a unit in the last place.
    """

    step: str
    values: tuple
    cell: str
    row: int | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    decimals: int = 4


@dataclass(frozen=True)
class Preset:
    """One worked example's setup: ``config`` reproduces it; ``title`` names it
    by its content; ``source`` says where a learner finds it (book section,
    teaching notebook); ``seed_file`` is the notebook in ``shared/seeds`` it
    comes from (None for the book's own code); ``page`` is where it is shown;
    ``query`` is the token it looks at; ``references`` are the numbers it
    prints."""

    slug: str
    title: str
    source: str
    seed_file: str | None
    description: str
    page: str
    config: AttentionConfig
    references: tuple[Reference, ...]
    query: int = 0


def check(preset: Preset, trace: Trace) -> Agreement:
    """Compare ``trace`` (of ``preset.config``) with every `Reference` number:
    one `Agreement` per reference, within half a unit of its last printed place,
    summed up by `explorer.core.agreement.of_all` (``where``: the step, row and
    cell of the largest difference; ``n_values``: how many printed numbers).

    References with ``changes`` are recomputed with those fields changed. A
    NaN in the trace counts as an infinite difference; a step of another shape
    ends the comparison there, as an infinite difference.
    """
    parts = []
    for ref in preset.references:
        source = compute_trace(trace.config.replace(**ref.changes)) if ref.changes else trace
        actual = source[ref.step].to(torch.float64)
        if ref.row is not None:
            actual = actual[ref.row]
        expected = torch.tensor(ref.values, dtype=torch.float64)
        tolerance = 0.5 * 10.0 ** -ref.decimals + 1e-9
        where = f"{ref.step}{f'[{ref.row}]' if ref.row is not None else ''}, {ref.cell}"
        if actual.shape != expected.shape:
            parts.append(Agreement(ref.step, f"shape {tuple(actual.shape)} instead of "
                                             f"{tuple(expected.shape)}", preset.source,
                                   math.inf, tolerance, where=where))
            break
        diff = torch.nan_to_num((actual - expected).abs(), nan=math.inf)
        parts.append(Agreement(ref.step, f"the {expected.numel()} printed numbers",
                               preset.source, float(diff.max()), tolerance, where=where,
                               n_values=expected.numel()))
    return of_all(preset.title, "every number it prints", preset.source, parts)


# ---------------------------------------------------------------------------
# The five seeds
# ---------------------------------------------------------------------------
SIMPLIFIED = {"weight_init": "identity", "scale": False}
"""Simplified attention (seeds 000, 001, 003; book §3.3): no trainable weights
(Q = K = V = X), no scaling."""

JOURNEY_SENTENCE = "Your journey starts with one step"
JOURNEY_INPUTS = ((0.43, 0.15, 0.89), (0.55, 0.87, 0.66), (0.57, 0.85, 0.64),
                  (0.22, 0.58, 0.33), (0.77, 0.25, 0.10), (0.05, 0.80, 0.55))
"""The book's hand-picked 3-d embeddings of `JOURNEY_SENTENCE` (§3.3.1, ``inputs``)."""
_LIGHT_X = ((0.21, 0.47, 0.91), (0.52, 0.11, 0.65), (0.03, 0.85, 0.19),
            (0.73, 0.64, 0.39), (0.13, 0.55, 0.68), (0.22, 0.77, 0.08))

PRESETS: dict[str, Preset] = {p.slug: p for p in [
    Preset(
        slug="journey",
        title="Hand-picked vectors, no weights: “Your journey starts with one step”",
        source=f"the book’s §3.3.1 and the teaching notebook “{NOTEBOOKS['000']}”",
        seed_file="000_28fcb52aab540c90.txt",
        description="The book's hand-picked 3-d vectors; simplified attention: "
                    "scores X·Xᵀ, softmax, context A·X.",
        page=SIMPLIFIED_PAGE,
        config=AttentionConfig(sentence=JOURNEY_SENTENCE, d_in=3, d_k=3,
                               d_v=3, embedding="given", embeddings=JOURNEY_INPUTS, **SIMPLIFIED),
        query=1,
        references=(
            Reference("attn_scores", cell="notebook cell 13", values=(
                (0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310),
                (0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865),
                (0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605),
                (0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565),
                (0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935),
                (0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450))),
            Reference("attn_weights", cell="notebook cell 14", values=(
                (0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452),
                (0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581),
                (0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565),
                (0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720),
                (0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295),
                (0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896))),
            Reference("context", cell="notebook cell 15", values=(
                (0.4421, 0.5931, 0.5790), (0.4419, 0.6515, 0.5683),
                (0.4431, 0.6496, 0.5671), (0.4304, 0.6298, 0.5510),
                (0.4671, 0.5910, 0.5266), (0.4177, 0.6503, 0.5645))),
        )),
    Preset(
        slug="self-attention-v1",
        title="SelfAttention_v1, the chapter's running example: “Your journey starts with one "
              "step”",
        source="the book’s §3.4.1 and Listing 3.1 (torch.manual_seed(123), d_out = 2)",
        seed_file=None,
        description="The hand-picked 3-d vectors with trainable weights drawn by "
                    "torch.rand(d_in, d_out) after torch.manual_seed(123), d_k = d_v = 2; "
                    "scores scaled by √d_k.",
        page=SELF_ATTENTION_PAGE,
        config=AttentionConfig(sentence=JOURNEY_SENTENCE, d_in=3, d_k=2,
                               d_v=2, seed=123, embedding="given", embeddings=JOURNEY_INPUTS,
                               weight_init="rand"),
        query=1,
        references=(
            Reference("queries", row=1, cell="§3.4.1 query_2", values=(0.4306, 1.4551)),
            Reference("attn_scores", row=1, cell="§3.4.1 attn_scores_2",
                      values=(1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440)),
            Reference("attn_weights", row=1, cell="§3.4.1 attn_weights_2",
                      values=(0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820)),
            Reference("context", cell="Listing 3.1, sa_v1(inputs)", values=(
                (0.2996, 0.8053), (0.3061, 0.8210), (0.3058, 0.8203),
                (0.2948, 0.7939), (0.2927, 0.7891), (0.2990, 0.8040))),
        )),
    Preset(
        slug="torch-rand-seed-123",
        title="Random inputs from torch.rand(6, 3): three ways to normalise",
        source=f"the teaching notebook “{NOTEBOOKS['001']}” (torch.manual_seed(123))",
        seed_file="001_c475e8729ba8e095.txt",
        description="torch.manual_seed(123); torch.rand(6, 3) as the embeddings; query x_2 "
                    "normalised three ways: by the sum, naive softmax, softmax.",
        page=SIMPLIFIED_PAGE,
        config=AttentionConfig(sentence=JOURNEY_SENTENCE, d_in=3, d_k=3,
                               d_v=3, seed=123, embedding="uniform", **SIMPLIFIED),
        query=1,
        references=(
            Reference("embeddings", row=0, cell="notebook cell 8", values=(0.2961, 0.5166, 0.2517)),
            Reference("embeddings", row=1, cell="notebook cell 9", values=(0.6886, 0.0740, 0.8665)),
            Reference("attn_scores", cell="notebook cell 15", values=(
                (0.4179, 0.4602, 0.1397, 0.5509, 0.2036, 0.3884),
                (0.4602, 1.2304, 0.2611, 1.1189, 0.3408, 1.0023),
                (0.1397, 0.2611, 0.0630, 0.2580, 0.0887, 0.2193),
                (0.5509, 1.1189, 0.2580, 1.0992, 0.3343, 0.8977),
                (0.2036, 0.3408, 0.0887, 0.3343, 0.1445, 0.3155),
                (0.3884, 1.0023, 0.2193, 0.8977, 0.3155, 0.8600))),
            Reference("attn_weights", row=1, cell="notebook cell 14", changes={"normalization": "sum"},
                      values=(0.1043, 0.2788, 0.0592, 0.2535, 0.0772, 0.2271)),
            Reference("attn_weights", row=1, cell="notebook cell 19",
                      changes={"normalization": "naive_softmax"},
                      values=(0.1174, 0.2536, 0.0962, 0.2268, 0.1042, 0.2019)),
            Reference("attn_weights", row=1, cell="notebook cell 34",
                      values=(0.1174, 0.2536, 0.0962, 0.2268, 0.1042, 0.2019)),
            Reference("context", row=1, cell="notebook cells 37 and 39", values=(0.4762, 0.2052, 0.6228)),
        )),
    Preset(
        slug="life-is-short",
        title="Life is short, eat dessert first: an embedding table and random weights",
        source=f"the teaching notebook “{NOTEBOOKS['002']}” (torch.manual_seed(123))",
        seed_file="002_8c91a21803773e04.txt",
        description="nn.Embedding(50000, 3) after torch.manual_seed(123), then "
                    "torch.randn weights (d_k = 2, d_v = 4); scaled dot-product attention.",
        page=SELF_ATTENTION_PAGE,
        config=AttentionConfig(),
        query=1,
        references=(
            Reference("embeddings", cell="notebook cell 9", values=(
                (0.3374, -0.1778, -0.3035), (0.1794, 1.8951, 0.4954),
                (0.2692, -0.0770, -1.0205), (-0.2196, -0.3792, 0.7671),
                (-0.5880, 0.3486, 0.6603), (-1.1925, 0.6984, -1.4097))),
            Reference("attn_scores", row=1, cell="notebook cell 16 (omega_1)",
                      values=(-0.6150, 2.4277, -0.9584, 0.2260, 1.2082, 0.5242)),
        )),
    Preset(
        slug="light-switch",
        title="I can't find the light switch: hand-picked vectors, the query “light”",
        source=f"the teaching notebook “{NOTEBOOKS['003']}”",
        seed_file="003_5dc6ea26df512a1c.txt",
        description="Hand-picked 3-d vectors; simplified attention; the query \"light\".",
        page=SIMPLIFIED_PAGE,
        config=AttentionConfig(sentence="I can't find the light switch", d_in=3, d_k=3, d_v=3,
                               embedding="given", embeddings=_LIGHT_X, **SIMPLIFIED),
        query=4,
        references=(
            Reference("attn_scores", cell="notebook cell 32", values=(
                (1.0931, 0.7524, 0.5787, 0.8090, 0.9046, 0.4809),
                (0.7524, 0.7050, 0.2326, 0.7035, 0.5701, 0.2511),
                (0.5787, 0.2326, 0.7595, 0.6400, 0.6006, 0.6763),
                (0.8090, 0.7035, 0.6400, 1.0946, 0.7121, 0.6846),
                (0.9046, 0.5701, 0.6006, 0.7121, 0.7818, 0.5065),
                (0.4809, 0.2511, 0.6763, 0.6846, 0.5065, 0.6477))),
            Reference("attn_weights", cell="notebook cell 33", values=(
                (0.2256, 0.1605, 0.1349, 0.1698, 0.1869, 0.1223),
                (0.2024, 0.1931, 0.1204, 0.1928, 0.1687, 0.1226),
                (0.1641, 0.1161, 0.1966, 0.1745, 0.1677, 0.1809),
                (0.1705, 0.1534, 0.1440, 0.2268, 0.1547, 0.1505),
                (0.2068, 0.1480, 0.1526, 0.1706, 0.1829, 0.1389),
                (0.1552, 0.1233, 0.1887, 0.1902, 0.1592, 0.1834))),
            Reference("context", cell="notebook cell 35", values=(
                (0.3101, 0.5440, 0.5383), (0.3362, 0.5293, 0.5323),
                (0.2897, 0.6003, 0.4588), (0.3387, 0.5656, 0.4880),
                (0.3039, 0.5600, 0.5155), (0.3023, 0.5974, 0.4544))),
            Reference("attn_scores", row=4, cell="notebook cell 3",
                      values=(0.9046, 0.5701, 0.6006, 0.7121, 0.7818, 0.5065)),
            Reference("context", row=4, cell="notebook cell 15", values=(0.3039, 0.5600, 0.5155)),
        )),
    Preset(
        slug="illustrated",
        title="Illustrated self-attention: whole-number inputs and weights",
        source=f"the teaching notebook “{NOTEBOOKS['004']}”, example 2 (after “Illustrated: "
               "Self-Attention”)",
        seed_file="004_d4886b04eb600938.txt",
        description="Integer inputs X (3×4) and integer W_key, W_query, W_value (4×3); "
                    "scores without scaling, and their softmax.",
        page=SELF_ATTENTION_PAGE,
        config=AttentionConfig(
            sentence="v_1 v_2 v_3", d_in=4, d_k=3, d_v=3, embedding="given",
            embeddings=((1, 0, 1, 0), (0, 2, 0, 2), (1, 1, 1, 1)), weight_init="given",
            W_query=((1, 0, 1), (1, 0, 0), (0, 0, 1), (0, 1, 1)),
            W_key=((0, 0, 1), (1, 1, 0), (0, 1, 0), (1, 1, 0)),
            W_value=((0, 2, 0), (0, 3, 0), (1, 0, 3), (1, 1, 0)), scale=False),
        query=0,
        references=(
            Reference("keys", cell="notebook cell 182", decimals=0,
                      values=((0, 1, 1), (4, 4, 0), (2, 3, 1))),
            Reference("queries", cell="notebook cell 181", decimals=0,
                      values=((1, 0, 2), (2, 2, 2), (2, 1, 3))),
            Reference("values", cell="notebook cell 118", decimals=0,
                      values=((1, 2, 3), (2, 8, 0), (2, 6, 3))),
            Reference("attn_scores", row=0, cell="notebook cell 154", decimals=0, values=(2, 4, 4)),
            Reference("attn_weights", row=0, cell="notebook cell 157", values=(0.0634, 0.4683, 0.4683)),
        )),
]}
"""Every preset, by slug (the ``?preset=`` URL value)."""
