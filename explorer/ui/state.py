"""Every setting and view value of the explorer, declared once, and what is
derived from that declaration.

`ENTRIES` lists them all: the worked example, the sidebar's settings (each an
`AttentionConfig` field), the hand-entered matrices, and the view values (the
query token, the head, the explained cell, the line view, the overflow demo,
the CSV's step; on the Real model page the model, the folder and the layer; on
the Experiments page the open experiment and each experiment's parameters).
Each `Entry` has a kind (its type, how a link writes and reads it, its bounds,
read from `explorer.config`), a default (per page, or computed from the page's
trace), its URL name (the entry's name) and the pages it belongs to.
Everything else follows from it:

- the widgets (`explorer.ui.widgets.draw`) take their key, label, help,
  bounds and choices from an entry;
- a link is read once, on a session's first run, every parameter in one pass
  (`read_link`); values whose bounds need the trace (a query token below the
  token count, a head below n_heads, a cell inside its step) are bounded in one
  place, `resolve`, which also says when a link's value had to be dropped;
- the link is written from the state (`link_params`, `publish`): the worked
  example, then every value of the page that differs from its baseline, the
  example's value or else the page's default;
- what carries over between pages (`begin`): every entry keeps its value for
  the whole session, and a page reads only its own entries (`Entry.pages`);
- the downloads read the page's `View`: the CSV's head is the head shown.

`INTERNAL` declares the session keys that are not entries (the messages about
a link, a requested page switch ...), so that every key a session holds is
listed in this module, and `ACTIONS` the key prefixes of widgets that hold no
value (buttons, charts, tables, uploads); a test compares a session's widget
keys with both.

Why `begin` re-assigns the values of the widgets at the start of every run
(Streamlit 1.67, seen in AppTest and in Chromium): with a ``pages/`` folder a
widget's element id includes its page script's hash, so the shared sidebar's
widgets remount under new ids on every page switch, and
``persist_state="session"`` restores a remounted widget's value one run late:
the first run on the new page shows the defaults (a link's or a worked
example's values vanish on the first page switch). Re-assigning every declared
value before any widget is drawn is Streamlit's documented way to keep values
across pages. No widget gets ``value=`` (its value is in the session before it
is drawn), so Streamlit has nothing to warn about, and none is bound to the URL
(``bind=``): the link is written here, from the same values, in one place.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import streamlit as st

from explorer import config as cfg
from explorer import literal
from explorer.config import (GIVEN_MATRICES, OPTION_HELP, AttentionConfig, ConfigError,
                             parse_field, shown)
from explorer.models.catalogue import DEFAULT_MODEL, MODEL_CHOICES
from explorer.presets import (EXPERIMENTS_PAGE, JOURNEY_SENTENCE, MULTI_HEAD_PAGE, PRESETS,
                              SELF_ATTENTION_PAGE, SIMPLIFIED_PAGE, SIMPLIFIED, Preset)
from explorer.steps import STEPS
from explorer.listings import MULTI_HEAD_ATTENTION, MULTI_HEAD_ATTENTION_CLASS
from explorer import modern, modern_explain
from explorer.ui.navigation import CHECK_PAGE, HOME_PAGE, MODEL_PAGE, MODERN_PAGE

# ---------------------------------------------------------------------------
# Kinds: a value's type, its text in a link, and its bounds
# ---------------------------------------------------------------------------


class Kind:
    """How an entry's value is read from a link (`parse`, raising `ConfigError`
    with a message that says what is allowed) and written into one (`text`)."""

    def parse(self, name: str, raw: str) -> Any:
        raise NotImplementedError

    def text(self, value: Any) -> str:
        return str(value)


def _whole(name: str, raw: str, low: int, high: int | None = None) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(name, f"{name} must be a whole number (got {shown(raw)})") from None
    if value < low or (high is not None and value > high):
        allowed = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(name, f"{name} must be {allowed} (got {value})")
    return value


@dataclass(frozen=True)
class Number(Kind):
    """A whole number in ``[low, high]``; ``field`` names the config field whose
    bounds and messages it uses (then ``low`` and ``high`` come from there)."""

    field: str | None = None
    low: int = 0
    high: int | None = None
    step: int = 1

    @property
    def bounds(self) -> tuple[int, int | None]:
        return cfg.int_bounds(self.field) if self.field else (self.low, self.high)

    def parse(self, name: str, raw: str) -> int:
        if self.field:
            return parse_field(self.field, raw)
        return _whole(name, raw, self.low, self.high)


@dataclass(frozen=True)
class Text(Kind):
    """Text as typed. ``field``: a config field whose rules a link's text must
    meet (the seed is a whole number, the sentence at most 20,000 characters);
    ``optional``: the empty text is allowed too (no dropout seed)."""

    field: str | None = None
    optional: bool = False
    max_chars: int | None = None
    placeholder: str | None = None

    def parse(self, name: str, raw: str) -> str:
        if self.field and not (self.optional and not raw.strip()):
            parse_field(self.field, raw)
        return raw


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``options`` (texts), the values a link may give. ``labels``
    names them for people; ``aliases`` are older spellings a link may still
    use; ``also`` says what else the widget offers that no link gives (a
    local folder)."""

    options: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    also: str = ""

    def label(self, option: str) -> str:
        return self.labels.get(option, option)

    def parse(self, name: str, raw: str) -> str:
        value = self.aliases.get(raw, raw)
        if value not in self.options:
            allowed = ", ".join(o for o in self.options if o) or "none"
            also = f"; {self.also}" if self.also else ""
            raise ConfigError(name, f"{name} must be one of {allowed}{also} (got {shown(raw)})")
        return value


