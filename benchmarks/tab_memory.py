"""The Real model page's browser tab, measured: ``python -m benchmarks.tab_memory``.

For each case (`CASES`: a tiny random model of a given layout, saved to a
folder, and a number of tokens) it starts one ``streamlit run`` with folders
allowed and offline (``EXPLORER_MODEL_FOLDERS=1``, ``HF_HUB_OFFLINE=1``), opens
the Real model page in a fresh headless Chromium (``/usr/bin/chromium``, the
tests' flags: ``--disable-gpu``), chooses "a local folder…" in the sidebar and
types the folder, as a visitor does, and waits until every chart is drawn, the
overview of every head (the page's last) included (`ALL_DRAWN`: `settle` alone
can end between two runs of a large page, before the overview). Meanwhile it polls ``/proc`` for the
browser's renderer processes (``--type=renderer``, below this process) and
keeps the peak of their summed resident memory; once drawn, it reads CDP's
``Performance.getMetrics`` ``JSHeapUsedSize``. Beside each measurement it
prints the page's own estimate, ``tab_bytes_drawn(*drawn(model, n), tab_costs(model))``
(`explorer.ui.real_model.drawn`; the costs `explorer.server.budget.MODEL_TAB`, or
`explorer.server.budget.DECODER_TAB` for a Llama-family model), and the
ratio the tests accept (0.95-1.2, tests/server/test_tab_budget.py).

    python -m benchmarks.tab_memory                      # every case, twice
    python -m benchmarks.tab_memory qwen3-28x16 gpt2-12x12 --repeat 3

Each visit is in a new browser, so that a run's renderers hold one page. On a
2-core machine running other jobs the repeats of a case agreed within 3%
(2026-11-26, benchmarks/results/history/2026-11-tab-memory.md); times are not
measured here.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import sync_playwright

from explorer import AttentionConfig, models
from explorer.models.anatomy import EVERY_ARCHITECTURE
from explorer.server.budget import MIB, tab_bytes, tab_bytes_drawn
from explorer.ui.real_model import drawn, tab_costs
from tests.browser.test_browser_tab_budget import heap_bytes
from tests.support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    chart_count,
    choose_option,
    page_url,
    settle,
)
from tests.support.server import RUN_COUNTER, Server, rss_mib
from tests.support.tiny_decoders import save_tiny_decoder
from tests.support.tiny_models import save_tiny_gpt2

SHORT = "the cat sat on the mat"  # 6 tokens
LONG = " ".join([SHORT] * 33)  # 198 tokens
WAIT_MS = 600_000  # a large page on a busy 2-core machine takes minutes
POLL_S = 0.05
ALL_DRAWN = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  const charts = [...document.querySelectorAll(".explorer-chart")];
  return app?.dataset.testScriptState === "notRunning"
    && performance.now() - window.__stateChanged > 1000
    && charts.some((c) => c.querySelector(".gtitle")?.textContent.startsWith("Every head"))
    && charts.every((c) => c.querySelector(".main-svg") && !c.dataset.drawing);
}"""
"""The page's last chart, the overview of every head, and every other chart drawn,
the script quiet for a second (`settle` can end between two runs of a large page)."""


@dataclass(frozen=True)
class Case:
    """A tiny random model of ``architecture`` (``"gpt2"`` or a key of
    `tests.support.tiny_decoders.TINY_DECODERS`) built with ``shape`` (its
    config's fields), opened on ``sentence``."""

    architecture: str
    shape: dict
    sentence: str = SHORT

    def save(self, folder: Path) -> Path:
        if self.architecture == "gpt2":
            return save_tiny_gpt2(folder, **self.shape)
        return save_tiny_decoder(folder, self.architecture, **self.shape)


