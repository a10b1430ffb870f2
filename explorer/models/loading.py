"""Loading a real GPT-2 or BERT: `load_model` and `download`.

Weights come from, in order: a local folder (saved with ``save_pretrained``),
the local Hugging Face cache (``local_files_only=True``), and the Hub, only when
it can be reached within `HUB_TIMEOUT` seconds. With none of them,
`ModelUnavailable` says so and names the command that fetches the weights once:
``python -m explorer.models download gpt2``.

Models load as the base class (``GPT2Model``, ``BertModel`` without pooler) in
float32, eval mode, with ``attn_implementation="eager"``: the default SDPA path
returns no attention weights.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
import transformers
from huggingface_hub import constants as hub_constants

from explorer.config import MAX_TOKENS, shown
from explorer.models.anatomy import ARCHITECTURES, Architecture
from explorer.models.errors import (DOWNLOAD_COMMAND, ModelError, ModelUnavailable,
                                    download_command)

HUB_TIMEOUT = 2.0
"""Seconds to wait for a TCP connection to the Hub before calling it unreachable."""

HUB_NAMES = {
    "gpt2": "openai-community/gpt2",
    "distilgpt2": "distilbert/distilgpt2",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-base-cased": "google-bert/bert-base-cased",
}
"""Short names and the Hub repositories they now live in; the local cache is
searched under both spellings."""


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A real model, ready for `compute_model_trace`, shared safely between threads.

    - ``name``: what the caller asked for (``"gpt2"``, a folder's name).
    - ``source``: ``"folder"``, ``"cache"`` or ``"hub"``; ``location``: the
      folder path or Hub repository the weights came from.
    - ``architecture``: ``"gpt2"`` or ``"bert"``; ``causal``: future tokens masked.
    - ``n_layers``, ``n_heads``, ``d_model``, ``head_dim`` (= d_model / n_heads).
    - ``max_tokens``: the most tokens one input may have (the model's positions,
      at most 512); ``vocab_size``: ids must lie in ``[0, vocab_size)``.
    - ``tokenizer``: the model's own tokenizer, or None (then only ids are read).
    - ``memory_bytes``: bytes of the parameters and buffers (float32).
    - ``module``: the ``transformers`` model itself (eval mode; never mutated).

    Every forward pass takes ``lock``, so hooks registered for one pass never
    see another thread's pass.
    """

    name: str
    source: str
    location: str
    architecture: str
    n_layers: int
    n_heads: int
    d_model: int
    causal: bool
    max_tokens: int
    vocab_size: int
    memory_bytes: int
    module: torch.nn.Module = field(repr=False)
    tokenizer: Any = field(default=None, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def head_dim(self) -> int:
        """Width of one head's queries, keys and values: d_model // n_heads."""
        return self.d_model // self.n_heads

    @property
    def anatomy(self) -> Architecture:
        """Where this architecture keeps its attention (see `anatomy.ARCHITECTURES`)."""
        return ARCHITECTURES[self.architecture]

    @property
    def label(self) -> str:
        """A readable name, e.g. ``"gpt2 (GPT-2, 12 layers × 12 heads)"``."""
        return (f"{self.name} ({self.anatomy.label}, {self.n_layers} layers × "
                f"{self.n_heads} heads)")


# ---------------------------------------------------------------------------
# Is the Hub reachable?
# ---------------------------------------------------------------------------
def offline_reason() -> str | None:
    """Why the Hub will not be tried, or None when it answers within `HUB_TIMEOUT`.

    ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set means offline without
    trying. Otherwise one HTTPS ``HEAD`` request goes to the Hub (certificate
    checked, so a firewall that accepts any connection does not count as the
    Hub), in a daemon thread, so that this never waits longer than
    `HUB_TIMEOUT` seconds, DNS included.
    """
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    if hub_constants.HF_HUB_OFFLINE or any(
            (flag or "").strip().upper() in ("1", "ON", "YES", "TRUE") for flag in flags):
        return "HF_HUB_OFFLINE is set"
    host = urlparse(hub_constants.ENDPOINT).hostname or "huggingface.co"
    reached = threading.Event()

    def connect() -> None:
        request = urllib.request.Request(hub_constants.ENDPOINT, method="HEAD")
        try:
            urllib.request.urlopen(request, timeout=HUB_TIMEOUT).close()
            reached.set()
        except urllib.error.HTTPError:  # the Hub answered, if only with an error status
            reached.set()
        except (OSError, ValueError):  # no DNS, no route, refused, bad certificate
            pass

    threading.Thread(target=connect, daemon=True).start()
    if reached.wait(HUB_TIMEOUT):
        return None
    return f"{host} cannot be reached"


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------
class _NotFound(Exception):
    """Internal: no config or weights at that location (try the next source)."""


def _unavailable(name: str, reason: str) -> ModelUnavailable:
    """The no-weights message, with the command that fetches them."""
    plain = re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name) and len(name) <= 96
    command = download_command(name if plain else "<model name>")
    also = ("or `make download-models`" if command == DOWNLOAD_COMMAND
            else f"GPT-2 small: `{DOWNLOAD_COMMAND}` or `make download-models`")
    return ModelUnavailable(
        f"No weights for {shown(name)} on this machine: it is not a folder, it is not in "
        f"the local Hugging Face cache ({hub_constants.HF_HUB_CACHE}), and the Hub cannot "
        f"be used ({reason}). Fetch it once while online with `{command}` ({also}), then "
        "it loads offline; or pass the path of a folder saved with save_pretrained().")


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _from_pretrained(loader: Any, location: str, local_files_only: bool, **kwargs: Any) -> Any:
    """``loader.from_pretrained``, turning "no such files" into `_NotFound` and
    any other failure (a corrupt weights file ...) into `ModelError`."""
    try:
        return loader.from_pretrained(location, local_files_only=local_files_only, **kwargs)
    except (OSError, ValueError) as err:  # missing files, bad repo names, offline
        raise _NotFound(_first_line(err)) from err
    except Exception as err:  # shown to the visitor as one clear error
        raise ModelError("model", f"the files at {location} could not be read as a model "
                                  f"({_first_line(err)})") from err


TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt")
"""A folder holds a tokenizer when it has one of these (GPT-2: vocab.json with
merges.txt; BERT: vocab.txt; either: tokenizer.json)."""


def _tokenizer(location: str, local_files_only: bool) -> Any:
    """The model's tokenizer, or None when the location holds none.

    transformers 5 builds an empty tokenizer (special tokens only) when the
    files are missing, so a folder must hold one of `TOKENIZER_FILES` and the
    vocabulary must hold more than the special tokens.
    """
    folder = Path(location)
    if folder.is_dir() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            location, local_files_only=local_files_only)
    except Exception:  # noqa: BLE001 - any failure means: no usable tokenizer here
        return None
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        return None
    return tokenizer


def _memory_bytes(module: torch.nn.Module) -> int:
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _load(location: str, name: str, source: str, local_files_only: bool) -> LoadedModel:
    """Load config, weights and tokenizer from one location.

    Raises `_NotFound` when the location has no config or weights, and
    `ModelError` for an unsupported architecture or incomplete weights.
    """
    config = _from_pretrained(transformers.AutoConfig, location, local_files_only)
    arch = ARCHITECTURES.get(getattr(config, "model_type", None))
    if arch is None:
        supported = ", ".join(repr(a) for a in ARCHITECTURES)
        raise ModelError("model", f"{shown(name)} is a {config.model_type!r} model; the explorer "
                                  f"opens models of type {supported} only (e.g. 'gpt2', "
                                  "'distilgpt2', 'bert-base-uncased')")
    why = arch.unsupported(config)
    if why:
        raise ModelError("model", f"{shown(name)} is a {arch.label} variant the explorer cannot "
                                  f"mirror step by step: {why}")
    model_class = getattr(transformers, arch.model_class)
    module, info = _from_pretrained(
        model_class, location, local_files_only, config=config, attn_implementation="eager",
        dtype=torch.float32, output_loading_info=True, **arch.model_kwargs)
    missing = sorted(info.get("missing_keys") or []) + sorted(
        str(k) for k in info.get("mismatched_keys") or [])
    if missing:
        raise ModelError("model", f"the weights of {shown(name)} are incomplete for a "
                                  f"{arch.label} model: {len(missing)} tensors are missing "
                                  f"or have the wrong shape (e.g. {missing[0]})")
    module.eval()
    module.requires_grad_(False)
    c = module.config
    return LoadedModel(
        name=name, source=source, location=location, architecture=arch.name,
        n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads, d_model=c.hidden_size,
        causal=arch.causal(c), max_tokens=min(MAX_TOKENS, c.max_position_embeddings),
        vocab_size=c.vocab_size, memory_bytes=_memory_bytes(module), module=module,
        tokenizer=_tokenizer(location, local_files_only))