@dataclass(frozen=True)
class Flag(Kind):
    """On or off; ``true`` or ``false`` in a link."""

    def parse(self, name: str, raw: str) -> bool:
        word = str(raw).strip().lower()
        if word not in ("true", "false"):
            raise ConfigError(name, f"{name} must be true or false (got {shown(raw)})")
        return word == "true"

    def text(self, value: Any) -> str:
        return "true" if value else "false"


@dataclass(frozen=True)
class Steps(Kind):
    """One of a few numbers (a slider's stops)."""

    options: tuple[float, ...]

    def parse(self, name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = None
        found = [o for o in self.options if value is not None and o == value]
        if not found:
            allowed = ", ".join(f"{o:g}" for o in self.options)
            raise ConfigError(name, f"{name} must be one of {allowed} (got {shown(raw)})")
        return found[0]

    def text(self, value: Any) -> str:
        return f"{value:g}"


@dataclass(frozen=True)
class Fraction(Kind):
    """A number in ``[0, high]`` in steps of ``step``, checked as the config
    field ``field`` (the dropout slider offers less than the backend allows)."""

    field: str
    high: float
    step: float

    def parse(self, name: str, raw: str) -> float:
        value = parse_field(self.field, raw)
        if value > self.high:
            raise ConfigError(name, f"{name} must be at most {self.high:g} here (got {shown(raw)})")
        return value

    def text(self, value: Any) -> str:
        return f"{value:g}"


@dataclass(frozen=True)
class Index(Kind):
    """A 0-based position (a token, a head, a layer), whose upper bound comes
    from the page's trace or model (`Entry.allowed`, checked by `resolve`)."""

    def parse(self, name: str, raw: str) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ConfigError(name, f"{name} must be a whole number, 0-based "
                                    f"(got {shown(raw)})") from None
        if value < 0:
            raise ConfigError(name, f"{name} must be at least 0 (got {value})")
        return value


@dataclass(frozen=True)
class CellRef(Kind):
    """The explained cell: ``(step, row, col, head)``, written ``step:row,col``
    (its head is the link's ``head``); bounded by `resolve`."""

    def parse(self, name: str, raw: str) -> tuple[str, int, int, int]:
        step, _, where = raw.partition(":")
        row, _, col = where.partition(",")
        if step not in STEPS:
            raise ConfigError(name, f"{name} must name a step such as attn_scores:1,0 "
                                    f"(got {shown(raw)})")
        return step, Index().parse(name, row), Index().parse(name, col), 0

    def text(self, value: Any) -> str:
        return f"{value[0]}:{value[1]},{value[2]}"


@dataclass(frozen=True)
class Pair(Kind):
    """Two 0-based positions, a cell's row and column, written ``row,col``
    (its bounds are checked by the page that draws the cell)."""

    def parse(self, name: str, raw: str) -> tuple[int, int]:
        row, comma, col = str(raw).partition(",")
        if not comma:
            raise ConfigError(name, f"{name} must be a row and a column such as 3,1 "
                                    f"(got {shown(raw)})")
        return Index().parse(name, row), Index().parse(name, col)

    def text(self, value: Any) -> str:
        return f"{value[0]},{value[1]}"


@dataclass(frozen=True)
class ChartCell(Kind):
    """A clicked cell of one of ``charts``, ``(chart, row, col)`` as the chart
    numbers it, written ``chart:row,col`` (bounded by the page that draws it)."""

    charts: tuple[str, ...] = ()

    def parse(self, name: str, raw: str) -> tuple[str, int, int]:
        chart, colon, where = str(raw).partition(":")
        if not colon or chart not in self.charts:
            raise ConfigError(name, f"{name} must name a chart and a cell such as "
                                    f"{self.charts[0]}:1,0; the charts are "
                                    f"{', '.join(self.charts)} (got {shown(raw)})")
        return (chart, *Pair().parse(name, where))

    def text(self, value: Any) -> str:
        return f"{value[0]}:{value[1]},{value[2]}"


@dataclass(frozen=True)
class MatrixKind(Kind):
    """A hand-entered matrix, held as a float array (NaN: an empty cell);
    written ``0.43,0.15;0.55,0.87``: rows split by ``;``, cells by ``,``,
    each number the shortest text that reads back as the same float32."""

    def parse(self, name: str, raw: str) -> np.ndarray:
        rows = []
        for i, row in enumerate(raw.split(";")):
            cells = []
            for j, cell in enumerate(row.split(",")):
                try:
                    cells.append(float(cell))
                except ValueError:
                    raise ConfigError(name, f"{name}: row {i}, column {j} of the link is not a "
                                            f"number (got {shown(cell)})") from None
            rows.append(cells)
        if len({len(r) for r in rows}) > 1:
            raise ConfigError(name, f"{name}: the link's rows have different lengths")
        return np.array(rows, dtype=np.float64)

    def text(self, value: Any) -> str:
        rows = np.asarray(value, dtype=np.float32)
        return ";".join(",".join(literal.float32_text(v) for v in row) for row in rows)


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------
EXAMPLE, PAGE_OWN, BASIC, ADVANCED, MATRIX, VIEW = ("example", "page", "basic", "advanced",
                                                    "matrix", "view")
"""Where an entry is drawn: the worked example's picker and the page's own
settings at the top of the sidebar, the basic and the advanced settings, a
table above the charts, or on the page itself (a view value)."""


def _same(value: Any) -> Any:
    return value


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


CONFIG_PAGES = frozenset({HOME_PAGE, SIMPLIFIED_PAGE, SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE,
                          EXPERIMENTS_PAGE})
"""The pages drawn from an `AttentionConfig`."""
WEIGHT_PAGES = CONFIG_PAGES - {SIMPLIFIED_PAGE}
"""The pages with trainable weights (the Simplified page fixes Q = K = V = X)."""
CHART_PAGES = frozenset({SIMPLIFIED_PAGE, SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE, MODEL_PAGE})
"""The pages that walk the steps' charts (a query to highlight, a cell to explain)."""
TRACE_PAGES = CONFIG_PAGES | {MODEL_PAGE}
"""The pages with downloads (all of them)."""
HEAD_PAGES = frozenset({MULTI_HEAD_PAGE, MODEL_PAGE})
OVERFLOW_PAGES = frozenset({SIMPLIFIED_PAGE, SELF_ATTENTION_PAGE})
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
    # The Modern attention page's own settings (`explorer.modern.ModernConfig`)
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
                  ONLY({MULTI_HEAD_PAGE}), page_defaults={MULTI_HEAD_PAGE: True}),
    _config_entry("n_heads", Number("n_heads"), "n_heads",
                  "Number of heads; d_k and d_v must divide by it (head_dim = d_k / n_heads).",
                  PAGE_OWN, ONLY({MULTI_HEAD_PAGE}), page_defaults={MULTI_HEAD_PAGE: 2}),
    _config_entry("dropout", Fraction("dropout", DROPOUT_MAX, DROPOUT_STEP),
                  "dropout p on the attention weights",
                  "Zero each weight with probability p and scale the rest by 1/(1−p), as "
                  "nn.Dropout(p) in training.", PAGE_OWN, ONLY({MULTI_HEAD_PAGE})),
    _config_entry("dropout_seed", Text(field="dropout_seed", optional=True,
                                       placeholder="same as seed"), "dropout_seed",
                  "Seeds the dropout mask's own torch.Generator; empty = the same as seed.",
                  PAGE_OWN, ONLY({MULTI_HEAD_PAGE}),
                  to_config=lambda raw: raw if raw.strip() else None,
                  from_config=lambda seed: "" if seed is None else str(seed)),
    _config_entry("out_proj", Choice(tuple(OUT_PROJ_CHOICES)), "out_proj: output projection",
                  "nn.Linear(d_v, d_v) with bias after the heads are concatenated; "
                  "auto = on when n_heads > 1.", PAGE_OWN, ONLY({MULTI_HEAD_PAGE}),
                  to_config=OUT_PROJ_CHOICES.get,
                  from_config={v: k for k, v in OUT_PROJ_CHOICES.items()}.get),
    # The shared settings
    _config_entry("sentence", Text(field="sentence", max_chars=cfg.MAX_SENTENCE_CHARS),
                  "Sentence", "Split on whitespace; punctuation at word ends is stripped; "
                  f"{cfg.MIN_TOKENS} to {cfg.MAX_TOKENS} tokens.", BASIC,
                  CONFIG_PAGES | {MODEL_PAGE, CHECK_PAGE, MODERN_PAGE},
                  page_defaults={CHECK_PAGE: JOURNEY_SENTENCE}),
    _config_entry("d_in", Number("d_in"), "d_in: embedding dim",
                  "Width of each token's embedding vector x_i.", BASIC,
                  CONFIG_PAGES | {CHECK_PAGE, MODERN_PAGE}),
    _config_entry("d_k", Number("d_k"), "d_k: query/key dim",
                  "Width of the queries and keys (W_query, W_key).", BASIC, WEIGHT_PAGES),
    _config_entry("d_v", Number("d_v"), "d_v: value dim",
                  "Width of the values and context vectors (W_value).", BASIC, WEIGHT_PAGES),
    # A text box, not a number box: seeds go up to 2**63 - 1, past what a browser
    # number input holds exactly. The backend parses and checks it.
    _config_entry("seed", Text(field="seed"), "seed",
                  f"Seeds a local torch.Generator; {cfg.MIN_SEED} to {cfg.MAX_SEED}. The same "
                  "seed gives the book's numbers.", BASIC, CONFIG_PAGES | {CHECK_PAGE, MODERN_PAGE},
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
          group=PAGE_OWN, default=DEFAULT_MODEL, always_linked=True),
    Entry("folder", Text(placeholder="/path/to/model"), ONLY({MODEL_PAGE}), "Folder",
          "A folder written by model.save_pretrained(folder) for a GPT-2 or BERT model "
          "(config.json and model.safetensors), with its tokenizer files to read text, e.g. "
          "from `python -m explorer.models download gpt2 --to models/`. It never goes into "
          "the link.", group=PAGE_OWN, default="", linked=False,
          shown_if=lambda values: values.get("model") == FOLDER),
    Entry("layer", Index(), ONLY({MODEL_PAGE}), "Layer to show", default=0,
          allowed=lambda c: range(c.n_layers) if c.n_layers else None),
    # The Check your code page's own settings: the class is built as the book builds
    # chapter 3's classes, nn.Module(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
    Entry("check_class", Text(), ONLY({CHECK_PAGE}), "Class to check",
          "The name of the nn.Module class in your code.", group=PAGE_OWN,
          default=MULTI_HEAD_ATTENTION_CLASS),
    Entry("d_out", Number("d_k"), ONLY({CHECK_PAGE}), "d_out",
          "Your class's d_out: the width of its queries, keys and values.", group=PAGE_OWN,
          default=4),
    Entry("num_heads", Number("n_heads"), ONLY({CHECK_PAGE}), "num_heads",
          "Passed when your __init__ takes num_heads; d_out must divide by it.",
          group=PAGE_OWN, default=2),
    Entry("qkv_bias", Flag(), ONLY({CHECK_PAGE}), "qkv_bias",
          "Passed when your __init__ takes qkv_bias.", group=PAGE_OWN, default=False),
    Entry("check_code", Text(), ONLY({CHECK_PAGE}), "Your code",
          "A Python file with your attention class (it may import torch).", group=PAGE_OWN,
          default=MULTI_HEAD_ATTENTION, linked=False),
    # What a chart page shows
    # The head and the query token are picked in the browser (chart.js follows a
    # choice at once, `explorer.ui.chart.picker`), which then sets them here.
    *_MODERN_ENTRIES,
    Entry("head", Index(), HEAD_PAGES | {MODERN_PAGE}, "Head to show", default=0, widget=False,
          allowed=lambda c: range(c.trace.config.n_heads) if c.trace else None),
    Entry("query", Index(), CHART_PAGES, "Query token", default=None, widget=False,
          page_defaults={SIMPLIFIED_PAGE: lambda c: min(1, c.trace.n_tokens - 1)},
          allowed=lambda c: range(c.trace.n_tokens) if c.trace else None),
    Entry("cell", CellRef(), CHART_PAGES, widget=False),
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
    Entry("n_keys", Number(low=1, high=cfg.MAX_TOKENS), ONLY({EXPERIMENTS_PAGE}),
          "keys per query", default=_n_tokens),
    Entry("temperature", Steps(TEMPERATURES), ONLY({EXPERIMENTS_PAGE}), "temperature T",
          default=1.0),
    Entry("dim_scores", Choice(tuple(DIM_SCORES), labels=DIM_SCORES), ONLY({EXPERIMENTS_PAGE}),
          "scores", default="symmetric"),
    Entry("shuffles", Number(low=1), ONLY({EXPERIMENTS_PAGE}), default=1, widget=False),
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

