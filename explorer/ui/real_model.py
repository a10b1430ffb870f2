"""The "Real model" page's own pieces: the model picker and loading, the layer
picker, the check against the model, the heads found by measuring and every
head at a glance; for a Llama-family model (Llama, Mistral, Qwen2, Qwen3,
Gemma 3), one layer and one query head step by step (`decoder_steps`: the
RMSNorm, Q, K, V, QK-norm, RoPE, the scores, the mask, the weights, the K/V
head shared, the head's output, o_proj), its generation token by token
(`generation`) and each checked against the model.

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

import json
import os
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import streamlit as st

from explorer import models
from explorer.core import literal
from explorer.core.agreement import Agreement
from explorer.core.config import ConfigError, shown
from explorer.core.steps import visible_steps
from explorer.core.tokenizer import token_labels
from explorer.core.trace import Trace, json_safe
from explorer.lessons.pages import MODEL_PAGE
from explorer.models import (
    EVERY_ARCHITECTURE,
    EXAMPLES,
    LoadedModel,
    ModelUnavailable,
    download_command,
    packaged,
)
from explorer.models import explain as decoder_explain
from explorer.models.catalogue import DEFAULT_MODEL, MAX_NEW_TOKENS, MODEL_CHOICES
from explorer.models.generation import rows_summary
from explorer.models.heads import HABITS, THUMBNAIL_SIZE
from explorer.models.llama import DECODER_STEPS, decoder_config
from explorer.render import decoder as decoder_figures
from explorer.render import decoder_script, figures
from explorer.render.figures import HEADS_IN_BROWSER_BYTES
from explorer.server import budget
from explorer.server.budget import BudgetError
from explorer.ui import cache, component, downloads, state, widgets
from explorer.ui.render import (
    BIG_MATRIX_CELLS,
    explanation_box,
    fitted_table,
    head_picker,
    number_table,
)
from explorer.ui.sidebar import Frame
from explorer.ui.state import FOLDER, Context, View

EXAMPLE_WORK_TOKENS = 64
"""Tokens assumed when reserving work for measuring an example (they are short)."""
_FOUND_KEY = state.MODEL_EXAMPLE_FOUND
_SOURCES = {"package": f"the installed package {packaged.DISTRIBUTION} (no network)",
            "cache": "the local Hugging Face cache",
            "hub": "the Hugging Face Hub (downloaded now, and kept in the local cache)"}
SENTENCE_HELP = ("Read by the model's own tokenizer (GPT-2: byte-level BPE; BERT: WordPiece, "
                 "with [CLS] and [SEP] added; a Llama-family model: its own BPE, with its "
                 "beginning-of-sequence token where it adds one); at most 512 tokens. The same "
                 "sentence as on the other pages.")
DECODER_VALUES = ("layer", "head", "query", "decoder_cell", "new_tokens", "generated")
"""The view values a Llama-family model's page uses (the chapter-3 steps' cell,
CSV step and line view belong to GPT-2 and BERT)."""
GENERATION_SEED = 0
"""Breaks ties between equally likely tokens (`explorer.models.generate`)."""


@dataclass(frozen=True)
class ModelView(View):
    """The page's `explorer.ui.state.View` of a real model's layer, with the
    loaded ``model``, its cache ``key`` (a name or ``folder:<path>``) and a
    readable ``label``; the trace holds every head (the page picks one)."""

    model: Any = None
    key: str = ""
    label: str = ""

    @property
    def decoder(self) -> bool:
        """Whether the model is of the Llama family (its own steps, generation)."""
        return self.model is not None and self.model.family == "decoder"

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
            ids = models.model_input(model, values["sentence"]).ids
            check_tab(model, len(ids), layer)  # before anything is computed or sent
            if model.family == "decoder":
                trace = _decoder_trace(model, key, label, ids, layer)
                context = Context(trace, trace.config, model.n_layers)
                shown_values = {**values, **state.resolve(MODEL_PAGE, context, DECODER_VALUES)}
                last = shown_values["new_tokens"] - 1  # the link says the token shown
                if shown_values["generated"] > last:
                    state.put("generated", last)
                    shown_values["generated"] = last
            else:
                trace = _trace(model, key, label, ids, layer)
                context = Context(trace, trace.config, model.n_layers,
                                  tuple(visible_steps(trace)))
                shown_values = {**values, **state.resolve(MODEL_PAGE, context)}
            view = ModelView(MODEL_PAGE, trace.config, trace, shown_values, model=model,
                             key=key, label=label)
    except ModelUnavailable as error:  # offline without the weights: expected, not a fault
        st.info(literal.markdown(str(error)))
        name = values["model"] if values["model"] in MODEL_CHOICES else DEFAULT_MODEL
        st.markdown(f"Fetch {MODEL_CHOICES[name].label} once, on a machine with internet access "
                    "(or copy its Hugging Face cache here):")
        st.code(download_command(name), language="bash", wrap_lines=True)  # no sideways scroll
        if packaged.installed() and values["model"] != packaged.NAME:
            st.caption(f"Or choose {MODEL_CHOICES[packaged.NAME].label} in the sidebar: "
                       "it is installed on this machine and needs no network.")
        if budget.MODEL_FOLDERS:
            st.caption("Or choose “a local folder” in the sidebar and give the path of a "
                       "folder saved with save_pretrained().")
    except budget.TabBudgetError as error:  # the visitor's tab: too large a page to draw
        st.error(literal.markdown(str(error)))
    except BudgetError as error:  # this server's limit, with the setting that lifts it
        st.warning(literal.markdown(str(error)))
    except ConfigError as error:  # ModelError: the message says what to do
        st.error(literal.markdown(str(error)))
    note = ("A folder is not part of the link: whoever opens it chooses their own."
            if values["model"] == FOLDER else "")
    if view is not None and view.decoder:  # its own downloads (no chapter-3 steps)
        view = frame.finish(view, shown_values, context, note=note, offer_downloads=False)
        with st.sidebar:
            decoder_downloads(view)
        return view
    return frame.finish(view, shown_values, context, note=note)


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
        state.put("model", models.page_default())
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
        load = partial(models.load_folder, folder.strip(), within_budget=True,  # as typed
                       architectures=EVERY_ARCHITECTURE)
    else:
        c = MODEL_CHOICES[choice]
        key, label, expected = c.name, c.label, c.nbytes
        load = partial(models.load_model, c.name, architectures=EVERY_ARCHITECTURE)
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
    heads = f"{model.n_heads} heads"
    if model.family == "decoder":
        heads = f"{model.n_heads} query heads sharing {model.n_kv_heads} K/V heads"
        masked += f"; weights in {model.dtype}, a layer computed in float32 when opened"
    st.caption(literal.markdown(
        f"{label} ({model.anatomy.label}): {model.n_layers} layers × {heads}, "
        f"d_model = {model.d_model}, head_dim = {model.head_dim}; {masked}. Weights from "
        f"{source}."))


def _trace(model: LoadedModel, key: str, label: str, ids: list[int], layer: int) -> Trace:
    """Layer ``layer`` on the sentence's ``ids`` (`explorer.models.compute_model_trace`),
    cached per model, token ids and layer."""
    n = len(ids)
    work = budget.WORK_FACTOR * models.model_trace_bytes(model, n) + budget.model_pass_bytes(
        1, model.n_heads, model.d_model, n)
    return cache.cached_model_result(
        ("trace", key, ids, layer),
        lambda: models.compute_model_trace(model, input_ids=ids, layer=layer),
        work, what=f"layer {layer} of {label} on {n} tokens")


# ---------------------------------------------------------------------------
# The browser tab's share: what the page draws, counted before it is computed
# ---------------------------------------------------------------------------
def drawn(model: LoadedModel, n_tokens: int, layer: int = 0,
          new_tokens: int | None = None) -> tuple[int, int]:
    """The numbers the page sends the browser for layer ``layer`` on ``n_tokens``
    tokens, and its head panels: ``(cells, panels)``, for
    `explorer.server.budget.tab_bytes_drawn` (n tokens, d = d_model, h heads of
    e, L layers).

    GPT-2 and BERT: X (n, d); head h's slices of W_query, W_key, W_value (d, e),
    of their biases (e) and of the context (n, e); its Q, K, V (n, e); its
    scores, scaled scores, masked scores and weights (n, n) and the causal mask
    (n, n); the whole context (n, d), W_out (d, d), b_out (d) and output (n, d).
    A per-head chart carries every head's variant while they fit in
    `explorer.render.figures.HEADS_IN_BROWSER_BYTES` (h times its numbers).
    A Llama-family model: one query head's every step (`decoder_steps`, one
    head each, those drawn twice counted twice) and its generation's rows, at
    most ``new_tokens`` (None: `explorer.models.catalogue.MAX_NEW_TOKENS`) of them. Both: the overview's L × h thumbnails of
    at most `explorer.models.heads.THUMBNAIL_SIZE` tokens a side, the panels."""
    n, d, h, layers = n_tokens, model.d_model, model.n_heads, model.n_layers
    t = min(n, THUMBNAIL_SIZE)
    overview = layers * h * t * t
    if model.family == "decoder":
        c = decoder_config(model, layer)
        e = c.head_dim
        g = MAX_NEW_TOKENS if new_tokens is None else new_tokens
        cells = (2 * n * d + n + d                       # layer_input, rms, norm, embeddings
                 + 3 * d * e + (3 * e if c.qkv_bias else 0)  # W_query, W_key, W_value, b
                 + 3 * n * e                             # Q, K, V
                 + ((2 * e + 4 * n * e) if c.qk_norm else 0)  # q_norm, k_norm; beside normed
                 + e // 2 + 2 * n * e                    # frequencies, cos, sin
                 + 4 * n * e                             # Q and K beside their rotations
                 + 5 * n * n                             # scores, scaled, mask, masked, weights
                 + n * e + e * d + 2 * n * d + (d if c.out_bias else 0)  # context .. output
                 + 2 * (n + g) + g * (n + g))            # a token's rows (the last's at most)
        return cells + overview, layers * h

    def sent(size: int) -> int:  # a per-head chart, with its heads' variants if they fit
        return size * (h if 4 * h * size <= HEADS_IN_BROWSER_BYTES else 1)

    e = model.head_dim
    per_head_steps = 3 + (1 if model.causal else 0)
    cells = (n * d + 3 * sent(d * e) + 3 * sent(e) + 3 * sent(n * e)
             + per_head_steps * sent(n * n) + (n * n if model.causal else 0)
             + sent(n * e) + 2 * n * d + d * d + d)
    return cells + overview, layers * h


def tab_costs(model: LoadedModel) -> budget.TabCosts:
    """What this page costs in a browser tab, measured: `explorer.server.budget.DECODER_TAB`
    for a Llama-family model, `explorer.server.budget.MODEL_TAB` for GPT-2 and BERT."""
    return budget.DECODER_TAB if model.family == "decoder" else budget.MODEL_TAB


def check_tab(model: LoadedModel, n_tokens: int, layer: int = 0) -> None:
    """Raise `explorer.server.budget.BudgetError` when the page of layer
    ``layer`` on ``n_tokens`` tokens (`drawn`) would take a browser tab past its
    budget, with the figures: the same estimate as every other page's, with the
    costs measured on this page (`tab_costs`)."""
    cells, panels = drawn(model, n_tokens, layer)
    budget.check_tab_drawn(
        cells, panels, f"{n_tokens:,} tokens, {model.n_layers} layers × {model.n_heads} heads",
        "Use a shorter text, or a model with fewer layers and heads.", tab_costs(model))


def _pass_work(view: ModelView, n_tokens: int) -> int:
    m = view.model
    return budget.model_pass_bytes(m.n_layers, m.n_heads, m.d_model, n_tokens)


# ---------------------------------------------------------------------------
# Checked against the model
# ---------------------------------------------------------------------------
def _layer_check(view: ModelView, steps: bool = False) -> Agreement:
    """The page's layer against the model, cached: `explorer.models.against_model`,
    or with ``steps`` every step of a decoder layer (`against_model_steps`)."""
    trace, against = view.trace, (models.against_model_steps if steps else models.against_model)
    return cache.cached_model_result(
        ("check-steps" if steps else "check", view.key, trace.config.input_ids, view.layer),
        lambda: against(trace, view.model), _pass_work(view, trace.n_tokens),
        what=f"checking {view.label} on {trace.n_tokens} tokens")


def _rows_check(view: ModelView, gen: Any) -> Agreement:
    """`explorer.models.against_full_pass` of the page's generation, cached."""
    return cache.cached_model_result(
        ("generation-check", view.key, gen.ids, view.layer),
        lambda: models.against_full_pass(gen, view.model),
        _pass_work(view, len(gen.ids)), what=f"checking the generation of {view.label}")


