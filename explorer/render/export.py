"""Take a configuration home: a PyTorch script, one matrix as CSV, a whole trace as HTML.

- `pytorch_script(config)`: a standalone script, importing only torch (and argparse),
  that recomputes every step the way chapter 3 of "Build a Large Language Model
  (From Scratch)" writes it, prints each one, and with ``--save FILE`` saves them
  under the trace's own step names.
- `matrix_csv(trace, name)`: one step as CSV, labelled with tokens and dims, that
  `explorer.ui.matrices.parse_csv_matrix` reads back exactly.
- `html_report(trace)`: one page with every chart the app's page shows, the
  settings, the tokens and ids: it opens offline, straight from disk.

The report draws its charts with the app's own chart modules (``explorer/render/chart/``), so that
they look exactly like the page's (cell numbers chosen from the real cell
size, colours, head outlines, sizing). It carries three things once each:

1. Plotly.js (the installed ``plotly`` package's ``plotly.min.js``) as a
   classic ``<script>`` in the head: it defines ``window.Plotly``, which
   chart.js's ``loadPlotly`` then uses instead of fetching anything;
2. each chart's `explorer.render.payload.encode` payload, base64, in the
   ``data-chart`` attribute of its ``<div class="chart">``;
3. one ``<script type="module">`` at the end of the body: the chart modules as
   one (`explorer.render.payload.CHART_JS`), unchanged (an inline module may declare
   exports that nothing imports, so no rewriting is needed), followed by a four-line bootstrap that mounts every
   chart with chart.js's default export ``mountChart``, exactly as Streamlit's
   component does (same decoding, sizing and redraw on resize).

Nothing is fetched, so it works from ``file://``.

Visitor text (the sentence, its tokens, the link) never becomes code or markup:
in the script it is a ``repr()`` literal or a one-line comment (`explorer.core.literal.comment`),
in HTML it passes through `explorer.core.literal.html`, and in CSV it is a
cell (quoted where needed) that a spreadsheet will not run as a formula
(`_csv_label`).
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from urllib.parse import urlsplit

from torch import Tensor

from explorer.core import literal
from explorer.core.config import OPTION_HELP, AttentionConfig
from explorer.core.steps import (
    STEPS,
    TOKENS,
    chart_caption,
    layout_rows,
    shows_colour_bar,
    visible_steps,
)
from explorer.core.tokenizer import PUNCTUATION, build_vocab, token_labels
from explorer.core.trace import Trace
from explorer.lessons.presets import NOTEBOOKS
from explorer.render.payload import CHART_JS, Chart, encode
from explorer.render.script_templates import template

HEADING = "--- {name} {shape} ---"
"""How the generated script heads each printed step, e.g. ``--- attn_scores (6, 6) ---``
(``shape`` is the tensor's shape as a Python tuple)."""

_MAX_COMMENT_CHARS = 100


# ---------------------------------------------------------------------------
# The settings, in words (the script's header and the report's table)
# ---------------------------------------------------------------------------
def settings_table(config: AttentionConfig) -> list[tuple[str, str]]:
    """The configuration as ``(setting, value)`` rows of plain, unescaped text.

    Only the settings that matter for ``config`` are listed (no ``vocab_size``
    without an embedding table, no dropout seed without dropout). The sentence
    is the visitor's raw text: escape it for wherever it goes.
    """
    c = config
    rows = [("sentence", c.sentence), ("tokens", str(len(c.tokens))),
            ("d_in, d_k, d_v", f"{c.d_in}, {c.d_k}, {c.d_v}"), ("seed", str(c.seed)),
            ("embedding", f"{c.embedding}: {OPTION_HELP['embedding'][c.embedding]}")]
    if c.embedding == "table":
        rows.append(("vocab_size", str(c.vocab_size)))
    rows += [("weight_init", f"{c.weight_init}: {OPTION_HELP['weight_init'][c.weight_init]}"),
             ("scale", f"on: scores / sqrt({c.head_dim})" if c.scale else "off"),
             ("normalization",
              f"{c.normalization}: {OPTION_HELP['normalization'][c.normalization]}"),
             ("causal", "on" if c.causal else "off"),
             ("dropout", f"p = {c.dropout:g}, mask seed {c.mask_seed}" if c.dropout else "off"),
             ("n_heads", f"{c.n_heads} (head_dim {c.head_dim}, value head_dim {c.head_dim_v})"
              if c.n_heads > 1 else "1"),
             ("out_proj", ("on" if c.has_out_proj else "off")
              + (" (auto: on when n_heads > 1)" if c.out_proj is None else ""))]
    return rows


# ---------------------------------------------------------------------------
# 1. The PyTorch script
# ---------------------------------------------------------------------------
def _shape(*dims: int) -> str:
    """A shape as the script's comments write it: ``(6, 2)``, ``(6,)``."""
    return str(tuple(dims))


def tensor_literal(matrix: Sequence[Sequence[float]], labels: Sequence[str],
                    comment: str) -> str:
    """``torch.tensor([...])`` holding the float32 ``matrix`` exactly (the shortest
    digits of each number), ``comment`` after its first line, then one row per
    line with its label as a comment."""
    lines = [f"torch.tensor([  # {comment}"]
    for row, label in zip(matrix, labels):
        numbers = ", ".join(literal.float32_text(v) for v in row)
        lines.append(f"    [{numbers}],  # {literal.comment(label, 40)}")
    lines.append("])")
    return "\n".join(lines)


def _settings_comment(config: AttentionConfig, link: str | None) -> str:
    """The header's settings, one aligned comment line each (visitor text only as
    a one-line comment, `explorer.core.literal.comment`), then the view's link."""
    table = settings_table(config)
    width = max(len(name) for name, _ in table)
    lines = [f"#   {name:<{width}}  {literal.comment(value, _MAX_COMMENT_CHARS)}"
             for name, value in table]
    if link:
        lines.append(f"#   {'view':<{width}}  {literal.comment(link, 2000)}")
    return "\n".join(lines)


def _needs_seed(config: AttentionConfig) -> bool:
    """Whether anything is drawn from ``torch.manual_seed(seed)``."""
    return (config.embedding in ("table", "uniform")
            or config.weight_init in ("randn", "rand", "linear") or config.has_out_proj)


def _needs_num_tokens(config: AttentionConfig) -> bool:
    return config.embedding == "uniform" or config.n_heads > 1 or config.causal


def _slot_values(config: AttentionConfig, link: str | None) -> dict[str, object]:
    """Every slot of the template ``attention.py``: the sizes, the shapes its
    comments print, the variable names the settings choose, and the sentence, the
    typed-in matrices and the settings as literals that no visitor text escapes."""
    c = config
    n, h, hd, hdv = len(c.tokens), c.n_heads, c.head_dim, c.head_dim_v
    rows = [f"input dim {i}" for i in range(c.d_in)]
    values: dict[str, object] = {
        "settings": _settings_comment(c, link), "heading": HEADING.format(
            name="{name}", shape="{tuple(tensor.shape)}"),
        "sentence": repr(c.sentence), "d_in": c.d_in, "d_k": c.d_k, "d_v": c.d_v,
        "n_heads": h, "seed": c.seed, "vocab_size": c.vocab_size, "punctuation": PUNCTUATION,
        "n": n, "head_dim": hd, "head_dim_v": hdv, "p": repr(c.dropout),
        "mask_seed": c.mask_seed, "d": "head_dim" if h > 1 else "d_k",
        "v_dim": "head_dim_v" if hdv != hd else "head_dim",
        "x": "embedded_sentence" if c.embedding == "table" else "inputs",
        "s": "masked_scores" if c.causal else "scaled_scores",
        "a": "dropped_weights" if c.dropout > 0 else "attn_weights",
        **{f"notebook_{key}": title for key, title in NOTEBOOKS.items()},
        # shapes, as the comments write them: (6, 2), (6,)
        "n_shape": _shape(n), "x_shape": _shape(n, c.d_in), "wk_shape": _shape(c.d_in, c.d_k),
        "wv_shape": _shape(c.d_in, c.d_v), "qk_shape": _shape(n, c.d_k),
        "v_shape": _shape(n, c.d_v), "kt_shape": _shape(hd, n), "nn_shape": _shape(n, n),
        "qk_split": _shape(n, h, hd), "qk_heads": _shape(h, n, hd), "kt_heads": _shape(h, hd, n),
        "v_split": _shape(n, h, hdv), "v_heads": _shape(h, n, hdv), "nn_heads": _shape(h, n, n),
        "vv_shape": _shape(c.d_v, c.d_v), "vb_shape": _shape(c.d_v)}
    if c.embedding == "given" and c.embeddings is not None:  # given X is never None
        values["embeddings"] = tensor_literal(c.embeddings, token_labels(c.tokens),
                                              _shape(n, c.d_in))
    if c.weight_init == "given":
        values |= {name.lower(): tensor_literal(getattr(c, name), rows, _shape(c.d_in, d))
                   for name, d in (("W_query", c.d_k), ("W_key", c.d_k), ("W_value", c.d_v))}
    return values


def _script_steps(config: AttentionConfig) -> list[list[str]]:
    """The blocks of ``attention.py`` that ``config`` needs, one list per numbered step."""
    c = config
    many = c.n_heads > 1
    qkv = ["qkv"] + (["head_dim"] + ["head_dim_v"] * (c.head_dim_v != c.head_dim)
                     + ["split_heads"]) * many + ["qkv_show"]
    normalization = "sum_causal" if c.normalization == "sum" and c.causal else c.normalization
    return [["tokens", *["num_tokens"] * _needs_num_tokens(c), "token_ids"],
            [f"embeddings_{c.embedding}"],
            [f"weights_{c.weight_init}", *["out_proj_layer"] * c.has_out_proj, "weights_show"],
            qkv, ["scores_heads" if many else "scores"], ["scale" if c.scale else "no_scale"],
            *[["causal_mask"]] * c.causal, [normalization], *[["dropout"]] * (c.dropout > 0),
            ["context_heads" if many else "context"], *[["out_proj"]] * c.has_out_proj]


def pytorch_script(config: AttentionConfig, link: str | None = None) -> str:
    """A standalone Python script that recomputes ``config``'s trace in plain PyTorch.

    The script imports only ``torch`` and ``argparse``. It follows the book's
    chapter 3 code and seed 002 (``sentence_int``, ``embedded_sentence`` or
    ``inputs``, ``W_query``, ``queries``, ``attn_scores``, ``attn_weights``,
    ``context_vec``, ``MultiHeadAttention``'s split into heads and
    ``out_proj``), with only the lines ``config`` needs. It tokenises like
    `explorer.core.tokenizer`, draws from ``torch.manual_seed(seed)`` in the app's
    order (embedding table or ``torch.rand``, W_query, W_key, W_value, then
    ``out_proj``) or writes the given matrices out exactly, and draws the dropout
    mask with ``nn.Dropout`` after ``torch.manual_seed(dropout seed)``.

    The text is the template ``explorer/render/scripts/attention.py``
    (`explorer.render.script_templates`): `_script_steps` picks its blocks, `_slot_values`
    fills them, and the steps are numbered here.

    Running it prints every step under a heading (`HEADING`); ``--save FILE``
    also saves ``{step name: tensor}`` with ``torch.save``, with the names and
    shapes of ``list(compute_trace(config))``: the app's numbers to float32
    rounding (the book's order of operations can round the last bits
    differently: a few 1e-6 apart at most, not always bit for bit).

    The sentence is embedded as a ``repr()`` literal and every other piece of
    visitor text (the sentence in the header, token labels, ``link``) only as a
    one-line comment, so none of it can run. Returns the source as a string.
    """
    blocks, values = template("attention"), _slot_values(config, link)

    def text(*names: str) -> str:
        return "\n".join(blocks[name].fill(**values) for name in names)

    settings = ["settings", *["num_heads"] * (config.n_heads > 1),
                *["seed"] * _needs_seed(config)]
    steps = [f"# {i}. {text(*names)[2:]}" for i, names in enumerate(_script_steps(config), 1)]
    top = "\n\n".join((text("header"), text("setup")))
    body = "\n\n".join((text(*settings), *steps, text("save")))
    return f"{top}\n\n\n{body}\n"


# ---------------------------------------------------------------------------
# 2. One matrix as CSV
# ---------------------------------------------------------------------------
def _short_title(title: str) -> str:
    """An axis title without its parenthesis: ``"query (row)"`` -> ``"query"``."""
    return title.split(" (")[0]


def _csv_label(label: str) -> str:
    """A label cell a spreadsheet shows as text: one starting with ``= + - @`` (or
    a tab / carriage return) would be run as a formula, so it gets a leading ``'``."""
    return "'" + label if label[:1] in ("=", "+", "-", "@", "\t", "\r") else label


def _step_table(trace: Trace, name: str, head: int) -> tuple[Tensor, list[str], list[str], str]:
    """The step as a 2-D tensor with its row labels, column labels and corner cell.

    A per-head step gives head ``head``; a vector of one value per token (the
    ids) is one column, any other vector one row named after the step.
    """
    tensor, step = trace[name], STEPS[name]  # KeyError naming the trace's steps
    if tensor.dim() == 3:
        if not 0 <= head < tensor.shape[0]:
            raise ValueError(f"head must be between 0 and {tensor.shape[0] - 1} "
                             f"for {name} (got {head})")
        tensor = tensor[head]
    labels = [_csv_label(t) for t in token_labels(trace.tokens)]
    rows, cols = _short_title(step.rows.title), _short_title(step.cols.title)
    if tensor.dim() == 1 and step.rows.labels == TOKENS:
        return tensor[:, None], labels, [cols], rows
    if tensor.dim() == 1:
        tensor = tensor[None, :]
        row_labels, corner = [name], name
    else:
        row_labels = labels if step.rows.labels == TOKENS else \
            [f"{rows} {i}" for i in range(tensor.shape[0])]
        corner = rows
    col_labels = [f"{cols}: {label}" for label in labels] if step.cols.labels == TOKENS else \
        [f"{cols} {j}" for j in range(tensor.shape[1])]
    return tensor, row_labels, col_labels, corner


def matrix_csv(trace: Trace, name: str, head: int = 0) -> str:
    """One step of ``trace`` as CSV text: a header row, then one labelled row per matrix row.

    - Rows: the token labels (`explorer.core.tokenizer.token_labels`: repeats get their
      position, ``the (3)``) where the rows are tokens, else ``input dim 0``,
      ``context dim 1`` ...; the corner cell names the row axis (``token``,
      ``query``, ``input dim``).
    - Columns: ``embedding dim 0``, ``query dim 1`` ... for dimensions, and
      ``key: Life``, ``key: is`` ... where the columns are keys.
    - A per-head step gives head ``head`` (``ValueError`` if there is no such head);
      ``token_ids`` is one column ``id``; ``b_out`` one row.
    - Numbers are the shortest text that reads back as the same float32
      (``0.3374``, ``-1.1925``); ``-inf`` and ``nan`` as such; masks as 0/1.
    - A label starting with ``= + - @`` gets a leading ``'`` so that a
      spreadsheet shows it instead of running it.
    - The text is valid UTF-8 once encoded: a token's lone surrogate (U+D800 to
      U+DFFF, which a visitor can send) is written as its escape ``\\ud800``
      (`explorer.core.literal.encodable`).

    `explorer.ui.matrices.parse_csv_matrix` reads the numbers of X and W back
    exactly. Raises ``KeyError`` for a step the trace does not have.
    """
    tensor, row_labels, col_labels, corner = _step_table(trace, name, head)
    floating = tensor.dtype.is_floating_point
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([corner, *(literal.encodable(label) for label in col_labels)])
    for label, row in zip(row_labels, tensor.tolist()):
        writer.writerow([literal.encodable(label),
                         *(literal.float32_text(v) if floating else str(int(v)) for v in row)])
    return out.getvalue()


# ---------------------------------------------------------------------------
# 3. The HTML report
# ---------------------------------------------------------------------------
def _link_html(link: str) -> str:
    """An ``http(s)`` link as an anchor; anything else (``javascript:``, a
    relative path) only as text, since escaping alone does not make it safe."""
    text = literal.html(link)
    try:
        scheme = urlsplit(link).scheme.lower()
    except ValueError:  # e.g. an unbalanced "[" in the host
        scheme = ""
    if scheme in ("http", "https"):
        return f'<a href="{text}">{text}</a>'
    return f"<code>{text}</code>"


def _settings_html(config) -> str:
    """The settings as a table: `settings_table` for an `AttentionConfig`, every
    field of any other config (a real model's) as it is."""
    if isinstance(config, AttentionConfig):
        table = settings_table(config)
    else:
        table = [(f.name, _field_text(getattr(config, f.name)))
                 for f in dataclasses.fields(config) if getattr(config, f.name) is not None]
    rows = "".join(f"<tr><th>{literal.html(name)}</th><td>{literal.html(value)}</td></tr>"
                   for name, value in table)
    return f"<table>{rows}</table>"


def _field_text(value, limit: int = 200) -> str:
    """A config field as one line of text, cut to ``limit`` characters."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _tokens_html(trace: Trace) -> str:
    ids = trace["token_ids"].tolist()
    rows = "".join(f"<tr><td>{i}</td><td>{literal.html(token)}</td><td>{token_id}</td></tr>"
                   for i, (token, token_id) in enumerate(zip(trace.tokens, ids)))
    about = f"{len(trace.tokens)} tokens"
    if isinstance(trace.config, AttentionConfig):
        about += (f", {len(build_vocab(trace.tokens))} in the vocabulary (the sorted "
                  "unique tokens; a token's id is its index there)")
    return (f"<p>{about}.</p>"
            f"<table><tr><th>position</th><th>token</th><th>id</th></tr>{rows}</table>")


def _chart_heads(trace: Trace, heads: Sequence[int] | None) -> list[int]:
    """The heads to draw per-head steps for (default: every head), checked."""
    n_heads = trace.config.n_heads
    chosen = list(range(n_heads)) if heads is None else list(heads)
    for head in chosen:
        if not 0 <= head < n_heads:
            raise ValueError(f"head must be between 0 and {n_heads - 1} (got {head})")
    return chosen


def _sections(trace: Trace, names: list[str], heads: Sequence[int] | None
              ) -> list[tuple[str, int | None, list[str]]]:
    """The report's sections as ``(heading, head, step names)``, in the page's
    order: the steps before the heads (with any step in between that has no head
    axis, such as the causal mask), then the per-head steps once for each head,
    then the steps after the heads. Without a head axis: one section."""
    per_head = [name for name in names if trace.per_head(name)]
    if not per_head:
        return [("", None, names)]
    first, last = names.index(per_head[0]), names.index(per_head[-1])
    shared = [name for name in names[first:last + 1] if name not in per_head]
    sections: list[tuple[str, int | None, list[str]]] = [("", None, names[:first] + shared)]
    sections += [(f"Head {head}", head, per_head) for head in _chart_heads(trace, heads)]
    if names[last + 1:]:
        sections.append(("Every head together", None, names[last + 1:]))
    return sections


def chart_div(chart: Chart, div_id: str, caption: str = "") -> str:
    """One chart for a page that `mount_script` draws: a ``<div class="chart">``
    holding ``chart``'s `explorer.render.payload.encode` payload in base64 (base64 holds no
    character that HTML reads) in its ``data-chart`` attribute, and the
    ``caption`` (plain text, escaped here) under it. ``div_id``: its element id."""
    payload = base64.b64encode(encode(chart)).decode("ascii")
    caption = f'<p class="caption">{literal.html(caption)}</p>' if caption else ""
    return (f'<div class="step"><div class="chart" id="{literal.html(div_id)}" '
            f'data-chart="{payload}"></div>{caption}</div>')


def _chart_div(trace: Trace, name: str, head: int | None, columns: int, colorbar: bool) -> str:
    """One step's chart as the page draws it: `explorer.render.figures.heatmap_chart`
    (titled with the step, its formula, shape and head), with the step's caption
    under it, as on the page (`explorer.core.steps.chart_caption`)."""
    from explorer.render.figures import heatmap_chart  # the script and the CSV need no plotly

    chart = heatmap_chart(trace, name, head=head or 0, colorbar=colorbar, columns=columns)
    div_id = f"chart-{name}" if head is None else f"chart-{name}-head-{head}"
    return chart_div(chart, div_id, chart_caption(trace, name, head or 0))


def chart_row(cells: Sequence[str]) -> str:
    """Charts side by side, in equal columns; one under the other on a narrow
    screen (``.row`` in `_STYLE`)."""
    return f'<div class="row" style="--columns: {len(cells)}">{"".join(cells)}</div>'


NARROW_SCREEN_PX = 640
"""Below this window width the report's rows hold one chart each, as
Streamlit's ``st.columns`` stack below 640 px."""


