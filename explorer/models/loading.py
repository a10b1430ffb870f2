"""Loading a real GPT-2, BERT or Llama-family model: `load_model` and `download`.

Weights come from, in order: a local folder (saved with ``save_pretrained``),
the local Hugging Face cache (``local_files_only=True``), and the Hub, only when
it can be reached within `HUB_TIMEOUT` seconds. With none of them,
`ModelUnavailable` says so and names the command that fetches the weights once:
``python -m explorer.models download gpt2``.

Models load as the base class (``GPT2Model``, ``BertModel`` without pooler) in
float32, eval mode, with ``attn_implementation="eager"``: the default SDPA path
returns no attention weights. The Llama family (Llama, Mistral, Qwen2, Qwen3,
Gemma 3 text; `explorer.models.anatomy.DECODERS`), opened when the caller asks
for it (``architectures=EVERY_ARCHITECTURE``), loads with its language-model
head (``LlamaForCausalLM`` ...), to generate, and in the dtype its weights ship
in (bfloat16 stays bfloat16: a layer is computed in float32 only when opened).

Nothing a folder holds is run or trusted: only safetensors weights are read
(never a pickle such as ``pytorch_model.bin``), and only from inside the folder
(a sharded index naming a pickle or a file elsewhere is refused), config.json is read as plain
JSON by the architecture's own config class (a config's ``auto_map``, code to
import, is dropped), and the sizes it asks for are checked
(`explorer.models.sizes`) before the model is built. A folder that cannot be
opened, for whatever reason, gets one message (`FolderUnusable`) that says
neither whether the path exists nor what a library said; the reason is kept on
the exception for the machine's owner.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
import transformers
from huggingface_hub import constants as hub_constants

from explorer.core.config import MAX_TOKENS, shown
from explorer.models import packaged
from explorer.models.anatomy import CLASSIC, EVERY_ARCHITECTURE, Architecture, Submodule
from explorer.models.catalogue import DECODER_CHOICES, DEFAULT_MODEL, MODEL_CHOICES
from explorer.models.errors import (
    DOWNLOAD_COMMAND,
    FolderUnusable,
    ModelError,
    ModelUnavailable,
    download_command,
)
from explorer.models.sizes import DecoderSizes, model_sizes, shipped_dtype
from explorer.server import budget

HUB_TIMEOUT = 2.0
"""Seconds to wait for a TCP connection to the Hub before calling it unreachable."""

HUB_NAMES = {
    "gpt2": "openai-community/gpt2",
    "distilgpt2": "distilbert/distilgpt2",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-base-cased": "google-bert/bert-base-cased",
    packaged.NAME: packaged.HUB_REPOSITORY,
    **{c.name: c.hub for c in DECODER_CHOICES.values()},
}
"""Short names and the Hub repositories they now live in; the local cache is
searched under both spellings."""


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A real model, ready for `compute_model_trace`, shared safely between threads.

    - ``name``: what the caller asked for (``"gpt2"``, a folder's name).
    - ``source``: ``"folder"``, ``"package"`` (all-MiniLM-L6-v2 from its installed
      package, `explorer.models.packaged`), ``"cache"`` or ``"hub"``;
      ``location``: the folder path or Hub repository the weights came from.
    - ``architecture``: ``"gpt2"``, ``"bert"`` or a Llama-family ``model_type``
      (``"llama"``, ``"mistral"``, ``"qwen2"``, ``"qwen3"``, ``"gemma3_text"``);
      ``family``: ``"classic"`` or ``"decoder"``; ``causal``: future tokens masked.
    - ``n_layers``, ``n_heads``, ``d_model``, ``head_dim`` (d_model / n_heads,
      unless the config sets it: Qwen3, Gemma 3), ``n_kv_heads`` (the K/V heads
      the query heads share; = n_heads in GPT-2 and BERT).
    - ``max_tokens``: the most tokens one input may have (the model's positions,
      at most 512); ``vocab_size``: ids must lie in ``[0, vocab_size)``.
    - ``tokenizer``: the model's own tokenizer, or None (then only ids are read);
      ``tokenizer_problem``: why tokenizer files that were there are unusable
      ("" when there were none).
    - ``tokenizer_bytes``: the memory its tokenizer takes, an estimate from its
      files (`explorer.server.budget.tokenizer_bytes`; 0 without a tokenizer, or
      for one from the Hub or its cache).
    - ``memory_bytes``: bytes of the parameters and buffers; ``dtype``: the
      weights' (``"float32"``; a Llama-family model keeps what it ships in, e.g.
      ``"bfloat16"``).
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
    module: Submodule = field(repr=False)
    tokenizer: Any = field(default=None, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    n_kv_heads: int = 0
    head_width: int = 0
    dtype: str = "float32"
    tokenizer_problem: str = ""
    tokenizer_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.n_kv_heads:  # one K/V head per query head (GPT-2, BERT)
            object.__setattr__(self, "n_kv_heads", self.n_heads)

    @property
    def head_dim(self) -> int:
        """Width of one head's queries, keys and values: the config's head_dim
        (``head_width``) when it sets one, else d_model // n_heads."""
        return self.head_width or self.d_model // self.n_heads

    @property
    def anatomy(self) -> Architecture:
        """Where this architecture keeps its attention (see
        `anatomy.EVERY_ARCHITECTURE`)."""
        return EVERY_ARCHITECTURE[self.architecture]

    @property
    def family(self) -> str:
        """``"classic"`` (GPT-2, BERT) or ``"decoder"`` (the Llama family)."""
        return self.anatomy.family

    @property
    def label(self) -> str:
        """A readable name, e.g. ``"gpt2 (GPT-2, 12 layers × 12 heads)"``, or
        ``"SmolLM2-135M (Llama, 30 layers × 9 heads sharing 3 K/V heads)"``."""
        plural = "s" if self.n_kv_heads > 1 else ""
        shared = (f" sharing {self.n_kv_heads} K/V head{plural}"
                  if self.n_kv_heads != self.n_heads else "")
        return (f"{self.name} ({self.anatomy.label}, {self.n_layers} layers × "
                f"{self.n_heads} heads{shared})")