LINK_READ, LINK_CHECKS, PROBLEMS = "_link_read", "_link_checks", "_problems"
SWITCH_TO, PAGE_FOLLOWS = "_switch_to", "_page_follows"
SHOWN_CONFIG, EDITOR_VERSION, IMPORT_ERROR = "_shown_config", "_editor_version", "_import_error"
CHART_SENT, MODEL_EXAMPLE_FOUND = "_chart_sent", "_model_example_found"
INTERNAL: dict[str, str] = {
    LINK_READ: "the session's link has been read (its first run)",
    LINK_CHECKS: "names of link values whose bounds `resolve` has yet to check",
    PROBLEMS: "messages about a link's bad values, by parameter",
    SWITCH_TO: "a page a callback asked to open (a worked example's)",
    SHOWN_CONFIG: "the config last drawn: where hand-entered tables start",
    EDITOR_VERSION: "bumped when a table's numbers are replaced (a new editor)",
    IMPORT_ERROR: "a CSV import's message, per matrix (`_import_error:<name>`)",
    CHART_SENT: "chart key -> hashes of the matrices its page holds",
    MODEL_EXAMPLE_FOUND: "the last measured example of the Real model page",
    PAGE_FOLLOWS: "a chart reran alone for a click; the whole page is to follow",
}
"""Session keys that are not entries, with what they hold."""

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
    "shuffle": "the Shuffle button",
    "download-": "a download button",
    "script-popover": "the Copy popover of the PyTorch script",
    "check-": "the Check my code button and the report's charts",
    "picker-": "a picker of the view drawn by chart.js (the query token, the head)",
    "modern-": "a chart of the Modern attention page",
}
"""Key prefixes of widgets that hold no setting: buttons, charts, tables and
uploads, each the action of an entry (a chart click sets ``cell``, a table
edit a matrix ...)."""


