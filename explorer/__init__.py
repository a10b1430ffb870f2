"""explorer: every intermediate matrix of scaled dot-product attention, in pure torch.

    >>> from explorer import AttentionConfig, compute_trace
    >>> trace = compute_trace(AttentionConfig(sentence="Life is short, eat dessert first"))
    >>> trace.tokens
    ['Life', 'is', 'short', 'eat', 'dessert', 'first']
    >>> trace["embeddings"].shape
    torch.Size([6, 3])

The package is laid out by part, each folder importing only those before it:

- `core`: the book's attention (config, tokenizer, recipes, attention,
  trace, steps, verify, literal);
- `server`: the settings and the memory budget;
- `lessons`, `checker`, `modern`, `models`: the page catalogue, the worked
  examples and explanations, checking a learner's own code, today's and the
  frontier's attention, real models;
- `render`: figures, payloads, exports and the browser's chart modules
  (plotly, pandas);
- `ui`: the Streamlit glue.

The compute folders (core, server, lessons, checker, modern, models) import
neither Streamlit, Plotly nor pandas (`tests/core/test_backend.py`).
``python -m explorer check`` is `explorer.__main__`.

The names below are loaded on first use (PEP 562), so that this package's own
import takes no lock while it imports anything else. Streamlit runs each
visitor's first page in its own thread; with eager imports here, one thread
importing ``explorer`` and another importing ``explorer.core.trace`` directly
would each wait for the other, and Python hands one of them a half-imported
module ("cannot import name 'Trace' from partially initialized module").
"""

from importlib import import_module

_HOMES = {"AttentionConfig": "explorer.core.config", "ConfigError": "explorer.core.config",
          "STEPS": "explorer.core.steps", "Step": "explorer.core.steps",
          "Trace": "explorer.core.trace", "compute_trace": "explorer.core.trace"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
