"""explorer: every intermediate matrix of scaled dot-product attention, in pure torch.

    >>> from explorer import AttentionConfig, compute_trace
    >>> trace = compute_trace(AttentionConfig(sentence="Life is short, eat dessert first"))
    >>> trace.tokens
    ['Life', 'is', 'short', 'eat', 'dessert', 'first']
    >>> trace["embeddings"].shape
    torch.Size([6, 3])

The compute modules (`config`, `tokenizer`, `recipes`, `attention`, `trace`,
`steps`, `explain`, `presets`, `verify`, `experiments`, `budget`, and `check`,
`learner`, `mistakes`, `sandbox` for checking a learner's own code) import
torch only. `explorer.figures` (plotly, pandas), `export` and `check_view` sit
above them and `explorer.ui` (Streamlit) above that. ``python -m explorer
check`` is `explorer.__main__`.

The names below are loaded on first use (PEP 562), so that this package's own
import takes no lock while it imports anything else. Streamlit runs each
visitor's first page in its own thread; with eager imports here, one thread
importing ``explorer`` and another importing ``explorer.trace`` directly
would each wait for the other, and Python hands one of them a half-imported
module ("cannot import name 'Trace' from partially initialized module").
"""

from importlib import import_module

_HOMES = {"AttentionConfig": "explorer.config", "ConfigError": "explorer.config",
          "STEPS": "explorer.steps", "Step": "explorer.steps",
          "Trace": "explorer.trace", "compute_trace": "explorer.trace"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
