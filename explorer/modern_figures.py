"""Charts and tables of the Modern attention page (`explorer.modern`): each a
heatmap drawn by `explorer.figures.matrix_chart`, as every other page's, or a
pandas table. No Streamlit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from explorer import figures, modern
from explorer.modern import ModernTrace
from explorer.steps import DIMS, KEY_COLS, MASK, QUERY_ROWS, SIGNED, TOKEN_ROWS, WEIGHTS, Axis, Step
from explorer.tokenizer import token_labels

DIM_COLS = Axis("dimension", DIMS)
HEAD_ROWS = Axis("query head", DIMS)
TILE_ROWS = Axis("query (row)", DIMS)
"""Rows numbered by position (a tile's rows, named by their token)."""


def _step(name: str, label: str, rows: Axis, cols: Axis, colour: str = SIGNED,
          cell_text: tuple[str, str] | None = None) -> Step:
    """A matrix of this page drawn like a step (its axes, colours and cell text)."""
    return Step(name, label, label, lambda c: "", lambda c: "", rows, cols, colour=colour,
                cell_text=cell_text)


STEPS = {
    "table": _step("table", "cos / sin", TOKEN_ROWS, DIM_COLS),
    "heads": _step("heads", "Q or K", TOKEN_ROWS, DIM_COLS),
    "scores": _step("scores", "scores", QUERY_ROWS, KEY_COLS),
    "weights": _step("weights", "weights", QUERY_ROWS, KEY_COLS, WEIGHTS),
    "mask": _step("mask", "mask", QUERY_ROWS, KEY_COLS, MASK, ("hidden", "seen")),
    "row": _step("row", "one row", Axis("new query", DIMS), KEY_COLS, WEIGHTS),
    "output": _step("output", "O", TOKEN_ROWS, DIM_COLS),
}
"""How each kind of matrix on the page is drawn."""


def _np(values: torch.Tensor) -> np.ndarray:
    return np.asarray(values.detach().to(torch.float64))


def chart(values: torch.Tensor, kind: str, title: str, labels: list[str], *,
          row_labels: list[str] | None = None, columns: int = 1, zrange=None,
          shapes: list[dict[str, Any]] = (), highlight_row: int | None = None):
    """A heatmap of ``values`` (2-D) drawn as ``kind`` (`STEPS`): token axes are
    labelled with ``labels``, dimension axes 0, 1, 2 …; ``shapes`` are added outlines."""
    step = STEPS[kind]
    values = _np(values)
    rows = row_labels or (labels[:values.shape[0]] if step.rows.labels != DIMS
                          else [str(i) for i in range(values.shape[0])])
    cols = labels[:values.shape[1]] if step.cols.labels != DIMS else [
        str(i) for i in range(values.shape[1])]
    drawn = figures.matrix_chart(values, rows, cols, step, title, zrange=zrange, columns=columns,
                                 highlight_row=highlight_row,
                                 filename=f"modern-{kind}")
    drawn.figure["layout"]["shapes"] += list(shapes)
    return drawn


def labels_of(tokens: list[str]) -> list[str]:
    return token_labels(tokens)


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------
def frequency_table(config: modern.ModernConfig) -> pd.DataFrame:
    """One row per pair i: the dimensions it turns, θ_i in radians per
    position, and the positions one full turn takes (2π/θ_i)."""
    theta = modern.rope_frequencies(config.head_dim, config.rope_base)
    pairs = modern.rope_pairs(config.head_dim, config.rope_pairing)
    return pd.DataFrame({
        "pair i": range(len(pairs)),
        "dimensions turned together": [f"{a} and {b}" for a, b in pairs],
        "θ_i (radians per position)": [float(t) for t in theta],
        "positions per full turn": [2 * math.pi / float(t) for t in theta],
    })


def pair_shapes(config: modern.ModernConfig, n_rows: int, pair: int = 0) -> list[dict]:
    """Outlines of the two columns of ``pair`` in a (tokens × head_dim) chart."""
    shapes = []
    for col in modern.rope_pairs(config.head_dim, config.rope_pairing)[pair]:
        shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": col - 0.5,
                       "x1": col + 0.5, "y0": -0.5, "y1": n_rows - 0.5,
                       "line": {"color": figures.HIGHLIGHT_COLOUR, "width": 2}})
    return shapes


