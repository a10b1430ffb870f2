"""The "Real model" page's own pieces: the model picker and loading, the layer
picker, the check against the model, the heads found by measuring and every
head at a glance.

Only the Real model page imports this module, and only this module imports
`explorer.models` (and with it transformers): the other pages never need it.
Models and what is computed from them are cached across sessions within the
memory budget (`explorer.ui.cache.cached_model`, `cached_model_result`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import partial

import streamlit as st

from explorer import budget, figures, literal, models
from explorer.config import ConfigError, shown
from explorer.models import EXAMPLES, LoadedModel, ModelUnavailable, download_command
from explorer.trace import Trace
from explorer.ui import cache, chart, controls, urlstate
from explorer.ui.navigation import page_menu
from explorer.ui.render import index_picker, set_query
from explorer.ui.sidebar import check_link_view, keep_across_pages, show_problems


@dataclass(frozen=True)
class ModelChoice:
    """A model the picker offers by name: ``name`` (what `load_model` takes and
    the link says), ``label`` (for people) and ``parameters``, the base model's
    (no LM head, no pooler), which fix its float32 size before it is loaded."""

    name: str
    label: str
    parameters: int
    about: str

    @property
    def nbytes(self) -> int:
        """Bytes of its float32 weights."""
        return 4 * self.parameters


MODEL_CHOICES: dict[str, ModelChoice] = {c.name: c for c in (
    ModelChoice("gpt2", "GPT-2 small", 124_439_808,
                "OpenAI's GPT-2 (2019): 12 layers × 12 heads, d_model 768, causal"),
    ModelChoice("distilgpt2", "DistilGPT-2", 81_912_576,
                "GPT-2 distilled to 6 layers × 12 heads, d_model 768, causal"),
    ModelChoice("bert-base-uncased", "BERT base (uncased)", 108_891_648,
                "Google's BERT (2018): 12 layers × 12 heads, d_model 768, every token "
                "sees every other"),
)}
"""The models offered by name, GPT-2 small first; their parameter counts are
checked against transformers' own configs in the tests."""


def _default_model() -> str:
    """GPT-2 small when this server's memory budget holds it, else the first
    model that fits (DistilGPT-2 on the default 1 GB budget)."""
    fitting = [c.name for c in MODEL_CHOICES.values() if c.nbytes <= budget.MODEL_BYTES]
    return fitting[0] if fitting else "gpt2"


DEFAULT_MODEL = _default_model()
FOLDER = "folder"
"""The picker's "a local folder" option (offered when `budget.MODEL_FOLDERS`)."""
FOLDER_KEY = "model_folder"
EXAMPLE_WORK_TOKENS = 64
"""Tokens assumed when reserving work for measuring an example (they are short)."""
_FOUND_KEY = "_model_example_found"
_SOURCES = {"cache": "the local Hugging Face cache",
            "hub": "the Hugging Face Hub (downloaded now, and kept in the local cache)"}


@dataclass(frozen=True)
class ModelView:
    """What the page draws: the loaded ``model``, its cache ``key`` (a name or
    ``folder:<path>``), a readable ``label``, and the ``trace`` of the chosen
    layer on the sentence (all heads; the page picks one)."""

    model: LoadedModel
    key: str
    label: str
    trace: Trace

    @property
    def layer(self) -> int:
        return self.trace.config.layer


# ---------------------------------------------------------------------------
# The link's own parameters
# ---------------------------------------------------------------------------
def check_model_param(raw: str) -> str:
    """A link's ``model``: one of `MODEL_CHOICES` by name. Raises `ConfigError`."""
    if raw not in MODEL_CHOICES:
        raise ConfigError(urlstate.MODEL, f"model must be one of {', '.join(MODEL_CHOICES)}; a "
                                          "folder is opened from the sidebar, never from a link "
                                          f"(got {shown(raw)})")
    return raw


