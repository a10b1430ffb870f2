"""An unusable tokenizer is reported as unusable, not missing (issue 41, item 6):
a folder whose tokenizer files cannot be read was told it had none."""

from __future__ import annotations

import pytest

from explorer.models import ModelError, compute_model_trace, load_model
from tests.support.tiny_models import save_tiny_gpt2


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("gpt2"))


def _copy_weights(source, target):
    for name in ("config.json", "model.safetensors"):
        (target / name).write_bytes((source / name).read_bytes())


def test_unreadable_tokenizer_files_are_named_unusable(gpt2_folder, tmp_path):
    _copy_weights(gpt2_folder, tmp_path)
    (tmp_path / "vocab.json").write_text("{not json")
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    model = load_model(tmp_path)
    assert model.tokenizer is None and "could not be read" in model.tokenizer_problem
    with pytest.raises(ModelError, match="has tokenizer files, but they are unusable: its "
                                         "tokenizer files could not be read") as info:
        compute_model_trace(model, "The cat")
    assert info.value.field == "text" and "input_ids" in str(info.value)
    assert "without a tokenizer" not in str(info.value)  # before: "missing"
    # Ids still work.
    assert compute_model_trace(model, input_ids=[3, 7], layer=0).tokens == ["#3", "#7"]


def test_a_folder_without_tokenizer_files_is_still_told_so(gpt2_folder, tmp_path):
    _copy_weights(gpt2_folder, tmp_path)
    model = load_model(tmp_path)
    assert model.tokenizer is None and model.tokenizer_problem == ""
    with pytest.raises(ModelError, match="without a tokenizer"):
        compute_model_trace(model, "The cat")


def test_a_good_tokenizer_has_no_problem(gpt2_folder):
    model = load_model(gpt2_folder)
    assert model.tokenizer is not None and model.tokenizer_problem == ""
