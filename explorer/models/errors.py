"""The exceptions of the real-model feature.

They subclass `explorer.config.ConfigError`, the package's one exception for
input it cannot use, so that a page that shows a ``ConfigError`` with
``st.error`` shows these too. ``field`` names what was wrong: ``"model"``,
``"text"``, ``"input_ids"``, ``"layer"``, ``"head"`` or ``"check"``.
"""

from __future__ import annotations

from explorer.config import ConfigError

def download_command(name: str = "gpt2") -> str:
    """The one-line command that fetches model ``name`` into the local Hugging
    Face cache once, for offline use."""
    return f"python -m explorer.models download {name}"


DOWNLOAD_COMMAND = download_command()
"""The command for GPT-2 small (``make download-models`` runs it)."""


class ModelError(ConfigError):
    """A model that cannot be used here, or input it cannot take.

    Raised for an unsupported architecture, a folder that is not a complete
    GPT-2 / BERT checkpoint, text without a tokenizer, too many tokens, and a
    layer or head index out of range. The message says what is allowed.
    """


class ModelUnavailable(ModelError):
    """No weights for the requested model: not a folder, not in the local
    Hugging Face cache, and the Hub cannot be reached (or the download failed).
    The message names the model and says how to get the weights."""

    def __init__(self, message: str):
        super().__init__("model", message)


class ModelMismatch(ModelError):
    """Our hand-computed attention disagrees with the model's own numbers by
    more than the tolerance: a bug to report, never to hide."""

    def __init__(self, message: str):
        super().__init__("check", message)
