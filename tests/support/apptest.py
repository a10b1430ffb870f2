"""AppTest as a visitor uses it: open a page or a link, read the charts as the
browser gets them, the link box, the pickers and the messages."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from explorer.core import literal
from explorer.render.payload import decode
from explorer.ui import state
from tests.support.server import HOME, ROOT

HOSTILE = "<img src=x onerror=alert(1)> **bold** [link](javascript:alert(1)) $x^2$"


def open_page(page: str, query: dict[str, str] | None = None) -> AppTest:
    """Open the app at ``page`` (optionally with URL query parameters), as a
    visitor following a link would."""
    at = AppTest.from_file(str(ROOT / HOME), default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    if page != HOME:
        at.switch_page(page).run()
    return at


def open_link(page: str, query: dict[str, str] | None = None) -> AppTest:
    """Open ``page`` first, as a link to it does (`open_page` runs Home first,
    whose settings would read the link's parameters before the page)."""
    at = AppTest.from_file(str(ROOT / HOME), default_timeout=60)
    at.query_params.update(query or {})
    at.switch_page(page).run()
    return at


def page_link(at: AppTest) -> str:
    """The "Link to this view" text, as a visitor reads it: the box opened
    (its code block, the sidebar's first, is drawn only while it is open)."""
    if not (state.LINK_BOX_KEY in at.session_state and at.session_state[state.LINK_BOX_KEY]):
        at.session_state[state.LINK_BOX_KEY] = True
        at.run()
    return at.sidebar.code[0].value


_MATRICES: dict = {}  # matrices the "page" holds, by hash, as the browser keeps them


def all_charts(at: AppTest) -> dict[str, dict]:
    """Every chart on the page by its key, as the browser gets it: the Plotly
    figure with each heatmap's ``z`` filled in from the payload's float32 blocks."""
    found = {}
    for element in at.get("bidi_component"):
        if not element.proto.bytes:  # a picker (explorer.ui.component.picker): JSON, no chart
            continue
        header, matrices = decode(element.proto.bytes, _MATRICES)
        figure = header["figure"]
        for trace in figure["data"]:
            if "matrix" in trace:
                trace["z"] = matrices[trace["matrix"]["block"]]
        found[element.proto.id.split("-", 2)[2]] = figure  # "$$ID-<hash>-<key>"
    return found


def chart_headers(at: AppTest) -> dict[str, dict]:
    """Every chart's header by its key: the figure and what the browser follows
    by itself (``marks``, ``view``, ``heads``, ``lines``; `explorer.render.payload.Chart`)."""
    return {element.proto.id.split("-", 2)[2]: decode(element.proto.bytes, {})[0]
            for element in at.get("bidi_component") if element.proto.bytes}


def charts(at: AppTest) -> dict[str, dict]:
    """The page's step charts by step name (their keys are ``chart-<step>``)."""
    return {key.removeprefix("chart-"): figure for key, figure in all_charts(at).items()
            if key.startswith("chart-")}


def z_values(spec: dict) -> np.ndarray:
    """A chart's (first) heatmap matrix."""
    return np.asarray(spec["data"][0]["z"], dtype=float)


def read_numbers(column) -> np.ndarray:
    """A table's numbers, written with the minus sign U+2212, as floats."""
    return np.array([float(text.replace("\u2212", "-")) for text in column])


def pick(at: AppTest, name: str, value: int | None) -> AppTest:
    """Choose ``value`` in the page's ``name`` picker ("query", "head"), which
    chart.js draws and follows in the browser: on the server its choice sets
    the state and reruns the page (`explorer.ui.render._pick`)."""
    at.session_state[name] = value
    return at.run()


def picked(at: AppTest, name: str) -> int | None:
    """The value the ``name`` picker shows: the one the page sent it."""
    for element in at.get("bidi_component"):
        if element.proto.id.endswith(f"-picker-{name}"):
            return json.loads(element.proto.json)["value"]
    raise KeyError(f"no {name} picker on the page")


def errors(at: AppTest, kind: str = "error") -> list[str]:
    """The text of the ``kind`` boxes ("error", "warning", "info") as a visitor
    reads it: the markdown escapes and word joiners of `explorer.core.literal.markdown`
    undone."""
    return [e.value.replace("\\", "").replace(literal.WORD_JOINER, "")
            for e in getattr(at, kind)]
