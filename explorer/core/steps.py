"""What each step of a `Trace` is: its symbol, name, formula, axes and colours.

One entry per step name, in pipeline order. The pages walk this list to draw
their heatmaps, so adding a step to the pipeline and here adds its chart.
Pure Python: no torch, plotly or streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from explorer.core.config import OPTION_HELP, TraceConfig

# Axis kinds: how a heatmap axis is labelled.
TOKENS = "tokens"  # one label per token
DIMS = "dims"      # 0, 1, 2, ... (matrix columns / feature dims)

# Colour kinds (the figure module maps them to scales).
SIGNED = "signed"    # diverging scale centred at 0
WEIGHTS = "weights"  # fixed [0, 1]
MASK = "mask"        # booleans

_INPUT_STEPS = ("token_ids", "embeddings")
"""The steps whose caption says what X is for a real model (``config.input_note``)."""


@dataclass(frozen=True)
class Axis:
    title: str
    labels: str  # TOKENS or DIMS


TOKEN_ROWS = Axis("token", TOKENS)
QUERY_ROWS = Axis("query (row)", TOKENS)
KEY_COLS = Axis("key (column)", TOKENS)
DIM_COLS = Axis("dimension", DIMS)


@dataclass(frozen=True)
class Step:
    """Metadata of one trace step.

    name: the trace key, e.g. ``"queries"``. symbol / expr: how the title writes
    it, e.g. ``"Q"`` and ``"X·W_query"``. label: the plain name ("Queries").
    rows / cols: the axes. colour: SIGNED, WEIGHTS or MASK. latex(config): the
    formula shown above the chart. per_head: has a leading head axis when
    n_heads > 1. projection: exists only because of trainable weights (hidden on
    the "Simplified attention" page). explain: one sentence for learners.
    shown(config): whether a page draws it (e.g. no "scaled scores" chart when
    scaling is off, since they equal the scores). head_columns: its columns fall
    into one block per head (W_query, W_key, W_value, their biases, the context).
    cell_text: for a mask, the text printed for False and for True.
    remark(trace, head): for a step whose ``explain`` states a property of its
    numbers ("each row sums to 1"), a sentence about the numbers of this trace
    (and head): what they are, or where the property does not hold; "" for
    nothing to add. `chart_caption` joins the two.
    """

    name: str
    label: str
    symbol: str
    expr: Callable[[TraceConfig], str]
    latex: Callable[[TraceConfig], str]
    rows: Axis
    cols: Axis
    colour: str = SIGNED
    per_head: bool = False
    projection: bool = False
    heatmap: bool = True
    explain: str = ""
    shown: Callable[[TraceConfig], bool] = lambda config: True
    head_columns: bool = False
    cell_text: tuple[str, str] | None = None
    remark: Callable[[Any, int], str] | None = None

    def caption(self, config: TraceConfig) -> str:
        """The explanation under the chart, with the weight recipe filled in; for
        a real model's X, what X is there (``config.input_note``)."""
        text = self.explain.format(recipe=OPTION_HELP["weight_init"][config.weight_init])
        note = getattr(config, "input_note", "")
        return f"{text} {note}".strip() if note and self.name in _INPUT_STEPS else text

    def title(self, config: TraceConfig, shape: tuple[int, ...]) -> str:
        """Chart title: name, symbol and formula, and shape, e.g.
        ``"Queries: Q = X·W_query (6×2)"``."""
        expr = self.expr(config)
        lhs = f"{self.symbol} = {expr}" if expr else self.symbol
        return f"{self.label}: {lhs} ({'×'.join(str(s) for s in shape)})"