def _head_charts(trace: Trace, names: list[str], heads: Sequence[int] | None
                 ) -> dict[str, list[str]]:
    """The multi-head page's charts that are not one step's, as report rows:
    ``"split"``, how Q, K and V are cut into heads; ``"route <head>"``, that
    head's weights by the book's second causal route; ``"grid"``, every head's
    weights at a glance. Each only where the page draws it."""
    from explorer.core import verify
    from explorer.render import figures

    c = trace.config
    rows: dict[str, list[str]] = {}
    if c.n_heads > 1 and {"queries", "keys", "values"} <= set(names):
        rows["split"] = [
            chart_row([chart_div(figures.head_split_chart(trace, name), f"chart-{name}-split")
                  for name in ("queries", "keys", "values")]),
            f'<p class="caption">{literal.html(figures.head_split_caption(trace))}</p>']
    route = verify.second_causal_route(trace) if "attn_weights" in names else None
    if route is not None:
        for head in _chart_heads(trace, heads):
            rows[f"route {head}"] = [
                "<h3>The same weights by the other route</h3>",
                chart_row([chart_div(figures.second_route_chart(trace, route, head),
                                  f"chart-second-route-head-{head}", route.explanation())])]
    if c.n_heads > 1 and "attn_weights" in names:
        rows["grid"] = ["<h2>Every head at a glance</h2>",
                        chart_row([chart_div(figures.heads_grid_chart(trace), "chart-heads-grid",
                                          "Every head's attention weights on one scale.")])]
    return rows


