"""The "Modern attention" page's pieces: its settings (the shared sentence,
d_in and seed, then `explorer.modern.attention.ModernConfig`'s sizes), and one section
per part (RoPE, grouped-query attention, the sliding window, the KV cache, the
online softmax, a Llama-style layer), each with its check against its
reference (`explorer.modern.verify`).

Its settings and view values are entries of `explorer.ui.state` beside the
others, so the link carries them; X comes from the same `AttentionConfig`
trace as on the other pages (cached), and the page's steps are cached with
the real model results, bounded by bytes (`explorer.ui.cache.cached_model_result`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import streamlit as st
import torch

from explorer.core import literal
from explorer.core.agreement import Agreement
from explorer.core.config import AttentionConfig, ConfigError
from explorer.core.tokenizer import token_labels
from explorer.lessons.explain import Explanation
from explorer.lessons.pages import MODERN_PAGE
from explorer.modern import attention as modern
from explorer.modern import explain as modern_explain
from explorer.modern import verify as modern_verify
from explorer.modern.attention import ModernConfig, ModernTrace
from explorer.render.modern import export as modern_export
from explorer.render.modern import figures as mf
from explorer.server.budget import BudgetError
from explorer.ui import cache, component, state, widgets
from explorer.ui.render import explanation_box
from explorer.ui.render import fitted_table as table
from explorer.ui.sidebar import Frame
from explorer.ui.state import Context, View

FIELDS = {"n_query_heads": "n_heads", "n_kv_heads": "n_kv_heads", "head_dim": "head_dim",
          "rope_base": "rope_base", "rope_pairing": "rope_pairing",
          "rope_offset": "rope_offset", "window": "window", "prefill": "prefill",
          "block_q": "block_q", "block_k": "block_k"}
"""Entry name -> `ModernConfig` field."""
WORK_FACTOR = 16
"""(n_heads, n, n) float32 tensors reserved while the steps are computed:
measured, 512 tokens and 16 heads raised the peak RSS by 250 MiB, 15.6 of them
(the steps then hold 95 MiB; 4 heads hold 25 MiB)."""


PART_SETTINGS = {"window": "Sliding window", "prefill": "KV cache", "block_q": "Online softmax",
                 "block_k": "Online softmax"}
"""`ModernConfig` fields that one part alone reads -> that part (its check's
name): a bad value of one of them is shown in its part, and the others are drawn."""


@dataclass(frozen=True)
class ModernView(View):
    """The page's view: ``trace`` is the `ModernTrace`, ``labels`` the token
    labels, ``key`` the trace's cache key (its checks are cached beside it),
    ``errors`` the message of each part whose own setting is bad (part ->
    message; that part shows it instead of its steps)."""

    labels: tuple[str, ...] = ()
    key: tuple = ()
    errors: tuple[tuple[str, str], ...] = ()

    def error(self, part: str) -> str | None:
        """The message of ``part``'s bad setting, or None."""
        return dict(self.errors).get(part)


def modern_config(values: dict) -> ModernConfig:
    """The `ModernConfig` of the page's setting values."""
    fields = {FIELDS[name]: values[name] for name in FIELDS}
    return ModernConfig(**{**fields, "rope_base": float(fields["rope_base"])})


def _tile_for(config: ModernConfig, n_tokens: int) -> tuple[int, int]:
    """The tile step the page shows (the ``tile`` entry), as (query tile, key
    tile), one of those causal FlashAttention walks; the first when it is outside them
    or not a tile step at all (a forged value: `explorer.ui.state.checked` says so)."""
    walked = modern.causal_tiles(n_tokens, config.block_q, config.block_k)
    step = state.checked("tile") or 0
    return walked[step if 0 <= step < len(walked) else 0]


def _stand_in(part: str, n_tokens: int) -> dict:
    """Settings of ``part`` that fit ``n_tokens``, computed in place of a bad
    one (the part shows its message, not these): one tile, a window of 1, every
    token in the prefill."""
    size = max(n_tokens, 1)
    return {"Online softmax": {"block_q": size, "block_k": size},
            "Sliding window": {"window": 1}, "KV cache": {"prefill": n_tokens}}[part]


