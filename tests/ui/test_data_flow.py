"""The page's data goes one way (issue 37): a run tokenizes the sentence once and
resolves the view once, a chart is handed what it draws (its trace by a weak
reference, so that no session keeps one), and a real model's layer and the
book's trace share one declared protocol."""

from __future__ import annotations

import gc
import weakref
from collections import Counter

import pytest

from explorer.core import config as cfg
from explorer.core.config import AttentionConfig
from explorer.core.trace import Trace, TraceConfig
from explorer.lessons.pages import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from explorer.models.layer_trace import ModelConfig
from explorer.ui import cache, state
from explorer.ui.navigation import PAGES
from tests.support.apptest import open_page


@pytest.fixture
def counted(monkeypatch):
    """Counts of the calls to the tokenizer (as a config calls it) and to the
    view's `resolve` (as the pages call it, through `explorer.ui.state`)."""
    calls = Counter()
    tokenize, resolve = cfg.tokenize, state.resolve

    def counting_tokenize(*args, **kwargs):
        calls["tokenize"] += 1
        return tokenize(*args, **kwargs)

    def counting_resolve(*args, **kwargs):
        calls["resolve"] += 1
        return resolve(*args, **kwargs)
    monkeypatch.setattr(cfg, "tokenize", counting_tokenize)
    monkeypatch.setattr(state, "resolve", counting_resolve)
    return calls


@pytest.mark.parametrize("page", [SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE])
def test_an_edit_tokenizes_the_sentence_once_and_resolves_the_view_once(page, counted):
    at = open_page(PAGES[page][0])
    counted.clear()
    at.text_input(key="seed").set_value("7").run()
    assert not at.exception
    charts = [k for k in at.session_state if str(k).startswith("chart-")]
    assert len(charts) >= 8  # every chart drew: none of them resolved the view again
    assert counted == {"tokenize": 1, "resolve": 1}


def test_a_page_keeps_no_trace_once_the_cache_lets_it_go():
    """The charts' fragments keep their arguments for the session: what they hold
    of the trace must not keep it alive (the byte-bounded cache is its only owner)."""
    cache._traces.clear()  # else the page may draw a trace an earlier test made, not checked
    gc.collect()
    before = weakref.WeakSet(o for o in gc.get_objects() if isinstance(o, Trace))
    at = open_page(PAGES[SELF_ATTENTION_PAGE][0])
    assert not at.exception
    assert any(isinstance(o, Trace) and o not in before for o in gc.get_objects())  # it made one
    cache._traces.clear()
    gc.collect()
    assert [o for o in gc.get_objects() if isinstance(o, Trace) and o not in before] == []


def test_the_books_config_and_a_models_layer_are_both_trace_configs():
    layer = ModelConfig(model="tiny", architecture="gpt2", layer=0, head=0, n_layers=1,
                        n_heads=2, d_model=4, causal=True, input_ids=(1, 2),
                        token_pieces=("a", "b"))
    assert isinstance(AttentionConfig(), TraceConfig)
    assert isinstance(layer, TraceConfig)
    assert (layer.d_k, layer.head_dim, layer.tokens) == (4, 2, ["a", "b"])


def test_a_config_missing_a_member_is_not_a_trace_config():
    class NoHeads:
        tokens, d_in, d_k, d_v, head_dim, head_dim_v = ["a"], 1, 1, 1, 1, 1
        causal, scale, normalization, dropout = False, True, "softmax", 0.0
        has_out_proj, weight_init = False, "randn"
        __dataclass_fields__: dict = {}  # every TraceConfig is a dataclass (the JSON writes it)

    assert not isinstance(NoHeads(), TraceConfig)
    NoHeads.n_heads = 1
    assert isinstance(NoHeads(), TraceConfig)
    del NoHeads.__dataclass_fields__
    assert not isinstance(NoHeads(), TraceConfig)
