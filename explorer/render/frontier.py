"""Charts, tables and the JSON of the Frontier attention page
(`explorer.modern.frontier`): each `Step` a heatmap drawn by
`explorer.render.figures.matrix_chart`, as the Modern page's, each part's facts
and checks a pandas table. No Streamlit."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from explorer.core.agreement import Agreement, tolerance_text
from explorer.core.steps import DIMS, SIGNED, TOKENS, WEIGHTS, Axis, plain_step
from explorer.core.trace import json_safe
from explorer.modern.frontier import Part, Step
from explorer.modern.frontier.parts import (
    PARTS,
    TOKEN_AXES,
    FrontierTrace,
    axis_labels,
    step_heads,
    step_matrix,
)
from explorer.render import figures

JSON_FILE = "frontier_attention.json"
AXIS_TITLES = {"tokens": "token (row)", "keys": "key (column)", "dims": "dimension",
               "slots": "cache slot", "steps": "decode step"}
"""An axis's title on a chart, by what it counts (`Step.rows`, `Step.cols`);
any other the name itself."""


def _axis(axis: str) -> Axis:
    return Axis(AXIS_TITLES.get(axis, axis), TOKENS if axis in TOKEN_AXES else DIMS)


def chart_title(step: Step, head: int) -> str:
    """``"scores (5×5), head 1 of 2"``: the step's title, its shape, and for a
    3-D step the head shown."""
    matrix = step_matrix(step, head)
    shape = "×".join(str(s) for s in matrix.shape)
    heads = step_heads(step)
    shown = f", head {min(head, heads - 1)} of {heads}" if step.values.dim() == 3 else ""
    return f"{step.title} ({shape}){shown}"


def step_chart(part: Part, step: Step, head: int, tokens: list[str], *, columns: int = 1,
               shapes: Sequence[dict[str, Any]] = ()):
    """The heatmap of ``step`` of ``part`` for head ``head`` (`step_matrix`): its
    axes labelled by `explorer.modern.frontier.parts.axis_labels`, a diverging
    scale for a signed step and [0, 1] for weights; ``shapes`` are added outlines
    (the explained cell)."""
    values = np.asarray(step_matrix(step, head).detach().to(torch.float64))
    kind = plain_step(step.name, _axis(step.rows), _axis(step.cols),
                      SIGNED if step.signed else WEIGHTS)
    rows = axis_labels(step.rows, values.shape[0], tokens)
    cols = axis_labels(step.cols, values.shape[1], tokens)
    drawn = figures.matrix_chart(values, rows, cols, kind, chart_title(step, head),
                                 columns=columns, filename=f"frontier-{part.key}-{step.name}")
    drawn.figure["layout"]["shapes"] += list(shapes)
    return drawn


def cell_outline(row: int, col: int) -> dict:
    """The outline of the explained cell, as on the other pages."""
    return figures.cell_shape(row, col)


def facts_table(part: Part) -> pd.DataFrame:
    """The part's facts, one row each: what, and its value."""
    return pd.DataFrame({"fact": list(part.facts), "value": list(part.facts.values())})


def checks_table(checks: tuple[Agreement, ...]) -> pd.DataFrame:
    """One row per check: what was compared, with which reference, the largest
    difference, the tolerance and whether it agrees."""
    return pd.DataFrame({
        "check": [f"{c.symbol} {c.name}" for c in checks],
        "compared": [c.compared for c in checks],
        "reference": [c.reference for c in checks],
        "max |difference|": [f"{c.max_abs_diff:.1e}" for c in checks],
        "agrees below": [tolerance_text(c.tolerance) for c in checks],
    })


def _matrix(values: torch.Tensor) -> Any:
    return json_safe(values.detach().to(torch.float64).tolist()
                     if values.dtype.is_floating_point else values.tolist())


def frontier_json(trace: FrontierTrace, tokens: list[str], settings: dict[str, Any],
                  link: str = "") -> str:
    """Every part of ``trace`` as strict JSON (−∞ as the string ``"-Infinity"``):
    the tokens, the page's ``settings`` (every setting as the link writes it),
    its ``link``, the `FrontierConfig`, and per part (in the page's order) its
    title, source, steps (name, title, formula, rows, cols, values), checks
    (`Agreement.to_dict`) and facts, or the message of a part that could not be
    computed."""
    parts: dict[str, Any] = {}
    for key in PARTS:
        if key in trace.errors:
            parts[key] = {"error": trace.errors[key]}
            continue
        part = trace.parts[key]
        parts[key] = {
            "title": part.title, "source": part.source,
            "steps": {step.name: {"title": step.title, "formula": step.formula,
                                  "rows": step.rows, "cols": step.cols, "signed": step.signed,
                                  "shape": list(step.values.shape),
                                  "values": _matrix(step.values)} for step in part.steps},
            "checks": [json_safe(check.to_dict()) for check in part.checks],
            "facts": dict(part.facts)}
    return json.dumps({"tokens": list(tokens), "settings": json_safe(settings), "link": link,
                       "config": dataclasses.asdict(trace.config), "parts": parts},
                      allow_nan=False, ensure_ascii=False)
