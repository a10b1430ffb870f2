"""What `explorer.ui.private` assumes of Streamlit's private parts: each test here
fails when an upgraded Streamlit no longer behaves so (docs/contributing.md, "Upgrading
Streamlit or Plotly")."""

from __future__ import annotations

import inspect
import re
import tomllib

import pytest
from playwright.sync_api import Page, expect
from streamlit import config
from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
from streamlit.testing.v1 import AppTest

from explorer.ui import private
from tests.conftest import ROOT, _serve


@pytest.fixture(scope="module")
def probe_server():
    """`streamlit run tests/support/apps/private_probe.py`, which writes what the seam reads."""
    yield from _serve(script="tests/support/apps/private_probe.py")


@pytest.mark.browser
def test_a_live_session_tells_its_unsent_messages_and_not_app_test(probe_server, page: Page):
    page.goto(probe_server.url)
    expect(page.get_by_text(re.compile(r"^after_wait="))).to_be_visible()
    text = page.locator("[data-testid='stMarkdownContainer']").all_inner_texts()
    # Every read in the run was a count (no None: the queues were found), some of
    # the 200 lines waited in them, and they drain (what `cache.drawing` waits for).
    assert "in_app_test=False" in text
    (counts,) = [t for t in text if t.startswith("types=")]
    assert counts.startswith("types=['int'] most="), counts
    assert int(counts.rsplit("=", 1)[1]) > 0, counts
    assert "after_wait=0" in text


def _reads_in_a_script():
    import streamlit as st

    from explorer.ui import private

    st.write(f"{private.in_app_test()} {private.unsent_messages()}")


def test_app_test_is_told_and_has_no_session_queues():
    at = AppTest.from_function(_reads_in_a_script, default_timeout=60).run()
    assert [m.value for m in at.markdown] == ["True None"]
    assert not private.in_app_test() and private.unsent_messages() is None  # no script


def test_the_project_turns_off_the_gc_after_each_run_and_streamlit_reads_it():
    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert settings["runner"]["postScriptGC"] is False
    assert config.get_option(private.POST_SCRIPT_GC_OPTION) is False  # read from there
    # A live server's script runner (AppTest has its own) collects only when it is on.
    finished = inspect.getsource(ScriptRunner._on_script_finished)
    assert re.search(r'if config\.get_option\("runner\.postScriptGC"\):\s+gc\.collect\(2\)',
                     finished), finished


def _widgets_and_state():
    import streamlit as st

    st.toggle("keyed", key="keyed")
    st.checkbox("no key")
    st.session_state["set_by_the_app"] = 1


def test_widget_and_session_keys_are_read_from_an_app_test():
    at = AppTest.from_function(_widgets_and_state, default_timeout=60).run()
    at.run()  # the first run's values are the second run's old state
    assert private.widget_keys(at) == ({"keyed"}, 1)
    assert private.session_keys(at) == {"set_by_the_app"}  # widgets' values go by their ids
