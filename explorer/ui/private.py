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
"""

from __future__ import annotations

from typing import Any

from streamlit import config
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

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
