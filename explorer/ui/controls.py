"""The sidebar's settings widgets. Each widget's key is the `AttentionConfig`
field it sets and also its URL query parameter (``bind="query-params"``), so
``?sentence=...&d_in=4`` reproduces a view. Limits and choices come from
`explorer.config`; nothing here restates one.

A widget is drawn with the *baseline* value as its default: the active
preset's value, or the page's default (`PAGE_DEFAULTS`). Streamlit leaves a
value equal to the widget's default out of the URL, so the address bar and
the link hold exactly what differs from that baseline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import streamlit as st

from explorer import config as cfg
from explorer.config import OPTION_HELP, AttentionConfig, ConfigError, parse_field, shown
from explorer.presets import MULTI_HEAD_PAGE

CONFIG_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(AttentionConfig)}


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Control:
    """One sidebar widget.

    ``key`` is the config field, the widget key and the URL parameter;
    ``draw(control, default, on_change)`` renders it and returns its value;
    ``to_config`` turns that value into the config field's and ``from_config``
    back; ``check(raw)`` raises `ConfigError` for a URL value the widget cannot
    show (by default, anything `parse_field` rejects).
    """

    key: str
    label: str
    help: str
    draw: Callable[["Control", Any, Callable[[], None]], Any]
    check: Callable[[str], Any] | None = None
    to_config: Callable[[Any], Any] = _same
    from_config: Callable[[Any], Any] = _same

    @property
    def default(self) -> Any:
        """The widget value of the config's default."""
        return self.from_config(CONFIG_DEFAULTS[self.key])

    def check_url_value(self, raw: str) -> Any:
        return self.check(raw) if self.check else parse_field(self.key, raw)


def widget_args(control: Control, on_change: Callable[[], None]) -> dict[str, Any]:
    """Arguments every settings widget shares: key = URL parameter, kept across pages."""
    return {"label": control.label, "key": control.key, "help": control.help,
            "bind": "query-params", "persist_state": "session", "on_change": on_change}


def _text(control: Control, default: str, on_change) -> str:
    return st.text_input(value=default, max_chars=cfg.MAX_SENTENCE_CHARS,
                         **widget_args(control, on_change))


def _dim(control: Control, default: int, on_change) -> int:
    return st.number_input(min_value=cfg.MIN_DIM, max_value=cfg.MAX_DIM, step=1, value=default,
                           **widget_args(control, on_change))


def _seed(control: Control, default: str, on_change) -> str:
    # A text box, not a number box: seeds go up to 2**63 - 1, past what a
    # browser number input holds exactly. The backend parses and checks it.
    return st.text_input(value=default, **widget_args(control, on_change))


def _vocab(control: Control, default: int, on_change) -> int:
    return st.number_input(min_value=1, max_value=cfg.MAX_VOCAB_SIZE, step=1000, value=default,
                           **widget_args(control, on_change))


def _offered(field: str) -> list[str]:
    """The choices of ``field`` the sidebar offers: those of `OPTION_HELP` that
    `AttentionConfig` accepts (weight_init "model" belongs to real-model traces)."""
    def accepted(option: str) -> bool:
        try:
            parse_field(field, option)
        except ConfigError:
            return False
        return True
    return [option for option in OPTION_HELP[field] if accepted(option)]


def _choice(control: Control, default: str, on_change) -> str:
    options = _offered(control.key)
    value = st.selectbox(options=options, index=options.index(default),
                         **widget_args(control, on_change))
    st.caption(f"`{value}`: {OPTION_HELP[control.key][value]}")
    return value


def _toggle(control: Control, default: bool, on_change) -> bool:
    return st.toggle(value=default, **widget_args(control, on_change))


def _check_toggle(key: str) -> Callable[[str], bool]:
    """A toggle's URL value: ``true`` or ``false``, what Streamlit reads."""
    def check(raw: str) -> bool:
        if str(raw).strip().lower() not in ("true", "false"):
            raise ConfigError(key, f"{key} must be true or false (got {shown(raw)})")
        return str(raw).strip().lower() == "true"
    return check


DROPOUT_CHOICES_MAX, DROPOUT_STEP = 0.95, 0.05
"""The dropout slider's range (the backend allows any p in [0, 1))."""


def _probability(control: Control, default: float, on_change) -> float:
    return st.slider(min_value=0.0, max_value=DROPOUT_CHOICES_MAX, step=DROPOUT_STEP,
                     value=default, **widget_args(control, on_change))


def _check_dropout(raw: str) -> float:
    p = parse_field("dropout", raw)
    if p > DROPOUT_CHOICES_MAX:
        raise ConfigError("dropout", f"dropout must be at most {DROPOUT_CHOICES_MAX} here "
                                     f"(got {shown(raw)})")
    return p


def _optional_seed(control: Control, default: str, on_change) -> str:
    return st.text_input(value=default, placeholder="same as seed",
                         **widget_args(control, on_change))


def _heads(control: Control, default: int, on_change) -> int:
    return st.number_input(min_value=1, max_value=cfg.MAX_HEADS, step=1, value=default,
                           **widget_args(control, on_change))