def verification(view: ModelView) -> None:
    """Our step-by-step layer against the model's own forward pass: the
    attention weights against ``output_attentions`` and the output against the
    hooked output projection. ✓ when it agrees, else a loud error."""
    check = _layer_check(view)
    line = literal.markdown(f"our step-by-step computation {models.summary(check)}.")
    if check.ok:
        st.success("✓ Verified against the model: " + line)
    else:
        from explorer.models.check import OUTPUT  # with transformers, as `models.summary`
        output = check.part(OUTPUT)
        scale = (f" The model's largest |output| is {output.scale:.3g}: a relative "
                 f"difference of {output.max_abs_diff / output.scale:.1e}."
                 if output.scale > 0 else "")
        st.error("✗ Checked against the model: " + line + literal.markdown(scale) + " This is "
                 "a bug in the explorer: please report it with the model, the layer and the "
                 "sentence.")


PACKAGED_ABOUT = (
    "all-MiniLM-L6-v2 is a sentence-embedding model, not a language model: "
    "sentence-transformers fine-tuned Microsoft's MiniLM-L6-H384 (a small BERT distilled "
    "from a larger one) so that the mean of its last layer's outputs places sentences of "
    "similar meaning close together. It is a BERT encoder (every token sees every other, "
    "[CLS] first and [SEP] last), so its heads are neither GPT-2's (no causal mask: a word "
    "sees the words after it too) nor BERT base's (other weights, half the layers). It "
    "opens from an installed package, with no network.")