# ---------------------------------------------------------------------------
# Is the Hub reachable?
# ---------------------------------------------------------------------------
def _offline_flag() -> bool:
    """Whether ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set (to 1, on, yes, true)."""
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return bool(hub_constants.HF_HUB_OFFLINE) or any(
        (flag or "").strip().upper() in ("1", "ON", "YES", "TRUE") for flag in flags)


def offline_reason() -> str | None:
    """Why the Hub will not be tried, or None when it answers within `HUB_TIMEOUT`.

    ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set means offline without
    trying. Otherwise one HTTPS ``HEAD`` request goes to the Hub (certificate
    checked, so a firewall that accepts any connection does not count as the
    Hub), in a daemon thread, so that this never waits longer than
    `HUB_TIMEOUT` seconds, DNS included.
    """
    if _offline_flag():
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


def in_local_cache(name: str) -> bool:
    """Whether the local Hugging Face cache holds model ``name``'s config.json
    (under either spelling, `HUB_NAMES`): nothing is fetched."""
    from huggingface_hub import try_to_load_from_cache
    return any(isinstance(try_to_load_from_cache(repo, "config.json"), str)
               for repo in _hub_spellings(name))


PROBE_SECONDS = 60.0
"""How long `page_default` trusts one answer of `offline_reason` (a probe can take
`HUB_TIMEOUT` seconds, and the default is asked on every run of the page)."""
_probe: list[tuple[float, str | None]] = []


def _hub_unreachable() -> bool:
    """`offline_reason` is not None, asked at most once a `PROBE_SECONDS` (the
    ``HF_HUB_OFFLINE`` flag, which costs nothing, every time)."""
    if _offline_flag():
        return True
    now = time.monotonic()
    if not _probe or now - _probe[0][0] > PROBE_SECONDS:
        _probe[:] = [(now, offline_reason())]
    return _probe[0][1] is not None