def _is_path(name: str) -> bool:
    """Whether ``name`` is meant as a folder rather than a Hub name like ``org/model``."""
    return name.startswith(("/", "./", "../", "~")) or Path(name).exists()


def _hub_spellings(name: str) -> list[str]:
    """The names to look up: as given, then its current Hub repository, if known."""
    return [name] + ([HUB_NAMES[name]] if name in HUB_NAMES else [])


def load_model(name_or_path: str | os.PathLike) -> LoadedModel:
    """Load a GPT-2 or BERT model and its tokenizer, ready for `compute_model_trace`.

    ``name_or_path``: a folder saved with ``save_pretrained`` (the tokenizer files
    are optional: without them only ``input_ids`` can be traced), or a Hub name
    such as ``"gpt2"``, ``"distilgpt2"``, ``"bert-base-uncased"``, looked up in
    the local Hugging Face cache first and downloaded only when the Hub answers.

    Raises `ModelUnavailable` when there are no weights and no network (the
    message names the download command), and `ModelError` for a missing folder,
    an architecture other than GPT-2 / BERT, or incomplete weights.
    """
    name = os.fspath(name_or_path).strip() if name_or_path is not None else ""
    if not name:
        raise ModelError("model", "model must be a name such as 'gpt2' or the path of a "
                                  "folder saved with save_pretrained() (got nothing)")
    folder = Path(name).expanduser()
    if folder.is_dir():
        try:
            return _load(str(folder), folder.name, "folder", local_files_only=True)
        except _NotFound:
            raise ModelError("model", f"the folder {shown(name)} holds no model: it needs a "
                                      "config.json and weights (model.safetensors), as "
                                      "written by model.save_pretrained(folder)") from None
    if _is_path(name):
        raise ModelError("model", f"there is no folder {shown(name)}: give the path of a folder "
                                  "saved with save_pretrained(), or a model name such as 'gpt2'")
    for location in _hub_spellings(name):
        try:
            return _load(location, name, "cache", local_files_only=True)
        except _NotFound:
            continue
    reason = offline_reason()
    if reason:
        raise _unavailable(name, reason)
    try:
        return _load(_hub_spellings(name)[-1], name, "hub", local_files_only=False)
    except _NotFound as err:
        raise _unavailable(name, f"the download failed: {err}") from None


def download(name: str = "gpt2", folder: str | os.PathLike | None = None) -> str:
    """Fetch a model and its tokenizer from the Hub into the local Hugging Face
    cache, so that `load_model(name)` works offline afterwards.

    With ``folder``, also save both there (``save_pretrained``), for
    ``load_model(folder)``. Returns where the weights are. Raises
    `ModelUnavailable` when the Hub cannot be reached, `ModelError` for an
    unsupported model. The command line ``python -m explorer.models download
    gpt2`` calls this.
    """
    reason = offline_reason()
    if reason:
        raise ModelUnavailable(f"cannot download {name!r}: {reason}. Run this on a machine "
                               "with internet access, then copy the Hugging Face cache "
                               f"({hub_constants.HF_HUB_CACHE}) or a saved folder here.")
    try:
        model = _load(_hub_spellings(name)[-1], name, "hub", local_files_only=False)
    except _NotFound as err:
        raise ModelUnavailable(f"cannot download {name!r}: {err}") from None
    if folder is None:
        return f"{hub_constants.HF_HUB_CACHE} (Hub repository {model.location})"
    target = Path(folder).expanduser()
    model.module.save_pretrained(target)
    if model.tokenizer is not None:
        model.tokenizer.save_pretrained(target)
    return str(target)
