"""Charts in the page: one Streamlit component draws every `explorer.render.payload.Chart`.

Why not ``st.plotly_chart``: the explorer draws a dozen heatmaps a page, up to
1024×1024 cells, and redraws them on every edit. Measured in Chromium
(``make bench``), ``st.plotly_chart`` sent each matrix as JSON text,
validated every figure again on the server, and remounted every selectable
chart whenever anything in it changed; clicking a heatmap cell needed an
invisible marker per cell. This component (Streamlit's components v2, no
iframe) draws with Plotly.js (the modules of ``explorer/render/chart/``), but:

- matrices travel as raw float32 bytes, and one the page already holds is
  not sent again (only its hash);
- a chart is updated in place (``Plotly.react``) across reruns;
- a click on a heatmap cell comes back directly;
- the browser sizes each chart to its column and picks the cell text from the
  real cell size.

Streamlit's static file serving serves both scripts from the committed folder
``static/`` at the app's root (``enableStaticServing``), under versioned URLs:
``static/explorer-chart.js`` (`explorer.render.payload.CHART_JS`, the modules of
``explorer/render/chart/`` as one) and a bundle of Plotly.js's core and heatmap trace
(``static/plotly/plotly-heatmap.min.js``: built by ``deploy/plotly/build.sh``
from npm packages pinned by its lock, of the plotly.js version the installed
``plotly`` package ships; its version and sha256 in ``plotly-heatmap.json``).
Chromium loads and evaluates it in a third of the time Plotly's partial
"cartesian" bundle took (0.15-0.25 s against 0.43-0.59 s on an idle static
page here): the traces the pages never draw cost more to evaluate than their
bytes suggest. Nothing is written at run time, so a read-only deploy works.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st

from explorer.render.payload import CHART_JS, Chart, encode
from explorer.ui import private, state

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "static"
"""Streamlit serves this folder at ``/app/static`` (``enableStaticServing``)."""
PLOTLY_JS = STATIC / "plotly" / "plotly-heatmap.min.js"
PLOTLY_JS_INFO = json.loads((STATIC / "plotly" / "plotly-heatmap.json").read_text())
"""The bundle's npm package, version, sha256 and how it was built."""


def _versioned(path: Path) -> str:
    digest = hashlib.blake2b(path.read_bytes(), digest_size=6).hexdigest()
    return f"app/static/{path.relative_to(STATIC).as_posix()}?v={digest}"


PLOTLY_URL = _versioned(PLOTLY_JS)
CHART_URL = _versioned(CHART_JS)
"""Where the page loads Plotly.js and the chart modules from: relative to the
page, so a base URL path works too, and versioned by content, so a browser
never keeps a stale copy."""
_SENT_KEY = state.CHART_SENT  # chart key -> hashes of the matrices its page holds


# The components themselves only load the chart modules (once per page), so that each
# chart's message carries a few lines of code, not the whole of the chart modules.
def _loader(function: str) -> str:
    return f"""export default function (component) {{
  import(new URL("{CHART_URL}", document.baseURI).href).then((m) => m.{function}(component));
}}"""


_component = st.components.v2.component("explorer_chart", js=_loader("default"),
                                         isolate_styles=False)
_picker = st.components.v2.component("explorer_picker", js=_loader("mountPicker"),
                                      isolate_styles=False)


def show(chart: Chart, key: str, on_click: Callable[[dict[str, int]], None] | None = None,
         on_lines: Callable[[bool], None] | None = None) -> None:
    """Draw ``chart`` under the widget key ``key`` (kept across reruns, so the
    page updates it in place). ``on_click({"trace", "row", "col"})`` runs when
    a heatmap cell is clicked, ``on_lines(on)`` when the line view's switch
    (`Chart.lines`) is turned; the page shows both at once, by itself."""
    sent = st.session_state.setdefault(_SENT_KEY, {})
    chart.clickable = on_click is not None
    # AppTest keeps only the last run's elements, so there every run sends every matrix.
    known = set() if private.in_app_test() else sent.get(key, set())
    payload = encode(chart, known, PLOTLY_URL)
    sent[key] = set(chart.hashes())
    _component(key=key, data=payload,
               on_click_change=lambda: _clicked(key, on_click),
               on_lines_change=lambda: _lines(key, on_lines),
               on_missing_change=lambda: _resend(key))


def picker(name: str, label: str, options: Sequence[str], value: int | None, *,
           none: str | None = None, buttons: bool = False, help: str | None = None,
           on_pick: Callable[[int | None], None]) -> int | None:
    """A picker of the page's view drawn by the chart modules (``explorer/render/chart/pickers.js``): ``options``
    named by their labels, as a drop-down (``none``: the label of no choice) or
    a row of ``buttons``. The page follows a choice at once, without the server;
    ``on_pick(index or None)`` then runs on the server (it sets state). Returns
    ``value``, the choice the page shows."""
    key = f"picker-{name}"
    _picker(key=key, data={"name": name, "label": label, "help": help, "options": list(options),
                           "value": value, "none": none, "buttons": buttons},
            on_pick_change=lambda: _picked(key, on_pick))
    return value


def _picked(key: str, on_pick: Callable[[int | None], None]) -> None:
    picked = getattr(st.session_state.get(key), "pick", None)
    if type(picked) is int:  # a choice's index, -1 for none (a forged value is ignored)
        on_pick(None if picked < 0 else picked)


def _clicked(key: str, on_click) -> None:
    cell = getattr(st.session_state.get(key), "click", None)
    if on_click is not None and cell:
        on_click(cell)


def _lines(key: str, on_lines) -> None:
    lines = getattr(st.session_state.get(key), "lines", None)
    if on_lines is not None and lines is not None:
        on_lines(bool(lines))


def _resend(key: str) -> None:
    """The page lost matrices it was sent (a reload, a full cache): send again."""
    st.session_state.get(_SENT_KEY, {}).pop(key, None)