def check_layer_param(raw: str) -> int:
    """A link's ``layer``: a whole number from 0 (the model bounds it once loaded)."""
    return urlstate.index(urlstate.LAYER, raw)


# ---------------------------------------------------------------------------
# Settings: the sidebar, loading, the layer and the trace
# ---------------------------------------------------------------------------
def settings() -> ModelView | None:
    """Draw the page's settings and return the `ModelView` to draw, or None.

    The sidebar holds the page menu, the model picker (and the folder, when
    chosen) and the shared sentence. The main area gets the messages about the
    link, the model's loading (no weights and no network says so and how to
    get them; a model too large for the budget gives the figures), a line
    about the model and the layer picker. Any problem is shown with
    ``st.error`` and gives None: never a traceback.
    """
    urlstate.clean({**{c.key: c.check_url_value for c in controls.ALL},
                    urlstate.MODEL: check_model_param, urlstate.LAYER: check_layer_param})
    messages = st.container()
    keep_across_pages()
    with st.sidebar:
        page_menu()
        st.header("Real model")
        choice = _model_picker()
        folder = _folder_box() if choice == FOLDER else ""
        sentence = _sentence_box()
        link_box = st.container()
    view = None
    try:
        if choice == FOLDER and not folder.strip():
            st.info("Type the path of a folder saved with save_pretrained() into “Folder” in "
                    "the sidebar.")
        else:
            model, key, label = _loaded(choice, folder)
            _about(model, label)
            layer = _layer_picker(model)
            view = ModelView(model, key, label, _trace(model, key, label, sentence, layer))
            check_link_view(view.trace, (urlstate.QUERY, urlstate.HEAD))
    except ModelUnavailable as error:
        st.error(literal.markdown(str(error)))
        name = choice if choice in MODEL_CHOICES else DEFAULT_MODEL
        st.markdown(f"Fetch {MODEL_CHOICES[name].label} once, on a machine with internet access "
                    "(or copy its Hugging Face cache here):")
        st.code(download_command(name), language="bash")
        if budget.MODEL_FOLDERS:
            st.caption("Or choose “a local folder” in the sidebar and give the path of a "
                       "folder saved with save_pretrained().")
    except ConfigError as error:  # ModelError, BudgetError: the message says what to do
        st.error(literal.markdown(str(error)))
    show_problems(messages)
    with link_box:
        _share_link(choice, view)
    return view


def _choice_label(option: str) -> str:
    if option == FOLDER:
        return "a local folder…"
    c = MODEL_CHOICES[option]
    too_big = " · needs a larger memory budget" if c.nbytes > budget.MODEL_BYTES else ""
    return f"{c.label} ({c.name}){too_big}"


def _model_changed() -> None:
    urlstate.forget_problems()
    choice = st.session_state[urlstate.MODEL]
    urlstate.set_param(urlstate.MODEL, choice if choice in MODEL_CHOICES else None)


def _model_picker() -> str:
    """`DEFAULT_MODEL`, or a link's ``model``; a folder when allowed."""
    options = list(MODEL_CHOICES) + ([FOLDER] if budget.MODEL_FOLDERS else [])
    if urlstate.MODEL not in st.session_state and urlstate.param(urlstate.MODEL):
        st.session_state[urlstate.MODEL] = urlstate.param(urlstate.MODEL)  # checked by clean
    if st.session_state.get(urlstate.MODEL) not in options:
        st.session_state[urlstate.MODEL] = DEFAULT_MODEL
    choice = st.selectbox("Model", options, key=urlstate.MODEL, format_func=_choice_label,
                          on_change=_model_changed, persist_state="session",
                          help="\n".join(f"- **{c.label}**: {c.about}"
                                         for c in MODEL_CHOICES.values()))
    if choice in MODEL_CHOICES:
        st.caption(MODEL_CHOICES[choice].about)
    return choice