"""What the page says about all-MiniLM-L6-v2 (`explorer.models.packaged`); which of its
heads stand out is measured, never asserted (`standout`)."""


def standout(view: ModelView) -> None:
    """For all-MiniLM-L6-v2: what it is (`PACKAGED_ABOUT`) and its heads that
    stand out, measured now on `explorer.models.STANDOUT_SENTENCE`
    (`explorer.models.standout_heads`, cached), with a button that opens each."""
    if view.key != packaged.NAME:
        return
    model = view.model
    found = cache.cached_model_result(
        ("standout", view.key), partial(models.standout_heads, model),
        budget.model_pass_bytes(model.n_layers, model.n_heads, model.d_model,
                                EXAMPLE_WORK_TOKENS),
        what="measuring the heads that stand out")
    st.info(literal.markdown(f"{PACKAGED_ABOUT} {found.describe()}"))
    columns = st.columns(len(found.best))
    for column, (habit, score) in zip(columns, found.best.items()):
        with column:
            st.button(f"Open layer {score.layer}, head {score.head}", key=f"standout-{habit}",
                      width="stretch", on_click=_open_head, args=(score.layer, score.head),
                      help=f"The head that looks at {HABITS[habit]} most")


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
def _overview(view: ModelView) -> Any:
    """`explorer.models.head_overview` of every head on the page's tokens, cached."""
    trace = view.trace
    return cache.cached_model_result(
        ("overview", view.key, trace.config.input_ids),
        partial(models.head_overview, view.model, input_ids=list(trace.config.input_ids)),
        _pass_work(view, trace.n_tokens),
        what=f"every head of {view.label} on {trace.n_tokens} tokens")


