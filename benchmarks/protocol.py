"""A visitor that speaks Streamlit's own protocol: the server's load without a browser.

A `Visitor` is what the browser is to the server, and nothing more: it opens
Streamlit's websocket (``/_stcore/stream``, subprotocol ``streamlit``, with
`websocket-client`), asks for a page with a `BackMsg` ``rerun_script`` (the
query string, the page, the widget states it has changed), and reads the
`ForwardMsg`s (`streamlit.proto`) until the run has finished. It keeps what a
browser keeps for the next run: the widgets' ids (read from their elements),
the address bar's query string (``page_info_changed``) and the chart matrices
it holds (`explorer.render.payload.decode` with a ``known`` dict: the server sends a
matrix the page holds as its hash only). It draws nothing, so it costs the
machine a few ms per edit, and many of them measure the server alone
(`benchmarks.locustfile`).

`wrong_numbers` checks a run against `explorer.compute_trace`: every step
chart (``chart-<step>``) must hold exactly the matrices of the visitor's own
configuration, every head of a per-head chart included.

`download` clicks a download button as the browser does: it asks the server
for the button's deferred file (a ``backend_operation_request``), then fetches
the address the server answers.

This module is the one place that knows Streamlit's wire format (1.67): the
widget value fields per element type (`VALUE_FIELDS`), the trigger widget
of a components-v2 event (`_trigger_id`) and the deferred file's request
(`Visitor.download`), as the browser's frontend sends them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import websocket
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.NumberInput_pb2 import NumberInput
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explorer import AttentionConfig, compute_trace
from explorer.core.steps import STEPS
from explorer.render.payload import decode
from explorer.ui.cache import WAITING_ICON
from tests.support.soak import step_numbers, url_path

WORKED_EXAMPLE = "preset=life-is-short"
"""The link a teacher gives the class: book notebook 002's example on the
Self-attention page (`explorer.lessons.presets`), the capacity benchmark's first page."""
RUN_TIMEOUT_S = 120.0
"""Longest wait for one run's messages (a loaded server queues its sessions' runs)."""
FRAGMENT_GRACE_S = 1.0
"""After a fragment's run, how long to wait for the page's full run that may follow."""
CHART_PREFIX = "chart-"
"""Widget keys of the step charts (`explorer.ui.render`): ``chart-<step>``."""
VALUE_FIELDS = {"text_input": "string_value", "text_area": "string_value",
                "checkbox": "bool_value", "selectbox": "string_value",
                "number_input": None}
"""The `WidgetState` field the browser fills for each element type (a
number input: ``int_value`` or ``double_value`` by its data type)."""
_EVENTS = "events"
"""The trigger widget a components-v2 element sends its events through."""


class ProtocolError(Exception):
    """The server closed the socket, timed out, or a run did not finish."""