def _inline_script(code: str, kind: str | None = None) -> str:
    """``code`` as an inline ``<script>``: code that could end the element early
    (``</script``) or change how HTML reads it (``<!--``) is refused."""
    lowered = code.lower()
    if "</script" in lowered or "<!--" in lowered:
        raise ValueError("this code cannot be inlined in a <script> element")
    kind_attr = f' type="{kind}"' if kind else ""
    return f"<script{kind_attr}>\n{code}\n</script>"


_MOUNT_CHARTS = """
// The report's bootstrap: mount every chart as the app's Streamlit component
// does, with chart.js's default export (no server: clicks go nowhere).
for (const div of {scope}.querySelectorAll("div.chart[data-chart]")) {{
  const data = Uint8Array.from(atob(div.dataset.chart), (c) => c.charCodeAt(0));
  mountChart({{ data, parentElement: div, setTriggerValue: () => {{}} }});
}}
"""


def plotly_script() -> str:
    """Plotly.js (the installed ``plotly`` package's) as one inline classic
    ``<script>``: it defines ``window.Plotly``, which chart.js then uses."""
    from explorer.render.figures import PLOTLY_MIN_JS

    return _inline_script(PLOTLY_MIN_JS.read_text(encoding="utf-8"))


def mount_script(scope_id: str | None = None) -> str:
    """chart.js's source, unchanged, and a bootstrap that mounts every
    `chart_div` of the element ``scope_id`` (the whole document by default),
    as one inline ``<script type="module">``. Needs `plotly_script` before it."""
    scope = "document" if scope_id is None else \
        f"document.getElementById({json.dumps(scope_id)})"
    return _inline_script(CHART_JS.read_text(encoding="utf-8") + _MOUNT_CHARTS.format(scope=scope),
                          kind="module")


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1150px; margin: 2em auto; padding: 0 1em;
       color: #31333f; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
