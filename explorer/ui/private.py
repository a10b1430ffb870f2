"""Every use of Streamlit's (and its Starlette server's) private parts, in one place.

Nothing here is public API: each function reads what Streamlit 1.67 happens to
do, and may break on any upgrade. Each use has a test in `tests/ui/test_private.py`
that fails when an upgraded Streamlit no longer behaves as assumed; run it first
after an upgrade (docs/contributing.md, "Upgrading Streamlit or Plotly").

- `unsent_messages`: how many of a session's messages the server still holds
  (the session's browser queue and the Starlette websocket's send queue), for
  `explorer.ui.cache.drawing`, which keeps a large page's bytes reserved until
  they are sent. No public API tells.
- `in_app_test`: whether the script runs in `AppTest` (the hidden option
  ``global.appTest``), for `explorer.ui.component.show`: AppTest keeps only the last
  run's elements, so there every run sends every matrix.
- ``runner.postScriptGC = false`` in ``.streamlit/config.toml`` (a hidden
  option, so it is a setting, not a call here): Streamlit's full
  ``gc.collect(2)`` after every run cost 100-160 ms per click.
- `widget_keys`, `session_keys`: the keys a session's widgets registered, and
  its session keys, for the test that every key is declared
  (`tests/ui/test_state.py`), read from AppTest's session internals (its key-id
  map, widget metadata and old state). AppTest's public API may do (its element
  tree's widget keys, ``at.session_state.keys()``); not yet tried.
- `session_id`: the running session's id, for the Check page's one check at a
  time per visitor where no address tells visitors apart
  (`explorer.ui.checking.visitor`).
- `install`, `forged_widget_values`: the guard on the widget values a browser
  sends (`WStates.__getitem__`, below), installed once by every page's first
  call (`explorer.ui.sidebar.Frame`), and the widgets whose forged values it
  dropped, for the page's message.
- `install` also holds a download made on a click until the browser has
  fetched it (`_execute_deferred_held`, wrapping
  `MediaFileManager.execute_deferred`, and reading the manager's ``_lock``,
  ``_files_by_session_and_coord`` and ``_file_metadata``): Streamlit's cleanup
  after any session's run removed it first (issue 52). No public API keeps it;
  passing the bytes instead of a function would build every file on every run,
  which `explorer.ui.downloads` avoids.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import OrderedDict
from typing import Any

from streamlit import config
from streamlit.runtime import Runtime
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.state.session_state import Serialized, WStates

POST_SCRIPT_GC_OPTION = "runner.postScriptGC"
"""The hidden option that ``.streamlit/config.toml`` turns off."""


def unsent_messages() -> int | None:
    """How many of this session's messages the server has not yet handed to its
    websocket: those in the session's browser queue and in the Starlette
    client's send queue. None where that cannot be read: no session (it is
    gone, or AppTest, which has no `Runtime`), or a Streamlit without these parts."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    try:
        info = Runtime.instance()._session_mgr.get_active_session_info(ctx.session_id)
        return len(info.session._browser_queue) + info.client._send_queue.qsize()
    except (AttributeError, RuntimeError):  # gone, AppTest, or another Streamlit
        return None


def session_id() -> str | None:
    """The id of the session whose script runs in this thread (Streamlit's script
    run context), or None outside a script run."""
    ctx = get_script_run_ctx()
    return None if ctx is None else str(ctx.session_id)


def in_app_test() -> bool:
    """Whether this script runs in Streamlit's `AppTest` (its hidden option
    ``global.appTest``, set while AppTest runs a script)."""
    return bool(config.get_option("global.appTest"))


def _session(at: Any) -> Any:
    """An AppTest's `SessionState` behind its public wrapper."""
    return at.session_state._state._state


