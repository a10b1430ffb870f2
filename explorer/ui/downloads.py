"""The sidebar's "Take it with you": the page's numbers, to keep and to rerun.

`take_it_with_you(trace, link)` draws one expander with four downloads, built
by `explorer.export` and `explorer.trace.Trace.to_json`:

- "Reproduce in PyTorch": ``attention.py`` (`explorer.export.pytorch_script`,
  with the page's link in its header), and the same script shown in a popover
  with Streamlit's copy button. Only for an `AttentionConfig` trace: a real
  model's trace has no script;
- "Report (HTML)": ``attention_<sentence>.html`` (`explorer.export.html_report`),
  the page's charts in one file that opens offline;
- "Every matrix (JSON)": ``attention_trace.json``, strict JSON;
- "One matrix as CSV": the step (and head) picked here, e.g.
  ``attn_weights_life-is-short.csv`` (`explorer.export.matrix_csv`).

Nothing is built on an ordinary rerun: each button's ``data`` is a function
that Streamlit calls when the button is clicked (in another thread, so it
reads only its arguments), and ``on_click="ignore"`` skips the rerun a click
would cause. The script in the popover is built only while the popover is open.
"""

from __future__ import annotations

from functools import partial

import streamlit as st

from explorer.config import AttentionConfig
from explorer.export import html_report, matrix_csv, pytorch_script
from explorer.figures import chart_filename
from explorer.steps import STEPS, visible_steps
from explorer.trace import Trace

SCRIPT_FILE = "attention.py"
JSON_FILE = "attention_trace.json"
MIME = {"py": "text/x-python", "html": "text/html", "json": "application/json",
        "csv": "text/csv"}
"""The media type of each download, by file extension."""
CSV_STEP_KEY, CSV_HEAD_KEY, CSV_BUTTON_KEY = "csv_step", "csv_head", "csv_download"
SCRIPT_POPOVER_KEY = "script_popover"
"""Widget keys: the CSV's step and head pickers and its button, the script's popover."""
_ICON = ":material/download:"


def take_it_with_you(trace: Trace, link: str) -> None:
    """Draw the "Take it with you" expander for ``trace``; ``link`` is the
    "Link to this view" text, written into the script and the report."""
    with st.expander("Take it with you", icon=_ICON):
        if isinstance(trace.config, AttentionConfig):
            _script(trace.config, link)
        st.download_button("Report (HTML)", data=partial(html_report, trace, link=link),
                           file_name=f"{chart_filename(trace, 'attention')}.html",
                           mime=MIME["html"], on_click="ignore", icon=_ICON,
                           help="Every chart of this page, the settings, tokens and ids, "
                                "in one file that opens offline.")
        st.download_button("Every matrix (JSON)", data=trace.to_json, file_name=JSON_FILE,
                           mime=MIME["json"], on_click="ignore", icon=_ICON,
                           help='Strict JSON: −∞ and NaN are the strings "-Infinity" and '
                                '"NaN" (float(s) in Python, Number(s) in JavaScript).')
        _one_matrix(trace)


def _script(config: AttentionConfig, link: str) -> None:
    """The script as a download and, in a popover, as code to copy."""
    st.markdown("**Reproduce in PyTorch**")
    with st.container(horizontal=True):
        st.download_button(SCRIPT_FILE, data=partial(pytorch_script, config, link=link),
                           file_name=SCRIPT_FILE, mime=MIME["py"], on_click="ignore",
                           icon=_ICON, help="A standalone script (torch only) that prints "
                                            "every matrix; `--save FILE` saves them.")
        popover = st.popover("Copy", icon=":material/content_copy:", key=SCRIPT_POPOVER_KEY,
                             on_change="rerun")
        if popover.open:
            with popover:
                st.code(pytorch_script(config, link=link), language="python", height=400)


def _one_matrix(trace: Trace) -> None:
    """Pick a step of the page (and a head), download it as CSV."""
    names = visible_steps(trace)
    _keep_choice(CSV_STEP_KEY, names, "attn_weights" if "attn_weights" in names else names[0])
    name = st.selectbox("One matrix as CSV", names, key=CSV_STEP_KEY,
                        format_func=lambda n: STEPS[n].label)
    head = None
    if trace.per_head(name):
        heads = list(range(trace[name].shape[0]))
        _keep_choice(CSV_HEAD_KEY, heads, 0)
        head = st.selectbox("head", heads, key=CSV_HEAD_KEY, format_func=lambda h: f"head {h}")
    st.download_button("CSV", data=partial(matrix_csv, trace, name, head=head or 0),
                       file_name=f"{chart_filename(trace, name, head)}.csv", mime=MIME["csv"],
                       on_click="ignore", icon=_ICON, key=CSV_BUTTON_KEY,
                       help="Labelled with the tokens and dims; the table importer "
                            "reads X and W back.")


def _keep_choice(key: str, options: list, default) -> None:
    """Keep a picker's choice across pages and reruns while it is still an
    option (re-assigning it before the widget is drawn, as
    `explorer.ui.sidebar` does for the settings), else start from ``default``."""
    chosen = st.session_state.get(key)
    st.session_state[key] = chosen if chosen in options else default