def entries_of(page: str, group: str | None = None) -> list[Entry]:
    """The entries of ``page`` (in declaration order), of ``group`` if given."""
    return [e for e in _ENTRIES if page in e.pages and (group is None or e.group == group)]


# ---------------------------------------------------------------------------
# The session: values, messages, carrying them across pages
# ---------------------------------------------------------------------------
def value(name: str, default: Any = None) -> Any:
    """Entry ``name``'s value in this session, or ``default``."""
    return st.session_state.get(name, default)


def put(name: str, new: Any) -> None:
    """Set entry ``name`` (from a callback, a link or before its widget is drawn)."""
    st.session_state[name] = new


def problems() -> dict[str, str]:
    """Messages about the link's bad values, by parameter; they stay until the
    visitor changes a setting (`changed`)."""
    return st.session_state.setdefault(PROBLEMS, {})


def note(name: str, raw: Any, error: Exception | str) -> None:
    """Record that the link's ``name`` was ignored, and why."""
    problems()[name] = f"Ignored the link's {shown(name)[1:-1]}={shown(raw)}: {error}"


def changed(name: str | None = None) -> None:
    """Every widget's ``on_change``: the visitor changed something, so the
    messages about the link no longer apply."""
    st.session_state.pop(PROBLEMS, None)