def page_default() -> str:
    """The model the Real model page opens on: the catalogue's `DEFAULT_MODEL`,
    unless the Hub cannot be reached and no model of the catalogue that this
    server's budget holds is in the local Hugging Face cache, but the
    all-MiniLM-L6-v2 package is installed (`explorer.models.packaged`): then
    ``"all-minilm-l6-v2"``, so that trained heads show offline. A cached model
    other than the default is opened rather than the package's."""
    if not packaged.installed():
        return DEFAULT_MODEL
    cached = [c.name for c in MODEL_CHOICES.values()
              if c.fits and c.name != packaged.NAME and in_local_cache(c.name)]
    if DEFAULT_MODEL in cached:
        return DEFAULT_MODEL
    if not _hub_unreachable():
        return DEFAULT_MODEL
    return cached[0] if cached else packaged.NAME


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------
MAX_CONFIG_BYTES = 2**20
"""The largest config.json read from a folder (GPT-2's is 665 bytes)."""

WEIGHTS_FILES = ("model.safetensors", "model.safetensors.index.json")
"""A folder's weights: one safetensors file, or the index of sharded ones. Only
safetensors are read, never pickled weights (``pytorch_model.bin``): unpickling
a file can run any code it names."""

HUB_NAME = re.compile(r"[\w.-]+(/[\w.-]+)?")
"""What a Hub model name looks like (``gpt2``, ``openai-community/gpt2``), at
most `HUB_NAME_CHARS` characters; anything else is taken for a path."""
HUB_NAME_CHARS = 96


LOCAL_SOURCES = ("folder", "package")
"""The sources read as a folder on this machine (never the Hub's cache layout)."""


class _NotFound(Exception):
    """Internal: no config or weights at that location (try the next source)."""


class _Unreadable(Exception):
    """Internal: files are there but cannot be read as a GPT-2 / BERT model."""


def _unavailable(name: str, reason: str) -> ModelUnavailable:
    """The no-weights message, with the command that fetches them."""
    plain = HUB_NAME.fullmatch(name) and len(name) <= HUB_NAME_CHARS
    command = download_command(name if plain else "<model name>")
    also = ("or “make download-models”" if command == DOWNLOAD_COMMAND
            else f"GPT-2 small: “{DOWNLOAD_COMMAND}” or “make download-models”")
    return ModelUnavailable(
        f"No weights for {shown(name)} on this machine: it is not a folder, it is not in "
        f"the local Hugging Face cache ({hub_constants.HF_HUB_CACHE}), and the Hub cannot "
        f"be used ({reason}). Fetch it once while online with “{command}” ({also}), then "
        "it loads offline; or pass the path of a folder saved with save_pretrained().")


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _os_reason(err: OSError, what: str = "the path") -> str:
    """``"config.json: Permission denied"``: an `OSError` without its path."""
    return f"{what}: {os.strerror(err.errno) if err.errno else type(err).__name__}"


