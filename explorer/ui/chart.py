"""Charts in the page: one Streamlit component draws every `explorer.charts.Chart`.

Why not ``st.plotly_chart``: the explorer draws a dozen heatmaps a page, up to
1024×1024 cells, and redraws them on every edit. Measured in Chromium
(``make bench``), ``st.plotly_chart`` sent each matrix as JSON text,
validated every figure again on the server, and remounted every selectable
chart whenever anything in it changed; clicking a heatmap cell needed an
invisible marker per cell. This component (Streamlit's components v2, no
iframe) draws with the same Plotly.js (``explorer/chart.js``), but:

- matrices travel as raw float32 bytes, and one the page already holds is
  not sent again (only its hash);
- a chart is updated in place (``Plotly.react``) across reruns;
- a click on a heatmap cell comes back directly;
- the browser sizes each chart to its column and picks the cell text from the
  real cell size.

Plotly.js is the one that ships with the ``plotly`` package, served by
Streamlit's static file serving (`ensure_plotly_js`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import plotly
import streamlit as st
from streamlit import config

from explorer.charts import CHART_JS, Chart, encode
from explorer.figures import PLOTLY_MIN_JS

ROOT = Path(__file__).resolve().parents[2]
PLOTLY_JS = ROOT / "static" / "plotly.min.js"
PLOTLY_URL = f"app/static/plotly.min.js?v={plotly.__version__}"
"""Where the page loads Plotly.js from (Streamlit serves ``static/`` at
``/app/static``; relative, so a base URL path works too)."""
_SENT_KEY = "_chart_sent"  # chart key -> hashes of the matrices its page holds


def ensure_plotly_js() -> Path:
    """Copy the installed ``plotly`` package's ``plotly.min.js`` to ``static/``
    (git-ignored), once per version, so the page can load it."""
    source = PLOTLY_MIN_JS
    if not PLOTLY_JS.exists() or PLOTLY_JS.stat().st_size != source.stat().st_size:
        PLOTLY_JS.parent.mkdir(exist_ok=True)
        shutil.copyfile(source, PLOTLY_JS)
    return PLOTLY_JS


_component = st.components.v2.component("explorer_chart", js=CHART_JS.read_text(),
                                        isolate_styles=False)


def show(chart: Chart, key: str, on_click: Callable[[dict[str, int]], None] | None = None
         ) -> None:
    """Draw ``chart`` under the widget key ``key`` (kept across reruns, so the
    page updates it in place). ``on_click({"trace", "row", "col"})`` runs when
    a heatmap cell is clicked."""
    ensure_plotly_js()
    sent = st.session_state.setdefault(_SENT_KEY, {})
    chart.clickable = on_click is not None
    # AppTest keeps only the last run's elements, so there every run sends every matrix.
    known = set() if config.get_option("global.appTest") else sent.get(key, set())
    payload = encode(chart, known, PLOTLY_URL)
    sent[key] = set(chart.hashes())
    _component(key=key, data=payload,
               on_click_change=lambda: _clicked(key, on_click),
               on_missing_change=lambda: _resend(key))


def _clicked(key: str, on_click) -> None:
    cell = getattr(st.session_state.get(key), "click", None)
    if on_click is not None and cell:
        on_click(cell)


def _resend(key: str) -> None:
    """The page lost matrices it was sent (a reload, a full cache): send again."""
    st.session_state.get(_SENT_KEY, {}).pop(key, None)