def page_follows() -> None:
    """From a chart's callback: the chart reruns alone first (it is a fragment,
    `explorer.ui.render.step_chart`), so that the clicked cell's explanation
    shows at once; then the whole page reruns (`follow_page`) for what the
    click changed elsewhere: the link, another chart's explanation, a table of
    the query token."""
    st.session_state[PAGE_FOLLOWS] = True


FOLLOW_PAUSE_SECONDS = 0.05
"""How long a chart's own rerun lets the browser draw the explanation before
the whole page reruns. The page's messages (145 on the multi-head page) arrive
in a burst that keeps React from drawing: with no pause the explanation came
with the page's (0.26-0.67 s after the click, Chromium, 2 cores); with 0.05 s
at 0.18-0.32 s, and the page's run ended 0.1-0.15 s later than before."""


def follow_page() -> None:
    """End of a chart's own rerun: rerun the whole page if a click asked
    for it (`page_follows`), after `FOLLOW_PAUSE_SECONDS`. A whole run clears
    the request (`begin`)."""
    if st.session_state.pop(PAGE_FOLLOWS, False):
        time.sleep(FOLLOW_PAUSE_SECONDS)
        st.rerun()


def request_switch(page: str) -> None:
    """Ask for ``page`` to be opened (from a callback, where `st.switch_page`
    is not allowed); `begin` opens it."""
    st.session_state[SWITCH_TO] = page