def checked_config(config: ModernConfig, n_tokens: int
                   ) -> tuple[ModernConfig, tuple[tuple[str, str], ...]]:
    """``config`` with each part's own bad setting (`PART_SETTINGS`) replaced by
    a stand-in, and the message of each such part, (part, message). Raises
    `ConfigError` for a bad setting every part reads (heads, head_dim, RoPE)."""
    errors: dict[str, str] = {}
    while True:
        try:
            config.check(n_tokens)
            return config, tuple(errors.items())
        except ConfigError as error:
            part = PART_SETTINGS.get(error.field)
            if part is None or part in errors:
                raise
            errors[part] = str(error)
            config = replace(config, **_stand_in(part, n_tokens))


def settings() -> ModernView | None:
    """Draw the sidebar and return the page's view, or None (the error shown)."""
    frame = Frame(MODERN_PAGE)
    values = frame.values
    with frame.sidebar:
        st.header(MODERN_PAGE)
        values |= widgets.group(MODERN_PAGE, state.PAGE_OWN, values)
        st.header("Settings")
        values |= widgets.group(MODERN_PAGE, state.BASIC, values)
    try:
        x_config = AttentionConfig(sentence=values["sentence"], d_in=values["d_in"],
                                   seed=values["seed"])
        x_trace = cache.cached_trace(x_config)
        config, part_errors = checked_config(modern_config(values), x_trace.n_tokens)
        tile = _tile_for(config, x_trace.n_tokens)
        key = _trace_key(x_config, config, tile)
        trace = _trace_of(x_config, config, tile)
    except (ConfigError, BudgetError) as error:
        st.error(literal.markdown(str(error)))
        frame.finish(None, values)
        return None
    context = Context(trace, config)
    shown = {**values, **state.resolve(MODERN_PAGE, context)}
    labels = tuple(token_labels(x_trace.tokens))
    view = ModernView(MODERN_PAGE, config, trace, shown, labels=labels, key=key,
                      errors=part_errors)
    frame.finish(None, shown, context)
    with st.sidebar:
        if part_errors:
            st.caption("The downloads come back once every setting fits: "
                       + literal.markdown(", ".join(part for part, _ in part_errors))
                       + " cannot be computed as set.")
        else:
            take_it_with_you(view, x_config, tile)
    return view


def part_intro(view: ModernView, part: str, intro: str) -> bool:
    """Open ``part`` (a check's name, `explorer.render.modern.figures.PART`): its
    heading, then its introduction ``intro`` (Markdown) and True, or, when one of
    its own settings is bad, that setting's message instead and False (the part
    then draws nothing more)."""
    st.header(mf.PART[part].heading)
    message = view.error(part)
    if message is not None:
        st.error(literal.markdown(f"{message}. The other parts are drawn; this one is not."))
        return False
    st.markdown(intro)
    return True


def _trace_key(x_config: AttentionConfig, config: ModernConfig, tile: tuple[int, int]) -> tuple:
    """The cache key of the page's steps (their checks are cached beside it)."""
    return ("modern", x_config, config, tile)


def _trace_of(x_config: AttentionConfig, config: ModernConfig, tile: tuple[int, int]
              ) -> ModernTrace:
    """The page's steps for X of ``x_config``, cached with the real model results
    (bounded by bytes); computing them reserves their work bytes first."""
    x_trace = cache.cached_trace(x_config)
    n = x_trace.n_tokens
    return cache.cached_model_result(
        _trace_key(x_config, config, tile),
        partial(modern.modern_attention, x_trace["embeddings"], config, x_config.seed, tile),
        work_bytes=WORK_FACTOR * 4 * config.n_heads * n * n, what="the Modern attention steps")


def _build(x_config: AttentionConfig, config: ModernConfig, tile: tuple[int, int], link: str,
           kind: str, head: int = 0, position: int | None = None) -> str:
    """A download's text (``kind``: "script", "json" or "report"), built when it
    is clicked, from the cached steps (a button holds the settings, never the
    trace); the report shows query head ``head`` and decoded token ``position``."""
    trace = _trace_of(x_config, config, tile)
    tokens = list(token_labels(x_config.tokens))
    if kind == "json":
        return modern_export.modern_json(trace, tokens)
    if kind == "report":
        return modern_export.modern_report(trace, tokens, x_config.sentence, head, position, link,
                                           _checks_of(_trace_key(x_config, config, tile), trace))
    return modern_export.modern_script(trace, tokens, x_config.seed, link)


