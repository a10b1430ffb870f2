"""`explorer.models.loading`: a folder's sharded weights are read only as
safetensors and only from inside the folder (issue 52): an index naming a
pickled ``.bin`` shard, or a shard outside the folder, is refused by name
before anything is read."""

from __future__ import annotations

import pytest
import torch

from explorer.core.config import shown
from explorer.models import load_model
from explorer.models.errors import ModelError
from tests.support.tiny_models import save_tiny_gpt2, shard_weights


def _refused(folder, monkeypatch) -> str:
    """``folder`` refused with a `ModelError`, nothing unpickled on the way: its message."""
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("a pickle was read"))
    with pytest.raises(ModelError) as refused:
        load_model(folder)
    assert refused.value.field == "model"
    return str(refused.value)


def test_sharded_safetensors_in_the_folder_load(tmp_path):
    folder = save_tiny_gpt2(tmp_path / "sharded")
    shard_weights(folder, ["model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors"])
    assert load_model(folder).n_layers == 2


@pytest.mark.parametrize("shards", [
    ["pytorch_model.bin"],  # before: unpickled by torch.load (weights_only) and loaded
    ["model-00001-of-00002.safetensors", "pytorch_model-00002-of-00002.bin"],
])
def test_an_index_naming_a_pickled_shard_is_refused_unread(tmp_path, monkeypatch, shards):
    folder = save_tiny_gpt2(tmp_path / "bin-shard")
    shard_weights(folder, shards)
    message = _refused(folder, monkeypatch)
    assert "model.safetensors.index.json" in message
    assert f"{shown(shards[-1])} is not a safetensors file" in message
    assert "pickled weights are never read" in message


@pytest.mark.parametrize("where", ["../outside.safetensors", "inner/../../outside.safetensors",
                                   "ABSOLUTE"])
def test_an_index_naming_weights_outside_the_folder_is_refused(tmp_path, monkeypatch, where):
    folder = save_tiny_gpt2(tmp_path / "models" / "escaping")
    (folder / "inner").mkdir()
    shard = str(tmp_path / "elsewhere.safetensors") if where == "ABSOLUTE" else where
    shard_weights(folder, ["model-00001-of-00002.safetensors", shard])
    message = _refused(folder, monkeypatch)
    assert f"{shown(shard)} lies outside the folder" in message
    assert "reads safetensors shards from inside the folder only" in message


def test_a_model_safetensors_beside_the_index_is_read_and_the_index_is_not(tmp_path):
    folder = save_tiny_gpt2(tmp_path / "both")
    (folder / "model.safetensors.index.json").write_text(
        '{"weight_map": {"wte.weight": "../outside.bin"}}')
    assert load_model(folder).n_layers == 2  # transformers reads model.safetensors alone
