"""The exceptions of the real-model feature.

They subclass `explorer.core.config.ConfigError`, the package's one exception for
input it cannot use, so that a page that shows a ``ConfigError`` with
``st.error`` shows these too. ``field`` names what was wrong: ``"model"``,
``"text"``, ``"input_ids"``, ``"layer"``, ``"head"`` or ``"check"``.
"""

from __future__ import annotations

from explorer.core.config import ConfigError, shown


def download_command(name: str = "gpt2") -> str:
    """The one-line command that fetches model ``name`` into the local Hugging
    Face cache once, for offline use."""
    return f"python -m explorer.models download {name}"


DOWNLOAD_COMMAND = download_command()
"""The command for GPT-2 small (``make download-models`` runs it)."""


class ModelError(ConfigError):
    """A model that cannot be used here, or input it cannot take.

    Raised for an unsupported architecture, sizes in a config.json outside
    `explorer.models.sizes.LIMITS`, a folder that cannot be opened
    (`FolderUnusable`), text without a tokenizer, too many tokens, and a layer
    or head index out of range. The message says what is allowed.
    """


class ModelUnavailable(ModelError):
    """No weights for the requested model: not a folder, not in the local
    Hugging Face cache, and the Hub cannot be reached (or the download failed).
    The message names the model and says how to get the weights."""

    def __init__(self, message: str):
        super().__init__("model", message)


FOLDER_HINT = ("A usable folder holds a GPT-2, BERT, Llama, Mistral, Qwen2, Qwen3 or Gemma 3 "
               "model as written by "
               "model.save_pretrained(folder): config.json and model.safetensors (with the "
               "tokenizer files to read text), e.g. from “python -m explorer.models download "
               "gpt2 --to models/”.")
"""What a folder must hold, said whenever one cannot be opened."""


def folder_message(path: str) -> str:
    """The one message for a folder that cannot be opened, whatever the reason:
    ``path`` quoted as typed (escaped and cut by `explorer.core.config.shown`, ``~``
    not expanded), then `FOLDER_HINT`. It says nothing about whether the path
    exists, is a file, or what a library said about it."""
    return f"Cannot open {shown(path)} as a model folder. {FOLDER_HINT}"


class FolderUnusable(ModelError):
    """A path that does not lead to a checkpoint this explorer can read: missing, a file, a folder without config.json or model.safetensors,
    unreadable, a name the system refuses (too long, a NUL character), files
    that are not valid JSON or safetensors, or weights that do not fit the config.

    ``str(error)`` is the same `folder_message` for all of these, so that a page
    showing it cannot be used to map a server's disk. ``reason`` says which it
    was, for whoever owns the machine (a notebook, the command line); it is
    also attached as a note, so a traceback prints it, and a library's own
    exception, when there is one, is the ``__cause__``. Never show ``reason``
    to a visitor.
    """

    def __init__(self, path: str, reason: str):
        super().__init__("model", folder_message(path))
        self.path = path
        self.reason = reason
        self.add_note(f"reason: {reason}")


class ModelMismatch(ModelError):
    """Our hand-computed attention disagrees with the model's own numbers by
    more than the tolerance: a bug to report, never to hide."""

    def __init__(self, message: str):
        super().__init__("check", message)