def plain_step(name: str, rows: Axis, cols: Axis, colour: str = SIGNED,
               cell_text: tuple[str, str] | None = None, *, label: str = "") -> Step:
    """A matrix that is drawn like a step but has no formula (a real model's
    layer, the Modern attention page): its ``rows`` and ``cols`` axes, ``colour``
    (SIGNED, WEIGHTS or MASK) and, for a mask, ``cell_text``. ``label`` (``name``
    when empty) is both its label and its symbol."""
    label = label or name
    return Step(name, label, label, _const(""), _const(""), rows, cols, colour=colour,
                cell_text=cell_text)


def _simple(config: TraceConfig) -> bool:
    """No trainable weights: Q = K = V = X."""
    return config.weight_init == "identity"


def _const(text: str) -> Callable[[TraceConfig], str]:
    return lambda config: text


def _scaled_expr(c: TraceConfig) -> str:
    if not c.scale:
        return "ω (scaling off)"
    return f"ω / √{c.head_dim}"


def _scaled_latex(c: TraceConfig) -> str:
    if not c.scale:
        return r"\tilde\omega = \omega \quad\text{(scaling off)}"
    d = r"d_k" if c.n_heads == 1 else r"\text{head\_dim}"
    return rf"\tilde\omega = \frac{{\omega}}{{\sqrt{{{d}}}}} = \frac{{\omega}}{{\sqrt{{{c.head_dim}}}}}"


_NORM_EXPR = {"softmax": "softmax({})", "naive_softmax": "naive_softmax({})",
              "sum": "{} / row sum"}
_NORM_LATEX = {
    "softmax": r"\alpha_{{ij}} = \operatorname{{softmax}}_j({s})"
               r" = \frac{{e^{{{s}_{{ij}} - \max_k {s}_{{ik}}}}}}{{\sum_k e^{{{s}_{{ik}} - \max_k {s}_{{ik}}}}}}",
    "naive_softmax": r"\begin{{gathered}}\alpha_{{ij}} = \frac{{e^{{{s}_{{ij}}}}}}"
                     r"{{\sum_k e^{{{s}_{{ik}}}}}} \\ \text{{(no max shift: may overflow)}}"
                     r"\end{{gathered}}",  # the note on its own line: a phone's width
    "sum": r"\alpha_{{ij}} = \frac{{{s}_{{ij}}}}{{\sum_k {s}_{{ik}}}}",
}


def _weights_input(c: TraceConfig) -> tuple[str, str]:
    """The (text, latex) symbol the normalisation is applied to."""
    if c.causal:
        return "masked", r"\hat\omega"
    return ("ω̃", r"\tilde\omega") if c.scale else ("ω", r"\omega")


def _weights_expr(c: TraceConfig) -> str:
    return _NORM_EXPR[c.normalization].format(_weights_input(c)[0])


def _weights_latex(c: TraceConfig) -> str:
    return _NORM_LATEX[c.normalization].format(s=_weights_input(c)[1])


def _context_expr(c: TraceConfig) -> str:
    a = "α′" if c.dropout > 0 else "α"
    return f"{a}·X" if _simple(c) else f"{a}·V"


def _context_latex(c: TraceConfig) -> str:
    a = r"\alpha'" if c.dropout > 0 else r"\alpha"
    v = "X" if _simple(c) else "V"
    formula = rf"Z = {a} {v}, \quad z_i = \sum_j {a}_{{ij}}\, {v.lower()}_j"
    if c.n_heads == 1:
        return formula
    # The note on its own line: on one, it ran 52 px past a phone's width.
    return rf"\begin{{gathered}}{formula} \\ \text{{(heads concatenated)}}\end{{gathered}}"


def _bias(c: TraceConfig) -> bool:
    """Whether Q, K and V add a bias (real models: ``config.qkv_bias``)."""
    return getattr(c, "qkv_bias", False)


def _proj(letter: str, weight: str) -> Callable[[TraceConfig], str]:
    def expr(c: TraceConfig) -> str:
        if _simple(c):
            return "X (no weights)"
        return f"X·{weight}" + (f" + b_{weight[2:]}" if _bias(c) else "")
    return expr


