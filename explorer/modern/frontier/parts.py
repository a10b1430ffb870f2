"""The Frontier page's parts in page order (`PARTS`), and `compute_parts`, which
computes them all from one X, one `FrontierConfig` and one seed.

Each part draws its weights from its own `torch.Generator`, seeded with the
learner's seed, so a part's numbers do not depend on which parts came before
it (adding, removing or reordering a part changes no other part's numbers).
A part that cannot compute the settings raises `ConfigError`; its message is
kept in `FrontierTrace.errors` and the other parts are computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from explorer.core.config import ConfigError
from explorer.lessons.explain import GIVEN, Explanation
from explorer.modern.frontier import (
    FrontierConfig,
    Part,
    Step,
    deltanet,
    gated,
    mla,
    ring,
    sinks,
    sparse,
)

PARTS: dict[str, Callable[[Tensor, FrontierConfig, torch.Generator], Part]] = {
    "mla": mla.mla,
    "sparse": sparse.sparse,
    "sinks": sinks.sinks,
    "ring": ring.ring,
    "gated": gated.gated,
    "deltanet": deltanet.deltanet,
}
"""Each part's key (its name in the link, the JSON and the script) -> its
function ``(x, config, generator) -> Part``, in the page's order."""
NAMES = {"mla": "Multi-head latent attention", "sparse": "DeepSeek sparse attention",
         "sinks": "Learned attention sinks", "ring": "The sliding window with a ring-buffer cache",
         "gated": "Gated attention", "deltanet": "Gated DeltaNet"}
"""Each part's name, for the heading of a part that could not be computed (a
computed part's heading is its `Part.title`)."""


@dataclass(frozen=True)
class FrontierTrace:
    """Every part of the page for one X: ``parts`` (key -> `Part`, in `PARTS`'
    order, those that computed) and ``errors`` (key -> the `ConfigError`'s
    message of each part that could not), with the ``config`` and the sentence's
    ``n_tokens`` they were computed for."""

    config: FrontierConfig
    n_tokens: int
    parts: dict[str, Part]
    errors: dict[str, str]

    @property
    def nbytes(self) -> int:
        """Bytes of every step's values (what the byte-bounded cache counts)."""
        return sum(step.values.numel() * step.values.element_size()
                   for part in self.parts.values() for step in part.steps)


def compute_parts(x: Tensor, config: FrontierConfig, seed: int) -> FrontierTrace:
    """Every part of `PARTS` for X ``(n_tokens, d_in)``, each with its own
    ``torch.Generator().manual_seed(seed)``.

    Raises `ConfigError` when ``config`` is outside its limits
    (`FrontierConfig.check`) or X is not a 2-D matrix of at least one token; a
    `ConfigError` of one part is kept in `FrontierTrace.errors` instead, and the
    other parts are computed."""
    if x.dim() != 2:
        raise ConfigError("x", f"X must be a matrix (n_tokens, d_in) (got {x.dim()} "
                               "dimensions)")
    n_tokens = x.shape[0]
    config.check(n_tokens)
    parts: dict[str, Part] = {}
    errors: dict[str, str] = {}
    for key, compute in PARTS.items():
        generator = torch.Generator().manual_seed(seed)
        try:
            parts[key] = compute(x, config, generator)
        except ConfigError as error:
            errors[key] = str(error)
    return FrontierTrace(config, n_tokens, parts, errors)


TOKEN_AXES = ("tokens", "keys")
"""The axes of a `Step` labelled with the sentence's tokens (the others by index)."""


def axis_labels(axis: str, count: int, tokens: list[str] | tuple[str, ...]) -> list[str]:
    """The labels of a step's axis of ``count`` entries: the first ``count`` of
    ``tokens`` on a token axis (`TOKEN_AXES`) that has no more entries than the
    sentence, else 0, 1, 2 …"""
    if axis in TOKEN_AXES and count <= len(tokens):
        return list(tokens[:count])
    return [str(i) for i in range(count)]


def step_heads(step: Step) -> int:
    """How many heads ``step`` holds: its first size when its values are 3-D
    ``(n_heads, rows, cols)``, else 1."""
    return step.values.shape[0] if step.values.dim() == 3 else 1


def step_matrix(step: Step, head: int) -> Tensor:
    """The 2-D matrix ``(rows, cols)`` a chart of ``step`` shows: head ``head``'s
    of a 3-D step (the last head when it has fewer), the values of a 2-D one."""
    if step.values.dim() == 3:
        return step.values[min(head, step_heads(step) - 1)]
    return step.values


def explain_cell(part: Part, step: Step, row: int, col: int, head: int,
                 tokens: list[str] | tuple[str, ...]) -> Explanation:
    """Cell ``(row, col)`` of ``step`` (of ``part``) for head ``head``, explained
    generically: the step's ``explain`` text, its value, and in the note the
    cell's row and column labels (the visitor's tokens: the page escapes the
    note, never the position). Raises IndexError for a cell outside the matrix."""
    matrix = step_matrix(step, head)
    n_rows, n_cols = matrix.shape
    if not (0 <= row < n_rows and 0 <= col < n_cols):
        raise IndexError(f"{step.name} has no cell ({row}, {col}); its shape is "
                         f"({n_rows}, {n_cols})")
    row_label = axis_labels(step.rows, n_rows, tokens)[row]
    col_label = axis_labels(step.cols, n_cols, tokens)[col]
    shown_head = min(head, step_heads(step) - 1)
    where = f"head {shown_head}, " if step.values.dim() == 3 else ""
    return Explanation(
        f"{part.key}.{step.name}", f"{step.name}[{row}, {col}]",
        (step.explain or f"a number of {step.title}").rstrip(". "), GIVEN, (),
        float(matrix[row, col]), position=f"{where}row {row}, column {col}",
        note=f"Row {row} is {step.rows[:-1] if step.rows.endswith('s') else step.rows} "
             f"“{row_label}”, column {col} is "
             f"{step.cols[:-1] if step.cols.endswith('s') else step.cols} “{col_label}” "
             f"({part.title}: {step.title}).")
