"""The "Real model" page's own pieces: the model picker and loading, the layer
picker, the check against the model, the heads found by measuring and every
head at a glance.

The page uses the frame of the other pages: its settings (``model``,
``folder``, ``layer``) are entries of `explorer.ui.state` beside the others,
with the shared ``sentence``, ``head``, ``query`` and ``cell``; the link and
the downloads are the same. The catalogue of models and its memory policy live
in `explorer.models.catalogue`.

Only the Real model page imports this module, and only this module imports
`explorer.models`' loading (and with it transformers): the other pages never
need it. Models and what is computed from them are cached across sessions
within the memory budget (`explorer.ui.cache.cached_model`, `cached_model_result`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import streamlit as st

from explorer import models
from explorer.server import budget
from explorer.render import figures
from explorer.core import literal
from explorer.server.budget import BudgetError
from explorer.core.config import ConfigError, shown
from explorer.models import EXAMPLES, LoadedModel, ModelUnavailable, download_command
from explorer.models.catalogue import DEFAULT_MODEL, MODEL_CHOICES
from explorer.core.steps import visible_steps
from explorer.core.trace import Trace
from explorer.ui import cache, component, state, widgets
from explorer.lessons.pages import MODEL_PAGE
from explorer.ui.sidebar import Frame
from explorer.ui.state import FOLDER, Context, View

EXAMPLE_WORK_TOKENS = 64
"""Tokens assumed when reserving work for measuring an example (they are short)."""
_FOUND_KEY = state.MODEL_EXAMPLE_FOUND
_SOURCES = {"cache": "the local Hugging Face cache",
            "hub": "the Hugging Face Hub (downloaded now, and kept in the local cache)"}
SENTENCE_HELP = ("Read by the model's own tokenizer (GPT-2: byte-level BPE; BERT: WordPiece, "
                 "with [CLS] and [SEP] added); at most 512 tokens. The same sentence as on the "
                 "other pages.")


@dataclass(frozen=True)
class ModelView(View):
    """The page's `explorer.ui.state.View` of a real model's layer, with the
    loaded ``model``, its cache ``key`` (a name or ``folder:<path>``) and a
    readable ``label``; the trace holds every head (the page picks one)."""

    model: Any = None
    key: str = ""
    label: str = ""

    @property
    def layer(self) -> int:
        return self.trace.config.layer

    def without_trace(self) -> ModelView:
        """Without the trace and the model either, which the byte-bounded caches
        hold; a chart of this view that reruns alone reruns the whole page
        (`explorer.ui.render.step_chart`)."""
        return replace(self, trace=None, model=None)


# ---------------------------------------------------------------------------
# Settings: the sidebar, loading, the layer and the trace
# ---------------------------------------------------------------------------
def settings() -> ModelView | None:
    """Draw the page's settings and return the `ModelView` to draw, or None.

    The sidebar holds the page menu, the model picker (and the folder, when
    chosen), the shared sentence, the link and the downloads. The main area
    gets the messages about the link, the model's loading (no weights and no
    network says so and how to get them; a model too large for the budget
    gives the figures), a line about the model and the layer picker. Being
    offline without the weights is said with ``st.info``, this server's memory
    limit with ``st.warning``, anything else with ``st.error``; each gives None,
    never a traceback.
    """
    frame = Frame(MODEL_PAGE)
    values = frame.values
    with frame.sidebar:
        st.header(MODEL_PAGE)
        values["model"] = _model_picker()
        if values["model"] == FOLDER:
            values["folder"] = widgets.draw("folder")
        values["sentence"] = widgets.draw("sentence", help=SENTENCE_HELP)
    view, shown_values, context = None, values, None
    try:
        if values["model"] == FOLDER and not values["folder"].strip():
            st.info("Type the path of a folder saved with save_pretrained() into “Folder” in "
                    "the sidebar.")
        else:
            model, key, label = _loaded(values["model"], values.get("folder", ""))
            _about(model, label)
            state.resolve(MODEL_PAGE, Context(n_layers=model.n_layers), ["layer"])
            layer = widgets.index("layer", model.n_layers, "layer")
            trace = _trace(model, key, label, values["sentence"], layer)
            context = Context(trace, trace.config, model.n_layers, tuple(visible_steps(trace)))
            shown_values = {**values, **state.resolve(MODEL_PAGE, context)}
            view = ModelView(MODEL_PAGE, trace.config, trace, shown_values, model=model,
                             key=key, label=label)
    except ModelUnavailable as error:  # offline without the weights: expected, not a fault
        st.info(literal.markdown(str(error)))
        name = values["model"] if values["model"] in MODEL_CHOICES else DEFAULT_MODEL
        st.markdown(f"Fetch {MODEL_CHOICES[name].label} once, on a machine with internet access "
                    "(or copy its Hugging Face cache here):")
        st.code(download_command(name), language="bash")
        if budget.MODEL_FOLDERS:
            st.caption("Or choose “a local folder” in the sidebar and give the path of a "
                       "folder saved with save_pretrained().")
    except BudgetError as error:  # this server's limit, with the setting that lifts it
        st.warning(literal.markdown(str(error)))
    except ConfigError as error:  # ModelError: the message says what to do
        st.error(literal.markdown(str(error)))
    return frame.finish(view, shown_values, context,
                        note="A folder is not part of the link: whoever opens it chooses "
                             "their own." if values["model"] == FOLDER else "")


def _choice_label(option: str) -> str:
    if option == FOLDER:
        return state.ENTRIES["model"].kind.label(FOLDER)
    c = MODEL_CHOICES[option]
    return f"{c.label} ({c.name})" + ("" if c.fits else " · needs a larger memory budget")


def _model_picker() -> str:
    """The model picker (entry ``model``): the catalogue's models, and a local
    folder when this server allows it (`explorer.server.budget.MODEL_FOLDERS`)."""
    options = list(MODEL_CHOICES) + ([FOLDER] if budget.MODEL_FOLDERS else [])
    if state.value("model") not in options:
        state.put("model", DEFAULT_MODEL)
    choice = widgets.draw("model", options=options, format_func=_choice_label)
    if choice in MODEL_CHOICES:
        st.caption(MODEL_CHOICES[choice].about)
    return choice


def _loaded(choice: str, folder: str) -> tuple[LoadedModel, str, str]:
    """The model, its cache key and label; loaded once per name or folder.
    Raises `ModelUnavailable`, `ModelError` (for a folder: `FolderUnusable`, one
    message whatever the reason) or `explorer.server.budget.BudgetError`."""
    if choice == FOLDER:
        path = os.path.abspath(os.path.expanduser(folder.strip()))
        key, label, expected = f"folder:{path}", f"The model in {shown(folder.strip())}", None
        load = partial(models.load_folder, folder.strip(), within_budget=True)  # as typed
    else:
        c = MODEL_CHOICES[choice]
        key, label, expected = c.name, c.label, c.nbytes
        load = partial(models.load_model, c.name)
    with st.spinner(f"Loading {literal.markdown(label)}…"):
        model = cache.cached_model(key, load, label, expected)
    return model, key, label


def _about(model: LoadedModel, label: str) -> None:
    """One line on the model: its shape and where the weights came from."""
    if model.source == "folder":
        label, source = model.name, f"the folder {model.location}"
    else:
        source = _SOURCES.get(model.source, model.source)
    masked = ("each token sees itself and earlier tokens only" if model.causal
              else "each token sees every token")
    st.caption(literal.markdown(
        f"{label} ({model.anatomy.label}): {model.n_layers} layers × {model.n_heads} heads, "
        f"d_model = {model.d_model}, head_dim = {model.head_dim}; {masked}. Weights from "
        f"{source}."))


def _trace(model: LoadedModel, key: str, label: str, sentence: str, layer: int) -> Trace:
    """Layer ``layer`` on the sentence (`explorer.models.compute_model_trace`),
    cached per model, token ids and layer."""
    ids = models.model_input(model, sentence).ids
    n = len(ids)
    work = budget.WORK_FACTOR * models.model_trace_bytes(model, n) + budget.model_pass_bytes(
        1, model.n_heads, model.d_model, n)
    return cache.cached_model_result(
        ("trace", key, ids, layer),
        lambda: models.compute_model_trace(model, input_ids=ids, layer=layer),
        work, what=f"layer {layer} of {label} on {n} tokens")


def _pass_work(view: ModelView, n_tokens: int) -> int:
    m = view.model
    return budget.model_pass_bytes(m.n_layers, m.n_heads, m.d_model, n_tokens)


# ---------------------------------------------------------------------------
# Checked against the model
# ---------------------------------------------------------------------------
def verification(view: ModelView) -> None:
    """Our step-by-step layer against the model's own forward pass: the
    attention weights against ``output_attentions`` and the output against the
    hooked output projection. ✓ when `ModelCheck.ok`, else a loud error."""
    trace = view.trace
    check = cache.cached_model_result(
        ("check", view.key, trace.config.input_ids, view.layer),
        lambda: models.against_model(trace, view.model), _pass_work(view, trace.n_tokens),
        what=f"checking {view.label} on {trace.n_tokens} tokens")
    line = literal.markdown(f"our step-by-step computation {check.summary()}.")
    if check.ok:
        st.success("✓ Verified against the model: " + line)
    else:
        scale = (f" The model's largest |output| is {check.output_scale:.3g}: a relative "
                 f"difference of {check.output_diff / check.output_scale:.1e}."
                 if check.output_scale > 0 else "")
        st.error("✗ Checked against the model: " + line + literal.markdown(scale) + " This is "
                 "a bug in the explorer: please report it with the model, the layer and the "
                 "sentence.")


# ---------------------------------------------------------------------------
# Heads found by measuring
# ---------------------------------------------------------------------------
def examples(view: ModelView) -> None:
    """A button per curated example (`explorer.models.EXAMPLES`): it loads the
    sentence and opens the head that, measured on this model, does it most;
    what was measured is said under the buttons."""
    st.subheader("Heads found by measuring")
    st.caption("Which head does what differs from one checkpoint to another, so each button "
               "measures every head of the loaded model on its sentence, then opens the one "
               "that does it most and explains the weight it was picked by.")
    for column, example in zip(st.columns(len(EXAMPLES)), EXAMPLES):
        with column:
            st.button(example.title, key=f"example-{example.name}", width="stretch",
                      on_click=_open_example, args=(view.key, example.name))
            st.caption(example.about)
    found = st.session_state.get(_FOUND_KEY)
    if found and found[:2] == (view.key, view["sentence"]):
        ok, message = found[2:]
        (st.success if ok else st.error)(literal.markdown(message))


def _open_example(key: str, name: str) -> None:
    """Measure example ``name`` on the loaded model and open what was found:
    its sentence, layer, head, query token and the weight's cell."""
    example = next(e for e in EXAMPLES if e.name == name)
    model = cache.loaded_model(key)
    if model is None:
        unloaded = "The model was unloaded to make room; try again."
        st.session_state[_FOUND_KEY] = (key, None, False, unloaded)
        return
    try:
        found = cache.cached_model_result(
            ("example", key, name), partial(models.resolve_example, model, example),
            budget.model_pass_bytes(model.n_layers, model.n_heads, model.d_model,
                                    EXAMPLE_WORK_TOKENS),
            what=f"measuring “{example.title}”")
    except ConfigError as error:  # e.g. a word the tokenizer splits differently
        st.session_state[_FOUND_KEY] = (key, state.value("sentence"), False,
                                        f"{example.title}: {error}")
        return
    state.put("sentence", example.text)
    _open_head(found.layer, found.head)
    state.put("query", found.query_index)
    state.put("cell", ("attn_weights", found.query_index, found.key_index, found.head))
    st.session_state[_FOUND_KEY] = (key, example.text, True,
                                    f"{example.title} {found.describe()}")


