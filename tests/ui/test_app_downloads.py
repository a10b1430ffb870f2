"""AppTest: the sidebar's "Take it with you" offers the page's downloads, built on click.

Streamlit registers a download whose ``data`` is a function (built only when
clicked) with its media file manager; `offered` records those registrations, so
each button's file name, media type and function can be read and called here.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import NamedTuple

import pytest
import torch
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from explorer import AttentionConfig, compute_trace
from explorer.core.trace import Trace, read_json
from explorer.render.export import pytorch_script
from explorer.ui import downloads
from explorer.ui.matrices import parse_csv_matrix
from tests.render.test_export import PLOTLY_JS_SIGNATURE
from tests.support.apptest import open_page, page_link, pick
from tests.support.server import PAGE_FILES
from tests.ui.test_app_multihead import TWO_HEADS, TWO_HEADS_CONFIG


class Download(NamedTuple):
    file_name: str
    mime: str
    make: Callable[[], str | bytes]


@pytest.fixture
def offered(monkeypatch) -> dict[str, tuple]:
    """Every deferred download registered while the test runs: file id ->
    (file name, media type, the function that builds the file)."""
    registered: dict[str, tuple] = {}
    original = MediaFileManager.add_deferred

    def recording(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        file_id = original(self, data_callable, mimetype, coordinates, file_name=file_name,
                           **kwargs)
        registered[file_id] = (file_name, mimetype, data_callable)
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", recording)
    return registered


def sidebar_downloads(at: AppTest, offered: dict[str, tuple]) -> dict[str, Download]:
    """The sidebar's download buttons by label, as offered in the last run."""
    return {button.label: Download(*offered[button.proto.deferred_file_id])
            for button in at.sidebar.get("download_button")}


def _no_constants(name: str):
    raise ValueError(f"not strict JSON: {name}")


def test_self_attention_offers_four_downloads_that_parse(offered):
    at = open_page(PAGE_FILES["Self_attention"], {"seed": "7"})
    assert not at.exception
    trace = compute_trace(AttentionConfig(seed=7))
    found = sidebar_downloads(at, offered)
    assert {label: (d.file_name, d.mime) for label, d in found.items()} == {
        "attention.py": ("attention.py", "text/x-python"),
        "Report (HTML)": ("attention_life-is-short-eat-dessert-first.html", "text/html"),
        "Every matrix (JSON)": ("attention_trace.json", "application/json"),
        "CSV": ("attn_weights_life-is-short-eat-dessert-first.csv", "text/csv"),
    }
    link = page_link(at)
    assert "seed=7" in link

    script = found["attention.py"].make()
    compile(script, "attention.py", "exec")
    assert script == pytorch_script(trace.config, link=link)  # the page's link, in its header

    document = found["Every matrix (JSON)"].make()
    parsed = json.loads(document, parse_constant=_no_constants)
    assert parsed["tokens"] == trace.tokens
    assert torch.equal(read_json(document)["attn_weights"], trace["attn_weights"])

    csv_text = found["CSV"].make()
    numbers = parse_csv_matrix(csv_text.encode(), (6, 6), "attn_weights")
    assert torch.equal(torch.tensor(numbers, dtype=torch.float32), trace["attn_weights"])

    report = found["Report (HTML)"].make()
    assert report.count(PLOTLY_JS_SIGNATURE) == 1
    assert 'id="chart-context"' in report and "seed=7" in report


def test_one_matrix_of_the_head_shown_and_the_script_to_copy(offered, monkeypatch):
    at = open_page(PAGE_FILES["Causal_and_multi_head"], TWO_HEADS)
    trace = compute_trace(TWO_HEADS_CONFIG)
    at.selectbox(key="csv_step").set_value("attn_weights").run()
    pick(at, "head", 1)  # the page shows head 1: so does the CSV
    csv_download = sidebar_downloads(at, offered)["CSV"]
    assert csv_download.file_name == "attn_weights_head1_life-is-short-eat-dessert-first.csv"
    numbers = parse_csv_matrix(csv_download.make().encode(), (6, 6), "attn_weights")
    assert torch.equal(torch.tensor(numbers, dtype=torch.float32), trace["attn_weights"][1])
    assert "Head 1, the head shown on the page." in [c.value for c in at.sidebar.caption]

    # A step without heads says no head.
    at.selectbox(key="csv_step").set_value("context").run()
    assert sidebar_downloads(at, offered)["CSV"].file_name.startswith("context_life")
    assert not any(c.value.startswith("Head ") for c in at.sidebar.caption)

    # The script to copy is built only while its popover is open.
    built = []
    monkeypatch.setattr(downloads, "pytorch_script",
                        lambda *args, **kwargs: built.append(args) or pytorch_script(*args,
                                                                                      **kwargs))
    at.run()
    assert built == [] and len(at.sidebar.code) == 0  # neither the script nor the link
    page_link(at)  # opens the link's box: its code block comes first
    assert built == [] and len(at.sidebar.code) == 1
    at.session_state[downloads.SCRIPT_POPOVER_KEY] = True
    at.run()
    assert len(built) == 1
    shown = at.sidebar.code[1].value
    assert shown == pytorch_script(trace.config, link=page_link(at)).rstrip("\n")
    ast.parse(shown)


def test_an_ordinary_rerun_builds_no_file(offered, monkeypatch):
    calls = []
    for name in ("pytorch_script", "html_report", "matrix_csv"):
        monkeypatch.setattr(downloads, name, lambda *a, name=name, **k: calls.append(name))
    monkeypatch.setattr(Trace, "to_json", lambda self: calls.append("to_json"))
    at = open_page(PAGE_FILES["Self_attention"])
    at.text_input(key="sentence").set_value("one more run").run()
    assert not at.exception
    assert len(sidebar_downloads(at, offered)) == 4
    assert calls == []


def _model_trace_sidebar():
    """A sidebar for a trace whose config is a real model's `ModelConfig` (the
    steps are a small trace's: only the config's kind matters here)."""
    from explorer import AttentionConfig, compute_trace
    from explorer.core.trace import Trace
    from explorer.models.layer_trace import ModelConfig
    from explorer.ui.downloads import take_it_with_you
    from explorer.ui.state import View

    steps = compute_trace(AttentionConfig(sentence="a cat", d_in=3, d_k=3, d_v=3,
                                          vocab_size=10))
    config = ModelConfig(model="tiny-gpt2", architecture="gpt2", layer=0, head=0, n_layers=1,
                         n_heads=1, d_model=3, causal=False, input_ids=(1, 2),
                         token_pieces=("a", "·cat"), text="a cat")
    import streamlit as st

    trace = Trace(config, config.tokens, dict(steps))
    st.session_state.setdefault("csv_step", "attn_weights")
    with st.sidebar:
        take_it_with_you(View("Real model", config, trace, {}, link="http://localhost:8501/Real_model"))


def test_a_real_model_trace_gets_no_script(offered):
    at = AppTest.from_function(_model_trace_sidebar, default_timeout=60).run()
    assert not at.exception
    found = sidebar_downloads(at, offered)
    assert sorted(found) == ["CSV", "Every matrix (JSON)", "Report (HTML)"]
    assert found["CSV"].file_name == "attn_weights_a-cat.csv"
    assert json.loads(found["Every matrix (JSON)"].make(),
                      parse_constant=_no_constants)["config"]["model"] == "tiny-gpt2"
    assert parse_csv_matrix(found["CSV"].make().encode(), (2, 2), "attn_weights")
    report = found["Report (HTML)"].make()
    assert report.count(PLOTLY_JS_SIGNATURE) == 1 and "tiny-gpt2" in report