def take_it_with_you(view: ModernView, x_config: AttentionConfig, tile: tuple[int, int]) -> None:
    """The sidebar's downloads of this page: the PyTorch script that recomputes
    every step, and every matrix as JSON."""
    link = state.url(st.context.url or "", st.query_params.to_dict())  # as `frame.finish` wrote it
    with st.expander("Take it with you", icon=":material/download:"):
        st.download_button("Reproduce in PyTorch", key="download-modern-script",
                           data=partial(_build, x_config, view.config, tile, link, "script"),
                           file_name=modern_export.SCRIPT_FILE, mime="text/x-python",
                           on_click="ignore", icon=":material/download:",
                           help="A script (torch only) that recomputes every step of this page "
                                "and checks it against PyTorch's SDPA; --save FILE keeps them.")
        st.download_button("Every matrix (JSON)", key="download-modern-json",
                           data=partial(_build, x_config, view.config, tile, link, "json"),
                           file_name=modern_export.JSON_FILE, mime="application/json",
                           on_click="ignore", icon=":material/download:",
                           help='Strict JSON: −∞ is the string "-Infinity".')
        st.download_button("Report (HTML)", key="download-modern-report",
                           data=partial(_build, x_config, view.config, tile, link, "report",
                                        view.head, view["decode_row"]),
                           file_name=modern_export.REPORT_FILE, mime="text/html",
                           on_click="ignore", icon=":material/download:",
                           help="This page's charts, tables and checks in one HTML file that "
                                "works offline.")


# ---------------------------------------------------------------------------
# The check line each part shows
# ---------------------------------------------------------------------------
def check_line(check: Agreement) -> None:
    """"✓ Verified against <reference>: max |difference| = …", as the multi-head page."""
    (st.success if check.ok else st.error)(check.line(code="`"))


def _checks(view: ModernView) -> dict[str, Agreement]:
    """Every part's check of the view's trace, computed once (cached beside it)."""
    return _checks_of(view.key, view.trace)


def _checks_of(key: tuple, trace: ModernTrace) -> dict[str, Agreement]:
    """The checks of ``trace`` (cache key ``key``), computed once for the page and
    its report."""
    return cache.cached_model_result(("modern-checks", *key), partial(modern_verify.checks, trace),
                                     work_bytes=0)


def head_picker(view: ModernView) -> int:
    """The query head shown in every per-head chart (the shared ``head`` entry)."""
    n_heads = view.config.n_heads
    if n_heads == 1:
        return 0
    return component.picker("head", "Query head to show", [f"head {h}" for h in range(n_heads)],
                        view.head, buttons=n_heads <= widgets.MAX_BUTTONS,
                        on_pick=partial(_pick, "head"))


def _pick(name: str, value) -> None:
    """The head picked in the browser: into the state (the page then reruns)."""
    state.put(name, value)
    state.changed()


def _chart(view: ModernView, head: int, key: str, *, position: int = 0, columns: int = 1) -> None:
    """The page's chart ``key`` (`explorer.render.modern.figures.chart_of`; ``position``:
    the decoded token). A click on a cell explains it under the chart (the
    ``modern_cell`` entry), the cell outlined."""
    explanation = _explained(view, head, key, position)
    outline = [mf.cell_outline(*view["modern_cell"][1:])] if explanation else []
    drawn = mf.chart_of(view.trace, key, head, list(view.labels), position=position,
                        columns=columns, shapes=outline)
    component.show(drawn, key=f"modern-{key}", on_click=partial(_clicked, key))
    if explanation is not None:
        explanation_box(explanation)


