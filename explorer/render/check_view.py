"""A `explorer.checker.report.CheckReport` drawn: the table of steps, and the first
difference's two matrices side by side, with the app's own chart code.

- `difference_charts(report)`: the reference's matrix and the learner's as two
  `explorer.render.payload.Chart` (`explorer.render.figures.matrix_chart`, one colour scale,
  the differing cells outlined), for the app's chart component
  (`explorer.ui.component.show`) or any page.
- `report_html(report)`: the report as one HTML fragment (what
  ``CheckReport._repr_html_`` shows in a notebook): the table as plain HTML, and
  the charts drawn by ``explorer/render/chart/chart.js`` with Plotly.js inlined, as
  `explorer.render.export.html_report` does (`chart_div`, `plotly_script`,
  `mount_script`), so it works offline. Plotly.js (about 4.6 MB) comes with
  the first report that has charts in this Python process, once per notebook
  as Plotly's own notebook renderer does (``init_notebook_mode``); the later
  reports use that ``window.Plotly``. ``charts=False`` leaves the charts out.

Every piece of the learner's text (tokens, class name, messages) passes
through `explorer.core.literal.html` or `explorer.core.literal.plotly`.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import numpy as np

from explorer.checker.verdicts import DIFFERS, MATCH, UNSURE
from explorer.core import literal
from explorer.core.steps import STEPS
from explorer.render.export import chart_div, mount_script, plotly_script
from explorer.render.figures import matrix_chart, shared_range
from explorer.render.payload import Chart

if TYPE_CHECKING:  # the checker imports this module when a notebook shows a report
    from explorer.checker.report import CheckReport

_COLOURS = {MATCH: "#1a7f37", DIFFERS: "#cf222e"}
_UNSURE_COLOUR = "#57606a"
"""A "?" verdict (the check is not sure of its reading) and a step not seen: grey."""
_CELL = "border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left"


def difference_charts(report: CheckReport) -> list[Chart]:
    """The first difference's slice, ours and yours, as two heatmaps on one
    colour scale with every differing cell outlined (up to `explorer.checker.check.MAX_OUTLINED`).

    Each is (n_tokens, n_tokens) or (n_tokens, d), drawn as its step (axes,
    colours) and titled "Ours: …" / "Yours: …" with the head and batch item.
    Just ours when no tensor of the learner's has the step's shape; no chart when
    the report is ok.
    """
    diff = report.first_difference
    if diff is None:
        return []
    step = STEPS[diff.step]
    matrices = [("Ours", np.array(diff.ours_matrix, dtype=np.float64))]
    if diff.theirs_matrix is not None:
        matrices.append(("Yours", np.array(diff.theirs_matrix, dtype=np.float64)))
    zrange = shared_range(step, *(values for _, values in matrices))
    where = "".join([f", batch item {diff.batch}" if diff.batch else "",
                     f", head {diff.head}" if diff.head is not None else ""])
    charts = []
    for i, (whose, values) in enumerate(matrices):
        same_shape = values.shape == matrices[0][1].shape
        cols = diff.col_labels if values.shape[1] == len(diff.col_labels) else \
            [str(j) for j in range(values.shape[1])]
        charts.append(matrix_chart(
            values, diff.row_labels[:values.shape[0]], cols, step,
            f"{whose}: {step.label}{where} ({values.shape[0]}×{values.shape[1]})",
            zrange=zrange, marked_cells=diff.cells if same_shape else (),
            colorbar=i == len(matrices) - 1, columns=len(matrices),
            filename=f"{diff.step}_{whose.lower()}"))
    return charts


def _table(report: CheckReport) -> str:
    rows = []
    for row, result in zip(report.rows(), report.steps):
        colour = _COLOURS.get(result.status, _UNSURE_COLOUR)
        rows.append(f'<tr><td style="{_CELL}"><code>{literal.html(row["step"])}</code></td>'
                    f'<td style="{_CELL}; color: {colour}; font-weight: bold">'
                    f'{row["result"]}</td><td style="{_CELL}">'
                    f'{literal.html(row["largest difference"])}</td></tr>')
    head = "".join(f'<th style="{_CELL}">{name}</th>'
                   for name in ("step", "yours", "largest difference"))
    return (f'<table style="border-collapse: collapse; margin: 0.5em 0">'
            f"<tr>{head}</tr>{''.join(rows)}</table>")


def _plotly_for_notebooks() -> str:
    """`plotly_script` with any AMD loader (the classic notebook's require.js)
    hidden while it runs, so that Plotly.js defines ``window.Plotly``."""
    return ("<script>window.__explorerDefine = window.define; window.define = undefined;"
            "</script>" + plotly_script() +
            "<script>window.define = window.__explorerDefine;</script>")


_plotly_sent = False
"""Whether a report of this process has carried Plotly.js (`report_html`)."""
_NO_PLOTLY = ("<script>if (!window.Plotly) document.getElementById({scope}).insertAdjacentText("
              "'beforeend', 'Plotly.js comes with the first report of this notebook, whose "
              "output is gone: show this one with IPython.display.HTML(explorer.render.check_view."
              "report_html(report, plotly=True))');</script>")


def report_html(report: CheckReport, charts: bool = True, plotly: bool | None = None) -> str:
    """The report as an HTML fragment: the verdict, what was read, the table of
    steps (✓ ✗ — and the largest difference), the first difference and the
    diagnosis, the notes, and (``charts``, when it differs) `difference_charts`
    drawn by the app's chart.js. The fragment mounts only its own charts, so a
    notebook may show several. ``plotly``: carry Plotly.js (True), or not
    (False); None: only the first fragment with charts of this process does,
    as a notebook needs it once."""
    global _plotly_sent
    colour = _COLOURS.get(MATCH if report.ok else UNSURE if report.uncertain else DIFFERS,
                          _UNSURE_COLOUR)
    parts = [f'<p style="color: {colour}; font-weight: bold">{literal.html(report.summary())}</p>',
             f"<p><b>{literal.html(report.module)}</b>: "
             f"{'<br>'.join(literal.html(line) for line in report.settings)}</p>",
             _table(report)]
    for label, text in report.findings():
        style = ' style="color: #57606a"' if label == "Note" else ""
        parts.append(f"<p{style}><b>{label}</b>: {literal.html(text)}</p>")
    drawn = difference_charts(report) if charts else []
    scope = f"explorer-check-{uuid.uuid4().hex}"
    if drawn:
        cells = "".join(chart_div(chart, f"{scope}-{i}") for i, chart in enumerate(drawn))
        carry = not _plotly_sent if plotly is None else plotly
        _plotly_sent = _plotly_sent or carry
        parts += [f'<div style="display: grid; gap: 1rem; grid-template-columns: '
                  f'repeat({len(drawn)}, minmax(0, 1fr))">{cells}</div>',
                  _plotly_for_notebooks() if carry else
                  _NO_PLOTLY.format(scope=json.dumps(scope)), mount_script(scope)]
    return f'<div class="explorer-check" id="{scope}">{"".join(parts)}</div>'