def _proj_latex(letter: str, weight: str) -> Callable[[TraceConfig], str]:
    def latex(c: TraceConfig) -> str:
        if _simple(c):
            return rf"{letter} = X"
        bias = rf" + b_{{\text{{{weight[2:]}}}}}" if _bias(c) else ""
        if c.n_heads > 1:  # head h's slice of the columns
            return (rf"{letter}_h = X\, W_{{\text{{{weight[2:]}}}}}^{{(h)}}"
                    + (bias + "^{(h)}" if bias else ""))
        return rf"{letter} = X\, W_{{\text{{{weight[2:]}}}}}" + bias
    return latex


def _weight_latex(name: str, out: str) -> Callable[[TraceConfig], str]:
    return lambda c: rf"W_{{\text{{{name}}}}} \in \mathbb{{R}}^{{d_{{in}} \times {out}}}"


def _bias_latex(name: str, out: str) -> Callable[[TraceConfig], str]:
    return lambda c: rf"b_{{\text{{{name}}}}} \in \mathbb{{R}}^{{{out}}}"


def _input_latex(c: TraceConfig) -> str:
    if getattr(c, "input_note", ""):  # a real model: X is a layer's input, not an embedding
        return (rf"\begin{{gathered}}X \in \mathbb{{R}}^{{n \times d_{{model}}}} \\ x_i = "
                rf"\text{{token }} i\text{{'s input to layer }} {getattr(c, 'layer', 0)}\end{{gathered}}")  # a phone
    return r"X \in \mathbb{R}^{n \times d_{in}},\quad x_i = \text{embedding of token } i"


# ---------------------------------------------------------------------------
# Remarks: what a caption's claim looks like in this trace's numbers
# ---------------------------------------------------------------------------
SATURATED = 0.99
"""A softmax row is saturated when its largest weight is at least this."""
SPREAD_NEAR_ONE = 2.0
"""Scaled scores whose standard deviation is at most this count as "near 1"."""


def _n(x: float, decimals: int | None = None) -> str:
    """A number in a remark: one decimal (two below 1) unless ``decimals`` says,
    a nonzero value that would print as 0 in scientific notation (1.9e−6), minus
    sign U+2212."""
    decimals = (1 if abs(x) >= 1 else 2) if decimals is None else decimals
    text = f"{x:.{decimals}f}"
    if x != 0 and float(text) == 0:  # 1.9e-6 is not 0.00: two digits and its exponent
        mantissa, exponent = f"{x:.1e}".split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text.replace("-", "−")


def _n_range(low: float, high: float) -> tuple[str, str]:
    """``low`` and ``high`` written with the fewest decimals (from `_n`'s, up to
    6) that tell them apart, so "between 1.1 and 1.1" is never written."""
    decimals = 1 if min(abs(low), abs(high)) >= 1 else 2
    while decimals < 6 and _n(low, decimals) == _n(high, decimals):
        decimals += 1
    return _n(low, decimals), _n(high, decimals)


def _rows(count: int, total: int) -> str:
    """``"3 of 10 rows"``, ``"1 of 10 rows"`` or ``"the only row"``."""
    return f"{count} of {total} rows" if total > 1 else "the only row"


def _verb(count: int, singular: str, plural: str) -> str:
    return singular if count == 1 else plural


def _non_finite_rows(values) -> int:
    """Rows of a (n, m) tensor holding NaN or ±∞."""
    return int((~values.isfinite()).any(dim=-1).sum())