def cell_outline(row: int, col: int) -> dict:
    """The outline of the explained cell, as on the other pages."""
    return figures.cell_shape(row, col)


def rope_terms_table(trace: ModernTrace, head: int, row: int, col: int) -> pd.DataFrame:
    """The terms of one score with RoPE: per dimension, the rotated query's and
    key's numbers and their product (the score is their sum / √head_dim)."""
    c = trace.config
    kv = modern.kv_head_of(c.n_heads, c.n_kv_heads)[head]
    q, k = trace.queries_rope[head, row], trace.keys_rope[kv, col]
    partner = {a: b for pair in modern.rope_pairs(c.head_dim, c.rope_pairing)
               for a, b in (pair, pair[::-1])}
    return pd.DataFrame({"dimension": range(c.head_dim),
                         "turns with": [partner[d] for d in range(c.head_dim)],
                         "q′": _np(q), "k′": _np(k), "q′ × k′": _np(q * k)})


# ---------------------------------------------------------------------------
# Grouped-query attention
# ---------------------------------------------------------------------------
def group_table(config: modern.ModernConfig) -> pd.DataFrame:
    """Which query heads share each K/V head."""
    owner = modern.kv_head_of(config.n_heads, config.n_kv_heads)
    return pd.DataFrame({
        "K/V head": range(config.n_kv_heads),
        "query heads that read it": [", ".join(str(h) for h, k in enumerate(owner) if k == kv)
                                     for kv in range(config.n_kv_heads)],
    })


def _kib(count: int) -> str:
    return f"{count:,} B" if count < 1024 else f"{count / 1024:,.1f} KiB"


def cache_table(config: modern.ModernConfig) -> pd.DataFrame:
    """KV-cache bytes per token: the page's sizes (one layer, float32) with its
    K/V heads and with one per query head (multi-head), then named models
    (bfloat16, every layer)."""
    rows = []
    for label, kv in ((f"this page, {config.n_kv_heads} K/V heads", config.n_kv_heads),
                      (f"this page as multi-head ({config.n_heads} K/V heads)", config.n_heads)):
        rows.append({"model": label, "layers": 1, "query heads": config.n_heads,
                     "K/V heads": kv, "head_dim": config.head_dim, "bytes per value": 4,
                     "cache per token": _kib(modern.kv_cache_bytes_per_token(
                         1, kv, config.head_dim, 4))})
    for m in modern.REAL_MODELS:
        rows.append({"model": m.name, "layers": m.n_layers, "query heads": m.n_heads,
                     "K/V heads": m.n_kv_heads, "head_dim": m.head_dim, "bytes per value": 2,
                     "cache per token": _kib(modern.kv_cache_bytes_per_token(
                         m.n_layers, m.n_kv_heads, m.head_dim, 2))})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------
# Online softmax
# ---------------------------------------------------------------------------
def tile_shape(rows: range, cols: range, colour: str = figures.MARK_COLOUR) -> dict:
    """The outline of one tile in an (n, n) chart."""
    return {"type": "rect", "xref": "x", "yref": "y", "x0": cols.start - 0.5,
            "x1": cols.stop - 0.5, "y0": rows.start - 0.5, "y1": rows.stop - 0.5,
            "line": {"color": colour, "width": 3}}


def tile_table(step: modern.TileStep, head: int, labels: list[str]) -> pd.DataFrame:
    """One row per query of the tile: m before and after, the correction
    exp(m_old − m_new) and the running sum ℓ, for ``head``."""
    return pd.DataFrame({
        "query": [labels[i] for i in step.rows],
        "m_old": _np(step.m_old[head]),
        "m_new": _np(step.m_new[head]),
        "exp(m_old − m_new)": _np(step.correction[head]),
        "ℓ": _np(step.l[head]),
    })


def memory_table(trace: ModernTrace) -> pd.DataFrame:
    """Bytes of float32 scores: the n × n matrix per head (never allocated)
    beside one tile per head (the most held at once)."""
    c, n = trace.config, trace.n_tokens
    return pd.DataFrame({
        "scores held": [f"every score: {c.n_heads} × {n} × {n} (never allocated)",
                        f"one tile: {c.n_heads} × {c.block_q} × {c.block_k}"],
        "bytes": [f"{trace.flash.full_scores_bytes:,}", f"{trace.flash.tile_bytes:,}"],
    })