@dataclass
class Run:
    """What one run sent: ``charts`` maps a chart's widget key
    (``chart-attn_weights``) to its decoded payload (header, matrices; a
    matrix sent as a hash the visitor does not hold is None); ``errors``
    the texts of error alerts and exceptions; ``notes`` those of the notes that
    say the page waits for its turn (`explorer.ui.cache.WAITING_ICON`);
    ``seconds`` from sending the request until the run finished; ``received``
    the bytes read."""

    seconds: float = 0.0
    charts: dict[str, tuple[dict[str, Any], list[np.ndarray | None]]] = field(
        default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    received: int = 0


def _user_key(element_id: str) -> str | None:
    """The key a widget was given (``$$ID-<hash>-<key>``), or None."""
    return element_id.split("-", 2)[2] if element_id.startswith("$$ID-") else None


def _trigger_id(element_id: str) -> str:
    """The id of the trigger widget through which a components-v2 element's
    events reach the server (Streamlit's ``_make_trigger_id``)."""
    return f"$$STREAMLIT_INTERNAL_KEY_{element_id}__{_EVENTS}"


@dataclass
class Download:
    """What one click on a download button brought: ``status`` the HTTP status of
    the file's fetch (0 when the server gave no address), ``body`` its bytes,
    ``error`` the server's message when it could not make the file, ``seconds``
    from the click until the file arrived or failed."""

    status: int = 0
    body: bytes = b""
    error: str = ""
    seconds: float = 0.0

    @property
    def arrived(self) -> bool:
        """Whether the file arrived (HTTP 200)."""
        return self.status == 200


class Visitor:
    """One visitor on ``url`` (``http://host:port``), its own session.

    `open` asks for a page, `set` changes a widget by its key, `pick` sends a
    picker's choice (``head``, ``query``); each returns the `Run`. Raises
    `ProtocolError` when the server does not finish a run within
    ``timeout`` seconds or closes the socket. Use it in ``with`` or `close` it.
    """

    def __init__(self, url: str, timeout: float = RUN_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        try:
            self._ws = websocket.create_connection(
                self.url.replace("http", "ws", 1) + "/_stcore/stream",
                subprotocols=["streamlit"], origin=self.url, timeout=timeout)
        except (OSError, websocket.WebSocketException) as error:
            raise ProtocolError(f"cannot connect to {self.url}: {error}") from error
        self.page: str | None = None
        self.query = ""
        self.session_id = ""  # the server's id of this session (its new_session message)
        self._elements: dict[str, Any] = {}  # user key -> its element's proto (this page)
        self._states: dict[str, WidgetState] = {}  # widget id -> the value this visitor set
        self._known: dict[str, np.ndarray] = {}  # matrix hash -> matrix the page holds

    def __enter__(self) -> Visitor:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        self._ws.close()

    # -- what the browser sends --------------------------------------------
    def open(self, page: str, query: str = "") -> Run:
        """Open ``page`` (a label of `explorer.ui.navigation.PAGES`) at ``query``
        (a link's query string, without ``?``), as a page link or a typed address."""
        self.page, self.query = page, query
        self._elements, self._states = {}, {}
        return self._rerun()

    def set(self, key: str, value: Any) -> Run:
        """Change the widget with key ``key`` on this page to ``value``, as a
        person typing or toggling it; KeyError if the page has no such widget."""
        kind, proto = self._elements[key]
        state = WidgetState(id=proto.id)
        name = VALUE_FIELDS[kind] or ("int_value" if proto.data_type == NumberInput.INT
                                      else "double_value")
        setattr(state, name, value)
        self._states[proto.id] = state
        return self._rerun()

    def pick(self, name: str, index: int | None) -> Run:
        """Choose ``index`` (None: none) in the page's picker ``name`` (e.g.
        ``head``, drawn by chart.js ``mountPicker``), as a click on it."""
        _, proto = self._elements[f"picker-{name}"]
        event = [{"event": "pick", "value": -1 if index is None else index}]
        trigger = WidgetState(id=_trigger_id(proto.id), json_trigger_value=json.dumps(event))
        # The component's own state, which the browser holds from its mount on: without
        # it, Streamlit presents no state to the callback that reads the event.
        self._states.setdefault(proto.id, WidgetState(id=proto.id, json_value="{}"))
        return self._rerun(extra=[trigger])

    def download(self, key: str) -> Download:
        """Click the page's download button ``key`` as the browser does
        (Streamlit 1.67's ``DownloadButton``): ask the server to make its deferred
        file (a ``backend_operation_request`` with the button's
        ``deferred_file_id``), wait for the answer, then fetch the address it
        gives at once. KeyError if the page has no such button."""
        _, proto = self._elements[key]
        message = BackMsg()
        request = message.backend_operation_request
        request.request_id, request.session_id = uuid.uuid4().hex, self.session_id
        request.deferred_file.file_id = proto.deferred_file_id
        started = time.monotonic()
        try:
            self._ws.send_binary(message.SerializeToString())
            answer = self._answer(request.request_id)
        except (OSError, websocket.WebSocketException) as error:
            raise ProtocolError(f"{self.page}: {type(error).__name__}: {error}") from error
        got = Download(error=answer.error_msg)
        if answer.HasField("deferred_file"):
            try:
                with urllib.request.urlopen(self.url + answer.deferred_file.url,
                                            timeout=self.timeout) as response:
                    got.status, got.body = response.status, response.read()
            except urllib.error.HTTPError as error:
                got.status = error.code
        got.seconds = time.monotonic() - started
        return got

    def _answer(self, request_id: str):
        """The server's ``backend_operation_response`` to ``request_id``."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            self._ws.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                frame = self._ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            message = ForwardMsg()
            message.ParseFromString(frame)
            if (message.WhichOneof("type") == "backend_operation_response"
                    and message.backend_operation_response.request_id == request_id):
                return message.backend_operation_response
        raise ProtocolError(f"{self.page}: no answer to a download within {self.timeout:.0f} s")

    def value(self, key: str) -> Any:
        """The value the page's widget ``key`` shows (its proto's ``value``)."""
        return self._elements[key][1].value

    def _rerun(self, extra: list[WidgetState] = ()) -> Run:
        message = BackMsg()
        message.rerun_script.query_string = self.query
        message.rerun_script.page_name = url_path(self.page)
        message.rerun_script.widget_states.widgets.extend([*self._states.values(), *extra])
        started = time.monotonic()
        try:
            self._ws.send_binary(message.SerializeToString())
            run = self._read()
        except (OSError, websocket.WebSocketException) as error:
            raise ProtocolError(f"{self.page}: {type(error).__name__}: {error}") from error
        run.seconds = time.monotonic() - started
        return run

    # -- what the server sends ---------------------------------------------
    def _read(self) -> Run:
        """Read messages until the page's run has finished (a fragment's run,
        then `FRAGMENT_GRACE_S` without another run starting)."""
        run = Run()
        deadline = time.monotonic() + self.timeout
        fragment_done = None
        while True:
            now = time.monotonic()
            if fragment_done is not None and now > fragment_done + FRAGMENT_GRACE_S:
                return run
            if now > deadline:
                raise ProtocolError(f"{self.page}: no finished run within {self.timeout:.0f} s")
            wait = deadline - now if fragment_done is None else FRAGMENT_GRACE_S
            self._ws.settimeout(max(0.01, wait))
            try:
                frame = self._ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            run.received += len(frame)
            message = ForwardMsg()
            message.ParseFromString(frame)
            kind = message.WhichOneof("type")
            if kind == "delta":
                self._element(message.delta, run)
            elif kind == "page_info_changed":
                self.query = message.page_info_changed.query_string
            elif kind == "new_session":
                fragment_done = None
                self.session_id = message.new_session.initialize.session_id or self.session_id
            elif kind == "script_finished":
                status = message.script_finished
                if status == ForwardMsg.FINISHED_SUCCESSFULLY:
                    return run
                if status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
                    fragment_done = time.monotonic()
                elif status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    run.errors.append("the script did not compile")
                    return run

    def _element(self, delta, run: Run) -> None:
        if delta.WhichOneof("type") != "new_element":
            return
        element = delta.new_element
        kind = element.WhichOneof("type")
        if kind == "exception":
            run.errors.append(f"exception: {element.exception.message}")
        elif kind == "alert" and element.alert.format == Alert.ERROR:
            run.errors.append(element.alert.body)
        elif kind == "alert" and element.alert.icon == WAITING_ICON:
            run.notes.append(element.alert.body)
        proto = getattr(element, kind) if kind else None
        key = _user_key(getattr(proto, "id", "") or "")
        if key is None:
            return
        self._elements[key] = (kind, proto)
        if kind == "bidi_component" and key.startswith(CHART_PREFIX) and proto.bytes:
            run.charts[key] = decode(proto.bytes, self._known)


def wrong_numbers(run: Run, config: AttentionConfig, head: int = 0,
                  needed: tuple[str, ...] = ("attn_weights", "context")) -> list[str]:
    """What in ``run`` is not ``config``'s own numbers ([] = every chart right).

    Every step chart must hold `compute_trace` ``(config)``'s matrix of its step
    (`tests.support.soak.step_numbers`), exactly as float32: each head's variant of a
    per-head chart, and the chart must show ``head``. The steps ``needed``
    must be among the charts, and the run must show no error."""
    problems = list(run.errors)
    trace = compute_trace(config)
    for step in needed:
        if CHART_PREFIX + step not in run.charts:
            problems.append(f"{step}: no chart")
    for key, (header, matrices) in run.charts.items():
        step = key.removeprefix(CHART_PREFIX)
        if step not in trace or not STEPS[step].heatmap:
            continue
        if header.get("heads"):
            shown = header.get("view", {}).get("head", 0)
            if shown != head:
                problems.append(f"{step}: shows head {shown}, not {head}")
            blocks = {h: variant["block"] for h, variant in enumerate(header["heads"])}
        else:
            heatmaps = [t["matrix"]["block"] for t in header["figure"]["data"] if "matrix" in t]
            blocks = {head: heatmaps[0]} if heatmaps else {}
        for h, block in blocks.items():
            got, want = matrices[block], step_numbers(trace, step, h)
            if got is None:
                problems.append(f"{step}: head {h}'s matrix was sent as a hash it never had")
            elif got.shape != want.shape or not np.array_equal(got, want.astype("<f4"),
                                                               equal_nan=True):
                problems.append(f"{step}: head {h}'s numbers are not this visitor's")
    return problems