OUT_PROJ_CHOICES = {"auto": None, "on": True, "off": False}
"""out_proj widget choices -> config values (None: on when n_heads > 1)."""


def _out_proj(control: Control, default: str, on_change) -> str:
    options = list(OUT_PROJ_CHOICES)
    return st.selectbox(options=options, index=options.index(default),
                        **widget_args(control, on_change))


def _check_out_proj(raw: str) -> bool | None:
    if raw not in OUT_PROJ_CHOICES:
        raise ConfigError("out_proj", f"out_proj must be one of auto, on, off (got {shown(raw)})")
    return OUT_PROJ_CHOICES[raw]


def _check_optional_seed(raw: str) -> int | None:
    return parse_field("dropout_seed", raw) if raw.strip() else None


def _choices_help(field: str) -> str:
    return "\n".join(f"- **{name}**: {OPTION_HELP[field][name]}" for name in _offered(field))


BASIC: tuple[Control, ...] = (
    Control("sentence", "Sentence",
            "Split on whitespace; punctuation at word ends is stripped; "
            f"{cfg.MIN_TOKENS} to {cfg.MAX_TOKENS} tokens.", _text),
    Control("d_in", "d_in: embedding dim", "Width of each token's embedding vector x_i.", _dim),
    Control("d_k", "d_k: query/key dim", "Width of the queries and keys (W_query, W_key).", _dim),
    Control("d_v", "d_v: value dim", "Width of the values and context vectors (W_value).", _dim),
    Control("seed", "seed", f"Seeds a local torch.Generator; {cfg.MIN_SEED} to {cfg.MAX_SEED}. "
            "The same seed gives the book's numbers.", _seed, from_config=str),
)
"""Always visible: the sentence, the sizes and the seed."""

ADVANCED: tuple[Control, ...] = (
    Control("embedding", "embedding: where X comes from", _choices_help("embedding"), _choice),
    Control("weight_init", "weight_init: how W is drawn", _choices_help("weight_init"), _choice),
    Control("vocab_size", "vocab_size", "Rows of the nn.Embedding table (embedding = table); "
            f"50,000 in the teaching notebook. At most {cfg.MAX_VOCAB_SIZE:,}, and vocab_size × d_in at most "
            f"{cfg.MAX_TABLE_ELEMENTS:,}.", _vocab),
    Control("scale", "scale: divide the scores by √d_k",
            "As in the book's SelfAttention; off in the “Illustrated self-attention” example.", _toggle,
            check=_check_toggle("scale")),
    Control("normalization", "normalization: scores → weights", _choices_help("normalization"),
            _choice),
)
"""The recipe choices, in the sidebar's "Advanced" section."""

MULTI_HEAD: tuple[Control, ...] = (
    Control("causal", "causal: mask future tokens",
            "Each token attends only to itself and earlier tokens (GPT-style).", _toggle,
            check=_check_toggle("causal")),
    Control("n_heads", "n_heads", "Number of heads; d_k and d_v must divide by it "
            "(head_dim = d_k / n_heads).", _heads),
    Control("dropout", "dropout p on the attention weights",
            "Zero each weight with probability p and scale the rest by 1/(1−p), "
            "as nn.Dropout(p) in training.", _probability, check=_check_dropout),
    Control("dropout_seed", "dropout_seed",
            "Seeds the dropout mask's own torch.Generator; empty = the same as seed.",
            _optional_seed, check=_check_optional_seed,
            to_config=lambda raw: raw if raw.strip() else None,
            from_config=lambda seed: "" if seed is None else str(seed)),
    Control("out_proj", "out_proj: output projection",
            "nn.Linear(d_v, d_v) with bias after the heads are concatenated; "
            "auto = on when n_heads > 1.", _out_proj, check=_check_out_proj,
            to_config=OUT_PROJ_CHOICES.get,
            from_config={v: k for k, v in OUT_PROJ_CHOICES.items()}.get),
)
"""The "Causal & multi-head attention" page's own settings."""

ALL: tuple[Control, ...] = (*BASIC, *ADVANCED, *MULTI_HEAD)
BY_KEY: dict[str, Control] = {c.key: c for c in ALL}

PAGE_DEFAULTS: dict[str, dict[str, Any]] = {MULTI_HEAD_PAGE: {"causal": True, "n_heads": 2}}
"""Where a page opens differently from the config's defaults (widget values)."""


def widget_values(config: AttentionConfig) -> dict[str, Any]:
    """Every setting of ``config`` as its widget shows it."""
    return {c.key: c.from_config(getattr(config, c.key)) for c in ALL}


def baseline(page: str, preset_config: AttentionConfig | None) -> dict[str, Any]:
    """The widgets' defaults on ``page``: the preset's values when one is
    active, else the config defaults with the page's own (`PAGE_DEFAULTS`)."""
    if preset_config is not None:
        return widget_values(preset_config)
    return {**{c.key: c.default for c in ALL}, **PAGE_DEFAULTS.get(page, {})}