def every_head(view: ModelView, head: int) -> None:
    """The layers × heads grid of attention patterns (click one to open it) and
    each head's measured habits on this sentence, in a sortable table."""
    overview = _overview(view)
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


# ---------------------------------------------------------------------------
# A Llama-family model: one layer and one query head, every step
# ---------------------------------------------------------------------------
def _decoder_trace(model: LoadedModel, key: str, label: str, ids: list[int],
                   layer: int) -> Trace:
    """Layer ``layer`` of a Llama-family model on the sentence's ``ids``
    (`explorer.models.compute_decoder_trace`, float32), cached per model, token ids
    and layer; the work reserved: its exact bytes (`decoder_trace_bytes`) while
    computed, and the forward pass that catches the layer's input."""
    n = len(ids)
    work = budget.WORK_FACTOR * models.decoder_trace_bytes(model, n, layer) + \
        budget.model_pass_bytes(1, model.n_heads, model.d_model, n)
    return cache.cached_model_result(
        ("decoder-trace", key, ids, layer),
        lambda: models.compute_decoder_trace(model, input_ids=ids, layer=layer),
        work, what=f"layer {layer} of {label} on {n} tokens")


def _generation(view: ModelView, new_tokens: int):
    """`explorer.models.generate` of ``new_tokens`` after the sentence, the opened
    layer's rows kept; cached per model, ids, layer and count. Reserves a forward
    pass over the whole sequence (`explorer.server.budget.model_pass_bytes`)."""
    trace, m = view.trace, view.model
    ids = list(trace.config.input_ids)
    return cache.cached_model_result(
        ("generation", view.key, tuple(ids), view.layer, new_tokens),
        partial(models.generate, m, input_ids=ids, max_new_tokens=new_tokens, layer=view.layer,
                seed=GENERATION_SEED),
        _pass_work(view, len(ids) + new_tokens),
        what=f"generating {new_tokens} tokens with {view.label}")