def _is_file(path: Path) -> bool:
    """A regular file (not a folder, FIFO or device: reading those can block
    or never end), following links; False for any path the system refuses."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def _folder(path: str) -> Path:
    """The folder ``path`` names (``~`` expanded, made absolute). Raises
    `_NotFound` saying why there is none."""
    if "\0" in path:
        raise _NotFound("the path holds a NUL character")
    folder = Path(os.path.abspath(os.path.expanduser(path)))
    try:
        mode = folder.stat().st_mode
    except OSError as err:  # missing, too long, not readable, a loop of links ...
        raise _NotFound(_os_reason(err)) from err
    if not stat.S_ISDIR(mode):
        raise _NotFound("it is not a folder")
    return folder


def _json_file(path: Path) -> Any:
    """The file ``path`` (config.json, an index) read as plain JSON, at most
    `MAX_CONFIG_BYTES`. Raises `_NotFound` or `_Unreadable` saying why not."""
    if not _is_file(path):
        raise _NotFound(f"it holds no {path.name}")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise _NotFound(_os_reason(err, path.name)) from err
    if len(data) > MAX_CONFIG_BYTES:
        raise _Unreadable(f"{path.name} is larger than {MAX_CONFIG_BYTES:,} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, nested too deep
        raise _Unreadable(f"{path.name} is not valid JSON ({_first_line(err)})") from err


def _folder_config(folder: Path) -> dict:
    """A folder's config.json as a dict, read as plain JSON (at most
    `MAX_CONFIG_BYTES`). Raises `_NotFound` or `_Unreadable` saying why not."""
    raw = _json_file(folder / "config.json")
    if not isinstance(raw, dict):
        raise _Unreadable("config.json is not a JSON object")
    return raw


def _check_shards(folder: Path, shown_as: str) -> None:
    """The shards a folder's index (model.safetensors.index.json) lists, when
    transformers would read them (no model.safetensors beside it): each must be
    a ``.safetensors`` file named from inside the folder, never a pickle
    (``pytorch_model-00001-of-00002.bin``, which transformers would unpickle)
    nor a file elsewhere (``../x.safetensors``, an absolute path).

    Raises `ModelError` naming the first shard that is not, `_NotFound` or
    `_Unreadable` for an index that cannot be read or lists no shards."""
    single, index = (folder / name for name in WEIGHTS_FILES)
    if _is_file(single) or not _is_file(index):
        return
    raw = _json_file(index)
    shards = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(shards, dict) or not shards or not all(
            isinstance(shard, str) for shard in shards.values()):
        raise _Unreadable(f"{index.name} maps no tensor to a shard file (weight_map)")
    for shard in sorted(set(shards.values())):
        where = os.path.normpath(os.path.join(folder, shard))
        why = ("lies outside the folder" if os.path.isabs(shard) or where == str(folder)
               or os.path.commonpath([folder, where]) != str(folder)
               else None if shard.endswith(".safetensors") else "is not a safetensors file")
        if why:
            raise ModelError("model", f"{shown_as} lists in {index.name} a shard the explorer "
                                      f"does not read: {shown(shard)} {why}. It reads "
                                      "safetensors shards from inside the folder only "
                                      "(pickled weights are never read).")


def _hub_config(location: str, local_files_only: bool) -> dict:
    """A Hub repository's config.json (from the local cache, or downloaded) as a dict."""
    try:
        raw, _ = transformers.PretrainedConfig.get_config_dict(
            location, local_files_only=local_files_only)
    except (OSError, ValueError) as err:  # not cached, bad repo name, offline
        raise _NotFound(_first_line(err)) from err
    return raw


def _model_config(raw: dict, model: str, architectures: tuple[str, ...] = CLASSIC
                  ) -> tuple[Architecture, Any]:
    """The architecture and transformers config that a config.json describes.

    Built by the architecture's own config class, never ``AutoConfig``: a
    config's ``auto_map`` (code to import) is dropped unread. ``model`` names
    the model in messages; ``architectures``: the ``model_type`` values the
    caller opens. Raises `ModelError` for an architecture or variant the
    explorer does not mirror (for one that exists only as code, ``auto_map``,
    saying that such code is never run), `_Unreadable` for a config that is not one.
    """
    model_type = raw.get("model_type")
    if not isinstance(model_type, str):
        raise _Unreadable("config.json names no model_type")
    arch = EVERY_ARCHITECTURE.get(model_type) if model_type in architectures else None
    if arch is None:
        supported = ", ".join(repr(a) for a in architectures)
        examples = ("'gpt2', 'distilgpt2', 'bert-base-uncased'" if architectures == CLASSIC
                    else "'gpt2', 'bert-base-uncased', 'smollm2-135m', 'qwen3-0.6b'")
        if model_type == "gemma3" and "gemma3_text" in architectures:
            raise ModelError("model", f"{model} is a multimodal Gemma 3 ('gemma3'); the "
                                      "explorer reads Gemma 3's text models ('gemma3_text', "
                                      "e.g. google/gemma-3-1b-it)")
        if "auto_map" in raw:
            raise ModelError("model", f"{model} comes with its own code (auto_map in its "
                                      f"config.json, for a {shown(model_type)} model), which "
                                      "the explorer never runs; it opens models of type "
                                      f"{supported} only (e.g. {examples})")
        raise ModelError("model", f"{model} is a {shown(model_type)} model; the explorer opens "
                                  f"models of type {supported} only (e.g. {examples})")
    config_class = getattr(transformers, arch.config_class)
    try:
        config = config_class.from_dict({k: v for k, v in raw.items() if k != "auto_map"})
    except Exception as err:  # transformers' field checks raise several kinds
        raise _Unreadable(f"config.json is not a {arch.label} config "
                          f"({_first_line(err)})") from err
    why = arch.unsupported(config)
    if why:
        raise ModelError("model", f"{model} is a {arch.label} variant the explorer cannot "
                                  f"mirror step by step: {why}")
    return arch, config