QWEN3_0_6B = dict(num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                  hidden_size=64, head_dim=16, intermediate_size=64)
"""Qwen3-0.6B's layers × heads (28 × 16 query heads, 8 K/V heads), its width tiny."""
SMOLLM2_135M = dict(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                    hidden_size=72, intermediate_size=64)
"""SmolLM2-135M's layers × heads (30 × 9 query heads, 3 K/V heads), its width tiny."""
CASES = {
    "gpt2-12x12": Case("gpt2", dict(n_layer=12, n_head=12, n_embd=48)),
    "gpt2-28x16": Case("gpt2", dict(n_layer=28, n_head=16, n_embd=32)),
    "gpt2-28x16-long": Case("gpt2", dict(n_layer=28, n_head=16, n_embd=32), LONG),
    "qwen3-28x16": Case("qwen3", QWEN3_0_6B),
    "qwen3-28x16-long": Case("qwen3", QWEN3_0_6B, LONG),
    "llama-30x9": Case("llama", SMOLLM2_135M),
    "qwen3-2x16-wide-long": Case("qwen3", {**QWEN3_0_6B, "num_hidden_layers": 2,
                                           "hidden_size": 1024, "head_dim": 128}, LONG),
}


class PeakRenderers(threading.Thread):
    """Polls the summed resident memory of the Chromium renderers below this process
    (`tests.support.server.rss_mib`) every `POLL_S` until `stop`, which returns the
    most seen, in MiB."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mib, self._done = 0.0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak_mib = max(self.peak_mib, rss_mib(os.getpid(), "--type=renderer"))
            self._done.wait(POLL_S)

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak_mib


def measure(playwright, server: Server, folder: Path, sentence: str) -> dict:
    """One visit in a fresh browser: peak renderer MiB, JS heap MiB, charts, errors."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    peak = PeakRenderers()
    peak.start()
    try:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(WAIT_MS)
        context.add_init_script(RUN_COUNTER)
        page = context.new_page()
        page.goto(page_url(server, "Real_model", sentence=sentence))
        settle(page, WAIT_MS)
        sidebar = page.get_by_test_id("stSidebar")
        choose_option(page, sidebar.get_by_test_id("stSelectbox").filter(has_text="Model"),
                      "a local folder…")
        settle(page, WAIT_MS)
        box = sidebar.get_by_role("textbox", name="Folder")
        box.fill(str(folder))
        box.press("Enter")
        settle(page, WAIT_MS)
        errors = page.get_by_test_id("stAlertContentError").all_inner_texts()
        if not errors:
            page.wait_for_function(ALL_DRAWN, timeout=WAIT_MS, polling=250)
        errors = page.get_by_test_id("stAlertContentError").all_inner_texts()
        charts = chart_count(page) if not errors else 0
        time.sleep(2)  # the peak, if anything is still settling
        heap = heap_bytes(page) / MIB
    finally:
        renderers = peak.stop()
        browser.close()
    return dict(renderers=renderers, heap=heap, charts=charts, errors=errors)