def _open_head(layer: int, head: int) -> None:
    """Show layer ``layer``, head ``head``."""
    state.put("layer", layer)
    state.put("head", head)
    state.changed()


# ---------------------------------------------------------------------------
# Every head at a glance
# ---------------------------------------------------------------------------
def every_head(view: ModelView, head: int) -> None:
    """The layers × heads grid of attention patterns (click one to open it) and
    each head's measured habits on this sentence, in a sortable table."""
    trace = view.trace
    overview = cache.cached_model_result(
        ("overview", view.key, trace.config.input_ids),
        partial(models.head_overview, view.model, input_ids=list(trace.config.input_ids)),
        _pass_work(view, trace.n_tokens),
        what=f"every head of {view.label} on {trace.n_tokens} tokens")
    grid, table = st.columns([3, 2])
    with grid:
        component.show(figures.head_overview_chart(overview, view.layer, head), key="head-overview",
                   on_click=partial(_clicked_head, view.model.n_heads))
        st.caption("Each thumbnail is one head's attention weights on this sentence (query "
                   "rows, key columns; long sentences in blocks of tokens). Click one to open "
                   "that layer and head above; the one shown is outlined.")
    with table:
        habits = figures.head_habits_table(overview)
        st.dataframe(habits, height=min(36 + 35 * len(habits), 560), column_config={
            name: st.column_config.ProgressColumn(
                name.split()[0], help=f"Mean share of a token's weight on {name}",
                format="%.2f", min_value=0.0, max_value=1.0, width="small")
            for name in habits.columns})
        st.caption("Measured on this sentence: the mean share of a token's weight on the "
                   "previous token, on the first token and on itself (the first token is left "
                   "out: in GPT-2 it can only attend to itself). Click a column to sort.")


def _clicked_head(n_heads: int, cell: dict[str, int]) -> None:
    """A click on thumbnail k (trace k = layer · n_heads + head) opens that head."""
    _open_head(*divmod(cell["trace"], n_heads))
