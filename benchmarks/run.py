"""Speed figures for the explorer: `make bench`.

Each case is timed with `timeit` (best of several repeats, so background noise
inflates nothing) and printed as a table; the figures are also written to
``benchmarks/results/latest.json`` for comparison between commits. A chart is
timed as the pages build it (`explorer.render.figures.heatmap_chart`) and as they
send it (`explorer.render.payload.encode`: the whole payload, or only the header when
the page already holds the matrix).
"""

from __future__ import annotations

import json
import platform
import statistics
import timeit
from collections.abc import Callable
from pathlib import Path

import torch

from explorer import AttentionConfig, compute_trace
from explorer.core import recipes
from explorer.lessons import experiments
from explorer.lessons.explain import explain_cell
from explorer.render import figures
from explorer.render.payload import encode, matrix_hash

RESULTS = Path(__file__).parent / "results"
LONG_SENTENCE = " ".join(f"w{i}" for i in range(512))


def _cached_table():
    table = recipes.embedding_table(123, 50_000, 3)
    return lambda seed, vocab_size, d_in: table


def _app_page_seconds(page: str, **query: str) -> Callable[[], None]:
    from streamlit.testing.v1 import AppTest

    root = Path(__file__).resolve().parent.parent

    def run() -> None:
        at = AppTest.from_file(str(root / "streamlit_app.py"), default_timeout=300)
        at.query_params.update(query)
        at.run()
        if page != "streamlit_app.py":
            at.switch_page(page).run()
        assert not at.exception
    return run


def cases() -> dict[str, tuple[Callable[[], object], int]]:
    """name -> (function, calls per repeat)."""
    default = AttentionConfig()
    big = AttentionConfig(sentence=LONG_SENTENCE, d_in=1024, d_k=1024, d_v=1024,
                          embedding="uniform")
    table_hit = _cached_table()
    big_trace = compute_trace(big)
    small_trace = compute_trace(default)
    big_chart = figures.heatmap_chart(big_trace, "W_query")
    return {
        "embedding table 50,000×3 (draw)": (lambda: recipes.embedding_table(123, 50_000, 3), 20),
        "embedding table 1,000,000×64 (draw)":
            (lambda: recipes.embedding_table(123, 1_000_000, 64), 1),
        "trace, defaults, table drawn": (lambda: compute_trace(default), 20),
        "trace, defaults, table cached": (lambda: compute_trace(default, table_hit), 200),
        "trace, 512 tokens, d=1024": (lambda: compute_trace(big), 3),
        "heatmap chart 6×6": (lambda: figures.heatmap_chart(small_trace, "attn_weights"), 20),
        "heatmap chart 512×512": (lambda: figures.heatmap_chart(big_trace, "attn_weights"), 2),
        "heatmap chart 1024×1024 (W_query), to payload bytes":
            (lambda: encode(figures.heatmap_chart(big_trace, "W_query")), 2),
        "heatmap chart 1024×1024 (W_query), payload of a held matrix":
            (lambda: encode(big_chart, {matrix_hash(m) for m in big_chart.matrices}), 5),
        "heatmap figure 512×512 (go.Figure, to_figure)":
            (lambda: figures.heatmap(big_trace, "attn_weights"), 2),
        "explain one context cell, 512 tokens": (lambda: explain_cell(big_trace, "context", 7, 9), 5),
        "scaling curves (d_k 1..1024)": (lambda: experiments.scaling_curves(seed=1), 2),
        "page: Self-attention, defaults (AppTest)":
            (_app_page_seconds("pages/2_Self_attention.py"), 1),
        "page: Causal & multi-head, 4 heads (AppTest)":
            (_app_page_seconds("pages/3_Causal_and_multi_head.py", d_in="8", d_k="8", d_v="8",
                               n_heads="4", causal="true", dropout="0.1"), 1),
        "page: Experiments, defaults (AppTest)": (_app_page_seconds("pages/4_Experiments.py"), 1),
        "page: Self-attention, 512 tokens, d=256 (AppTest)":
            (_app_page_seconds("pages/2_Self_attention.py", sentence=LONG_SENTENCE, d_in="256",
                               d_k="256", d_v="256", embedding="uniform"), 1),
    }


def main() -> None:
    torch.set_num_threads(torch.get_num_threads())
    results = {}
    print(f"{'case':45s} {'best ms':>10s} {'median ms':>10s}")
    for name, (func, number) in cases().items():
        times = timeit.repeat(func, number=number, repeat=3 if "page" in name else 5)
        per_call = [t / number * 1000 for t in times]
        results[name] = {"best_ms": min(per_call), "median_ms": statistics.median(per_call)}
        print(f"{name:45s} {min(per_call):10.2f} {statistics.median(per_call):10.2f}")
    RESULTS.mkdir(exist_ok=True)
    meta = {"python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "machine": platform.machine()}
    latest = RESULTS / "latest.json"
    try:  # keep what other benchmarks (benchmarks.browser) wrote
        everything = json.loads(latest.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        everything = {}
    everything["backend"] = {"meta": meta, "results": results}
    latest.write_text(json.dumps(everything, indent=2))
    print(f"written to {latest} (backend)")


if __name__ == "__main__":
    main()