def _weights(arch: Architecture, config: Any, location: str, local_files_only: bool
             ) -> Submodule:
    """The model built from ``config`` with the safetensors weights at ``location``,
    in float32 (GPT-2, BERT) or in the dtype the weights ship in (the Llama family).

    Raises `_NotFound` when there are none, `_Unreadable` when they cannot be
    read or do not fit the config (a tensor missing or of the wrong shape)."""
    model_class = getattr(transformers, arch.model_class)
    dtype = (getattr(torch, shipped_dtype(config)) if arch.family == "decoder"
             else torch.float32)
    try:
        module, info = model_class.from_pretrained(
            location, config=config, local_files_only=local_files_only, use_safetensors=True,
            trust_remote_code=False, attn_implementation="eager", dtype=dtype,
            output_loading_info=True, **arch.model_kwargs)
    except (OSError, ValueError) as err:  # no weights file here (or not yet downloaded)
        raise _NotFound(_first_line(err)) from err
    except Exception as err:  # a corrupt file, shapes that do not fit ...
        raise _Unreadable(f"the weights could not be read ({_first_line(err)})") from err
    missing = sorted(info.get("missing_keys") or []) + sorted(
        str(k) for k in info.get("mismatched_keys") or [])
    if missing:
        raise _Unreadable(f"the weights are incomplete for a {arch.label} model: "
                          f"{len(missing)} tensors are missing or have the wrong shape "
                          f"(e.g. {missing[0]})")
    module.eval()
    module.requires_grad_(False)
    return module


TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt")
"""A folder holds a tokenizer when it has one of these (GPT-2: vocab.json with
merges.txt; BERT: vocab.txt; either: tokenizer.json)."""
TOKENIZER_READ_FILES = (*TOKENIZER_FILES, "merges.txt", "tokenizer_config.json",
                        "added_tokens.json", "special_tokens_map.json", "tokenizer.model",
                        "spiece.model", "sentencepiece.bpe.model")
"""Every file a tokenizer load may read from a folder, counted by
`tokenizer_file_bytes`."""


def tokenizer_file_bytes(location: str) -> int:
    """The bytes of the tokenizer files (`TOKENIZER_READ_FILES`) in the folder
    ``location``, which `_tokenizer` would read; 0 when it holds none of
    `TOKENIZER_FILES` (nothing is read then) or is no folder (a Hub name)."""
    folder = Path(location)
    if not folder.is_dir() or not any(_is_file(folder / n) for n in TOKENIZER_FILES):
        return 0
    total = 0
    for name in TOKENIZER_READ_FILES:
        if _is_file(folder / name):
            try:
                total += (folder / name).stat().st_size
            except OSError:  # gone since: nothing to read
                pass
    return total


def _tokenizer(location: str, local_files_only: bool) -> tuple[Any, str]:
    """The model's tokenizer and "", or None and why: "" when the location holds
    none, else what makes the files there unusable.

    transformers 5 builds an empty tokenizer (special tokens only) when the
    files are missing, so a folder must hold one of `TOKENIZER_FILES` and the
    vocabulary must hold more than the special tokens. A tokenizer_config's
    ``auto_map`` (code to import) is never followed (``trust_remote_code=False``).
    """
    folder = Path(location)
    if folder.is_dir() and not any(_is_file(folder / name) for name in TOKENIZER_FILES):
        return None, ""
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            location, local_files_only=local_files_only, trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - any failure means: no usable tokenizer here
        return None, (f"its tokenizer files could not be read ({type(error).__name__}: "
                      f"{str(error)[:200]})" if folder.is_dir() else "")
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        return None, ("its tokenizer files hold no vocabulary beyond the special tokens"
                      if folder.is_dir() else "")
    return tokenizer, ""