def begin(page: str) -> None:
    """Every page's first call. Carries every widget's value over (see the
    module docstring), opens a page a callback asked for, and on a session's
    first run reads its link (`read_link`)."""
    from explorer.ui.navigation import PAGES

    st.session_state.pop(PAGE_FOLLOWS, None)  # this run is the whole page
    for entry in _ENTRIES:
        if entry.widget and entry.name in st.session_state:
            st.session_state[entry.name] = st.session_state[entry.name]
    target = st.session_state.pop(SWITCH_TO, None)
    if target is not None and target != page:
        st.switch_page(PAGES[target][0])
    read_link(page)


# ---------------------------------------------------------------------------
# Reading a link
# ---------------------------------------------------------------------------
def read_link(page: str) -> None:
    """On a session's first run, read every URL parameter in one pass.

    ``preset`` first (`apply_preset`), then every other parameter: a declared
    entry's value is parsed by its kind and stored; a bad one is noted
    (`problems`) and dropped, and so is an unknown name, a parameter given
    twice, and one that never goes into a link (a folder). Values whose bounds
    depend on the trace are marked for `resolve`, which checks them once the
    trace is known. The URL is then rewritten from the state (`publish`).
    """
    if st.session_state.get(LINK_READ):
        return
    st.session_state[LINK_READ] = True
    params = {key: st.query_params.get_all(key) for key in st.query_params}
    checks: set[str] = set()
    if "preset" in params:
        raw = params.pop("preset")[-1]
        try:
            apply_preset(PRESETS.get(ENTRIES["preset"].kind.parse("preset", raw)) or None)
        except ConfigError as error:
            note("preset", raw, error)
    head = None
    for name, raws in params.items():
        entry = ENTRIES.get(name)
        raw = raws[-1]
        try:
            if entry is None or not entry.linked:
                raise ConfigError(name, "it is not a setting of the explorer" if entry is None
                                  else "it is never part of a link")
            if len(raws) > 1:
                raise ConfigError(name, f"it is given {len(raws)} times")
            parsed = entry.kind.parse(name, raw)
        except ConfigError as error:
            if entry is None:
                problems()[name] = f"Ignored the link's unknown setting {shown(name)}."
            else:
                note(name, raw, error)
            continue
        if name == "head":
            head = parsed
        if isinstance(entry.kind, MatrixKind):
            set_matrix(name, parsed)
        else:
            put(name, parsed)
        if entry.allowed is not None or isinstance(entry.kind, CellRef):
            checks.add(name)
    if "cell" in checks and head is not None:
        put("cell", (*value("cell")[:3], head))
    st.session_state[LINK_CHECKS] = checks


def as_array(matrix: Any) -> np.ndarray:
    """A matrix (rows of numbers, None for an empty cell) as a 2-D float array, NaN empty."""
    array = np.array([[np.nan if cell is None else cell for cell in row] for row in matrix],
                     dtype=np.float64) if not isinstance(matrix, np.ndarray) else matrix
    return array.reshape(len(array), -1) if array.size else np.zeros((0, 0))


def set_matrix(name: str, matrix: Any) -> None:
    """Replace a matrix (a worked example loading, a link, an import) and start
    its table afresh."""
    put(name, as_array(matrix))
    st.session_state[EDITOR_VERSION] = st.session_state.get(EDITOR_VERSION, 0) + 1