def _explained(view: ModernView, head: int, key: str, position: int) -> Explanation | None:
    """The explanation of the clicked cell if it is one of chart ``key``'s, else
    None (also for a cell outside it: a link made for other sizes)."""
    cell = view["modern_cell"]
    if not cell or cell[0] != key:
        return None
    _, row, col = cell
    rows = modern_explain.chart_rows(view.trace, key, position)
    try:
        token = row if rows is None else rows[row]
        return modern_explain.explain_modern_cell(view.trace, key, token, col, head, view.labels)
    except IndexError:
        return None


def _clicked(key: str, cell: dict[str, int]) -> None:
    """A click on chart ``key``: explain that cell (the ``modern_cell`` entry).
    A click naming no cell (a forged message) is ignored with a message."""
    where = [cell.get(k) for k in ("row", "col")] if isinstance(cell, dict) else []
    if len(where) != 2 or not all(type(v) is int and v >= 0 for v in where):
        state.problems()["modern_cell"] = "Ignored a click on a chart that named no cell."
        return
    state.put("modern_cell", (key, *where))
    state.changed()


# ---------------------------------------------------------------------------
# The parts
# ---------------------------------------------------------------------------
def rope(view: ModernView, head: int) -> None:
    """1. RoPE: the frequencies, the cos and sin tables, Q and K before and after,
    the scores before and after, the offset that changes nothing."""
    trace, c = view.trace, view.config
    kv = modern.kv_head_of(c.n_heads, c.n_kv_heads)[head]
    if not part_intro(view, "RoPE", (
        "Instead of adding a position vector to X, RoPE **turns** each query and key by an "
        "angle that grows with its position m: the dimensions go in pairs, and pair i turns by "
        "m·θ_i, with θ_i = base^(−2i/head_dim). A query at m and a key at n then meet at the "
        "angle (m − n)·θ_i, so their score depends on how far apart they are, not where "
        f"they are. **Pairing: {literal.markdown(modern.PAIRING_HELP[c.rope_pairing])}.**")):
        return
    st.latex(r"q'_m = q_m \odot \cos(m\theta) + \mathrm{rotate}(q_m) \odot \sin(m\theta)")
    st.latex(r"\theta_i = \mathrm{base}^{-2i/\mathrm{head\_dim}}")
    table(mf.frequency_table(c))
    cos_col, sin_col = st.columns(2)
    show = partial(_chart, view, head, columns=2)
    with cos_col:
        show("cos")
    with sin_col:
        show("sin")
    st.caption("Outlined: the two columns of pair 0, which turn together.")
    before, after = st.columns(2)
    with before:
        show("q-before")
        show("scores-before")
    with after:
        show("q-after")
        show("scores-after")
    st.caption(f"Head {head}'s keys are K/V head {kv}'s, turned the same way. Token 0 (m = "
               f"{c.rope_offset}) turns by {c.rope_offset}·θ_i.")
    moved = trace.offset_change
    if c.rope_offset == 0:
        st.markdown("**Shift every position** with the sidebar's *position offset*: Q, K and "
                    "the cos and sin tables change, the scores do not, because q_m·k_n depends "
                    "only on m − n.")
    else:
        st.markdown(f"**Shift every position by {c.rope_offset}** (the sidebar's position "
                    f"offset): Q and K changed, yet the scores with RoPE differ from those at "
                    f"offset 0 by at most {moved:.1e}, float32 rounding of the angles (larger "
                    "offsets round more), because q_m·k_n depends only on m − n.")
    check_line(_checks(view)["RoPE"])


def grouped_query(view: ModernView, head: int) -> None:
    """2. Grouped-query attention: who shares which K/V head, the repeated K, the cache bytes."""
    c = view.config
    kind = ("multi-query attention (one K/V head)" if c.n_kv_heads == 1 else
            "multi-head attention (one K/V head per query head)" if c.n_kv_heads == c.n_heads
            else "grouped-query attention")
    if not part_intro(view, "Grouped-query attention", (
        f"{c.n_heads} query heads share {c.n_kv_heads} key/value heads: {literal.markdown(kind)}. "
        f"Each K/V head serves {c.n_heads // c.n_kv_heads} neighbouring query heads; its keys "
        "and values are repeated to them (`repeat_kv` in transformers, "
        "`enable_gqa=True` in PyTorch). Fewer K/V heads mean a smaller KV cache.")):
        return
    table_col, k_col = st.columns(2)
    with table_col:
        table(mf.group_table(c))
    with k_col:
        _chart(view, head, "k-shared", columns=2)
    _chart(view, head, "gqa-weights")
    st.subheader("KV-cache bytes per token")
    table(mf.cache_table(c))
    check_line(_checks(view)["Grouped-query attention"])


