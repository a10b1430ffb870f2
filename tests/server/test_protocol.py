"""Visitors that speak Streamlit's protocol (`benchmarks.protocol`), the
capacity benchmark's users: what they read is what the app sent, and each gets
its own numbers, checked against `explorer.compute_trace`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

import numpy as np

from benchmarks.protocol import WORKED_EXAMPLE, Run, Visitor, wrong_numbers
from explorer import AttentionConfig
from explorer.lessons.pages import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from tests.core.test_seeds import OMEGA_1_002


def test_a_visitors_run_holds_compute_traces_numbers(shared_server):
    with Visitor(shared_server.url) as visitor:
        run = visitor.open(SELF_ATTENTION_PAGE, WORKED_EXAMPLE)
        assert wrong_numbers(run, AttentionConfig()) == []
        # 002_8c91a21803773e04.txt, cell 16: omega_1, the scores of the query "is".
        _, matrices = run.charts["chart-attn_scores"]
        np.testing.assert_allclose(matrices[0][1], OMEGA_1_002, atol=5e-5)

        run = visitor.set("seed", "4321")
        assert wrong_numbers(run, AttentionConfig(seed=4321)) == []
        assert wrong_numbers(run, AttentionConfig())  # the check tells numbers apart
        assert "seed=4321" in visitor.query  # the link follows, as in the address bar

        visitor.open(MULTI_HEAD_PAGE)  # the settings travel with the session
        visitor.set("d_k", 4)
        run = visitor.set("n_heads", 2)
        config = AttentionConfig(seed=4321, d_k=4, n_heads=2)
        assert wrong_numbers(run, config) == []
        run = visitor.pick("head", 1)
        assert wrong_numbers(run, config, head=1) == []
        assert wrong_numbers(run, config, head=0)  # it shows head 1 now


def _own_numbers(url: str, i: int) -> tuple[list[str], list[str]]:
    """Visitor ``i`` opens its own link, then edits d_k and causal; returns the
    problems of its runs against its own config, and of its last run against
    visitor ``i + 1``'s config (which must have some)."""
    sentence = f"visitor {i} reads every matrix"
    config = AttentionConfig(sentence=sentence, seed=1000 + i)
    with Visitor(url) as visitor:
        run = visitor.open(SELF_ATTENTION_PAGE, urlencode({"sentence": sentence,
                                                           "seed": config.seed}))
        problems = wrong_numbers(run, config)
        config = AttentionConfig(sentence=sentence, seed=1000 + i, d_k=1 + i % 4)
        run = visitor.set("d_k", config.d_k)
        problems += wrong_numbers(run, config)
    neighbour = AttentionConfig(sentence=f"visitor {i + 1} reads every matrix",
                                seed=1001 + i, d_k=1 + (i + 1) % 4)
    return problems, wrong_numbers(run, neighbour)


def test_twenty_visitors_at_once_each_get_their_own_numbers(shared_server):
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda i: _own_numbers(shared_server.url, i), range(20)))
    assert [problems for problems, _ in results] == [[]] * 20
    assert all(others for _, others in results)


def _waiting_page() -> None:
    import streamlit as st

    from explorer.ui.cache import WAITING_ICON
    st.info("Waiting for memory: 1 visitor ahead.", icon=WAITING_ICON)
    st.info("An ordinary note.", icon=":material/info:")


def test_a_waiting_note_is_recognised_on_the_wire():
    """`Visitor` knows a waiting note by its icon (`explorer.ui.cache.WAITING_ICON`)
    as Streamlit writes it into the alert it sends; the overload benchmark counts
    them. Fails if Streamlit rewrites the icon on the way."""
    from streamlit.proto.Delta_pb2 import Delta
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_waiting_page).run()
    visitor, run = object.__new__(Visitor), Run()
    visitor._elements, visitor._known = {}, {}
    for info in at.info:
        delta = Delta()
        delta.new_element.alert.CopyFrom(info.proto)
        visitor._element(delta, run)
    assert run.notes == ["Waiting for memory: 1 visitor ahead."]