def apply_preset(preset: Preset | None) -> None:
    """Set every setting (and the hand-entered matrices and the query token) to
    ``preset``'s; None forgets the worked example and keeps the settings."""
    put("preset", preset.slug if preset else "")
    if preset is None:
        return
    for entry in CONFIG_ENTRIES:
        put(entry.name, entry.from_config(getattr(preset.config, entry.name)))
    for name in MATRICES:
        if getattr(preset.config, name) is not None:
            set_matrix(name, getattr(preset.config, name))
    put("query", preset.query)


def active_preset() -> Preset | None:
    """The worked example the visitor picked (by link, menu or gallery), if any."""
    return PRESETS.get(value("preset") or "")


# ---------------------------------------------------------------------------
# Settings and view values of a page
# ---------------------------------------------------------------------------
def baseline(page: str, preset: Preset | None) -> dict[str, Any]:
    """Every setting of ``page`` as it is when the visitor changed nothing:
    the worked example's when one is active, else the page's defaults."""
    out = {}
    for entry in entries_of(page):
        if entry.config and preset is not None:
            out[entry.name] = entry.from_config(getattr(preset.config, entry.name))
        elif entry.group != VIEW and not isinstance(entry.kind, MatrixKind):
            out[entry.name] = entry.default_on(page)
    return out


def settings(page: str, preset: Preset | None) -> dict[str, Any]:
    """The values of ``page``'s settings (not its view values), the baseline
    where the session holds none; put into the session for the widgets."""
    out = {}
    for name, base in baseline(page, preset).items():
        if name not in st.session_state:
            put(name, base)
        out[name] = value(name)
    return out