def _memory_bytes(module: torch.nn.Module) -> int:
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _load(location: str, name: str, source: str, local_files_only: bool, shown_as: str,
          within_budget: bool = False, architectures: tuple[str, ...] = CLASSIC
          ) -> LoadedModel:
    """Load config, weights and tokenizer from one location, in that order:

    1. the config.json, as plain JSON;
    2. its architecture (one of ``architectures``), variant and sizes
       (`explorer.models.sizes.model_sizes`), and with ``within_budget`` its
       bytes (float32, or the Llama family's shipped dtype) with its tokenizer's
       (a folder's tokenizer files, `tokenizer_file_bytes`, counted as
       `explorer.server.budget.tokenizer_bytes`) against the server's model share
       (`explorer.server.budget.check_model_fits`): all before anything is built or read;
    3. the safetensors weights, into the architecture's base class;
    4. the tokenizer, if there is one.

    ``shown_as`` names the model in messages (quoted). Raises `_NotFound` when
    the location has no config or weights, `_Unreadable` when its files are not
    a model's, `ModelError` for an unsupported architecture, sizes outside
    `explorer.models.sizes.LIMITS` or a folder's shard that is not safetensors
    inside it (`_check_shards`), and `explorer.server.budget.BudgetError`.
    """
    local = source in LOCAL_SOURCES
    raw = (_folder_config(Path(location)) if local
           else _hub_config(location, local_files_only))
    arch, config = _model_config(raw, shown_as, architectures)
    sizes = model_sizes(arch.name, config, shown_as)
    tokenizer_files = tokenizer_file_bytes(location)
    if within_budget:
        budget.check_model_fits(shown_as[:1].upper() + shown_as[1:], sizes.nbytes,
                                tokenizer_files)
    if local and not any(_is_file(Path(location, f)) for f in WEIGHTS_FILES):
        raise _NotFound("it holds no model.safetensors (pickled weights such as "
                        "pytorch_model.bin are never read)")
    if local:
        _check_shards(Path(location), shown_as)
    module = _weights(arch, config, location, local_files_only)
    c = module.config
    tokenizer, tokenizer_problem = _tokenizer(location, local_files_only)
    return LoadedModel(
        name=name, source=source, location=location, architecture=arch.name,
        n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads, d_model=c.hidden_size,
        causal=arch.causal(c), max_tokens=min(MAX_TOKENS, c.max_position_embeddings),
        vocab_size=c.vocab_size, memory_bytes=_memory_bytes(module), module=module,
        tokenizer=tokenizer, tokenizer_problem=tokenizer_problem,
        tokenizer_bytes=budget.tokenizer_bytes(tokenizer_files) if tokenizer is not None else 0,
        n_kv_heads=sizes.n_kv_heads if isinstance(sizes, DecoderSizes) else 0,
        head_width=sizes.head_dim if isinstance(sizes, DecoderSizes) else 0,
        dtype=str(next(module.parameters()).dtype).removeprefix("torch."))


def _text(name_or_path: Any) -> str:
    """``name_or_path`` as stripped text (a `str` or ``os.PathLike``), else `ModelError`."""
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise ModelError("model", "model must be a name such as 'gpt2' or the path of a folder "
                                  f"saved with save_pretrained() (got {shown(name_or_path)})")
    name = name_or_path.strip()
    if not name:
        raise ModelError("model", "model must be a name such as 'gpt2' or the path of a "
                                  "folder saved with save_pretrained() (got nothing)")
    return name