SCROLL_STEP_S = 0.3
SCROLL_TO_END = """() => {
  const boxes = [document.scrollingElement, ...document.querySelectorAll("*")]
    .filter((el) => el && el.scrollHeight > el.clientHeight + 10
            && ["auto", "scroll"].includes(getComputedStyle(el).overflowY));
  const box = boxes.sort((a, b) => b.scrollHeight - a.scrollHeight)[0]
    ?? document.scrollingElement;
  const before = box.scrollTop;
  box.scrollTop = before + 0.8 * box.clientHeight;
  return box.scrollTop + box.clientHeight >= box.scrollHeight - 2 || box.scrollTop === before;
}"""
"""Scroll the page's scrolling box (Streamlit's main area) down by 0.8 of a
window; true once it is at the end."""
LESSON_DRAWN = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  const charts = [...document.querySelectorAll(".explorer-chart")];
  return app?.dataset.testScriptState === "notRunning"
    && performance.now() - window.__stateChanged > 1000 && charts.length > 0
    && charts.every((c) => c.querySelector(".main-svg") && !c.dataset.drawing);
}"""
"""Every chart of a lesson page drawn, the script quiet for a second."""

W32, W64, W512 = (" ".join(["w"] * n) for n in (32, 64, 512))
WIDE = dict(d_in=1024, d_k=1024, d_v=1024)
LESSON_CASES = {
    "default": ("Causal_and_multi_head", {}),
    "4h-32": ("Causal_and_multi_head", dict(n_heads=4, d_k=64, d_v=64, sentence=W32)),
    "8h-32": ("Causal_and_multi_head", dict(n_heads=8, **WIDE, sentence=W32)),
    "16h-32": ("Causal_and_multi_head", dict(n_heads=16, **WIDE, sentence=W32)),
    "64h-32": ("Causal_and_multi_head", dict(n_heads=64, **WIDE, sentence=W32)),
    "128h-32": ("Causal_and_multi_head", dict(n_heads=128, **WIDE, sentence=W32)),
    "128h-64": ("Causal_and_multi_head", dict(n_heads=128, **WIDE, sentence=W64)),
    "256h-32": ("Causal_and_multi_head", dict(n_heads=256, **WIDE, sentence=W32)),
    "64h-32-din64": ("Causal_and_multi_head", dict(n_heads=64, d_in=64, d_k=1024, d_v=1024,
                                                   sentence=W32)),
    "64h-32-dk64": ("Causal_and_multi_head", dict(n_heads=64, d_in=1024, d_k=64, d_v=64,
                                                  sentence=W32)),
    "100h-1": ("Causal_and_multi_head", dict(n_heads=100, d_k=100, d_v=100, sentence="x")),
    "300h-1": ("Causal_and_multi_head", dict(n_heads=300, d_k=300, d_v=300, sentence="x")),
    "16h-512": ("Causal_and_multi_head", dict(n_heads=16, d_k=64, d_v=64, sentence=W512)),
    "self-512": ("Self-attention", dict(**WIDE, sentence=W512)),
}
"""Lesson pages measured scrolled to the end (``--lessons``): a page and its
link's fields; 32, 64 or 512 words of "w" (a token each)."""


def lesson_config(page: str, fields: dict) -> AttentionConfig:
    """The `explorer.AttentionConfig` a lesson link opens (the multi-head page's
    defaults: 2 heads, causal)."""
    defaults = dict(n_heads=2, causal=True) if page == "Causal_and_multi_head" else {}
    return AttentionConfig(**{**defaults, **fields})


def scroll_to_end(page) -> None:
    """Scroll the page to its end a window at a time, each step given
    `SCROLL_STEP_S` to paint, then wait until every chart is drawn."""
    for _ in range(2000):
        at_end = page.evaluate(SCROLL_TO_END)
        time.sleep(SCROLL_STEP_S)
        if at_end:
            break
    page.wait_for_function(LESSON_DRAWN, timeout=WAIT_MS, polling=250)


SPARES = """() => Object.fromEntries([...document.querySelectorAll(".explorer-spare")]
  .reduce((keys, spare) => {
    const key = [...spare.closest("[class*='st-key-']")?.classList ?? []]
      .find((c) => c.startsWith("st-key-")) ?? "?";
    return keys.set(key, (keys.get(key) ?? 0) + (spare.querySelector(".main-svg") ? 1 : 0));
  }, new Map()))"""
"""The spare heads drawn (`explorer/render/chart/spares.js`), per chart's key."""
SPARES_QUIET_S = 4


def spares_drawn(page) -> dict[str, int]:
    """Wait until no spare head has been drawn for `SPARES_QUIET_S` seconds (they
    are drawn one per task once the page is idle); the spares per chart."""
    spares, quiet = page.evaluate(SPARES), time.monotonic()
    while time.monotonic() - quiet < SPARES_QUIET_S:
        time.sleep(0.5)
        now = page.evaluate(SPARES)
        if now != spares:
            spares, quiet = now, time.monotonic()
    return spares