def widget_keys(at: Any) -> tuple[set[str], int]:
    """Every user key a widget of an `AppTest`'s session registered, and how many
    widgets had none (Streamlit made up their id)."""
    session = _session(at)
    mapping = session._key_id_mapper.id_key_mapping
    widgets = session._new_widget_state.widget_metadata
    return ({mapping[w] for w in widgets if w in mapping},
            sum(1 for w in widgets if w not in mapping))


def session_keys(at: Any) -> set[str]:
    """The keys of the values an `AppTest`'s app set in its session (by the last
    run): its old state without the widgets' values, which Streamlit keeps by
    their ``$$ID`` ids (`widget_keys` has the widgets' keys)."""
    return {k for k in _session(at)._old_state if not k.startswith("$$")}


_READ_WIDGET_VALUE = WStates.__getitem__
"""Streamlit's own `WStates.__getitem__`, which `install` wraps."""
MAX_SESSIONS_NOTED = 1000
"""Sessions whose dropped widget values wait for their page's message, at most
(the oldest are forgotten: a session that closed before its page finished)."""
_dropped: OrderedDict[str, list[str]] = OrderedDict()  # session id -> widget ids dropped
_dropped_lock = threading.Lock()
_FIELD_FAMILY = {"int_value": "number", "double_value": "number"}
"""Fields that stand for each other: a number input's metadata says ``double_value``
and its browser sends ``int_value`` for whole numbers. (None: a value cleared in the
browser, also the widget's own.)"""


def _read_widget_value(states: WStates, widget_id: str) -> Any:
    """`WStates.__getitem__` (Streamlit 1.67) that survives a forged value.

    What it guards: the one place Streamlit turns a widget value sent on the
    websocket (a ``WidgetState`` in a ``rerun_script`` BackMsg) into a Python
    value, by the widget's deserializer. Streamlit trusts the browser there: a
    value of another type than the widget's (text for a number input or a slider,
    an ``int_array_value`` for a drop-down, an index past its options, an
    infinite or NaN number, JSON that does not parse for a table) raises
    TypeError, ValueError, OverflowError, IndexError or JSONDecodeError from the
    deserializer, reached from ``SessionState.on_script_will_rerun`` (its
    ``_compact_state`` and ``_widget_changed``) before the page's script runs,
    or from ``register_widget`` while it runs. The session then shows an
    exception box, and keeps the bad value, so every later run fails the same
    way: the visitor's session is dead.

    A value in another field than the widget's own (``metadata.value_type``) is
    forged too, even where the deserializer reads it: Streamlit then records that
    field as the widget's, and its serializer raises in the next
    ``register_widget`` (a select slider sent ``string_value``).

    Here a value that cannot be read, or is in another field, is dropped: the widget keeps the value it
    had before (the session's old state) or, without one, is read as absent
    (Streamlit's own answer for a value whose widget it does not know yet,
    which then starts from its default). The widget's id is noted for
    `forged_widget_values`, which the page turns into its message. A value
    Streamlit cannot read only because it does not know the widget yet (no
    metadata) is left as Streamlit leaves it."""
    sent, metadata = states.states.get(widget_id), states.widget_metadata.get(widget_id)
    if not isinstance(sent, Serialized) or metadata is None:
        return _READ_WIDGET_VALUE(states, widget_id)  # read before, or a widget not known yet
    field = _FIELD_FAMILY.get(f := sent.value.WhichOneof("value"), f)
    if field is None or field == _FIELD_FAMILY.get(metadata.value_type, metadata.value_type):
        try:
            return _READ_WIDGET_VALUE(states, widget_id)
        except Exception:  # any: the deserializer met a value it cannot read
            pass
    ctx = get_script_run_ctx()
    old = ctx.session_state._state._old_state if ctx is not None else {}
    if ctx is not None:
        with _dropped_lock:
            _dropped.setdefault(ctx.session_id, []).append(widget_id)
            _dropped.move_to_end(ctx.session_id)
            while len(_dropped) > MAX_SESSIONS_NOTED:
                _dropped.popitem(last=False)
    if widget_id in old:
        states.set_from_value(widget_id, old[widget_id])
        return old[widget_id]
    del states[widget_id]
    raise KeyError(widget_id)