def decoder_verification(view: ModelView) -> None:
    """The layer against the model: every head's weights vs ``output_attentions``
    and the output vs the attention module's (`explorer.models.against_model`),
    then every step against the model's own modules (`against_model_steps`)."""
    check, steps = _layer_check(view), _layer_check(view, steps=True)
    line = literal.markdown(f"our step-by-step computation {models.summary(check)}.")
    if check.ok and steps.ok:
        st.success("✓ Verified against the model: " + line)
    else:
        st.error("✗ Checked against the model: " + line + " This is a bug in the explorer: "
                 "please report it with the model, the layer and the sentence.")
    with st.expander("Every step against the model's own modules"):
        st.code("\n".join(step.line() for step in steps.parts), language=None,
                wrap_lines=True)


def _decoder_clicked(chart: str, cell: dict[str, int]) -> None:
    """A click on a decoder chart: explain that cell (the ``decoder_cell`` entry)."""
    state.put("decoder_cell", (chart, cell["row"], cell["col"]))
    state.changed()


def _decoder_pick(name: str, value: int | None) -> None:
    """A choice of a picker the browser drew (the query token): into the state."""
    state.put(name, value)
    state.changed()


def _decoder_cell_picker(key: str, chart: str, shape: tuple[int, int]) -> None:
    """For a matrix whose cells are too small to aim at (d_model columns): pick
    one by number, as the chapter-3 charts offer (`explorer.ui.render`)."""
    pick = f"pick-{key}"
    with st.popover("Explain a cell", icon=":material/calculate:"):
        st.number_input("row", 0, shape[0] - 1, key=f"{pick}-row")
        st.number_input("column", 0, shape[1] - 1, key=f"{pick}-col")
        st.button("Explain", key=f"{pick}-explain", on_click=lambda: _decoder_clicked(
            chart, {"row": st.session_state[f"{pick}-row"],
                    "col": st.session_state[f"{pick}-col"]}))