def sliding_window(view: ModernView, head: int) -> None:
    """3. The sliding window: its mask beside the causal one, both ways of
    counting w, the weights."""
    c = view.config
    if not part_intro(view, "Sliding window", (
        f"A window of w = {c.window} is counted two ways, and both are in use. **This page "
        f"counts w keys, the query among them**: query i sees key j when i − w < j ≤ i, itself "
        f"and the {c.window - 1} tokens before it, as transformers' `sliding_window_overlay` "
        f"does. **Mistral's reference code counts the query plus w earlier tokens** "
        f"(`torch.triu(mask, diagonal=-sliding_window)`): i − w ≤ j ≤ i, {c.window + 1} keys, "
        "one more seen cell left of each row's diagonal. transformers has shipped both "
        "counts (its issues #29623 and #39408): read a model's `sliding_window` with its code's "
        "rule. The weights and the check below use this page's count.")):
        return
    causal_col, window_col, earlier_col = st.columns(3)
    with causal_col:
        _chart(view, head, "mask-causal", columns=3)
    with window_col:
        _chart(view, head, "mask-window", columns=3)
    with earlier_col:
        _chart(view, head, "mask-window-earlier", columns=3)
    _chart(view, head, "window-weights")
    check_line(_checks(view)["Sliding window"])


def kv_cache(view: ModernView, head: int) -> None:
    """4. The KV cache, one token at a time."""
    trace, c, labels = view.trace, view.config, list(view.labels)
    decoding = trace.decoding
    if not part_intro(view, "KV cache", (
        f"Generation feeds the sentence in steps: **prefill** the first {c.prefill} tokens at "
        "once (their keys and values go into the cache), then **decode** one token at a time: "
        "its key and value are appended, and its single query reads every cached key. Nothing "
        "is recomputed for the earlier tokens.")):
        return
    if not decoding.steps:
        st.info(f"Every token is in the prefill ({c.prefill} of {trace.n_tokens}): lower "
                "prefill to decode some.")
    else:
        position = widgets.index("decode_row", trace.n_tokens, "token", labels=labels,
                                 buttons=False)
        if position < c.prefill:
            st.markdown(f"Token {position} ({literal.markdown(labels[position])}) is in the "
                        f"prefill: its row comes from the causal attention of the first "
                        f"{c.prefill} tokens at once. Pick a later token to see it decoded.")
        else:
            step = decoding.steps[position - c.prefill]
            st.markdown(f"Decoding token {position} ({literal.markdown(labels[position])}): "
                        f"the cache holds the keys and values of tokens 0 … {position} "
                        f"({step.cache_len} tokens × {c.n_kv_heads} K/V heads × head_dim "
                        f"{c.head_dim}, keys and values: "
                        f"{2 * step.cache_len * c.n_kv_heads * c.head_dim * 4:,} bytes in "
                        "float32). Its one query reads all of them; the keys after it are not "
                        "in the cache yet, so its row has no column for them.")
        _chart(view, head, "decode-row", position=position)
        st.caption(f"The cache grew {' → '.join(map(str, decoding.cache_lengths[:12]))}"
                   f"{' …' if len(decoding.cache_lengths) > 12 else ''} tokens, one per step.")
    check_line(_checks(view)["KV cache"])


