"""The sidebar's "Take it with you": the page's numbers, to keep and to rerun.

`take_it_with_you(view)` draws one expander with four downloads of the page's
`explorer.ui.state.View`, built by `explorer.render.export` and
`explorer.core.trace.Trace.to_json`:

- "Reproduce in PyTorch": ``attention.py`` (`explorer.render.export.pytorch_script`,
  with the page's link in its header), and the same script shown in a popover
  with Streamlit's copy button. Only for an `AttentionConfig` trace: a real
  model's trace has no script;
- "Report (HTML)": ``attention_<sentence>.html`` (`explorer.render.export.html_report`),
  the page's charts in one file that opens offline;
- "Every matrix (JSON)": ``attention_trace.json``, strict JSON;
- "One matrix as CSV": the step picked here (entry ``csv_step``), of the head
  the page shows, e.g. ``attn_weights_life-is-short.csv``
  (`explorer.render.export.matrix_csv`).

On the Backward pass page, two more: ``backward.py``
(`explorer.render.backward_script.backward_script`: every gradient by hand,
checked against ``loss.backward()``) and ``gradients.json`` (`Gradients.to_json`).

Nothing is built on an ordinary rerun: each button's ``data`` is a function
that Streamlit calls when the button is clicked (in another thread, so it
reads only its arguments), and ``on_click="ignore"`` skips the rerun a click
would cause. The script in the popover is built only while the popover is open.
A function holds the page's config, not its trace (`_later`): Streamlit keeps
a page's functions until its session ends, and holding traces kept every
visitor's last large trace alive, outside the cache's bound.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import streamlit as st

from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.steps import STEPS, visible_steps
from explorer.core.trace import Trace
from explorer.lessons.pages import BACKWARD_PAGE, BY_NAME
from explorer.render import backward_script
from explorer.render.export import html_report, matrix_csv, pytorch_script
from explorer.render.figures import chart_filename
from explorer.ui import backward_data, widgets
from explorer.ui.cache import cached_trace
from explorer.ui.state import View

SCRIPT_FILE = "attention.py"
JSON_FILE = "attention_trace.json"
MIME = {"py": "text/x-python", "html": "text/html", "json": "application/json",
        "csv": "text/csv"}
"""The media type of each download, by file extension."""
SCRIPT_POPOVER_KEY = "script-popover"
"""The key of the script's Copy popover (an action of `explorer.ui.state.ACTIONS`)."""
_ICON = ":material/download:"


def take_it_with_you(view: View) -> None:
    """Draw the "Take it with you" expander for the page's ``view``; its link is
    written into the script and the report."""
    trace, link = view.trace, view.link
    with st.expander("Take it with you", icon=_ICON):
        if isinstance(trace.config, AttentionConfig):
            _script(trace.config, link)
        if view.page == BACKWARD_PAGE:
            _backward(view)
        st.download_button("Report (HTML)", data=_later(trace, html_report, link=link),
                           file_name=f"{chart_filename(trace, 'attention')}.html",
                           mime=MIME["html"], on_click="ignore", icon=_ICON,
                           key="download-report",
                           help=BY_NAME[view.page].report)
        st.download_button("Every matrix (JSON)", data=_later(trace, Trace.to_json),
                           file_name=JSON_FILE,
                           mime=MIME["json"], on_click="ignore", icon=_ICON,
                           key="download-json",
                           help='Strict JSON: −∞ and NaN are the strings "-Infinity" and '
                                '"NaN" (float(s) in Python, Number(s) in JavaScript).')
        _one_matrix(view)


def _later(trace: Trace, build: Callable[..., str], *args: Any, **kwargs: Any) -> Callable[[], str]:
    """A button's ``data``: ``build(trace, *args, **kwargs)`` when it is clicked.
    For an `AttentionConfig` trace it holds the config alone and finds the trace
    again in the cache (computing it again if it left), told no waiting note
    (it runs outside the page). A real model's trace is held as it is (its
    cache is the model's)."""
    if not isinstance(trace.config, AttentionConfig):
        return partial(build, trace, *args, **kwargs)
    config = trace.config
    return lambda: build(cached_trace(config, tell=False), *args, **kwargs)


def _script(config: AttentionConfig, link: str) -> None:
    """The script as a download and, in a popover, as code to copy."""
    st.markdown("**Reproduce in PyTorch**")
    with st.container(horizontal=True):
        st.download_button(SCRIPT_FILE, data=partial(pytorch_script, config, link=link),
                           file_name=SCRIPT_FILE, mime=MIME["py"], on_click="ignore",
                           icon=_ICON, key="download-script", help="A standalone script (torch only) that prints "
                                            "every matrix; `--save FILE` saves them.")
        popover = st.popover("Copy", icon=":material/content_copy:", key=SCRIPT_POPOVER_KEY,
                             on_change="rerun")
        if popover.open:
            with popover:
                st.code(pytorch_script(config, link=link), language="python", height=400)


def _backward(view: View) -> None:
    """The Backward pass page's own: its script, which recomputes every gradient
    with torch alone and checks it against ``loss.backward()``
    (`explorer.render.backward_script`), and every gradient as JSON."""
    try:
        loss_config = backward_data.loss_config_of(view.values)
    except ConfigError:  # the page says why; nothing to take
        return
    config, link = view.config, view.link
    st.markdown("**The backward pass**")
    st.download_button(backward_script.SCRIPT_FILE,
                       data=partial(backward_script.backward_script, config, loss_config,
                                    link=link),
                       file_name=backward_script.SCRIPT_FILE, mime=MIME["py"],
                       on_click="ignore", icon=_ICON, key="download-backward-script",
                       help="A standalone script (torch only): the forward pass, every "
                            "gradient by hand, and its check against loss.backward().")
    st.download_button("Every gradient (JSON)",
                       data=partial(backward_data.gradients_json, config, loss_config),
                       file_name=backward_script.JSON_FILE, mime=MIME["json"],
                       on_click="ignore", icon=_ICON, key="download-gradients-json",
                       help="dL/d(step) for every step, named and shaped as the steps; "
                            'strict JSON ("-Infinity", "NaN" as strings).')


def _one_matrix(view: View) -> None:
    """Pick a step of the page and download it as CSV, of the head the page shows."""
    trace = view.trace
    name = widgets.draw("csv_step", options=visible_steps(trace),
                        format_func=lambda n: STEPS[n].label)
    head = view.head if trace.per_head(name) else None
    if head is not None:
        st.caption(f"Head {head}, the head shown on the page.")
    st.download_button("CSV", data=_later(trace, matrix_csv, name, head=head or 0),
                       file_name=f"{chart_filename(trace, name, head)}.csv", mime=MIME["csv"],
                       on_click="ignore", icon=_ICON, key="download-csv",
                       help="Labelled with the tokens and dims; the table importer "
                            "reads X and W back.")