def _decoder_chart(view: ModelView, hs: Any, chart: str, tokens: list[str], *,
                   columns: int = 1, generation: Any = None, generated: int = 0,
                   again: bool = False) -> None:
    """Chart ``chart`` (`explorer.models.explain.CHARTS`) of the head's slice
    ``hs``, the line of transformers that computes it under it
    (`explorer.models.llama.DECODER_STEPS`), and the explained cell, if it is
    one of this chart's. ``again``: drawn a second time (beside its next step),
    under its own key."""
    cell = view["decoder_cell"]
    explanation = None
    if cell and cell[0] == chart:
        try:
            explanation = decoder_explain.explain_decoder_cell(
                view.trace, hs, chart, cell[1], cell[2], tokens, generation, generated)
        except (IndexError, KeyError):  # a link made for another sentence or model
            explanation = None
    token_rows = chart not in decoder_explain.GENERATION_CHARTS and \
        decoder_figures.kind_of(chart).rows.labels == decoder_figures.TOKENS
    drawn = decoder_figures.decoder_chart(
        view.trace, hs, chart, tokens, generation=generation, generated=generated,
        columns=columns, marked_cell=cell[1:] if explanation is not None else None,
        highlight_row=view.query if token_rows else None)
    key = f"decoder-{chart}" + ("-again" if again else "")
    component.show(drawn, key=key, on_click=partial(_decoder_clicked, chart))
    shape = drawn.matrices[0].shape
    if shape[0] * shape[1] > BIG_MATRIX_CELLS:
        _decoder_cell_picker(key, chart, shape)
    line = DECODER_STEPS.get(chart)
    if line:
        st.caption(f"transformers: `{line}`")  # the project's own text (DECODER_STEPS)
    if explanation is not None:
        explanation_box(explanation)


def _charts_row(view: ModelView, hs: Any, names: list[str], tokens: list[str],
                again: tuple[str, ...] = ()) -> None:
    """``names`` side by side (those the trace has), in one row of columns;
    those in ``again`` were drawn above already (before their next step)."""
    present = [n for n in names if n in hs.steps or n in view.trace]
    if not present:
        return
    columns = st.columns(len(present)) if len(present) > 1 else [st.container()]
    for column, name in zip(columns, present):
        with column:
            _decoder_chart(view, hs, name, tokens, columns=len(present), again=name in again)


def decoder_steps(view: ModelView, head: int) -> None:
    """Layer ``view.layer`` and query head ``head`` of a Llama-family model, every
    step as a heatmap with its line of transformers' code: the RMSNorm, the
    head's slice of the weights, Q, K, V, QK-norm (where the model has it), RoPE
    with the model's θ, the scores, the causal or sliding-window mask, the
    weights, the K/V head shared, the head's output and o_proj."""
    trace, c = view.trace, view.trace.config
    hs = models.head_slice(trace, head)
    tokens = token_labels(list(trace.tokens))  # unique: Plotly merges equal labels
    row = partial(_charts_row, view, hs, tokens=tokens)
    st.header(f"1. Layer {view.layer}'s input and its RMSNorm")
    st.markdown("The residual stream entering the layer is normalised by its root mean square "
                "(no mean subtracted, no bias: RMSNorm) and scaled by `input_layernorm`'s "
                "weight" + (" (Gemma: 1 + weight)" if c.norm_offset else "") + ".")
    row(["layer_input"])
    row(["rms", "input_norm"])
    row(["embeddings"])
    st.header(f"2. Head {head}'s slice of the weights, and Q, K, V")
    sharing = ", ".join(map(str, hs.sharing))
    st.markdown(  # numbers only: no visitor text
        f"{c.n_heads} query heads share {c.n_kv_heads} K/V heads of {c.head_dim}: query head "
        f"{head} reads K/V head {hs.kv_head}, which query heads {sharing} all read "
        "(`repeat_kv`). Its keys and values are computed once for them all.")
    number_table(decoder_figures.sharing_table(c))
    row(["W_query", "W_key", "W_value"])
    row(["b_query", "b_key", "b_value"])
    row(["queries", "keys", "values"])
    if c.qk_norm:
        st.subheader("QK-norm: each head's q and k normalised on their own")
        st.markdown("Before RoPE, every query and key row of a head is RMS-normalised over its "
                    f"{c.head_dim} numbers and scaled by `q_norm` / `k_norm`: the scores then "
                    "cannot grow with the size of Q and K.")
        row(["q_norm", "k_norm"])
        row(["queries", "queries_normed"], again=("queries",))
        row(["keys", "keys_normed"], again=("keys",))
    scaling = "" if c.rope_type == "default" else f", {c.rope_type} scaling {c.rope_parameters}"
    st.header("3. RoPE: Q and K turned by their position")
    st.markdown(literal.markdown(
        f"Each pair (i, i + e/2) of a query or key at position m turns by m·θ_i, θ_i = "
        f"θ^(−2i/e) with this model's θ = {c.rope_theta:g}{scaling} (e = {c.head_dim})."))
    row(["rope_frequencies"])
    row(["rope_cos", "rope_sin"])
    q, k = ("queries_normed", "keys_normed") if c.qk_norm else ("queries", "keys")
    row([q, "queries_rope"], again=(q, "queries"))
    row([k, "keys_rope"], again=(k, "keys"))
    st.header(f"4. Attention inside head {head}")
    window = ("the causal mask" if c.window is None else
              f"a sliding window of {c.window} keys (this layer is a sliding-window layer)")
    st.markdown(literal.markdown(
        f"The scores are multiplied by the model's scaling, {c.scaling:.6g}, then {window} "
        "hides keys, and softmax makes each row weights."))
    row(["attn_scores", "scaled_scores"])
    row(["causal_mask", "masked_scores"])
    row(["attn_weights"])
    st.header("5. The head's output and o_proj")
    row(["context", "W_out"])
    row(["head_output"])
    st.markdown("Every head's context side by side, times `o_proj`: the layer's attention "
                "output (before the residual is added).")
    row(["output"])
    row(["b_out"])