def _scaled_scores_remark(trace, head: int) -> str:
    """The scaled scores' real spread, and whether the weights saturate anyway."""
    scores = trace.head("scaled_scores", head)
    finite = scores[scores.isfinite()].double()
    if finite.numel() < 2:
        return ""
    spread = float(finite.std())
    low, high = _n_range(float(finite.min()), float(finite.max()))
    text = f"Here their standard deviation is {_n(spread)} (from {low} to {high})"
    if trace.config.scale and "keys" in trace and trace.head("keys", head).shape[-1] == 1:
        text = ("Here head_dim is 1: √1 = 1, so dividing changes nothing and these are the "
                f"raw scores. Their standard deviation is {_n(spread)} "
                f"(from {low} to {high})")
    weights = trace.head("attn_weights", head)
    if trace.config.normalization != "softmax" or weights.shape[-1] < 2:
        return text + "."
    # A causal row 0 has one key: its weight is 1 whatever the scores.
    rows = weights[1:] if trace.config.causal else weights
    saturated = int((rows.amax(dim=-1) >= SATURATED).sum())
    if saturated:
        counted = (f"{saturated} of the {rows.shape[0]} rows after the first"
                   if trace.config.causal else _rows(saturated, rows.shape[0]))
        return (text + f": {counted} {_verb(saturated, 'gives', 'give')} {SATURATED:g} or "
                f"more of {_verb(saturated, 'its', 'their')} weight to one key, so the softmax "
                "saturates" + (" all the same" if spread <= SPREAD_NEAR_ONE else "")
                + (" (the first row has one key, whose weight is 1 whatever the scores)."
                   if trace.config.causal else "."))
    return text + (f" and no row gives {SATURATED:g} of its weight to one key."
                   if spread <= SPREAD_NEAR_ONE else
                   f", yet no row gives {SATURATED:g} of its weight to one key.")


def _masked_weights_remark(trace, head: int) -> str:
    """Masked keys whose weight is not exactly 0 (a row summing to 0 with
    normalization = sum: 0 / 0)."""
    mask = trace["causal_mask"]
    masked = trace.head("attn_weights", head)[mask]
    wrong = int((masked != 0).sum())
    text = ("With normalization = sum there is no exp: the masked scores count as 0 in "
            "the row sum." if trace.config.normalization == "sum" else "")
    if not wrong:
        return text
    rows = int(((trace.head("attn_weights", head) != 0) & mask).any(dim=-1).sum())
    return (f"{text} Here {wrong} masked {_verb(wrong, 'weight', 'weights')} in "
            f"{_rows(rows, mask.shape[0])} {_verb(wrong, 'is', 'are')} NaN, not 0: the row's "
            "kept scores sum to 0, and 0 / 0 is NaN.").strip()


def _weights_remark(trace, head: int) -> str:
    """Rows that do not sum to 1 (NaN or ±∞), and negative weights."""
    weights = trace.head("attn_weights", head)
    n = weights.shape[0]
    broken = _non_finite_rows(weights)
    why = ("the naive softmax's exp overflowed (∞ / ∞ = NaN)"
           if trace.config.normalization == "naive_softmax"
           else "their scores sum to 0 (a division by 0)")
    parts = []
    if broken:
        parts.append(f"Here {_rows(broken, n)} {_verb(broken, 'holds', 'hold')} NaN or ±∞ "
                     f"and {_verb(broken, 'sums', 'sum')} to nothing: {why}.")
    negative = int((weights < 0).sum())
    if negative:
        parts.append(f"{negative} {_verb(negative, 'weight is', 'weights are')} negative: "
                     "dividing by the row sum keeps each "
                     "row's sum at 1 but not the signs, so a row is not a split of "
                     "attention into shares.")
    return " ".join(parts)


def _dropped_remark(trace, head: int) -> str:
    """The rows' real sums after dropout."""
    sums = trace.head("dropped_weights", head).double().sum(dim=-1)
    sums = sums[sums.isfinite()]
    if not sums.numel():
        return ""
    low, high = float(sums.min()), float(sums.max())
    if high - low < 1e-6:
        return f"Here every row sums to {_n(low)}."
    low_text, high_text = _n_range(low, high)
    return (f"Here the rows sum to between {low_text} and {high_text}: 1 only on "
            "average over many draws, not in each row.")


