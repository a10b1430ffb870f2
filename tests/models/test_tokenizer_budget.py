"""A folder's tokenizer counts in the model's memory (issue 52): "a tokenizer with
2 M extra entries adds 519 MB that no budget counts and nothing releases". Its
files are weighed (`explorer.server.budget.TOKENIZER_BYTES_PER_FILE_BYTE`)
with the weights before anything is read, and the tokenizer lives only in the
model's cache entry."""

from __future__ import annotations

import gc
import weakref

import pytest
import transformers

from explorer.models import load_folder
from explorer.models.anatomy import EVERY_ARCHITECTURE
from explorer.server import budget
from explorer.server.budget import MIB, BudgetError
from explorer.ui import cache
from tests.support.tiny_models import save_tiny_gpt2, write_tokenizer_json


def _never_parsed(monkeypatch) -> list:
    """Record every tokenizer load (`_tokenizer` swallows a loader's exceptions)."""
    calls: list = []
    real = transformers.AutoTokenizer.from_pretrained

    def recorded(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", recorded)
    return calls


def test_a_folder_with_a_2m_entry_tokenizer_is_refused_unread(tmp_path, monkeypatch):
    folder = save_tiny_gpt2(tmp_path / "huge")
    files = write_tokenizer_json(folder, added=2_000_000).stat().st_size  # 258 MB
    calls = _never_parsed(monkeypatch)
    with pytest.raises(BudgetError) as info:
        load_folder(folder, within_budget=True, architectures=EVERY_ARCHITECTURE)
    message = str(info.value)
    counted = budget.tokenizer_bytes(files)
    assert f"{counted / MIB:,.0f} MB for its tokenizer" in message
    assert f"whose files hold {files / MIB:,.1f} MB" in message
    assert f"allows {budget.MODEL_BYTES / MIB:,.0f} MB for models" in message
    assert "EXPLORER_MEMORY_BUDGET_MB=" in message
    assert calls == []  # refused before the tokenizer was read


def test_the_figures_real_tokenizers_count_fit_the_catalogues_budgets():
    """Folders of the catalogue's models as ``python -m explorer.models download
    NAME FOLDER`` saves them (transformers 5 writes tokenizer.json and a
    tokenizer_config.json of a few kB, counted as 4 kB here): GPT-2 small
    (tokenizer.json 1,355,256 bytes) at its documented 1536 MB, BERT base
    (466,062) at 1280, SmolLM2-135M (2,104,556) at the default 1024. By name
    the catalogue's models count their weights only, as before. DistilGPT-2's
    folder (312 MB of weights, 33 MB of tokenizer) needs 1280, Qwen3-0.6B's
    (1,137 + 262 MB) 3328."""
    def fits(weights: int, files: int, budget_mb: int) -> bool:
        share = (budget_mb * MIB - budget.BASELINE_BYTES) * budget.MODEL_SHARE_PERCENT / 100
        return weights + budget.tokenizer_bytes(files + 4096) <= share

    assert fits(4 * 124_439_808, 1_355_256, 1536)
    assert fits(4 * 108_891_648, 466_062, 1280)
    assert fits(2 * 134_515_008, 2_104_556, 1024)
    assert not fits(4 * 81_912_576, 1_355_256, 1024) and fits(4 * 81_912_576, 1_355_256, 1280)
    assert not fits(2 * 596_049_920, 11_422_654, 2816) and fits(
        2 * 596_049_920, 11_422_654, 3328)


def test_the_tokenizer_is_counted_and_released_with_its_model(tmp_path):
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    files = write_tokenizer_json(folder, added=1000).stat().st_size
    cache.clear()
    try:
        model = cache.cached_model("folder:x", lambda: load_folder(folder, within_budget=True),
                                   "x")
        assert model.tokenizer is not None
        assert model.tokenizer_bytes == budget.tokenizer_bytes(files) > files
        assert cache.cache_bytes()["models"] == model.memory_bytes + model.tokenizer_bytes
        held = weakref.ref(model.tokenizer)
    finally:
        del model
        cache.clear()
    gc.collect()
    assert held() is None  # nothing but the cache entry held it