def config_fields(page: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The `AttentionConfig` fields of a page's setting ``values``; the
    Simplified page fixes `SIMPLIFIED` and d_k = d_v = d_in (Q = K = V = X)."""
    fields = {e.name: e.to_config(values[e.name]) for e in CONFIG_ENTRIES if e.name in values}
    if page == SIMPLIFIED_PAGE:
        fields.update(SIMPLIFIED, d_k=values["d_in"], d_v=values["d_in"])
    return fields


def _in_bounds(entry: Entry, found: Any, context: Context, head: int) -> None:
    """Raise `ConfigError` unless ``found`` is one of the values ``entry``
    allows in ``context``; a cell must lie inside its step (of the head shown,
    ``head``, for a step with a head axis)."""
    if isinstance(entry.kind, CellRef):
        step, row, col, cell_head = found
        trace = context.trace
        if step not in trace:
            raise ConfigError(entry.name, f"this page has no step {step}")
        if trace.per_head(step) and cell_head != head:
            raise ConfigError(entry.name, f"the cell is head {cell_head}'s, not the head shown")
        shape = trace.head(step, cell_head).shape
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape
        _whole(entry.name, str(row), 0, rows - 1)
        _whole(entry.name, str(col), 0, cols - 1)
        return
    allowed = entry.allowed(context) if entry.allowed else None
    if allowed is None or found in allowed:
        return
    if isinstance(allowed, range):
        raise ConfigError(entry.name, f"{entry.name} must be between 0 and {len(allowed) - 1} "
                                      f"(got {found})")
    raise ConfigError(entry.name, f"{entry.name} must be one of {', '.join(map(str, allowed))} "
                                  f"here (got {shown(found)})")


def resolve(page: str, context: Context, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The view values of ``page`` (those in ``names``, else all), each within
    what ``context`` allows: a value that no longer fits (a shorter sentence,
    fewer heads, another head shown than a cell's) falls back to the page's
    default, and a link's value that does not fit is noted. Put into the
    session, for the widgets."""
    checks = st.session_state.get(LINK_CHECKS, set())
    out: dict[str, Any] = {}
    for entry in entries_of(page, VIEW):
        if names is not None and entry.name not in names:
            continue
        found = value(entry.name)
        try:
            if found is not None:
                _in_bounds(entry, found, context, out.get("head", value("head") or 0))
        except ConfigError as error:
            if entry.name in checks:
                note(entry.name, entry.kind.text(found), error)
            found = None
        if found is None:
            found = entry.default_on(page, context)
        checks.discard(entry.name)
        if entry.name not in st.session_state or value(entry.name) != found:
            put(entry.name, found)
        out[entry.name] = found
    return out


# ---------------------------------------------------------------------------
# Writing the link
# ---------------------------------------------------------------------------
def link_params(page: str, values: Mapping[str, Any], base: Mapping[str, Any],
                preset: Preset | None, context: Context | None = None,
                matrix_starts: Mapping[str, Any] | None = None) -> tuple[dict[str, str], str]:
    """The link's parameters for ``page``: the worked example, then every
    setting that differs from ``base`` (`baseline`), every view value that
    differs from its default, and the hand-edited matrices when they differ from
    where a link's tables start (``matrix_starts``) and fit in
    `MAX_LINK_MATRIX_CHARS`. Returns them and a note for the link box (or "")."""
    params: dict[str, str] = {"preset": preset.slug} if preset else {}
    matrices: dict[str, str] = {}
    for entry in entries_of(page):
        if not entry.linked or entry.name not in values or entry.name == "preset":
            continue
        found = values[entry.name]
        if isinstance(entry.kind, MatrixKind):
            start = (matrix_starts or {}).get(entry.name)
            if found is not None and not _same_numbers(found, start):
                try:
                    matrices[entry.name] = entry.kind.text(found)
                except (TypeError, ValueError):  # an empty cell: no matrix to link yet
                    pass
            continue
        if found is None or (isinstance(entry.kind, Choice) and found not in entry.kind.options):
            continue  # nothing, or what no link gives (a local folder)
        default = base[entry.name] if entry.name in base else entry.default_on(page, context)
        text = entry.kind.text(found)
        if entry.always_linked or default is None or text != entry.kind.text(default):
            params[entry.name] = text
    length = sum(len(text) for text in matrices.values())
    note_text = ""
    if length <= MAX_LINK_MATRIX_CHARS:
        params.update(matrices)
    else:
        note_text = (f"The link leaves out your hand-edited matrices ({length:,} characters; "
                     f"a link carries up to {MAX_LINK_MATRIX_CHARS:,}). Download them as JSON "
                     "instead.")
    return params, note_text


def _same_numbers(a: Any, b: Any) -> bool:
    """Whether two matrices hold the same float32 numbers (None never matches)."""
    if a is None or b is None:
        return False
    try:
        return np.array_equal(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
    except (TypeError, ValueError):  # an empty or unfinished cell
        return False


def url(page_url: str, params: Mapping[str, str]) -> str:
    """``page_url`` with ``params`` as its query, keeping ``,;:`` readable."""
    query = urllib.parse.urlencode(dict(params), safe=",;:", quote_via=urllib.parse.quote)
    return f"{page_url}?{query}" if query else page_url


def publish(params: Mapping[str, str], note_text: str = "") -> str:
    """Write ``params`` into the address bar (when they changed) and draw the
    sidebar's "Link to this view": the page's URL with them, collapsed, in a
    code box with Streamlit's copy button, and ``note_text`` under it. Returns
    the link (the downloads write it into the script and the report)."""
    if st.query_params.to_dict() != dict(params):
        st.query_params.from_dict(params)
    link = url(st.context.url or "", params)
    with st.expander("Link to this view", icon=":material/link:"):
        st.code(link, language=None, wrap_lines=True,
                height=min(300, 40 + 22 * (len(link) // 40)))
        if note_text:
            st.caption(note_text)
    return link


def show_problems() -> None:
    """The messages about the link's bad values, each as an error."""
    for message in problems().values():
        st.error(literal.markdown(message))


# ---------------------------------------------------------------------------
# What a page draws
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """What a page draws: the ``config`` and its ``trace``, the active worked
    example, and ``values``: every entry of the page, settings and view values
    alike, resolved (`view["temperature"]`). ``before_heads_only``: n_heads
    was rejected, so the trace is the one-head one and only the steps before
    the head split are the visitor's. ``link``: the link to this view."""

    page: str
    config: Any
    trace: Any
    values: Mapping[str, Any]
    preset: Preset | None = None
    before_heads_only: bool = False
    link: str = ""

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def query(self) -> int | None:
        """The highlighted query token (None: none)."""
        return self.values.get("query")

    @property
    def head(self) -> int:
        """The head shown (0 on a page without heads)."""
        return self.values.get("head") or 0

    @property
    def cell(self) -> tuple[str, int, int, int] | None:
        """The explained cell, ``(step, row, col, head)``."""
        return self.values.get("cell")

    def without_trace(self) -> View:
        """This view without its trace: what a chart keeps for its own reruns
        (`explorer.ui.render.step_chart`), so that no session holds a trace
        outside the byte-bounded cache."""
        return replace(self, trace=None)

    def in_browser(self) -> dict[str, Any]:
        """The view as chart.js follows it (`explorer.charts.Chart.view`): the
        query token, the explained cell, the head shown and the line view."""
        return {"query": self.query, "cell": list(self.cell) if self.cell else None,
                "head": self.head, "lines": bool(self.values.get("lines"))}