def load_folder(path: str | os.PathLike, *, within_budget: bool = False,
                architectures: Iterable[str] = EVERY_ARCHITECTURE) -> LoadedModel:
    """Load the model saved in the folder ``path`` (``~`` is expanded): GPT-2, BERT,
    or a Llama, Mistral, Qwen2, Qwen3 or Gemma 3 (text) model; ``architectures``:
    the ``model_type`` values to open (default every one,
    `explorer.models.anatomy.EVERY_ARCHITECTURE`).

    The folder must hold what ``model.save_pretrained(folder)`` writes:
    config.json and model.safetensors (or its sharded index); tokenizer files
    are optional (without them only ``input_ids`` can be traced). Nothing in it
    is ever run: pickled weights (pytorch_model.bin) are not read, and a
    config's ``auto_map`` (custom code) is ignored. The Hub is never asked.

    With ``within_budget`` (the Real model page), the float32 bytes the config
    asks for, with the memory its tokenizer files will take
    (`explorer.server.budget.tokenizer_bytes`), are weighed against the server's
    model share before the model is built or the tokenizer read
    (`explorer.server.budget.check_model_fits`; MB = 2**20 bytes).

    Raises:

    - `FolderUnusable` for any path that does not lead to a readable
      checkpoint (missing, a file, no config.json or model.safetensors,
      unreadable, a name the system refuses, invalid JSON or safetensors,
      weights that do not fit the config): always the one message
      (`explorer.models.errors.folder_message`), the path quoted as typed; the
      reason is in ``error.reason``, for the machine's owner only;
    - `ModelError` naming what the folder's config.json asks for, once it has
      been read: an architecture other than GPT-2 / BERT, a variant the
      explorer cannot mirror, sizes outside `explorer.models.sizes.LIMITS`;
      or a shard its model.safetensors.index.json lists that is not a
      safetensors file inside the folder (a pickled ``.bin``, ``../x.safetensors``);
    - `explorer.server.budget.BudgetError` (with ``within_budget``), with the figures.

    All are `explorer.core.config.ConfigError`: never `OSError`.
    """
    typed = _text(path)
    shown_as = f"the model in {shown(typed)}"
    try:
        folder = _folder(typed)
        return _load(str(folder), folder.name, "folder", local_files_only=True,
                     shown_as=shown_as, within_budget=within_budget,
                     architectures=tuple(architectures))
    except (_NotFound, _Unreadable) as err:  # the library's exception, if any, as the cause
        raise FolderUnusable(typed, str(err)) from err.__cause__
    except OSError as err:  # not expected past the checks above; still never shown
        raise FolderUnusable(typed, _os_reason(err)) from err


def _is_path(name: str) -> bool:
    """Whether ``name`` is meant as a folder rather than a Hub name like ``org/model``:
    it starts like a path, is no Hub name, or names something on this machine."""
    if name.startswith(("/", "./", "../", "~")):
        return True
    if len(name) > HUB_NAME_CHARS or not HUB_NAME.fullmatch(name):
        return True
    return os.path.lexists(name)  # False for any name the system refuses, never an OSError


def _hub_spellings(name: str) -> list[str]:
    """The names to look up: as given, then its current Hub repository, if known."""
    return [name] + ([HUB_NAMES[name]] if name in HUB_NAMES else [])


def _from_hub(location: str, name: str, source: str, within_budget: bool = False,
              architectures: tuple[str, ...] = CLASSIC) -> LoadedModel:
    """`_load` from the local cache (``source="cache"``), the Hub (``"hub"``) or
    an installed package's extracted folder (``"package"``); unreadable files
    there become a `ModelError` with the library's reason (the files are the
    Hub's or a package's, not a visitor's)."""
    try:
        return _load(location, name, source, local_files_only=source != "hub",
                     shown_as=shown(name), within_budget=within_budget,
                     architectures=architectures)
    except _Unreadable as err:
        raise ModelError("model", f"the files of {shown(name)} at {location} could not be "
                                  f"read as a model: {err}") from err.__cause__