.row { display: grid; gap: 1rem; margin: 1.5em 0;
       grid-template-columns: repeat(var(--columns, 1), minmax(0, 1fr)); }
.step { min-width: 0; }
a, code, td { overflow-wrap: anywhere; }
.caption { color: #555; font-size: 0.9em; margin: 0.3em 0; }
""" + f"@media (max-width: {NARROW_SCREEN_PX - 1}px) {{ .row {{ grid-template-columns: minmax(0, 1fr); }} }}\n"


def html_report(trace: Trace, link: str | None = None, steps: list[str] | None = None,
                heads: Sequence[int] | None = None) -> str:
    """A standalone HTML page with ``trace``'s charts, settings, tokens and ids.

    ``steps``: the steps to draw, in that order (default `explorer.core.steps.visible_steps`:
    every heatmap the app shows for the config, in pipeline order, and the
    multi-head page's other charts: how Q, K and V are split into heads, each
    head's weights by the book's second causal route and every head at a glance,
    `_head_charts`). A per-head step gets one chart per head in ``heads``
    (default: every head), grouped by head (`_sections`). The charts are the
    page's own (`explorer.render.figures.heatmap_chart`, related steps side by side on
    one colour scale, as `explorer.core.steps.layout_rows` and
    `explorer.core.steps.shows_colour_bar` say, each with its caption,
    `explorer.core.steps.chart_caption`), drawn by the app's ``chart.js``, so cell
    numbers, colours, head outlines and sizes match the page; hover or tap a
    cell for its value. Plotly.js and chart.js are inlined once each, so the page
    works offline from disk (see the module docstring). ``link`` (the view in
    the explorer) becomes an anchor if it is ``http(s)``, else plain text.

    Every piece of text, the visitor's sentence, tokens and link included,
    passes through `explorer.core.literal.html`, so the page can always be written
    as UTF-8: a lone surrogate shows as its escape (``\\ud800``), as in the
    script's comments. Raises ``KeyError`` for a
    step the trace does not have and ``ValueError`` for a head that does not exist.
    """
    from explorer.render.figures import head_colour

    names = visible_steps(trace) if steps is None else list(dict.fromkeys(steps))
    for name in names:
        trace[name]  # raises KeyError naming the steps the trace has
    extra = _head_charts(trace, names, heads) if steps is None else {}
    sections = _sections(trace, names, heads)
    last_head = max((i for i, (_, head, _) in enumerate(sections) if head is not None),
                    default=len(sections) - 1)
    body = []
    for index, (heading, head, section) in enumerate(sections):
        if heading:
            colour = "" if head is None else f' style="color: {head_colour(head)}"'
            body.append(f"<h2{colour}>{literal.html(heading)}</h2>")
        for row in layout_rows(section):
            body.append(chart_row([_chart_div(trace, name, head if trace.per_head(name) else None,
                                         len(row), shows_colour_bar(row, i))
                              for i, name in enumerate(row)]))
            if "attn_weights" in row:  # in a head's section, or the only one
                body += extra.get(f"route {head or 0}", [])
        if not heading:
            body += extra.get("split", [])
        if index == last_head:
            body += extra.get("grid", [])
    sentence = getattr(trace.config, "sentence", None) or " ".join(trace.tokens)
    return html_page("Self-attention", "Self-attention, step by step", sentence, link, [
        "<h2>Settings</h2>", _settings_html(trace.config),
        "<h2>Tokens and ids</h2>", _tokens_html(trace),
        "<h2>Steps</h2>",
        *body])


def html_page(title: str, heading: str, sentence: str, link: str | None,
              parts: Sequence[str]) -> str:
    """A standalone report page: ``title`` (then the sentence's start) in the
    window's title, ``heading``, the ``sentence`` and the ``link`` to the view
    in the explorer (plain text, escaped here), then ``parts`` (HTML), with
    Plotly.js and the chart modules inlined once each (`plotly_script`,
    `mount_script`), so it works offline. Every report's page is this one."""
    view = f"<p>View in the explorer: {_link_html(link)}</p>" if link else ""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{literal.html(title)}: {literal.html(literal.comment(sentence, 60))}</title>",
        f"<style>{_STYLE}</style>",
        plotly_script(),
        "</head><body>",
        f"<h1>{literal.html(heading)}</h1>",
        f'<p>Sentence: <q class="sentence">{literal.html(sentence)}</q></p>',
        view,
        *parts,
        ("<footer><p class=\"caption\">Made by the self-attention explorer. Hover or tap a cell "
         "for its value; each chart's toolbar saves it as PNG or SVG. Plotly.js is included "
         "in this file, so it works offline.</p></footer>"),
        mount_script(),
        "</body></html>",
        "",
    ])


def table_html(frame) -> str:
    """A pandas table (its numbers already text, `explorer.render.figures.table_text`)
    as an HTML table, every header and cell passed through `explorer.core.literal.html`."""
    head = "".join(f"<th>{literal.html(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{literal.html(str(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><tr>{head}</tr>{rows}</table>"
