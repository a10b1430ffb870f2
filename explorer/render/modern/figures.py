"""Charts and tables of the Modern attention page (`explorer.modern.attention`): each a
heatmap drawn by `explorer.render.figures.matrix_chart`, as every other page's, or a
pandas table. No Streamlit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from explorer.core.steps import (
    DIM_COLS,
    DIMS,
    KEY_COLS,
    MASK,
    QUERY_ROWS,
    TOKEN_ROWS,
    WEIGHTS,
    Axis,
    plain_step,
)
from explorer.modern import attention as modern
from explorer.modern import explain as modern_explain
from explorer.modern.attention import ModernTrace
from explorer.render import figures

HEAD_ROWS = Axis("query head", DIMS)
TILE_ROWS = Axis("query (row)", DIMS)
"""Rows numbered by position (a tile's rows, named by their token)."""


STEPS = {
    "table": plain_step("table", TOKEN_ROWS, DIM_COLS, label="cos / sin"),
    "heads": plain_step("heads", TOKEN_ROWS, DIM_COLS, label="Q or K"),
    "scores": plain_step("scores", QUERY_ROWS, KEY_COLS),
    "weights": plain_step("weights", QUERY_ROWS, KEY_COLS, WEIGHTS),
    "mask": plain_step("mask", QUERY_ROWS, KEY_COLS, MASK, ("hidden", "seen")),
    "row": plain_step("row", Axis("new query", DIMS), KEY_COLS, WEIGHTS, label="one row"),
    "output": plain_step("output", TOKEN_ROWS, DIM_COLS, label="O"),
}
"""How each kind of matrix on the page is drawn."""


def _np(values: torch.Tensor) -> np.ndarray:
    return np.asarray(values.detach().to(torch.float64))


def chart(values: torch.Tensor, kind: str, title: str, labels: list[str], *,
          row_labels: list[str] | None = None, columns: int = 1, zrange=None,
          shapes: Sequence[dict[str, Any]] = (), highlight_row: int | None = None):
    """A heatmap of ``values`` (2-D) drawn as ``kind`` (`STEPS`): token axes are
    labelled with ``labels``, dimension axes 0, 1, 2 …; ``shapes`` are added outlines."""
    step = STEPS[kind]
    matrix = _np(values)
    rows = row_labels or (labels[:matrix.shape[0]] if step.rows.labels != DIMS
                          else [str(i) for i in range(matrix.shape[0])])
    cols = labels[:matrix.shape[1]] if step.cols.labels != DIMS else [
        str(i) for i in range(matrix.shape[1])]
    drawn = figures.matrix_chart(matrix, rows, cols, step, title, zrange=zrange, columns=columns,
                                 highlight_row=highlight_row,
                                 filename=f"modern-{kind}")
    drawn.figure["layout"]["shapes"] += list(shapes)
    return drawn


@dataclass(frozen=True)
class Part:
    """One part of the page: its heading, its check's name
    (`explorer.modern.verify.checks`) and its charts' rows as the report lays
    them out (keys of `explorer.modern.explain.CHARTS`)."""

    heading: str
    check: str
    rows: tuple[tuple[str, ...], ...]


PARTS = (
    Part("1. Rotary position embeddings (RoPE)", "RoPE",
         (("cos", "sin"), ("q-before", "q-after"), ("scores-before", "scores-after"))),
    Part("2. Grouped-query and multi-query attention", "Grouped-query attention",
         (("k-shared",), ("gqa-weights",))),
    Part("3. Sliding-window attention", "Sliding window",
         (("mask-causal", "mask-window", "mask-window-earlier"), ("window-weights",))),
    Part("4. The KV cache, one token at a time", "KV cache", (("decode-row",),)),
    Part("5. FlashAttention's online softmax", "Online softmax", (("tile",), ("tile-output",))),
)
"""The page's five parts in order (the page's headings are these)."""
PART = {part.check: part for part in PARTS}
"""The parts by their check's name."""


def part_tables(trace: ModernTrace, part: Part, head: int, labels: list[str]
                ) -> list[tuple[str, pd.DataFrame]]:
    """The tables a part shows, each with its caption."""
    c = trace.config
    if part.check == "RoPE":
        return [("RoPE's frequencies", frequency_table(c))]
    if part.check == "Grouped-query attention":
        return [("Who shares which K/V head", group_table(c)),
                ("KV-cache bytes per token", cache_table(c))]
    if part.check == "Online softmax":
        step = modern_explain.shown_tile(trace)
        return [(f"Query tile {step.q_tile}, key tile {step.k_tile}: m, the correction, ℓ",
                 tile_table(step, head, labels)), ("Memory", memory_table(trace))]
    return []


def _titles(trace: ModernTrace, head: int, position: int) -> dict[str, tuple[str, str]]:
    """Each chart of the page (`explorer.modern.explain.CHARTS`): how it is drawn
    (a kind of `STEPS`) and its title."""
    c, n = trace.config, trace.n_tokens
    kv = modern.kv_head_of(c.n_heads, c.n_kv_heads)[head]
    positions = f"positions {c.rope_offset} … {c.rope_offset + n - 1}"
    return {
        "cos": ("table", f"cos(m·θ), {positions}"),
        "sin": ("table", f"sin(m·θ), {positions}"),
        "q-before": ("heads", f"Q of head {head}, before RoPE"),
        "q-after": ("heads", f"Q of head {head}, after RoPE"),
        "scores-before": ("scores", f"scores of head {head} without RoPE, Q·Kᵀ/√head_dim"),
        "scores-after": ("scores", f"scores of head {head} with RoPE"),
        "k-shared": ("heads", f"K of K/V head {kv}, read by query head {head} (after RoPE)"),
        "gqa-weights": ("weights", f"causal attention weights of query head {head}"),
        "mask-causal": ("mask", "causal mask (dark: seen)"),
        "mask-window": ("mask", f"window w = {c.window}: {c.window} keys (transformers)"),
        "mask-window-earlier": ("mask", f"w = {c.window}: itself + {c.window} earlier "
                                        "(Mistral's reference)"),
        "window-weights": ("weights", f"windowed attention weights of query head {head}"),
        "decode-row": ("row", f"head {head}: token {position}'s one row of weights (reads "
                              f"the cached keys 0 … {position})"),
        "tile": ("scores", f"head {head}: the tile read (masked scores S; the page draws them "
                           "all, the kernel never does)"),
        "tile-output": ("output", f"head {head}: O after this tile (not yet divided by ℓ)"),
    }


def chart_of(trace: ModernTrace, key: str, head: int, labels: list[str], *, position: int = 0,
             columns: int = 1, shapes: Sequence[dict[str, Any]] = ()):
    """The page's chart ``key`` (`explorer.modern.explain.CHARTS`) for query head
    ``head`` as the page and its report draw it: its matrix
    (`explorer.modern.explain.chart_matrix`, the rows `chart_rows` says; the
    decoded row is token ``position``'s), kind, title and outlines (RoPE's pair
    0 on cos and sin, the tile read), plus ``shapes``."""
    kind, title = _titles(trace, head, position)[key]
    values = modern_explain.chart_matrix(trace, key, head)
    rows = modern_explain.chart_rows(trace, key, position)
    values = values[:, :modern_explain.chart_columns(key, position)]  # the cached keys alone
    own = []
    if key in ("cos", "sin"):
        own = pair_shapes(trace.config, trace.n_tokens)
    elif key == "tile":
        step = modern_explain.shown_tile(trace)
        own = [tile_shape(step.rows, step.cols)]
    return chart(values if rows is None else values[rows], kind, title, labels,
                 row_labels=None if rows is None else [labels[i] for i in rows],
                 columns=columns, zrange=(-1, 1) if kind == "table" else None,
                 shapes=[*own, *shapes])


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
    (bfloat16, every layer); three columns, the product written out, so that
    it fits a phone's width."""
    sizes = [(f"this page, {config.n_kv_heads} K/V heads", 1, config.n_kv_heads,
              config.head_dim, 4),
             (f"this page as multi-head ({config.n_heads} K/V heads)", 1, config.n_heads,
              config.head_dim, 4),
             *((m.name, m.n_layers, m.n_kv_heads, m.head_dim, 2) for m in modern.REAL_MODELS)]
    return pd.DataFrame({
        "model": [name for name, *_ in sizes],
        "2 (K and V) × layers × K/V heads × head_dim × bytes": [
            f"2 × {layers} × {kv} × {dim} × {size} B" for _, layers, kv, dim, size in sizes],
        "cache per token": [_kib(modern.kv_cache_bytes_per_token(layers, kv, dim, size))
                            for _, layers, kv, dim, size in sizes],
    })


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