def load_model(name_or_path: str | os.PathLike, *, within_budget: bool = False,
               architectures: Iterable[str] = EVERY_ARCHITECTURE) -> LoadedModel:
    """Load a model the explorer mirrors and its tokenizer: GPT-2 or BERT, ready
    for `compute_model_trace`, or a Llama-family model (``"smollm2-135m"``,
    ``"qwen3-0.6b"``, a Llama, Mistral, Qwen2, Qwen3 or Gemma 3 folder), ready for
    `explorer.models.llama.compute_decoder_trace` and `explorer.models.generation`.
    ``architectures``: the ``model_type`` values to open (default every one,
    `explorer.models.anatomy.EVERY_ARCHITECTURE`; ``CLASSIC`` for GPT-2 and BERT).

    ``name_or_path``: a folder saved with ``save_pretrained`` (see `load_folder`,
    which this calls for anything that starts like a path, is not a Hub name,
    or exists on this machine), or a Hub name such as ``"gpt2"``,
    ``"distilgpt2"``, ``"bert-base-uncased"``, looked up in the local Hugging
    Face cache first and downloaded only when the Hub answers.
    ``"all-minilm-l6-v2"`` opens from its installed package, with no network
    (`explorer.models.packaged`: extracted once, its weights' sha256 checked
    before they are opened), and like a Hub name when the package is missing. Only
    safetensors weights are read, and no code from a config (``auto_map``).

    Raises `ModelUnavailable` when there are no weights and no network (the
    message names the download command); for a folder, `FolderUnusable` (one
    message for every path that cannot be opened; ``error.reason`` says why);
    `ModelError` for an architecture outside ``architectures``, sizes outside
    `explorer.models.sizes.LIMITS`, unreadable files in the cache or a
    package whose weights are not the published ones; with
    ``within_budget``, `explorer.server.budget.BudgetError` for a model larger than
    the server's model share, before it is built (as in `load_folder`). All are
    `explorer.core.config.ConfigError`.
    """
    name, kinds = _text(name_or_path), tuple(architectures)
    if name == packaged.NAME:
        folder = packaged.packaged_folder()  # its sha256 checked; None: not installed
        if folder is not None:
            try:
                return _from_hub(str(folder), name, "package", within_budget, kinds)
            except _NotFound as err:  # a file missing from the package's zip
                raise ModelError("model", f"the files of {shown(name)} at {folder} could not "
                                          f"be read as a model: {err}") from None
    elif _is_path(name):
        return load_folder(name, within_budget=within_budget, architectures=kinds)
    for location in _hub_spellings(name):
        try:
            return _from_hub(location, name, "cache", within_budget, kinds)
        except _NotFound:
            continue
    reason = offline_reason()
    if reason:
        raise _unavailable(name, reason)
    try:
        return _from_hub(_hub_spellings(name)[-1], name, "hub", within_budget, kinds)
    except _NotFound as err:
        raise _unavailable(name, f"the download failed: {err}") from None


def download(name: str = "gpt2", folder: str | os.PathLike | None = None) -> str:
    """Fetch a model and its tokenizer from the Hub into the local Hugging Face
    cache, so that `load_model(name)` works offline afterwards.

    With ``folder``, also save both there (``save_pretrained``), for
    ``load_model(folder)``. Returns where the weights are. Raises
    `ModelUnavailable` when the Hub cannot be reached, `ModelError` for an
    unsupported model. Every architecture is fetched (GPT-2, BERT and the
    Llama family). The command line ``python -m explorer.models download
    gpt2`` calls this.
    """
    reason = offline_reason()
    if reason:
        raise ModelUnavailable(f"cannot download {name!r}: {reason}. Run this on a machine "
                               "with internet access, then copy the Hugging Face cache "
                               f"({hub_constants.HF_HUB_CACHE}) or a saved folder here.")
    try:
        model = _from_hub(_hub_spellings(name)[-1], name, "hub",
                          architectures=tuple(EVERY_ARCHITECTURE))
    except _NotFound as err:
        raise ModelUnavailable(f"cannot download {name!r}: {err}") from None
    if folder is None:
        return f"{hub_constants.HF_HUB_CACHE} (Hub repository {model.location})"
    target = Path(folder).expanduser()
    model.module.save_pretrained(target)
    if model.tokenizer is not None:
        model.tokenizer.save_pretrained(target)
    return str(target)