_EXECUTE_DEFERRED = MediaFileManager.execute_deferred
"""Streamlit's own `MediaFileManager.execute_deferred`, which `install` wraps."""
DOWNLOAD_HOLD_S = 60.0
"""How long a file made for a download button's click stays on the server
whatever other sessions do, for the browser's fetch (it fetches at once)."""
HOLDER = "explorer: downloads being fetched"
"""The made-up session that references the files being fetched: no script run
clears its references (a real session's id is a UUID)."""
_MAKE_ATTEMPTS = 3


def _execute_deferred_held(manager: MediaFileManager, file_id: str) -> str:
    """`MediaFileManager.execute_deferred` (Streamlit 1.67) whose file is still
    there when the browser fetches it.

    What it mends: on a click, ``execute_deferred`` runs the button's function
    (``data=`` a callable, `explorer.ui.downloads`), stores the file it returns
    and answers its address, but maps the file to no session. Every session's
    script run ends with ``remove_orphaned_files``, which marks a downloadable
    file that no session references on its first call and deletes it on the
    next. With other visitors' runs coming several a second, the file was gone
    before the browser's fetch: HTTP 404, a download Chromium calls canceled,
    and nothing on the page (issue 52: 34 of 60 fetches with 4 visitors).

    Here the file is referenced for `DOWNLOAD_HOLD_S` by `HOLDER`, a session of
    its own, then released, and Streamlit's cleanup removes it as before. A
    file removed in the instant between Streamlit's storing it and the hold
    (two cleanups there) is made again. A click Streamlit cannot serve (the
    button's function is gone: its session ended, or is rerunning its page)
    still fails here as before, and Streamlit's button shows "Failed to
    generate file for download" under itself."""
    for _ in range(_MAKE_ATTEMPTS):
        url = _EXECUTE_DEFERRED(manager, file_id)
        if _hold(manager, os.path.splitext(url.rsplit("/", 1)[-1])[0]):  # /media/<id>.<ext>
            break
    return url


def _hold(manager: MediaFileManager, made: str) -> bool:
    """Reference the stored file ``made`` from `HOLDER` for `DOWNLOAD_HOLD_S`;
    whether it was still stored."""
    hold = f"{made} {uuid.uuid4().hex}"  # each click its own hold, released on its own
    with manager._lock:
        manager._files_by_session_and_coord[HOLDER][hold] = made
        stored = made in manager._file_metadata
    release = threading.Timer(DOWNLOAD_HOLD_S, _release, (manager, hold))
    release.daemon = True
    release.start()
    return stored


def _release(manager: MediaFileManager, hold: str) -> None:
    """Drop one hold of `_hold`: its file is Streamlit's to remove again."""
    with manager._lock:
        holds = manager._files_by_session_and_coord.get(HOLDER, {})
        holds.pop(hold, None)
        if not holds:
            manager._files_by_session_and_coord.pop(HOLDER, None)


def install() -> None:
    """Install the guard on the widget values a browser sends
    (`_read_widget_value`) and the hold on a download being fetched
    (`_execute_deferred_held`) in this process, once; every page's first call
    (`explorer.ui.sidebar.Frame`) calls it, before any widget is drawn."""
    WStates.__getitem__ = _read_widget_value
    MediaFileManager.execute_deferred = _execute_deferred_held


def forged_widget_values() -> list[str | None]:
    """The keys of this session's widgets whose values the guard dropped since
    the last call (None for a widget without a key), and forget them; [] outside
    a script run."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return []
    with _dropped_lock:
        dropped = _dropped.pop(ctx.session_id, [])
    keys = ctx.session_state._state._key_id_mapper.id_key_mapping
    return list(dict.fromkeys(keys.get(widget_id) for widget_id in dropped))