def _folder_box() -> str:
    return st.text_input(
        "Folder", key=FOLDER_KEY, persist_state="session", placeholder="/path/to/model",
        on_change=urlstate.forget_problems,
        help="A folder written by model.save_pretrained(folder) for a GPT-2 or BERT model "
             "(config.json and model.safetensors), with its tokenizer files to read text, "
             "e.g. from `python -m explorer.models download gpt2 --to models/`. It never "
             "goes into the link.")


def _sentence_box() -> str:
    """The shared sentence, drawn with the other pages' own control."""
    control = dataclasses.replace(
        controls.BY_KEY["sentence"],
        help="Read by the model's own tokenizer (GPT-2: byte-level BPE; BERT: WordPiece, "
             "with [CLS] and [SEP] added); at most 512 tokens. The same sentence as on "
             "the other pages.")
    return control.draw(control, control.default, urlstate.forget_problems)


def _loaded(choice: str, folder: str) -> tuple[LoadedModel, str, str]:
    """The model, its cache key and label; loaded once per name or folder.
    Raises `ModelUnavailable`, `ModelError` (for a folder: `FolderUnusable`, one
    message whatever the reason) or `explorer.budget.BudgetError`."""
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


def _layer_picker(model: LoadedModel) -> int:
    """Pick the layer to show (0-based). A link's ``layer`` is the first choice;
    one outside the model is noted, and layer 0 shown."""
    n_layers = model.n_layers
    raw = urlstate.param(urlstate.LAYER)
    if urlstate.LAYER not in st.session_state and raw is not None:
        try:
            st.session_state[urlstate.LAYER] = urlstate.index(urlstate.LAYER, raw, n_layers)
        except ConfigError as error:
            urlstate.note(urlstate.LAYER, raw, error)
            urlstate.set_param(urlstate.LAYER, None)
    if st.session_state.get(urlstate.LAYER) not in range(n_layers):
        st.session_state[urlstate.LAYER] = 0
    return index_picker("Layer to show", n_layers, urlstate.LAYER, "layer",
                        persist_state="session")


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


def _share_link(choice: str, view: ModelView | None) -> None:
    """The link to this view: the model by name, the sentence, the layer and
    the view pickers; a folder is never written into it."""
    params: dict = {}
    if choice in MODEL_CHOICES:  # always: a server's default depends on its budget
        params[urlstate.MODEL] = choice
    sentence = st.session_state.get("sentence")
    if sentence is not None and sentence != controls.BY_KEY["sentence"].default:
        params["sentence"] = sentence
    if view is not None:
        params.update(urlstate.view_params((urlstate.LAYER, urlstate.HEAD, urlstate.QUERY)))
    urlstate.link_box(params, "A folder is not part of the link: whoever opens it chooses "
                              "their own." if choice == FOLDER else None)


# ---------------------------------------------------------------------------
# Checked against the model
# ---------------------------------------------------------------------------
def verification(view: ModelView) -> None:
    """Our step-by-step layer against the model's own forward pass: the
    attention weights against ``output_attentions`` and the output against the
    hooked output projection. ✓ within `explorer.models.TOLERANCE`, else a loud error."""
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
    if found and found[:2] == (view.key, st.session_state.get("sentence")):
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
        st.session_state[_FOUND_KEY] = (key, st.session_state.get("sentence"), False,
                                        f"{example.title}: {error}")
        return
    st.session_state["sentence"] = example.text
    _open_head(found.layer, found.head)
    set_query(found.query_index)
    urlstate.set_view(urlstate.CELL,
                      ("attn_weights", found.query_index, found.key_index, found.head))
    st.session_state[_FOUND_KEY] = (key, example.text, True,
                                    f"{example.title} {found.describe()}")


def _open_head(layer: int, head: int) -> None:
    """Show layer ``layer``, head ``head`` (in the pickers and the link)."""
    urlstate.set_view(urlstate.LAYER, layer)
    urlstate.set_view(urlstate.HEAD, head)


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
        chart.show(figures.head_overview_chart(overview, view.layer, head), key="head-overview",
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
