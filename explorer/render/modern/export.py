"""The Modern attention page taken home: a standalone PyTorch script that
recomputes every step of the page (`modern_script`), every matrix as
strict JSON (`modern_json`), and the page's charts, tables and checks as a
standalone HTML page (`modern_report`, the report of the other pages').

The script imports only torch (and argparse); X is written in it as the page's
float32 numbers (the other pages' scripts show how X is drawn), and every
other step is computed as `explorer.modern.attention` computes it. It checks each part
against PyTorch's SDPA as the page does, and ``--save FILE`` saves every step
under the names of `modern_steps` (a test compares them with the page's).
"""

from __future__ import annotations

import dataclasses
import json

import torch
from torch import Tensor

from explorer.core import literal
from explorer.core.trace import json_safe
from explorer.lessons.pages import MODERN_PAGE
from explorer.modern.attention import ModernTrace
from explorer.render.export import (
    chart_div,
    chart_row,
    html_page,
    table_html,
    tensor_literal,
)
from explorer.render.script_templates import template

SCRIPT_FILE = "modern_attention.py"
JSON_FILE = "modern_attention.json"
REPORT_FILE = "modern_attention.html"


def modern_steps(trace: ModernTrace) -> dict[str, Tensor]:
    """Every matrix of the page by name (the script saves the same names)."""
    return {
        "embeddings": trace.embeddings, "W_query": trace.W_query, "W_key": trace.W_key,
        "W_value": trace.W_value, "queries": trace.queries, "keys": trace.keys,
        "values": trace.values, "cos": trace.cos, "sin": trace.sin,
        "queries_rope": trace.queries_rope, "keys_rope": trace.keys_rope,
        "scores_no_rope": trace.scores_no_rope, "scores_rope": trace.scores_rope,
        "causal_weights": trace.causal.attn_weights, "causal_context": trace.causal.context,
        "window_mask": trace.window_mask, "window_weights": trace.windowed.attn_weights,
        "window_context": trace.windowed.context,
        "decoded_context": _decoded_context(trace), "flash_context": trace.flash.context,
    }


def _decoded_context(trace: ModernTrace) -> Tensor:
    """The context rows of the prefill, then of each decoded token: (n_heads, n, head_dim)."""
    import torch
    rows = [trace.decoding.prefill.context] + [s.context[:, None] for s in trace.decoding.steps]
    return torch.cat(rows, dim=1)


def modern_json(trace: ModernTrace, tokens: list[str]) -> str:
    """Every matrix of `modern_steps`, the tokens and the settings, as strict
    JSON (−∞ as the string ``"-Infinity"``, as `explorer.core.trace.Trace.to_json`)."""
    return json.dumps({"tokens": list(tokens), "config": dataclasses.asdict(trace.config),
                       "steps": {name: json_safe(t.to(torch.float64).tolist() if t.dtype.is_floating_point
                                                 else t.tolist())
                                 for name, t in modern_steps(trace).items()}},
                      allow_nan=False)


def modern_report(trace: ModernTrace, labels: list[str], sentence: str, head: int = 0,
                  position: int | None = None, link: str | None = None,
                  checks: dict | None = None) -> str:
    """The page as a standalone HTML page (`explorer.render.export.html_page`): its
    settings, then each part (`explorer.render.modern.figures.PARTS`) with its charts
    for query head ``head`` as the page draws them
    (`explorer.render.modern.figures.chart_of`; ``position``: the decoded token, by
    default the last), its tables and its check line (``checks``: the page's,
    `explorer.modern.verify.checks` of ``trace``, else computed here). Raises
    ``ValueError`` for a head that does not exist."""
    import pandas as pd  # the script needs neither pandas nor plotly

    from explorer.modern import verify as modern_verify
    from explorer.render import figures
    from explorer.render.modern import figures as modern_figures

    if not 0 <= head < trace.config.n_heads:
        raise ValueError(f"there is no query head {head}; the page has {trace.config.n_heads}")
    position = trace.n_tokens - 1 if position is None else position
    checks = modern_verify.checks(trace) if checks is None else checks
    settings = pd.DataFrame([(f.name, str(getattr(trace.config, f.name)))
                             for f in dataclasses.fields(trace.config)], columns=["setting", "value"])
    body = ["<h2>Settings</h2>", table_html(settings),
            f"<p>Query head shown: {head}.</p>"]
    for part in modern_figures.PARTS:
        body.append(f"<h2>{literal.html(part.heading)}</h2>")
        for row in part.rows:
            body.append(chart_row([chart_div(modern_figures.chart_of(
                trace, key, head, labels, position=position, columns=len(row)),
                f"chart-{key}") for key in row]))
        for caption, frame in modern_figures.part_tables(trace, part, head, labels):
            body += [f"<h3>{literal.html(caption)}</h3>",
                     table_html(figures.table_text(frame))]
        body.append(f'<p class="check">{literal.html(checks[part.check].line())}</p>')
    return html_page(MODERN_PAGE, f"{MODERN_PAGE}, step by step", sentence, link, body)


def modern_script(trace: ModernTrace, tokens: list[str], seed: int, link: str | None = None
                  ) -> str:
    """A standalone script (torch and argparse only) that recomputes every step
    of ``trace``: X as the page's numbers, then the weights from ``seed``, RoPE,
    grouped-query attention, the window, the KV cache and the online softmax,
    each checked against SDPA; ``--save FILE`` saves `modern_steps`. The text is
    the template ``explorer/render/scripts/modern_attention.py``
    (`explorer.render.script_templates`), its slots filled with ``trace``'s settings and X."""
    c = trace.config
    x = tensor_literal(trace.embeddings.tolist(), tokens,
                       f"X: the page's embeddings {tuple(trace.embeddings.shape)}")
    return template("modern_attention")["script"].fill(
        page=literal.comment(link or "the Modern attention page", 300), seed=seed,
        n_heads=c.n_heads, n_kv_heads=c.n_kv_heads, head_dim=c.head_dim,
        rope_base=repr(c.rope_base), rope_offset=c.rope_offset, pairing=repr(c.rope_pairing),
        window=c.window, prefill=c.prefill, block_q=c.block_q, block_k=c.block_k,
        step_names=repr(list(modern_steps(trace))), embeddings=x) + "\n"