def online_softmax(view: ModernView, head: int) -> None:
    """5. FlashAttention's online softmax: the tile read, m, ℓ, the correction and O."""
    trace, c, labels = view.trace, view.config, list(view.labels)
    flash = trace.flash
    if not part_intro(view, "Online softmax", (
        f"FlashAttention never builds the {trace.n_tokens} × {trace.n_tokens} scores. It "
        f"walks tiles of {c.block_q} queries × {c.block_k} keys and keeps, per query row, the "
        "running maximum m, the running sum ℓ and an unnormalised output O. When a tile raises "
        "the maximum, what was summed so far is rescaled by the correction exp(m_old − m_new). "
        "At the end O / ℓ is the attention output (FlashAttention-2, Algorithm 1).")):
        return
    st.markdown(literal.markdown(skipped_tiles_text(trace)))
    for line in (r"m' = \max(m, \mathrm{rowmax}\,S)", r"c = e^{m - m'}",  # one a line: a phone
                 r"\ell' = c\,\ell + \mathrm{rowsum}\,e^{S - m'}", r"O' = c\,O + e^{S - m'} V"):
        st.latex(line)
    chosen = widgets.index("tile", trace.n_tile_steps, "tile", buttons=False, labels=[
        "query tile {}, key tile {}".format(*trace.tile_of(s)) for s in range(trace.n_tile_steps)])
    q_tile, k_tile = trace.tile_of(chosen)
    step = next((s for s in flash.steps if (s.q_tile, s.k_tile) == (q_tile, k_tile)), None)
    if step is None:  # the cached trace kept another tile: shown on the next run
        return
    _chart(view, head, "tile")
    table(mf.tile_table(step, head, labels))
    if step.O is not None:
        _chart(view, head, "tile-output")
    st.subheader("Memory")
    table(mf.memory_table(trace))
    check_line(_checks(view)["Online softmax"])


def skipped_tiles_text(trace: ModernTrace) -> str:
    """What the causal walk skips: how many of the tiles hold only keys after
    their queries, and that skipping them roughly halves the work."""
    c, n = trace.config, trace.n_tokens
    total = modern.tile_steps(n, c.block_q, c.block_k)
    walked = trace.n_tile_steps
    return (f"{modern.SKIPPED_TILE[0].upper()}{modern.SKIPPED_TILE[1:]}, and so does this "
            f"walk: it takes "
            f"{walked} of the {total} tiles, {total - walked} skipped. With T × T equal tiles "
            "it takes T(T + 1)/2, so for long sentences skipping them roughly halves the work.")


def llama_layer(view: ModernView) -> None:
    """6. A Llama-style layer: a tiny random LlamaModel (no download) whose
    layer-0 attention the explorer's RoPE and grouped-query steps reproduce."""
    c, trace = view.config, view.trace
    st.header("6. All at once: a Llama-style layer")
    d_in = trace.embeddings.shape[1]
    hidden = -(-d_in // c.n_heads) * c.n_heads  # transformers wants n_heads | hidden size
    padded = torch.nn.functional.pad(trace.embeddings, (0, hidden - d_in))
    pad_note = f" (X padded with {hidden - d_in} zero columns)" if hidden > d_in else ""
    st.markdown(
        f"A tiny `LlamaModel` from `transformers`, built with random weights (no download): "
        f"hidden size {hidden}{pad_note}, {c.n_heads} query heads, {c.n_kv_heads} K/V heads, "
        f"head_dim {c.head_dim}, RoPE base {c.rope_base:g}, rotate-half pairing, 2 layers, "
        "eager attention. Its layer 0 reads X after its RMSNorm; the explorer's steps "
        "(X·W_qᵀ split into heads, RoPE, grouped-query causal attention, o_proj) recompute it.")

    def compute():
        model = modern_verify.tiny_llama(hidden, c.n_heads, c.n_kv_heads, c.head_dim,
                                         c.rope_base, seed=0)
        return modern_verify.llama_layer_check(model, padded)
    try:
        result = cache.cached_model_result(("modern-llama", *view.key), compute,
                                           work_bytes=64 * trace.n_tokens ** 2 * c.n_heads)
    except BudgetError as error:
        st.error(literal.markdown(str(error)))
        return
    weights, output = result.parts
    (st.success if result.ok else st.error)(
        f"{result.symbol} Every head of the Llama layer's attention weights "
        "(`output_attentions=True`) and its attention output: max |difference| = "
        f"{weights.max_abs_diff:.1e} and {output.max_abs_diff:.1e} (agreement: below "
        f"{modern_verify.TOLERANCE:.0e}).")