def generation(view: ModelView, head: int) -> None:
    """Generate up to ``new_tokens`` tokens (greedy, seeded); the slider picks one:
    its one row of scores and weights over the cache in query head ``head``, the
    cache's bytes beside the same model without grouped-query sharing, and every
    row checked against a full forward pass (`explorer.models.against_full_pass`)."""
    st.header("6. Generation, token by token")
    st.markdown("The model generates greedily with its KV cache: the sentence once (prefill), "
                "then one token at a time. Each new token's one query reads every key in the "
                "cache; the earlier keys and values are never computed again.")
    new_tokens = widgets.draw("new_tokens")
    try:
        gen = _generation(view, int(new_tokens))
    except ConfigError as error:  # BudgetError, ModelError: the message says what to do
        st.warning(literal.markdown(str(error)))
        return
    if not gen.generated:
        st.info("The model generated nothing.")
        return
    tokens = token_labels(list(gen.tokens))  # unique: Plotly merges equal labels
    n = len(gen.generated)
    shown_index = view["generated"] if view["generated"] < n else n - 1
    if n > 1:
        if state.value("generated") != shown_index:
            state.put("generated", shown_index)
        shown_index = widgets.draw("generated", options=list(range(n)),
                                   format_func=lambda i: f"{i + 1}: {gen.generated[i].token}")
    token = gen.generated[shown_index]
    stop = {"tokens": "all asked for", "eos": "the model's end-of-sequence token",
            "time": "the time limit", "positions": "the model's last position"}[gen.stopped]
    st.markdown(literal.markdown(
        f"Generated: {''.join(t.token for t in gen.generated)} (stopped: {stop}). Token "
        f"{shown_index + 1}, “{token.token}” at position {token.position}: its row read "
        f"{int(token.mask.sum())} keys, and layer {gen.config.layer}'s cache keeps "
        f"{token.cache_kept} tokens after it."))
    hs = models.head_slice(view.trace, head)
    for chart in ("generated_scores", "generated_weights", "generated_rows"):
        _decoder_chart(view, hs, chart, tokens, generation=gen, generated=shown_index)
    st.subheader("The KV cache")
    c = gen.config
    st.caption(literal.markdown(
        f"Measured bytes of the model's own cache, every layer, in {view.model.dtype}; "
        f"without grouped-query sharing each of the {c.n_heads} query heads would keep its "
        f"own keys and values: × {c.n_heads // c.n_kv_heads}."))
    fitted_table(decoder_figures.cache_table(gen))  # static: every column on a phone too
    rows = _rows_check(view, gen)
    (st.success if rows.ok else st.error)(literal.markdown(
        rows_summary(rows, view.model.dtype)))


