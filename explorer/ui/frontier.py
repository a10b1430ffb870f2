"""The "Frontier attention" page's pieces: its settings (the shared sentence,
d_in and seed, then `explorer.modern.frontier.FrontierConfig`'s sizes, entries
of `explorer.ui.state` so the link carries them), the query head shown in every
3-D step, and one section per part of `explorer.modern.frontier.parts.PARTS`:
its title and summary, each `Step` as a heatmap (a click explains the cell),
its facts as a table and its checks.

X comes from the same `AttentionConfig` trace as on the other pages (cached);
the parts are cached with the real model results, bounded by bytes
(`explorer.ui.cache.cached_model_result`). A part that raises `ConfigError`
shows its message in its own section; the others are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import streamlit as st

from explorer.core import literal
from explorer.core.agreement import Agreement
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.tokenizer import token_labels
from explorer.lessons.explain import Explanation
from explorer.lessons.pages import FRONTIER_PAGE
from explorer.modern.frontier import FrontierConfig, Part
from explorer.modern.frontier.parts import (
    NAMES,
    PARTS,
    FrontierTrace,
    compute_parts,
    explain_cell,
    step_heads,
)
from explorer.render import frontier as rf
from explorer.render import frontier_script
from explorer.server import budget
from explorer.server.budget import BudgetError
from explorer.ui import cache, component, downloads, state, widgets
from explorer.ui.render import explanation_box
from explorer.ui.render import fitted_table as table
from explorer.ui.sidebar import Frame
from explorer.ui.state import Context, View
from explorer.ui.state.entries import FRONTIER_FIELDS

SHARED = ("sentence", "d_in", "seed")
"""The shared settings the page reads (X's)."""
CELL = "frontier_cell"
"""The entry of the explained cell, ``("part.step", row, col)``."""
WORK_FACTOR = 64
"""float32 numbers reserved per (head, query, key) while the parts are computed:
six parts, each holding a few (heads, n, n) matrices and its reference's (an
estimate from the parts' steps, not measured)."""


@dataclass(frozen=True)
class FrontierView(View):
    """The page's view: ``trace`` is the `FrontierTrace`, ``labels`` the token
    labels, ``n_heads`` the most heads of any 3-D step (the head picker's)."""

    labels: tuple[str, ...] = ()
    n_heads: int = 1


@dataclass(frozen=True)
class _Shown:
    """What the shared ``head`` entry reads of a page's trace: ``config.n_heads``."""

    config: Any


def frontier_config(values: dict) -> FrontierConfig:
    """The `FrontierConfig` of the page's setting values."""
    return FrontierConfig(**{field: values[name] for name, field in FRONTIER_FIELDS.items()})


def most_heads(trace: FrontierTrace) -> int:
    """The most heads of any step of ``trace`` (at least 1)."""
    return max([step_heads(step) for part in trace.parts.values() for step in part.steps] or [1])


def _key(x_config: AttentionConfig, config: FrontierConfig) -> tuple:
    return ("frontier", x_config, config)


def _trace_of(x_config: AttentionConfig, config: FrontierConfig) -> FrontierTrace:
    """Every part for X of ``x_config``, cached with the real model results
    (bounded by bytes); computing them reserves their work bytes first."""
    x_trace = cache.cached_trace(x_config)
    n, heads = x_trace.n_tokens, max(config.n_heads, config.index_heads)
    return cache.cached_model_result(
        _key(x_config, config),
        partial(compute_parts, x_trace["embeddings"], config, x_config.seed),
        work_bytes=WORK_FACTOR * 4 * heads * n * n, what="the Frontier attention parts")


def drawn_cells(trace: FrontierTrace) -> int:
    """How many numbers the page draws: one head of each step."""
    return sum(step.values[0].numel() if step.values.dim() == 3 else step.values.numel()
               for part in trace.parts.values() for step in part.steps)


def check_tab(trace: FrontierTrace) -> None:
    """Raise `explorer.server.budget.TabBudgetError` when drawing ``trace``'s
    charts would take the visitor's browser tab past its budget
    (`explorer.server.budget.check_tab_drawn`, a lesson page's costs per number)."""
    charts = sum(len(part.steps) for part in trace.parts.values())
    budget.check_tab_drawn(drawn_cells(trace), 0, f"{charts} charts",
                           "Use a shorter sentence or smaller sizes.")


def settings() -> FrontierView | None:
    """Draw the sidebar and return the page's view, or None (the error shown)."""
    frame = Frame(FRONTIER_PAGE)
    values = frame.values
    with frame.sidebar:
        st.header(FRONTIER_PAGE)
        values |= widgets.group(FRONTIER_PAGE, state.PAGE_OWN, values)
        st.header("Settings")
        values |= widgets.group(FRONTIER_PAGE, state.BASIC, values)
    try:
        x_config = AttentionConfig(sentence=values["sentence"], d_in=values["d_in"],
                                   seed=values["seed"])
        x_trace = cache.cached_trace(x_config)
        config = frontier_config(values)
        config.check(x_trace.n_tokens)
        trace = _trace_of(x_config, config)
        check_tab(trace)
    except (ConfigError, BudgetError) as error:
        st.error(literal.markdown(str(error)))
        frame.finish(None, values)
        return None
    n_heads = most_heads(trace)
    context = Context(_Shown(replace(config, n_heads=n_heads)), config)
    shown = {**values, **state.resolve(FRONTIER_PAGE, context)}
    view = FrontierView(FRONTIER_PAGE, config, trace, shown,
                        labels=tuple(token_labels(x_trace.tokens)), n_heads=n_heads)
    frame.finish(None, shown, context)
    with st.sidebar:
        take_it_with_you(view, x_config)
    return view


# ---------------------------------------------------------------------------
# Downloads
# ---------------------------------------------------------------------------
def _json(x_config: AttentionConfig, config: FrontierConfig, settings: dict[str, Any],
          link: str) -> str:
    """The page's JSON, built when its button is clicked, from the cached parts
    (a button holds the settings, never the parts)."""
    return rf.frontier_json(_trace_of(x_config, config), list(token_labels(x_config.tokens)),
                            settings, link)


def _script(x_config: AttentionConfig, config: FrontierConfig, link: str) -> str:
    """The page's standalone script (`explorer.render.frontier_script`), built
    when its button is clicked, from the cached X and parts."""
    x_trace = cache.cached_trace(x_config, tell=False)
    return frontier_script.frontier_script(
        _trace_of(x_config, config), list(token_labels(x_trace.tokens)),
        x_trace["embeddings"], config, x_config.seed, link)


def take_it_with_you(view: FrontierView, x_config: AttentionConfig) -> None:
    """The sidebar's downloads of this page: every part's steps, checks and
    facts, with the settings and the link, as JSON; and the script that
    recomputes the parts and checks them against transformers."""
    link = state.url(st.context.url or "", st.query_params.to_dict())  # as `frame.finish` wrote it
    settings = {name: view[name] for name in (*SHARED, *FRONTIER_FIELDS)}
    with st.expander("Take it with you", icon=":material/download:"):
        st.download_button("Every part (JSON)", key="download-frontier-json",
                           data=partial(_json, x_config, view.config, settings, link),
                           file_name=rf.JSON_FILE, mime=downloads.MIME["json"],
                           on_click="ignore", icon=":material/download:",
                           help='Every step of every part, its checks and facts, the settings '
                                'and the link; strict JSON: −∞ is the string "-Infinity".')
        st.download_button("Reproduce in PyTorch (script)", key="download-frontier-script",
                           data=partial(_script, x_config, view.config, link),
                           file_name=frontier_script.SCRIPT_FILE, mime=downloads.MIME["py"],
                           on_click="ignore", icon=":material/download:",
                           help="A script needing only torch and transformers: it recomputes "
                                "latent attention, the sinks, the ring buffer, gated attention "
                                "and Gated DeltaNet from the page's X and seed, checks each "
                                "against the page's numbers and transformers' modules, and "
                                "exits 0 only when every check agrees.")


# ---------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------
def head_picker(view: FrontierView) -> int:
    """The head shown in every 3-D step (the shared ``head`` entry); a step with
    fewer heads shows its last."""
    if view.n_heads == 1:
        return 0
    return component.picker("head", "Head to show", [f"head {h}" for h in range(view.n_heads)],
                            view.head, buttons=view.n_heads <= widgets.MAX_BUTTONS,
                            on_pick=partial(_pick, "head"))


def _pick(name: str, value) -> None:
    """The head picked in the browser: into the state (the page then reruns)."""
    state.put(name, value)
    state.changed()


def check_line(check: Agreement) -> None:
    """"✓ name: verified against <reference>, same <compared>, max |difference| = …"."""
    (st.success if check.ok else st.error)(check.line(code="`"))


def parts(view: FrontierView, head: int) -> None:
    """Every part's section, in the page's order."""
    for number, key in enumerate(PARTS, start=1):
        part_section(view, number, key, head)


def part_section(view: FrontierView, number: int, key: str, head: int) -> None:
    """Part ``key``'s section: its heading and summary, each step's formula and
    chart, its facts and its checks; or the part's `ConfigError` message."""
    trace: FrontierTrace = view.trace
    message = trace.errors.get(key)
    if message is not None:
        st.header(f"{number}. {NAMES[key]}")
        st.error(literal.markdown(f"{message}. The other parts are drawn; this one is not."))
        return
    part = trace.parts[key]
    st.header(f"{number}. {part.title}")
    st.markdown(part.summary)
    st.caption(f"Source: {part.source}")
    steps = list(part.steps)
    for at in range(0, len(steps), 2):
        pair = steps[at:at + 2]
        for column, step in zip(st.columns(2) if len(pair) == 2 else [st.container()], pair):
            with column:
                _chart(view, part, step.name, head, columns=len(pair))
    if part.facts:
        st.subheader("In numbers")
        table(rf.facts_table(part))
    for check in part.checks:
        check_line(check)


def _chart(view: FrontierView, part: Part, name: str, head: int, columns: int) -> None:
    """Step ``name`` of ``part``: its formula and its chart; a click on a cell
    explains it under the chart (the `CELL` entry), the cell outlined."""
    step = part.step(name)
    explanation = _explained(view, part, name, head)
    outline = [rf.cell_outline(*view[CELL][1:])] if explanation else []
    st.latex(step.formula)
    drawn = rf.step_chart(part, step, head, list(view.labels), columns=columns, shapes=outline)
    chart = f"{part.key}.{name}"
    component.show(drawn, key=f"frontier-{part.key}-{name}", on_click=partial(_clicked, chart))
    if explanation is not None:
        explanation_box(explanation)


def _explained(view: FrontierView, part: Part, name: str, head: int) -> Explanation | None:
    """The explanation of the clicked cell if it is one of this step's, else
    None (also for a cell outside it: a link made for other sizes)."""
    cell = view[CELL]
    if not cell or cell[0] != f"{part.key}.{name}":
        return None
    try:
        return explain_cell(part, part.step(name), cell[1], cell[2], head, view.labels)
    except IndexError:
        return None


def _clicked(chart: str, cell: dict[str, int]) -> None:
    """A click on ``chart`` (``part.step``): explain that cell (the `CELL`
    entry). A click naming no cell (a forged message) is ignored with a message."""
    where = [cell.get(k) for k in ("row", "col")] if isinstance(cell, dict) else []
    if len(where) != 2 or not all(type(v) is int and v >= 0 for v in where):
        state.problems()[CELL] = "Ignored a click on a chart that named no cell."
        return
    state.put(CELL, (chart, *where))
    state.changed()
