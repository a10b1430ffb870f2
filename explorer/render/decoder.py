"""Charts and tables of a Llama-family layer on the Real model page: each chart a
heatmap drawn by `explorer.render.figures.matrix_chart`, as every other page's,
of the matrix `explorer.models.explain.chart_matrix` gives (one query head's
slice of `explorer.models.llama.compute_decoder_trace`, a generated token's
row of `explorer.models.generation.generate`). No Streamlit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from explorer.core.steps import (
    DIMS,
    KEY_COLS,
    TOKENS,
    WEIGHTS,
    Axis,
    Step,
    plain_step,
)
from explorer.models import explain as decoder_explain
from explorer.models.layer_steps import BY_NAME as STEP
from explorer.render import figures

GENERATED_ROWS = Axis("generated token (row)", TOKENS)
NEW_QUERY = Axis("new query", DIMS)
GENERATION_KINDS = {
    "generated_scores": plain_step("generated_scores", NEW_QUERY, KEY_COLS),
    "generated_weights": plain_step("generated_weights", NEW_QUERY, KEY_COLS, WEIGHTS),
    "generated_rows": plain_step("generated_rows", GENERATED_ROWS, KEY_COLS, WEIGHTS),
}
"""How the generation's charts are drawn (the layer's: `explorer.models.layer_steps`)."""


def kind_of(chart: str) -> Step:
    """How chart ``chart`` (`explorer.models.explain.CHARTS`) is drawn: its
    axes, colours and a mask's cell text, from its `LayerStep` (or
    `GENERATION_KINDS`). Raises KeyError for no such chart."""
    return GENERATION_KINDS[chart] if chart in GENERATION_KINDS else STEP[chart].kind


def title_of(chart: str, config: Any, head: int, kv_head: int, position: int = 0) -> str:
    """The chart's title: what it is, whose (query head, K/V head, the layer's),
    from its `LayerStep`'s title with the config's numbers filled in."""
    h = f"head {head}"
    theta = f"θ = {config.rope_theta:g}" + ("" if config.rope_type == "default"
                                            else f", {config.rope_type} scaling")
    generation = {
        "generated_scores": f"{h}: token {position}'s scaled scores over the cache",
        "generated_weights": f"{h}: token {position}'s weights over the cache",
        "generated_rows": f"{h}: every generated token's row of weights",
    }
    if chart in generation:
        return generation[chart]
    mask = ("causal mask" if config.window is None
            else f"sliding window of {config.window} keys")
    return STEP[chart].title.format(head=h, kv_head=f"K/V head {kv_head}", theta=theta,
                                    scaling=f"{config.scaling:.4g}", mask=mask)


def _labels(axis: Axis, size: int, tokens: list[str], offset: int = 0) -> list[str]:
    if axis.labels == DIMS:
        return [str(i) for i in range(size)] if axis.title else [""] * size
    return [tokens[offset + i] for i in range(size)]


def decoder_chart(trace: Any, head_slice: Any, chart: str, tokens: list[str], *,
                  generation: Any = None, generated: int = 0, columns: int = 1,
                  marked_cell: tuple[int, int] | None = None,
                  highlight_row: int | None = None) -> figures.Chart:
    """Chart ``chart`` of query head ``head_slice.head``: its matrix
    (`explorer.models.explain.chart_matrix`), axes labelled with ``tokens``
    (the prompt's and the generated ones), title, the explained cell outlined."""
    values = np.asarray(decoder_explain.chart_matrix(trace, head_slice, chart, generation,
                                                     generated).detach().to(torch.float64))
    step = kind_of(chart)
    n_prompt = trace.n_tokens
    offset = n_prompt if chart == "generated_rows" else 0
    position = generation.generated[generated].position if chart in (
        "generated_scores", "generated_weights") else 0
    rows = _labels(step.rows, values.shape[0], tokens, offset)
    cols = _labels(step.cols, values.shape[1], tokens)
    if chart in ("generated_scores", "generated_weights"):
        rows = [tokens[position]]
    title = title_of(chart, trace.config, head_slice.head, head_slice.kv_head, position)
    title += f" {'×'.join(map(str, values.shape))}"
    return figures.matrix_chart(values, rows, cols, step, title, columns=columns,
                                marked_cell=marked_cell, highlight_row=highlight_row,
                                filename=f"{chart}_head{head_slice.head}")


def sharing_table(config: Any) -> pd.DataFrame:
    """Which query heads read which K/V head (``repeat_kv``): one row per K/V head."""
    rows = [{"K/V head": kv, "query heads reading it": ", ".join(
        str(h) for h, k in enumerate(config.kv_head_of) if k == kv)}
        for kv in range(config.n_kv_heads)]
    return pd.DataFrame(rows).set_index("K/V head")


def _mb(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.2f} MB" if nbytes >= 2**20 else f"{nbytes / 1024:,.1f} KB"


def cache_table(generation: Any) -> pd.DataFrame:
    """The model's KV cache after the prompt and after each generated token: the
    tokens the opened layer's cache keeps (read from the model's cache: a
    sliding-window layer keeps only the end), the bytes (measured, every layer),
    and the bytes without grouped-query sharing (each query head with its own
    K/V head)."""
    n = len(generation.prompt_ids)
    c = generation.config
    kept = f"tokens kept (layer {c.layer})"
    rows = [{"after": f"the prompt ({n} tokens)", kept: generation.prompt_cache_kept,
             "KV cache": _mb(generation.prompt_cache_bytes),
             "without GQA": _mb(generation.prompt_cache_bytes * c.n_heads // c.n_kv_heads)}]
    rows += [{"after": f"“{t.token}” (position {t.position})",
              kept: t.cache_kept, "KV cache": _mb(t.cache_bytes),
              "without GQA": _mb(t.mha_cache_bytes)} for t in generation.generated]
    return pd.DataFrame(rows).set_index("after")