def measure_lesson(playwright, server: Server, name: str, fields: dict) -> dict:
    """One visit of a lesson page in a fresh browser: the renderers' peak MiB once
    drawn (``unscrolled``) and after scrolling to the end (``scrolled``), charts, errors."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    peak = PeakRenderers()
    peak.start()
    unscrolled = 0.0
    try:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(WAIT_MS)
        context.add_init_script(RUN_COUNTER)
        page = context.new_page()
        page.goto(page_url(server, name, **{k: str(v).lower() if isinstance(v, bool) else str(v)
                                            for k, v in fields.items()}))
        settle(page, WAIT_MS)
        errors = page.get_by_test_id("stAlertContentError").all_inner_texts()
        if not errors:
            page.wait_for_function(LESSON_DRAWN, timeout=WAIT_MS, polling=250)
            time.sleep(2)
            unscrolled = peak.peak_mib
            scroll_to_end(page)
            spares = spares_drawn(page)
            time.sleep(2)
        charts = page.locator(".explorer-chart").count()
    finally:
        scrolled = peak.stop()
        browser.close()
    return dict(unscrolled=unscrolled, scrolled=scrolled, charts=charts, errors=errors,
                spares=spares if not errors else {})


def lessons(names: list[str], repeat: int) -> None:
    """Measure `LESSON_CASES` ``names`` unscrolled and scrolled, with the estimate."""
    rows = []
    with sync_playwright() as pw:
        server = Server(env={"EXPLORER_MEMORY_BUDGET_MB": "2048"})
        try:
            for name in names:
                page_name, fields = LESSON_CASES[name]
                estimate = tab_bytes(lesson_config(page_name, fields)) / MIB
                for run in range(repeat):
                    got = measure_lesson(pw, server, page_name, fields)
                    rows.append((name, estimate, got))
                    print(f"{name} run {run + 1}: {got['unscrolled']:,.0f} MiB drawn, "
                          f"{got['scrolled']:,.0f} MiB scrolled, {got['charts']} charts, "
                          f"spares {got['spares']}, "
                          f"estimate {estimate:,.0f} MiB {got['errors'] or ''}", flush=True)
        finally:
            server.stop()
    print("\n| case | charts | drawn MiB | scrolled to the end MiB | estimate MiB "
          "| estimate / scrolled |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, estimate, got in rows:
        print(f"| {name} | {got['charts']} | {got['unscrolled']:,.0f} | {got['scrolled']:,.0f} "
              f"| {estimate:,.0f} | {estimate / max(got['scrolled'], 1):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: all)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--lessons", action="store_true",
                        help=f"lesson pages scrolled to the end: {', '.join(LESSON_CASES)}")
    args = parser.parse_args()
    if args.lessons:
        lessons(args.cases or list(LESSON_CASES), args.repeat)
        return
    if unknown := set(args.cases) - set(CASES):
        parser.error(f"no case {', '.join(sorted(unknown))}; the cases: {', '.join(CASES)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tab-memory-") as tmp, sync_playwright() as pw:
        server = Server(env={"HF_HUB_OFFLINE": "1", "EXPLORER_MODEL_FOLDERS": "1"})
        try:
            for name in args.cases or CASES:
                case = CASES[name]
                folder = case.save(Path(tmp) / name)
                model = models.load_folder(folder, architectures=EVERY_ARCHITECTURE)
                n = len(models.model_input(model, case.sentence).ids)
                cells, panels = drawn(model, n)
                estimate = tab_bytes_drawn(cells, panels, tab_costs(model)) / MIB
                for run in range(args.repeat):
                    got = measure(pw, server, folder, case.sentence)
                    rows.append((name, model, n, cells, panels, estimate, got))
                    print(f"{name} run {run + 1}: {got['renderers']:,.0f} MiB renderers, "
                          f"{got['heap']:,.0f} MiB heap, {got['charts']} charts, "
                          f"estimate {estimate:,.0f} MiB {got['errors'] or ''}", flush=True)
        finally:
            server.stop()
    print("\n| case | layers × heads (K/V) | tokens | cells | panels | charts "
          "| renderers MiB | JS heap MiB | estimate MiB | estimate / measured |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, m, n, cells, panels, estimate, got in rows:
        kv = f" ({m.n_kv_heads})" if m.family == "decoder" else ""
        print(f"| {name} | {m.n_layers} × {m.n_heads}{kv} | {n} | {cells:,} | {panels} "
              f"| {got['charts']} | {got['renderers']:,.0f} | {got['heap']:,.0f} "
              f"| {estimate:,.0f} | {estimate / got['renderers']:.2f} |")


if __name__ == "__main__":
    main()