def _context_remark(trace, head: int) -> str:
    """Where a context row is not a mix (an average) of the values."""
    weights = trace["dropped_weights" if "dropped_weights" in trace else "attn_weights"]
    weights = weights if weights.dim() == 3 else weights[None]
    n = weights.shape[-2]
    parts = []
    broken = _non_finite_rows(trace["context"])
    if broken:
        parts.append(f"Here {_rows(broken, n)} {_verb(broken, 'holds', 'hold')} NaN or ±∞, "
                     "passed on from the weights.")
    if bool((weights < 0).any()):
        parts.append("Some weights are negative (normalization = sum), so a row is not an "
                     "average of the values: it can lie outside their range.")
    elif "dropped_weights" in trace:
        parts.append("After dropout a row's weights do not sum to 1, so it is a weighted sum "
                     "of the values, not their average.")
    return " ".join(parts)


_WEIGHT_DIMS_ROWS = Axis("input dim (d_in)", DIMS)

STEPS: dict[str, Step] = {s.name: s for s in [
    Step("token_ids", "Token ids", "ids", _const("vocabulary index"),
         _const(r"\text{id}(t) = \text{index of } t \text{ in sorted(set(tokens))}"),
         TOKEN_ROWS, Axis("id", DIMS), heatmap=False),
    Step("embeddings", "Embeddings", "X", _const(""), _input_latex,
         TOKEN_ROWS, Axis("embedding dim", DIMS),
         explain="Each row is one token's input vector."),
    Step("W_query", "Query weights", "W_query", _const(""), _weight_latex("query", "d_k"),
         _WEIGHT_DIMS_ROWS, Axis("query dim (d_k)", DIMS), projection=True,
         explain="Trainable: projects each embedding to a query. Here: {recipe}.",
         head_columns=True),
    Step("W_key", "Key weights", "W_key", _const(""), _weight_latex("key", "d_k"),
         _WEIGHT_DIMS_ROWS, Axis("key dim (d_k)", DIMS), projection=True,
         explain="Trainable: projects each embedding to a key. Here: {recipe}.",
         head_columns=True),
    Step("W_value", "Value weights", "W_value", _const(""), _weight_latex("value", "d_v"),
         _WEIGHT_DIMS_ROWS, Axis("value dim (d_v)", DIMS), projection=True,
         explain="Trainable: projects each embedding to a value. Here: {recipe}.",
         head_columns=True),
    Step("b_query", "Query bias", "b_query", _const(""), _bias_latex("query", "d_k"),
         Axis("", DIMS), Axis("query dim (d_k)", DIMS), projection=True, head_columns=True,
         explain="Trainable: added to every token's query. Here: {recipe}."),
    Step("b_key", "Key bias", "b_key", _const(""), _bias_latex("key", "d_k"),
         Axis("", DIMS), Axis("key dim (d_k)", DIMS), projection=True, head_columns=True,
         explain="Trainable: added to every token's key. Here: {recipe}."),
    Step("b_value", "Value bias", "b_value", _const(""), _bias_latex("value", "d_v"),
         Axis("", DIMS), Axis("value dim (d_v)", DIMS), projection=True, head_columns=True,
         explain="Trainable: added to every token's value. Here: {recipe}."),
    Step("queries", "Queries", "Q", _proj("Q", "W_query"), _proj_latex("Q", "W_query"),
         TOKEN_ROWS, Axis("query dim", DIMS), per_head=True, projection=True,
         explain="What each token is looking for."),
    Step("keys", "Keys", "K", _proj("K", "W_key"), _proj_latex("K", "W_key"),
         TOKEN_ROWS, Axis("key dim", DIMS), per_head=True, projection=True,
         explain="What each token offers to be matched on."),
    Step("values", "Values", "V", _proj("V", "W_value"), _proj_latex("V", "W_value"),
         TOKEN_ROWS, Axis("value dim", DIMS), per_head=True, projection=True,
         explain="What each token passes on when attended to."),
    Step("attn_scores", "Attention scores", "ω",
         lambda c: "X·Xᵀ" if _simple(c) else "Q·Kᵀ",
         lambda c: r"\omega = X X^\top,\quad \omega_{ij} = x_i \cdot x_j" if _simple(c)
         else r"\omega = Q K^\top,\quad \omega_{ij} = q_i \cdot k_j",
         QUERY_ROWS, KEY_COLS, per_head=True,
         explain="Row i: how well query i matches every key (a dot product)."),
    Step("scaled_scores", "Scaled scores", "ω̃", _scaled_expr, _scaled_latex,
         QUERY_ROWS, KEY_COLS, per_head=True,
         explain="Dividing by √d_k undoes the scores' growth with d_k: for queries and keys "
                 "with entries of variance 1 it brings their spread back to about 1, so the "
                 "softmax does not saturate.",
         shown=lambda c: c.scale, remark=_scaled_scores_remark),
    Step("causal_mask", "Causal mask", "M", _const("key j after query i"),
         _const(r"M_{ij} = \begin{cases} \text{masked} & j > i \\ \text{kept} & j \le i \end{cases}"),
         QUERY_ROWS, KEY_COLS, colour=MASK, cell_text=("allowed", "future"),
         explain="A token may only attend to itself and earlier tokens: each future key "
                 "(dark, “future”) gets −∞ instead of its score."),
    Step("masked_scores", "Masked scores", "ω̂",
         lambda c: ("ω̃" if c.scale else "ω") + " with −∞ where masked",
         lambda c: (r"\hat\omega_{ij} = \begin{cases} -\infty & j > i \\ "
                    + (r"\tilde\omega_{ij}" if c.scale else r"\omega_{ij}")
                    + r" & j \le i \end{cases}"),
         QUERY_ROWS, KEY_COLS, per_head=True,
         explain="exp(−∞) = 0, so masked keys get exactly zero weight.",
         remark=_masked_weights_remark),
    Step("attn_weights", "Attention weights", "α", _weights_expr, _weights_latex,
         QUERY_ROWS, KEY_COLS, colour=WEIGHTS, per_head=True,
         explain="Each row sums to 1: how query i splits its attention over the keys.",
         remark=_weights_remark),
    Step("dropout_mask", "Dropout keep-mask", "D", lambda c: f"Bernoulli(1 − {c.dropout:g})",
         lambda c: rf"D_{{ij}} \sim \text{{Bernoulli}}(1 - p),\quad p = {c.dropout:g}",
         QUERY_ROWS, KEY_COLS, colour=MASK, per_head=True, cell_text=("dropped", "kept"),
         explain="Which weights survive dropout (dark = kept, 1; light = dropped, 0)."),
    Step("dropped_weights", "Weights after dropout", "α′", lambda c: f"α·D / (1 − {c.dropout:g})",
         _const(r"\alpha'_{ij} = \frac{\alpha_{ij} D_{ij}}{1 - p}"),
         QUERY_ROWS, KEY_COLS, per_head=True,
         explain="Kept weights are scaled up by 1/(1−p) so their expected sum stays 1.",
         remark=_dropped_remark),
    Step("context", "Context vectors", "Z", _context_expr, _context_latex,
         TOKEN_ROWS, Axis("value dim", DIMS), head_columns=True,
         explain="Row i: token i's new vector, a weighted mix of the values.",
         remark=_context_remark),
    Step("W_out", "Output projection weights", "W_out", _const("out_proj.weightᵀ"),
         _const(r"W_{\text{out}} = \texttt{nn.Linear(d\_v, d\_v).weight}^\top"),
         Axis("context dim", DIMS), Axis("output dim", DIMS),
         explain="Mixes the concatenated heads back together."),
    Step("b_out", "Output projection bias", "b_out", _const("out_proj.bias"),
         _const(r"b_{\text{out}} = \texttt{nn.Linear(d\_v, d\_v).bias}"),
         Axis("", DIMS), Axis("output dim", DIMS)),
    Step("output", "Output", "O", _const("Z·W_out + b_out"),
         _const(r"O = Z\, W_{\text{out}} + b_{\text{out}}"),
         TOKEN_ROWS, Axis("output dim", DIMS),
         explain="The layer's result, one row per token."),
]}
"""Every step a `Trace` can hold, in pipeline order."""

