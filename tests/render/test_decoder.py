"""The Real model page's Llama-family charts and tables (`explorer.render.decoder`)
at a phone's width: issue 51's cosmetics, measured on the size rule chart.js draws by."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.models import explain as decoder_explain
from explorer.render import figures
from explorer.render.decoder import kind_of

PHONE_CHART_PX = 358
"""A chart's width on a 390 px phone (the page's padding taken off)."""


def height_for(size: dict, width: int) -> int:
    """chart.js's ``heightFor`` (explorer/render/chart/figure.js), in Python."""
    cell = min(size["max_cell"], max(1, (width - size["chrome"]) / size["cols"]))
    return round(min(size["max_height"],
                     max(size["min_height"], size["rows"] * cell + size["vertical"])))


@pytest.mark.parametrize("chart", sorted(decoder_explain.CHARTS))
@pytest.mark.parametrize("shape", [(8, 15), (1, 9), (7, 32), (3, 3)])
def test_a_vertical_axis_title_never_runs_into_the_chart_title(chart, shape):
    """The plot area holds the rows' axis title, with the ", every 10th" thinned labels
    add, but for `figures.TITLE_REACH_PX` above and below (the page's "generated token
    (row), every 2nd" on 8 rows ran 40 px into its title at 390 px)."""
    step = kind_of(chart)
    rows, cols = shape
    c = figures.matrix_chart(np.zeros(shape), [f"t{i}" for i in range(rows)],
                             [f"k{j}" for j in range(cols)], step, "a title")
    height = height_for(c.size, PHONE_CHART_PX)
    title = step.rows.title + figures.THINNED_SUFFIX if step.rows.title else ""
    plot = height - c.size["vertical"]
    assert plot >= figures.AXIS_TITLE_CHAR_PX * len(title) - figures.TITLE_REACH_PX, (
        chart, shape, height)


def test_the_generated_rows_chart_grows_to_hold_its_axis_title():
    step = kind_of("generated_rows")
    c = figures.matrix_chart(np.zeros((8, 15)), [f"t{i}" for i in range(8)],
                             [f"k{j}" for j in range(15)], step, "rows")
    assert step.rows.title == "generated token (row)"
    assert height_for(c.size, PHONE_CHART_PX) >= 7 * 32 - 60 + c.size["vertical"]