def _decoder_json(trace: Trace, gen: Any, overview: Any = None,
                  checks: tuple[Agreement, ...] = (), head: int | None = None) -> str:
    """The page's JSON, strict: the layer's trace (its config's ``head``: the
    query head the page showed, ``head``; the steps hold every head), the
    generation, where every head's weight goes (``head_shares``:
    `explorer.models.HeadOverview`'s ``to_first``, ``to_previous`` and
    ``to_self``, each (n_layers, n_heads)) and the checks against the model
    (`explorer.core.agreement.Agreement.to_dict`)."""
    shares = None if overview is None else {
        name: getattr(overview, name).tolist() for name in ("to_first", "to_previous", "to_self")}
    if head is not None and head != trace.config.head:
        trace = Trace(replace(trace.config, head=head), trace.tokens, {n: trace[n] for n in trace})
    return json.dumps({"trace": json.loads(trace.to_json()),
                       "generation": json.loads(gen.to_json()) if gen is not None else None,
                       "head_shares": json_safe(shares),
                       "checks": json_safe([check.to_dict() for check in checks])},
                      allow_nan=False)


def decoder_downloads(view: ModelView) -> None:
    """The sidebar's downloads of a Llama-family layer, built when clicked: the
    layer and the head shown as a PyTorch script that recomputes them by hand
    and checks them against the model, generates the page's ``new_tokens``
    with the KV cache and measures every head (`explorer.render.decoder_script`), and
    every matrix of the trace and the generation, as JSON."""
    def build() -> str:
        try:
            gen = _generation(view, int(view["new_tokens"]))
        except ConfigError:
            gen = None
        checks = [_layer_check(view), _layer_check(view, steps=True)]
        if gen is not None:
            checks.append(_rows_check(view, gen))
        return _decoder_json(view.trace, gen, _overview(view), tuple(checks), head=view.head)
    with st.expander("Take it with you", icon=":material/download:"):
        st.download_button(decoder_script.SCRIPT_FILE,
                           data=partial(decoder_script.decoder_script, view.trace.config,
                                        view.model.location, view.head,
                                        text=view["sentence"], link=view.link,
                                        new_tokens=int(view["new_tokens"]),
                                        seed=GENERATION_SEED),
                           file_name=decoder_script.SCRIPT_FILE, mime=downloads.MIME["py"],
                           on_click="ignore", icon=":material/download:",
                           key="download-decoder-script",
                           help="A standalone script (torch and transformers): it loads the "
                                "model, recomputes this layer and head by hand and checks "
                                "them against the model's own numbers, generates token by "
                                "token with the KV cache, each row checked against a full "
                                "pass, and tabulates where every head's weight goes.")
        st.download_button("Every matrix and the generation (JSON)", data=build,
                           file_name="decoder_trace.json", mime="application/json",
                           on_click="ignore", icon=":material/download:",
                           key="download-decoder-json",
                           help='Strict JSON: −∞ is the string "-Infinity". The layer’s '
                                "steps (trace) and each generated token's rows (generation).")


def decoder_page(view: ModelView) -> None:
    """Everything a Llama-family model's page draws below the settings."""
    head = head_picker(view)
    component.picker("query", "Highlight a query token in every chart",
                     token_labels(list(view.trace.tokens)), view.query, none="none",
                     on_pick=partial(_decoder_pick, "query"))
    decoder_verification(view)
    st.header("Tokens as the model sees them")
    st.dataframe(figures.token_table(view.trace), width="content")
    decoder_steps(view, head)
    generation(view, head)
    st.header("7. Every head at a glance")
    st.markdown("Trained Llama-family models put much of many heads' weight on the first "
                "token, whatever it is: an **attention sink** (Xiao et al., 2023), a place "
                "for weight that has nowhere useful to go, since softmax must give out 1. "
                "The *first token* column measures it.")
    every_head(view, head)