def chart_caption(trace, name: str, head: int = 0) -> str:
    """The text under step ``name``'s chart, on the page and in the report:
    `Step.caption` and, where it states a property of the numbers, `Step.remark`
    on this trace's (and head's) numbers. "" for a step without one."""
    step = STEPS[name]
    if not step.explain:
        return ""
    remark = step.remark(trace, head) if step.remark else ""
    return f"{step.caption(trace.config)} {remark}".strip()


SIDE_BY_SIDE: tuple[tuple[str, ...], ...] = (
    ("W_query", "W_key", "W_value"),
    ("b_query", "b_key", "b_value"),
    ("queries", "keys", "values"),
    ("attn_scores", "scaled_scores"),
    ("causal_mask", "masked_scores"),
    ("dropout_mask", "dropped_weights"),
    ("W_out", "b_out"),
)
"""Steps drawn next to each other on a page when they appear together."""


SHARED_SCALES: tuple[tuple[str, ...], ...] = (
    ("W_query", "W_key", "W_value"),
    ("b_query", "b_key", "b_value"),
    ("queries", "keys", "values"),
    ("attn_scores", "scaled_scores", "masked_scores"),
)
"""Steps drawn on one colour scale: the scores share theirs so that dividing by
√d_k visibly shrinks them, and the projections theirs so that they compare."""


