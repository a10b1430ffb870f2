"""The declaration: every setting and view value of the explorer (`ENTRIES`),
the pages each belongs to, and the key prefixes of the widgets that hold no
value (`ACTIONS`). See `explorer.ui.state` for what follows from it.
No streamlit: the declaration can be read and tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from explorer.checker.learner import class_name_problem
from explorer.checker.listings import (
    DEFAULT_SIZES,
    MULTI_HEAD_ATTENTION,
    MULTI_HEAD_ATTENTION_CLASS,
)
from explorer.core import config as cfg
from explorer.core.config import GIVEN_MATRICES, OPTION_HELP, AttentionConfig
from explorer.core.steps import STEPS
from explorer.lessons import pages
from explorer.lessons.backward import settings as backward
from explorer.lessons.experiments import MAX_SHUFFLES
from explorer.lessons.pages import (
    BACKWARD_PAGE,
    CHECK_PAGE,
    EXPERIMENTS_PAGE,
    FRONTIER_PAGE,
    MODEL_PAGE,
    MODERN_PAGE,
    MULTI_HEAD_PAGE,
    SIMPLIFIED_PAGE,
)
from explorer.lessons.presets import JOURNEY_SENTENCE, PRESETS
from explorer.models import explain as decoder_explain
from explorer.models.catalogue import (
    DEFAULT_NEW_TOKENS,
    GENERATION_SECONDS,
    MAX_NEW_TOKENS,
    MODEL_CHOICES,
)
from explorer.modern import attention as modern
from explorer.modern import explain as modern_explain
from explorer.modern import frontier
from explorer.modern.frontier.parts import PARTS
from explorer.ui.state.kinds import (
    CellRef,
    ChartCell,
    Choice,
    Flag,
    Fraction,
    Index,
    Kind,
    MatrixKind,
    Number,
    Pair,
    Steps,
    Text,
)

EXAMPLE, PAGE_OWN, BASIC, ADVANCED, MATRIX, VIEW = ("example", "page", "basic", "advanced",
                                                    "matrix", "view")
"""Where an entry is drawn: the worked example's picker and the page's own
settings at the top of the sidebar, the basic and the advanced settings, a
table above the charts, or on the page itself (a view value)."""


def _same(value: Any) -> Any:
    return value


def _page_model(context: "Context | None" = None) -> str:
    """The Real model page's model when the session holds none: the catalogue's
    `explorer.models.catalogue.DEFAULT_MODEL`, or offline, with no other trained
    model on the machine, the installed all-MiniLM-L6-v2
    (`explorer.models.loading.page_default`; imported here, on the Real model
    page only, since it loads transformers)."""
    from explorer.models.loading import page_default
    return page_default()


@dataclass(frozen=True)
class Entry:
    """One setting or view value.

    ``name`` is its session key, its widget's key and its URL parameter.
    ``default`` is its value when the session holds none: a value, or a
    function of the page's `Context` (the query token a page starts on);
    ``page_defaults`` overrides it per page. ``config``: the `AttentionConfig`
    field it sets, through ``to_config`` (and back, for a worked example's
    values, ``from_config``). ``allowed``: the values the page's `Context`
    allows (``range(n_tokens)`` for the query token, the page's steps for the
    CSV; a cell is checked against its step's shape). ``shown_if``: the settings
    under which its widget is drawn. ``linked=False``: never in a link (a
    folder's path); ``always_linked``: in every link of its pages (the model:
    a server's default depends on its memory budget). ``widget=False``: held
    in the session without a widget of its own (the explained cell).
    """

    name: str
    kind: Kind
    pages: frozenset[str]
    label: str = ""
    help: str = ""
    group: str = VIEW
    default: Any = None
    page_defaults: Mapping[str, Any] = field(default_factory=dict)
    config: bool = False
    to_config: Callable[[Any], Any] = _same
    from_config: Callable[[Any], Any] = _same
    allowed: Callable[["Context"], Collection | None] | None = None
    shown_if: Callable[[Mapping[str, Any]], bool] | None = None
    linked: bool = True
    always_linked: bool = False
    widget: bool = True

    def optional_on(self, page: str) -> bool:
        """Whether "none" is a value on ``page`` (its default there is None)."""
        return self.page_defaults.get(page, self.default) is None

    def default_on(self, page: str, context: "Context | None" = None) -> Any:
        """The value on ``page`` when the session holds none."""
        value = self.page_defaults.get(page, self.default)
        return value(context) if callable(value) else value


CONFIG_PAGES = pages.having(pages.CONFIG)
"""The pages drawn from an `AttentionConfig`."""
WEIGHT_PAGES = pages.having(pages.CONFIG, pages.WEIGHTS)
"""The pages with trainable weights (the Simplified page fixes Q = K = V = X)."""
CHART_PAGES = pages.having(pages.STEP_CHARTS)
"""The pages that walk the steps' charts (a query to highlight, a cell to explain)."""
TRACE_PAGES = pages.having(pages.TRACE)
"""The pages with a trace's downloads."""
HEAD_PAGES = pages.having(pages.HEADS)
MULTI_HEAD_SETTINGS = pages.having(pages.MULTI_HEAD)
"""The pages with the causal mask, heads, dropout and out_proj in their own settings."""
OVERFLOW_PAGES = pages.having(pages.OVERFLOW)
ONLY = frozenset


@dataclass(frozen=True)
class Context:
    """What bounds and defaults of view values depend on: the page's trace
    (its tokens, heads and steps), its config, and a real model's layer count."""

    trace: Any = None
    config: Any = None
    n_layers: int | None = None
    shown_steps: tuple[str, ...] = ()


def _offered(name: str) -> tuple[str, ...]:
    """The options of a config choice the sidebar offers: those `OPTION_HELP`
    describes that `AttentionConfig` accepts (weight_init "model" belongs to
    real-model traces)."""
    return tuple(o for o in OPTION_HELP[name] if o in cfg.choices(name))


def _choices_help(name: str) -> str:
    return "\n".join(f"- **{o}**: {OPTION_HELP[name][o]}" for o in _offered(name))


OUT_PROJ_CHOICES = {"auto": None, "on": True, "off": False}
"""The out_proj widget's choices and their config values (None: on when n_heads > 1)."""
DROPOUT_MAX, DROPOUT_STEP = 0.95, 0.05
"""The dropout slider's range (the backend allows any p in [0, 1))."""
FOLDER = "folder"
"""The model picker's "a local folder" choice (never in a link)."""
EXPERIMENT_LABELS = {
    "scaling": "Why divide by √d_k",
    "temperature": "Temperature",
    "softmax_dim": "softmax dim & keepdim",
    "permutation": "Permutation",
    "compare": "Compare two configurations",
}
"""The Experiments page's experiments, in order: link name -> label."""
TEMPERATURES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
SCALING_KEYS = (4, 16, 64, 256)
"""Keys per query offered by the √d_k experiment (plus the sentence's own count)."""
DIM_SCORES = {"symmetric": "X·Xᵀ (symmetric, as in the notebook)",
              "asymmetric": "Q·Kᵀ (W_query ≠ W_key)"}
OVERFLOW_FACTORS = (1, 2, 5, 10, 20, 50)
"""Multipliers of X offered by the overflow demo (scores grow with their square)."""


def _config_entry(name: str, kind: Kind, label: str, help: str, group: str,
                  pages: frozenset[str] = CONFIG_PAGES, **more: Any) -> Entry:
    """An `AttentionConfig` field's entry; its default is the config's."""
    from_config = more.pop("from_config", _same)
    default = from_config(AttentionConfig.__dataclass_fields__[name].default)
    return Entry(name, kind, pages, label, help, group, default=default, config=True,
                 from_config=from_config, **more)


@dataclass(frozen=True)
class ClassName(Text):
    """The class to check: written into the page's snippets as code, so it must be a
    Python identifier and no keyword (`explorer.checker.learner.class_name_problem`)."""

    def parse(self, name: str, raw: str) -> str:
        problem = class_name_problem(raw.strip())
        if problem is not None:
            raise cfg.ConfigError(name, f"{name}: {problem}")
        return raw


CAUSAL_CHOICES = {"auto": None, "causal": True, "not causal": False}
"""The Check page's causal choices and what `explorer.checker.check.check_module` gets."""


def _n_tokens(context: Context) -> int:
    return context.trace.n_tokens


def _experiment_side(side: str, scale: Callable[[AttentionConfig], bool]) -> list[Entry]:
    """Configuration A's or B's settings in "Compare two configurations"; they
    start from the sidebar's config (B with the scaling flipped)."""
    exp = ONLY({EXPERIMENTS_PAGE})
    return [
        Entry(f"{side}_seed", Text(field="seed"), exp, "seed",
              default=lambda c: str(c.config.seed)),
        Entry(f"{side}_scale", Flag(), exp, "scale by √d_k", default=lambda c: scale(c.config)),
        Entry(f"{side}_normalization", Choice(_offered("normalization")), exp, "normalization",
              default=lambda c: c.config.normalization),
        Entry(f"{side}_causal", Flag(), exp, "causal", default=lambda c: c.config.causal),
    ]


_MODERN = ONLY({MODERN_PAGE})
_MODERN_ENTRIES = [
    # The Modern attention page's own settings (`explorer.modern.attention.ModernConfig`)
    Entry("n_query_heads", Number(low=1, high=modern.MAX_MODERN_HEADS), _MODERN, "n_heads",
          "Query heads; n_kv_heads must divide it.", PAGE_OWN, default=4),
    Entry("n_kv_heads", Number(low=1, high=modern.MAX_MODERN_HEADS), _MODERN, "n_kv_heads",
          "Key/value heads, each shared by n_heads / n_kv_heads query heads: 1 is multi-query "
          "attention, n_heads is multi-head attention.", PAGE_OWN, default=2),
    Entry("head_dim", Number(low=2, high=modern.MAX_HEAD_DIM, step=2), _MODERN, "head_dim",
          "Width of each head's queries, keys and values; even, since RoPE turns pairs.",
          PAGE_OWN, default=8),
    Entry("rope_base", Number(low=int(modern.MIN_ROPE_BASE), high=int(modern.MAX_ROPE_BASE),
                              step=1000), _MODERN, "RoPE base",
          "θ_i = base^(−2i/head_dim): 10,000 in RoFormer and Llama 2, 500,000 in Llama 3.",
          PAGE_OWN, default=int(modern.DEFAULT_ROPE_BASE)),
    Entry("rope_pairing", Choice(modern.ROPE_PAIRINGS, labels=modern.PAIRING_HELP), _MODERN,
          "RoPE pairing", "Which dimensions turn together.", PAGE_OWN, default=modern.ROTATE_HALF),
    Entry("rope_offset", Number(low=0, high=modern.MAX_ROPE_OFFSET), _MODERN,
          "position offset", "Shift every position by this many: the scores stay the same.",
          PAGE_OWN, default=0),
    Entry("window", Number(low=1, high=cfg.MAX_TOKENS), _MODERN, "sliding window w",
          "Each query sees itself and the w − 1 tokens before it.", PAGE_OWN, default=3),
    Entry("prefill", Number(low=0, high=cfg.MAX_TOKENS), _MODERN, "KV cache: prefill tokens",
          "The first tokens are processed at once; the rest one at a time.", PAGE_OWN,
          default=2),
    Entry("block_q", Number(low=1, high=cfg.MAX_TOKENS), _MODERN, "block_q: query tile",
          "Queries per tile of the online softmax.", PAGE_OWN, default=2),
    Entry("block_k", Number(low=1, high=cfg.MAX_TOKENS), _MODERN, "block_k: key tile",
          "Keys per tile of the online softmax.", PAGE_OWN, default=2),
    # What the page shows
    Entry("decode_row", Index(), _MODERN, "Token to decode",
          default=lambda c: c.trace.n_tokens - 1,
          allowed=lambda c: range(c.trace.n_tokens) if c.trace else None),
    Entry("modern_cell", ChartCell(modern_explain.CHARTS), _MODERN, default=None, widget=False),
    Entry("tile", Index(), _MODERN, "Tile step", default=0,
          allowed=lambda c: range(c.trace.n_tile_steps) if c.trace else None),
]
"""The Modern attention page's entries (`explorer.ui.modern`)."""

@dataclass(frozen=True)
class StepCell(ChartCell):
    """A clicked cell of a Frontier step, ``part.step:row,col``: the part one of
    ``charts`` (`explorer.modern.frontier.parts.PARTS`), the step a snake_case
    name (the page explains nothing for a step its part does not have, or a
    cell outside it)."""

    def parse(self, name: str, raw: str) -> tuple[str, int, int]:
        chart, colon, where = str(raw).partition(":")
        part, dot, step = chart.partition(".")
        if not (colon and dot and part in self.charts and step
                and step.replace("_", "").isalnum() and step.isascii()):
            raise cfg.ConfigError(name, f"{name} must name a part's step and a cell such as "
                                        f"{self.charts[0]}.scores:1,0; the parts are "
                                        f"{', '.join(self.charts)} (got {cfg.shown(raw)})")
        return (chart, *Pair().parse(name, where))


_FRONTIER = ONLY({FRONTIER_PAGE})
_FRONTIER_SIZES = {
    # entry name -> (`FrontierConfig` field, label, help)
    "frontier_heads": ("n_heads", "n_heads", "Query heads of every part."),
    "frontier_head_dim": ("head_dim", "head_dim",
                          "Width of each head's queries, keys and values (MLA: the part "
                          "without RoPE, qk_nope_head_dim and v_head_dim)."),
    "rope_dim": ("rope_dim", "MLA: rope dim",
                 "Width of MLA's decoupled RoPE key and query (qk_rope_head_dim); even."),
    "kv_lora_rank": ("kv_lora_rank", "MLA: kv_lora_rank",
                     "Width of MLA's cached KV latent c_KV."),
    "q_lora_rank": ("q_lora_rank", "MLA: q_lora_rank", "Width of MLA's query latent."),
    "top_k": ("top_k", "sparse: top_k", "Keys each query keeps in DeepSeek sparse attention."),
    "index_heads": ("index_heads", "sparse: indexer heads",
                    "Heads of the lightning indexer."),
    "index_dim": ("index_dim", "sparse: indexer dim", "Width of the lightning indexer's heads."),
    "frontier_window": ("window", "ring: window W",
                        "Slots of the ring-buffer cache: the keys each query sees, itself "
                        "included."),
    "chunk": ("chunk", "DeltaNet: chunk", "Tokens per chunk of Gated DeltaNet's chunked form."),
}
"""The Frontier page's sizes: entry name (its URL parameter) -> `FrontierConfig`
field, label, help. Bounds and defaults come from `explorer.modern.frontier`."""
_FRONTIER_ENTRIES = [
    *(Entry(name, Number(low=frontier.LIMITS[field][0], high=frontier.LIMITS[field][1],
                         step=2 if field in frontier.EVEN else 1),
            _FRONTIER, label, help, PAGE_OWN,
            default=frontier.FrontierConfig.__dataclass_fields__[field].default)
      for name, (field, label, help) in _FRONTIER_SIZES.items()),
    Entry("frontier_cell", StepCell(tuple(PARTS)), _FRONTIER, default=None, widget=False),
]
"""The Frontier attention page's entries (`explorer.ui.frontier`)."""
FRONTIER_FIELDS = {name: field for name, (field, _, _) in _FRONTIER_SIZES.items()}
"""Entry name -> `FrontierConfig` field."""

_BACKWARD = ONLY({BACKWARD_PAGE})
BACKWARD_D_K = 4
"""The Backward pass page's d_k: with its 2 heads, head_dim = 2, so that the
scaling's ÷√head_dim (÷1.4142) shows in dL/dω beside dL/dω̃ (issue 51: at the
other pages' d_k = 2, head_dim = 1 and ÷√1 changed nothing)."""
_BACKWARD_ENTRIES = [
    # The Backward pass page's loss, in its own settings (`explorer.lessons.backward.settings`)
    Entry("loss", Choice(backward.LOSSES, labels={backward.NEXT_TOKEN: "next-token prediction",
                                                  backward.TARGET: "squared distance to a target"}),
          _BACKWARD, "loss", "\n".join(f"- **{name}**: {text}"
                                        for name, text in backward.LOSS_HELP.items()),
          PAGE_OWN, default=backward.NEXT_TOKEN),
    Entry("target_seed", Text(field="seed", optional=True, placeholder="seed + 1"), _BACKWARD,
          "target_seed", "Seeds the target context T = torch.randn(n_tokens, d) of its own "
          "torch.Generator; empty = the seed + 1.", PAGE_OWN, default="",
          shown_if=lambda values: values.get("loss") == backward.TARGET),
    # Its training run, on the page
    Entry("optimizer", Choice(backward.OPTIMIZERS, labels=backward.OPTIMIZER_LABELS),
          _BACKWARD, "optimizer", "\n".join(f"- **{name}**: {text}"
                                             for name, text in backward.OPTIMIZER_HELP.items()),
          default=backward.SGD),
    Entry("learning_rate", Text(optional=True, placeholder="the optimizer's default"),
          _BACKWARD, "learning rate",
          f"Between {backward.MIN_LEARNING_RATE:g} and {backward.MAX_LEARNING_RATE:g}; empty = "
          + ", ".join(f"{rate:g} for {name}" for name, rate
                      in backward.DEFAULT_LEARNING_RATE.items()) + ".", default=""),
    Entry("train_steps", Number(low=backward.MIN_TRAIN_STEPS, high=backward.MAX_TRAIN_STEPS),
          _BACKWARD, "training steps", "How many updates of the weights.",
          default=backward.DEFAULT_TRAIN_STEPS),
    Entry("train_step", Index(), _BACKWARD, "Weights after step", default=None, widget=False),
    # FlashAttention's backward pass, tile by tile
    Entry("flash_block_q", Number(low=1, high=cfg.MAX_TOKENS), _BACKWARD, "block_q: query tile",
          "Queries per tile of the tiled backward pass.", default=2),
    Entry("flash_block_k", Number(low=1, high=cfg.MAX_TOKENS), _BACKWARD, "block_k: key tile",
          "Keys per tile of the tiled backward pass.", default=2),
    Entry("flash_tile", Index(), _BACKWARD, "Tiles walked", default=None, widget=False),
    # The explained cell of a gradient (its head: the head shown)
    Entry("grad_cell", CellRef(), _BACKWARD, widget=False),
]
"""The Backward pass page's entries (`explorer.ui.backward`); ``train_step`` and
``flash_tile`` None: the last step, the last tile."""

_ENTRIES: list[Entry] = [
    # The worked example: applied first, then the settings a link gives.
    Entry("preset", Choice(("", *PRESETS), labels={s: p.title for s, p in PRESETS.items()}),
          CONFIG_PAGES, "Start from a worked example",
          "Sets every setting to a book or notebook example; change anything afterwards. "
          "While it is unchanged, the page checks the numbers it prints.",
          group=EXAMPLE, default=""),
    # The page's own settings (Causal & multi-head attention)
    _config_entry("causal", Flag(), "causal: mask future tokens",
                  "Each token attends only to itself and earlier tokens (GPT-style).", PAGE_OWN,
                  MULTI_HEAD_SETTINGS, page_defaults={MULTI_HEAD_PAGE: True, BACKWARD_PAGE: True}),
    _config_entry("n_heads", Number("n_heads"), "n_heads",
                  "Number of heads; d_k and d_v must divide by it (head_dim = d_k / n_heads).",
                  PAGE_OWN, MULTI_HEAD_SETTINGS, page_defaults={MULTI_HEAD_PAGE: 2, BACKWARD_PAGE: 2}),
    _config_entry("dropout", Fraction("dropout", DROPOUT_MAX, DROPOUT_STEP),
                  "dropout p on the attention weights",
                  "Zero each weight with probability p and scale the rest by 1/(1−p), as "
                  "nn.Dropout(p) in training.", PAGE_OWN, MULTI_HEAD_SETTINGS),
    _config_entry("dropout_seed", Text(field="dropout_seed", optional=True,
                                       placeholder="same as seed"), "dropout_seed",
                  "Seeds the dropout mask's own torch.Generator; empty = the same as seed.",
                  PAGE_OWN, MULTI_HEAD_SETTINGS,
                  to_config=lambda raw: raw if raw.strip() else None,
                  from_config=lambda seed: "" if seed is None else str(seed)),
    _config_entry("out_proj", Choice(tuple(OUT_PROJ_CHOICES)), "out_proj: output projection",
                  "nn.Linear(d_v, d_v) with bias after the heads are concatenated; "
                  "auto = on when n_heads > 1.", PAGE_OWN, MULTI_HEAD_SETTINGS,
                  to_config=OUT_PROJ_CHOICES.get,
                  from_config={v: k for k, v in OUT_PROJ_CHOICES.items()}.get),
    # The shared settings
    _config_entry("sentence", Text(field="sentence"),
                  "Sentence", "Split on whitespace; punctuation at word ends is stripped; "
                  f"{cfg.MIN_TOKENS} to {cfg.MAX_TOKENS} tokens.", BASIC,
                  CONFIG_PAGES | {MODEL_PAGE, CHECK_PAGE, MODERN_PAGE, FRONTIER_PAGE},
                  page_defaults={CHECK_PAGE: JOURNEY_SENTENCE}),
    _config_entry("d_in", Number("d_in"), "d_in: embedding dim",
                  "Width of each token's embedding vector x_i.", BASIC,
                  CONFIG_PAGES | {CHECK_PAGE, MODERN_PAGE, FRONTIER_PAGE}),
    _config_entry("d_k", Number("d_k"), "d_k: query/key dim",
                  "Width of the queries and keys (W_query, W_key).", BASIC, WEIGHT_PAGES,
                  page_defaults={BACKWARD_PAGE: BACKWARD_D_K}),
    _config_entry("d_v", Number("d_v"), "d_v: value dim",
                  "Width of the values and context vectors (W_value).", BASIC, WEIGHT_PAGES),
    # A text box, not a number box: seeds go up to 2**63 - 1, past what a browser
    # number input holds exactly. The backend parses and checks it.
    _config_entry("seed", Text(field="seed"), "seed",
                  f"Seeds a local torch.Generator; {cfg.MIN_SEED} to {cfg.MAX_SEED}. The same "
                  "seed gives the book's numbers.", BASIC,
                  CONFIG_PAGES | {CHECK_PAGE, MODERN_PAGE, FRONTIER_PAGE},
                  from_config=str),
    _config_entry("embedding", Choice(_offered("embedding")), "embedding: where X comes from",
                  _choices_help("embedding"), ADVANCED),
    _config_entry("weight_init", Choice(_offered("weight_init")), "weight_init: how W is drawn",
                  _choices_help("weight_init"), ADVANCED, WEIGHT_PAGES),
    _config_entry("vocab_size", Number("vocab_size", step=1000), "vocab_size",
                  "Rows of the nn.Embedding table (embedding = table); 50,000 in the teaching "
                  f"notebook. At most {cfg.MAX_VOCAB_SIZE:,}, and vocab_size × d_in at most "
                  f"{cfg.MAX_TABLE_ELEMENTS:,}.", ADVANCED,
                  shown_if=lambda values: values.get("embedding") == "table"),
    _config_entry("scale", Flag(), "scale: divide the scores by √d_k",
                  "As in the book's SelfAttention; off in the “Illustrated self-attention” "
                  "example.", ADVANCED, WEIGHT_PAGES),
    _config_entry("normalization", Choice(_offered("normalization")),
                  "normalization: scores → weights", _choices_help("normalization"), ADVANCED),
    # Hand-entered matrices, in tables above the charts when their option is "given"
    *(Entry(name, MatrixKind(), CONFIG_PAGES if option == "embedding" else WEIGHT_PAGES,
            group=MATRIX, widget=False,
            shown_if=lambda values, option=option: values.get(option) == "given")
      for option, names in GIVEN_MATRICES.items() for name in names),
    # The Real model page's own settings
    Entry("model", Choice(tuple(MODEL_CHOICES),
                          labels={**{c.name: c.label for c in MODEL_CHOICES.values()},
                                  FOLDER: "a local folder…"},
                          also="a folder is opened from the sidebar, never from a link"),
          ONLY({MODEL_PAGE}), "Model", "\n".join(f"- **{c.label}**: {c.about}"
                                                 for c in MODEL_CHOICES.values()),
          group=PAGE_OWN, default=_page_model, always_linked=True),
    Entry("folder", Text(placeholder="/path/to/model"), ONLY({MODEL_PAGE}), "Folder",
          "A folder written by model.save_pretrained(folder) for a GPT-2, BERT, Llama, "
          "Mistral, Qwen2, Qwen3 or Gemma 3 (text) model "
          "(config.json and model.safetensors), with its tokenizer files to read text, e.g. "
          "from `python -m explorer.models download gpt2 --to models/`. It never goes into "
          "the link.", group=PAGE_OWN, default="", linked=False,
          shown_if=lambda values: values.get("model") == FOLDER),
    Entry("layer", Index(), ONLY({MODEL_PAGE}), "Layer to show", default=0,
          allowed=lambda c: range(c.n_layers) if c.n_layers else None),
    # A Llama-family model's own view values (`explorer.ui.real_model`): the explained
    # cell of its charts, the tokens to generate and the generated token shown
    Entry("decoder_cell", ChartCell(decoder_explain.CHARTS), ONLY({MODEL_PAGE}), default=None,
          widget=False),
    Entry("new_tokens", Number(low=1, high=MAX_NEW_TOKENS), ONLY({MODEL_PAGE}),
          "Tokens to generate", "Greedy, seeded: the most likely token each time; the "
          "generation also stops at the model's end-of-sequence token or after "
          f"{GENERATION_SECONDS:g} seconds.", default=DEFAULT_NEW_TOKENS),
    Entry("generated", Number(low=0, high=MAX_NEW_TOKENS - 1), ONLY({MODEL_PAGE}),
          "Generated token",
          default=0),
    # The Check your code page's own settings: the class is built as the book builds
    # chapter 3's classes, nn.Module(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
    Entry("check_class", ClassName(), ONLY({CHECK_PAGE}), "Class to check",
          "The name of the nn.Module class in your code: a Python identifier.",
          group=PAGE_OWN, default=MULTI_HEAD_ATTENTION_CLASS),
    Entry("d_out", Number("d_k"), ONLY({CHECK_PAGE}), "d_out",
          "Your class's d_out: the width of its queries, keys and values.", group=PAGE_OWN,
          default=DEFAULT_SIZES["d_out"]),
    Entry("num_heads", Number("n_heads"), ONLY({CHECK_PAGE}), "num_heads",
          "Passed when your __init__ takes num_heads; d_out must divide by it.",
          group=PAGE_OWN, default=DEFAULT_SIZES["num_heads"]),
    Entry("qkv_bias", Flag(), ONLY({CHECK_PAGE}), "qkv_bias",
          "Passed when your __init__ takes qkv_bias.", group=PAGE_OWN, default=False),
    # What the check assumes about the class (`check_module(causal=..., n_heads=...)`)
    Entry("check_causal", Choice(tuple(CAUSAL_CHOICES),
                                 labels={"auto": "read from your code", "causal": "causal",
                                         "not causal": "not causal"}),
          ONLY({CHECK_PAGE}), "Causal mask",
          "Read from your code: causal when it holds or builds a triangular mask (any name), "
          "calls scaled_dot_product_attention with is_causal=True, or has Causal in its class "
          "name. Set it to say what your class is meant to compute.", group=PAGE_OWN,
          default="auto"),
    Entry("check_n_heads", Number(low=0, high=cfg.MAX_HEADS), ONLY({CHECK_PAGE}),
          "n_heads the check assumes",
          "0: read from your code (num_heads, n_head, n_heads, num_attention_heads, heads or "
          "nhead, on the module or its config; else the head axis its forward shows). Set it "
          "when the report says the count was guessed.",
          group=PAGE_OWN, default=0),
    Entry("check_code", Text(), ONLY({CHECK_PAGE}), "Your code",
          "A Python file with your attention class (it may import torch).", group=PAGE_OWN,
          default=MULTI_HEAD_ATTENTION, linked=False),
    # What a chart page shows
    # The head and the query token are picked in the browser (chart.js follows a
    # choice at once, `explorer.ui.component.picker`), which then sets them here.
    *_MODERN_ENTRIES,
    *_FRONTIER_ENTRIES,
    Entry("head", Index(), HEAD_PAGES | {MODERN_PAGE}, "Head to show", default=0, widget=False,
          allowed=lambda c: range(c.trace.config.n_heads) if c.trace else None),
    Entry("query", Index(), CHART_PAGES | {BACKWARD_PAGE}, "Query token", default=None,
          widget=False, page_defaults={SIMPLIFIED_PAGE: lambda c: min(1, c.trace.n_tokens - 1),
                                       BACKWARD_PAGE: lambda c: c.trace.n_tokens - 1},
          allowed=lambda c: range(c.trace.n_tokens) if c.trace else None),
    Entry("cell", CellRef(), CHART_PAGES, widget=False),
    *_BACKWARD_ENTRIES,
    # The line view's switch is drawn by chart.js under the weights' chart.
    Entry("lines", Flag(), CHART_PAGES, "Show as lines",
          "Each weight as a line from its query token (left) to its key token (right): the "
          "larger the weight, the thicker and darker the line.", default=False, widget=False),
    Entry("overflow", Flag(), OVERFLOW_PAGES,
          "Why softmax subtracts the row max: watch the naive softmax overflow",
          default=lambda c: c.config.normalization == "naive_softmax"
          or not bool(np.isfinite(c.trace["attn_weights"].numpy()).all())),
    Entry("overflow_c", Steps(OVERFLOW_FACTORS), OVERFLOW_PAGES, "c: multiply X by", default=1),
    Entry("csv_step", Choice(tuple(STEPS)), TRACE_PAGES, "One matrix as CSV",
          default=lambda c: "attn_weights" if "attn_weights" in c.shown_steps
          else c.shown_steps[0], allowed=lambda c: c.shown_steps or None),
    # The Experiments page
    Entry("experiment", Choice(tuple(EXPERIMENT_LABELS), labels=EXPERIMENT_LABELS,
                               aliases={label: name for name, label in EXPERIMENT_LABELS.items()}),
          ONLY({EXPERIMENTS_PAGE}), "Experiment", default="scaling"),
    Entry("n_keys", Number(low=1, high=cfg.MAX_TOKENS), ONLY({EXPERIMENTS_PAGE, BACKWARD_PAGE}),
          "keys per query", default=_n_tokens),
    Entry("temperature", Steps(TEMPERATURES), ONLY({EXPERIMENTS_PAGE}), "temperature T",
          default=1.0),
    Entry("dim_scores", Choice(tuple(DIM_SCORES), labels=DIM_SCORES), ONLY({EXPERIMENTS_PAGE}),
          "scores", default="symmetric"),
    Entry("shuffles", Number(low=1, high=MAX_SHUFFLES), ONLY({EXPERIMENTS_PAGE}), default=1,
          widget=False),
    Entry("positions", Flag(), ONLY({EXPERIMENTS_PAGE}),
          "add sinusoidal positional encodings to X", default=False),
    *_experiment_side("a", lambda c: c.scale),
    *_experiment_side("b", lambda c: not c.scale),
]
ENTRIES: dict[str, Entry] = {e.name: e for e in _ENTRIES}
"""Every setting and view value, by name, in the order a link writes them."""
CONFIG_ENTRIES = [e for e in _ENTRIES if e.config]
MATRICES: tuple[str, ...] = tuple(e.name for e in _ENTRIES if isinstance(e.kind, MatrixKind))
MAX_LINK_MATRIX_CHARS = 2048
"""The most characters the hand-edited matrices take in a link, together."""

ACTIONS: dict[str, str] = {
    "chart-": "a step's chart (a click explains a cell)",
    "lines-chart-": "the line view of the weights",
    "split-": "the head split of Q, K or V",
    "heads-grid": "every head at a glance (a click opens a head)",
    "head-overview": "every head of a real model (a click opens it)",
    "causal-second-route": "the book's second route to causal weights",
    "overflow-demo-": "the overflow demo's charts",
    "exp-": "an experiment's charts",
    "pick-": "the row and column of a cell picked by number, and its button",
    "editor:": "a hand-entered matrix's table",
    "upload:": "a hand-entered matrix's CSV import",
    "open-": "a worked example's Open button",
    "reset-preset": "the Reset to the example button",
    "example-": "a Real model example's button",
    "standout-": "the Real model page's button that opens one of all-MiniLM-L6-v2's heads "
                 "that stand out",
    "shuffle": "the Shuffle button",
    "download-": "a download button",
    "script-popover": "the Copy popover of the PyTorch script",
    "link-box": "the Link to this view box (its code box is drawn while it is open)",
    "check-": "the Check my code button and the report's charts",
    "picker-": "a picker of the view drawn by chart.js (the query token, the head)",
    "modern-": "a chart of the Modern attention page",
    "decoder-": "a chart of a Llama-family layer on the Real model page (a click explains a cell)",
    "backward-": "a chart or a slider of the Backward pass page",
    "frontier-": "a chart of the Frontier attention page (a click explains a cell)",
}
"""Key prefixes of widgets that hold no setting: buttons, charts, tables and
uploads, each the action of an entry (a chart click sets ``cell``, a table
edit a matrix ...)."""


def entries_of(page: str, group: str | None = None) -> list[Entry]:
    """The entries of ``page`` (in declaration order), of ``group`` if given."""
    return [e for e in _ENTRIES if page in e.pages and (group is None or e.group == group)]
