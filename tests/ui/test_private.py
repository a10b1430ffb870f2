"""What `explorer.ui.private` assumes of Streamlit's private parts: each test here
fails when an upgraded Streamlit no longer behaves so (docs/contributing.md, "Upgrading
Streamlit or Plotly")."""

from __future__ import annotations

import inspect
import re
import time
import tomllib

import pytest
from playwright.sync_api import Page, expect
from streamlit import config
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime.backend_operation_handler import DeferredFileHandler
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
from streamlit.runtime.state.session_state import SessionState, WStates
from streamlit.testing.v1 import AppTest

from explorer.ui import private
from tests.support.server import ROOT, serve


@pytest.fixture(scope="module")
def probe_server():
    """`streamlit run tests/support/apps/private_probe.py`, which writes what the seam reads."""
    yield from serve(script="tests/support/apps/private_probe.py")


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


def _number_and_what_was_dropped():
    import streamlit as st

    from explorer.ui import private

    private.install()
    st.number_input("n", 0, 10, 3, key="n")
    st.write(f"n={st.session_state.n} dropped={private.forged_widget_values()}")


def test_the_guard_wraps_where_streamlit_reads_a_sent_widget_value():
    # Streamlit 1.67 turns a sent WidgetState into a value in WStates.__getitem__, by the
    # widget's deserializer, and its rerun reads the new values through it (the compaction
    # of the last run's state, the changed-widget check). If an upgrade reads them
    # elsewhere, the guard (`private.install`) no longer stands in the way.
    read = inspect.getsource(private._READ_WIDGET_VALUE)
    assert "isinstance(wstate, Value)" in read and "metadata.deserializer(" in read, read
    assert re.search(r"self\._old_state\[key_or_wid\] = self\[key_or_wid\]",
                     inspect.getsource(SessionState._compact_state))
    assert "self._new_widget_state.get(widget_id)" in inspect.getsource(
        SessionState._widget_changed)
    private.install()
    assert WStates.__getitem__ is private._read_widget_value


def test_a_sent_value_of_another_type_is_dropped_and_the_widget_keeps_its_value(monkeypatch):
    at = AppTest.from_function(_number_and_what_was_dropped, default_timeout=60).run()
    number = at.number_input(key="n").set_value(5)
    at.run()
    assert [m.value for m in at.markdown] == ["n=5 dropped=[]"]
    # The next run's message carries text for the number, as a forged BackMsg would.
    forged = WidgetState(id=at.number_input(key="n").id, string_value="abc")
    monkeypatch.setattr(type(number), "_widget_state", property(lambda _: forged))
    at.run()  # before the guard: ValueError from number_input's deserializer
    assert not at.exception
    assert [m.value for m in at.markdown] == ["n=5 dropped=['n']"]
    monkeypatch.undo()
    at.run()
    assert [m.value for m in at.markdown] == ["n=5 dropped=[]"]


def _shows_its_session_id():
    import streamlit as st

    from explorer.ui import private as seam

    st.text(f"session {seam.session_id()}")


def test_the_session_id_is_the_script_run_contexts_and_none_outside_a_run():
    """`private.session_id` reads the script run context's ``session_id`` (AppTest
    gives every session the one id it names; a live server, a uuid each)."""
    at = AppTest.from_function(_shows_its_session_id).run()
    assert at.text[0].value == "session test session id"
    assert private.session_id() is None  # this thread runs no script


def _manager_with_a_button() -> tuple[MediaFileManager, str]:
    """A media file manager as the server has one, and the deferred id of a download
    button registered in it (outside a script run: Streamlit's "dontcare" session)."""
    manager = MediaFileManager(MemoryMediaFileStorage("/media"))
    deferred = manager.add_deferred(lambda: "a,b\n1,2\n", "text/csv", "1.2.3", "m.csv")
    return manager, deferred


def _made_id(url: str) -> str:
    assert re.fullmatch(r"/media/[0-9a-f]+\.csv", url), url
    return url.removeprefix("/media/").removesuffix(".csv")


def test_streamlit_removes_a_made_download_after_two_runs_of_any_session():
    # The cause of issue 52's lost downloads: the file a click makes is referenced by no
    # session, and the cleanup that ends every session's run marks it, then deletes it,
    # while the button's function stays. If an upgrade keeps the file, the hold
    # (`private._execute_deferred_held`) may go.
    manager, deferred = _manager_with_a_button()
    made = _made_id(private._EXECUTE_DEFERRED(manager, deferred))
    manager.remove_orphaned_files()
    assert manager.read_file(made) is not None  # marked
    manager.remove_orphaned_files()
    assert manager.read_file(made) is None  # gone: the browser's fetch gets 404
    assert private._EXECUTE_DEFERRED(manager, deferred)  # the button itself still works
    # Streamlit's handler of a click calls the manager's method, so the hold wraps it.
    handle = inspect.getsource(DeferredFileHandler.handle)
    assert "self._get_media_file_mgr().execute_deferred," in handle, handle
    private.install()
    assert MediaFileManager.execute_deferred is private._execute_deferred_held


def test_a_held_download_outlives_every_cleanup_until_released(monkeypatch):
    monkeypatch.setattr(private, "DOWNLOAD_HOLD_S", 0.5)
    manager, deferred = _manager_with_a_button()
    made = _made_id(private._execute_deferred_held(manager, deferred))
    for session in ["another session"] * 9 + ["dontcare"]:  # others' runs, then its own
        manager.clear_session_refs(session)
        manager.remove_orphaned_files()
    assert manager.read_file(made).content == b"a,b\n1,2\n"
    time.sleep(0.8)  # released
    assert private.HOLDER not in manager._files_by_session_and_coord
    manager.remove_orphaned_files()
    manager.remove_orphaned_files()
    assert manager.read_file(made) is None  # Streamlit's to remove again


def test_a_download_removed_before_its_hold_is_made_again(monkeypatch):
    # Two cleanups in the instant between Streamlit's storing the file and the hold:
    # the file is made again, and held.
    monkeypatch.setattr(private, "DOWNLOAD_HOLD_S", 0.5)
    streamlits, urls = private._EXECUTE_DEFERRED, []

    def removed_at_once(manager, deferred):
        urls.append(streamlits(manager, deferred))
        if len(urls) == 1:
            manager.remove_orphaned_files()
            manager.remove_orphaned_files()
        return urls[-1]

    monkeypatch.setattr(private, "_EXECUTE_DEFERRED", removed_at_once)
    manager, deferred = _manager_with_a_button()
    made = _made_id(private._execute_deferred_held(manager, deferred))
    assert len(urls) == 2
    manager.remove_orphaned_files()
    manager.remove_orphaned_files()
    assert manager.read_file(made) is not None