def scale_group(name: str) -> tuple[str, ...]:
    """The steps whose colour scale ``name`` shares (itself alone if none)."""
    return next((group for group in SHARED_SCALES if name in group), (name,))


def visible_steps(trace, keep: Callable[[Step], bool] = lambda step: True) -> list[str]:
    """The steps of ``trace`` (a `explorer.core.trace.Trace`) that are drawn as
    heatmaps, in pipeline order: those with a chart that `Step.shown` keeps
    for its config (no scaled scores when scaling is off) and ``keep`` accepts."""
    return [name for name in trace
            if STEPS[name].heatmap and STEPS[name].shown(trace.config) and keep(STEPS[name])]


def shows_colour_bar(row: list[str], i: int) -> bool:
    """Whether the ``i``-th chart of a page row (`layout_rows`) shows its colour
    bar: not when the next chart of the row shares its scale and shows it."""
    return not (i + 1 < len(row) and row[i + 1] in scale_group(row[i]))


def layout_rows(names: list[str]) -> list[list[str]]:
    """Group ``names`` (in pipeline order) into page rows, per `SIDE_BY_SIDE`."""
    group_of = {name: i for i, group in enumerate(SIDE_BY_SIDE) for name in group}
    rows: list[list[str]] = []
    for name in names:
        if rows and name in group_of and group_of.get(rows[-1][-1]) == group_of[name]:
            rows[-1].append(name)
        else:
            rows.append([name])
    return rows


def stages(names: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Split step names (pipeline order) into what comes before the heads, the
    per-head part (from the first to the last per-head step) and what follows
    (concatenation and output projection)."""
    inside = [i for i, name in enumerate(names) if STEPS[name].per_head]
    if not inside:
        return names, [], []
    first, last = inside[0], inside[-1]
    return names[:first], names[first:last + 1], names[last + 1:]


def split_after(names: list[str], last: str) -> tuple[list[str], list[str]]:
    """``names`` up to and including ``last``, and the rest (all of them first
    when ``last`` is absent)."""
    if last not in names:
        return names, []
    cut = names.index(last) + 1
    return names[:cut], names[cut:]
