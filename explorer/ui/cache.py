"""Traces and embedding tables shared by every session, bounded by bytes.

`cachetools` LRU caches whose size is each value's bytes (`explorer.server.budget`
sets the bounds), behind a lock, since Streamlit serves sessions in threads.
A cached `Trace` is shared, never copied: treat its tensors as read-only.
Computing a trace that is not cached reserves its bytes from the server's
work allowance first (`explorer.server.budget.WORK`); a visitor whose request has
to wait for it is told at once, with its place in the queue (`waiting_note`);
so is a page drawing the charts of a large trace (`drawing`).

The Real model page adds two more: loaded models (`cached_model`, one per
name or folder, within `explorer.server.budget.MODEL_BYTES`) and what is computed from
them (`cached_model_result`: traces, head overviews, checks). This module never
imports `explorer.models` (transformers): the page passes its loaders in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar

import cachetools
import streamlit as st

from explorer.core import literal, recipes
from explorer.core.config import AttentionConfig
from explorer.core.trace import Trace, compute_trace
from explorer.lessons import pages
from explorer.server import budget
from explorer.ui import private

budget.tune_malloc()  # once per server process: freed tensors go back to the system

_tables = cachetools.LRUCache(
    maxsize=budget.TABLE_CACHE_BYTES,
    getsizeof=lambda value: value[0].nbytes + value[1].nbytes)
_traces = cachetools.LRUCache(maxsize=budget.TRACE_CACHE_BYTES,
                              getsizeof=lambda trace: trace.nbytes)
_lock = threading.RLock()
_computing: dict[AttentionConfig, Future] = {}
"""The configs being computed now, each by one session (`cached_trace`)."""


@cachetools.cached(_tables, lock=_lock)
def embedding_table(seed: int, vocab_size: int, d_in: int):
    """`recipes.embedding_table`, cached per (seed, vocab_size, d_in): editing
    the sentence does not redraw the table."""
    return recipes.embedding_table(seed, vocab_size, d_in)


def cached_trace(config: AttentionConfig, tell: bool = True) -> Trace:
    """`compute_trace` of ``config``, from the cache when it is there.
    ``tell``: say on the page when it waits (`waiting_note`); False outside a
    page's run (a download).

    Computed once at a time per config: sessions asking for a config that
    another is computing (a class opening the teacher's link together) wait
    for that computation and share its trace, reserving no memory of their
    own, and with ``tell`` say so on the page if it takes a while (`_shared`);
    if it fails or its session stops, one of them computes in turn. Within a
    page run (`drawing`), ``tell`` first reserves what the page holds (`_hold`).

    Raises `explorer.server.budget.BudgetError` (a `ConfigError`) when the trace alone
    needs more than the server's work allowance, or the server stays busy.
    A trace larger than the whole cache is computed but not kept.
    """
    if tell:
        _hold(config)
    while True:
        with _lock:
            trace = _traces.get(config)
            if trace is not None:
                return trace
            pending = _computing.get(config)
            if pending is None:  # this session computes it
                pending = _computing[config] = Future()
                break
        try:
            return _shared(pending, tell)
        except BaseException:  # noqa: BLE001 - the other session's error or stop: try again
            continue
    try:
        nbytes = budget.trace_bytes(config)
        with budget.WORK.reserve(int(nbytes * budget.WORK_FACTOR),
                                 on_wait=waiting_note() if tell else None):
            trace = compute_trace(config, embedding_table=embedding_table)
        with _lock:  # cached before the waiting ones are let go: no second computation
            if trace.nbytes <= _traces.maxsize:
                _traces[config] = trace
            del _computing[config]
        pending.set_result(trace)
        return trace
    except BaseException as error:
        with _lock:
            _computing.pop(config, None)
        pending.set_exception(error)
        raise


WAITING_ICON = ":material/hourglass_top:"
"""The icon of every note that says a page waits for its turn (what a visitor
on the protocol, `benchmarks.protocol`, recognises it by)."""
SHARED_NOTE_AFTER_SECONDS = 0.5
"""How long a session waits for another's computation of its config before saying so."""


def _shared(pending: Future, tell: bool) -> Trace:
    """The trace another session is computing (``pending``); past
    `SHARED_NOTE_AFTER_SECONDS`, with ``tell``, the page says why it waits,
    until the trace is there."""
    try:
        return pending.result(timeout=SHARED_NOTE_AFTER_SECONDS if tell else None)
    except TimeoutError:
        pass
    place = st.empty()
    place.info("Waiting for another visitor's computation of this same configuration; "
               "this page shows its result as soon as it is done.",
               icon=WAITING_ICON)
    try:
        return pending.result()
    finally:
        place.empty()


class _PageRun(threading.local):
    """The page run this thread draws (`drawing`): its ``page``, the ``stack``
    that releases what it holds, and the ``held`` bytes of the work allowance."""

    page: str | None = None
    stack: ExitStack | None = None
    held: int = 0


_run = _PageRun()


@contextmanager
def drawing(page: str) -> Iterator[None]:
    """Hold ``page``'s bytes of the work allowance through the ``with``, which
    reads the page's settings and draws its charts: from its first `cached_trace`
    (`_hold`: `explorer.server.budget.drawing_bytes` of that config, with the
    page's `explorer.lessons.pages.Page.traces` and its checks while it draws)
    until its browser has read the charts. A page therefore waits for memory before it computes or holds a
    trace, told its place on the page, and no trace it holds goes uncounted.
    Then the memory goes back (`explorer.server.budget.trim_malloc`). A small page
    draws at once. If the server stays busy for
    `explorer.server.budget.DRAWING_WAIT_SECONDS`, the page says so and stops
    (`st.stop`) without drawing."""
    if _run.page is not None:  # within another page's run: that one holds
        yield
        return
    with ExitStack() as stack:
        _run.page, _run.stack, _run.held = page, stack, 0
        try:
            yield
            if _run.held:
                _wait_until_sent(SEND_WAIT_SECONDS)
        finally:
            _run.page, _run.stack, _run.held = None, None, 0


def _hold(config: AttentionConfig) -> None:
    """Within a page run (`drawing`), reserve what the page holds for ``config``
    before its trace is computed or read: the first trace asked for sets the
    amount; a larger one later adds the difference (served at once, as a
    thread holding bytes is). Outside a page run, nothing."""
    if _run.page is None:
        return
    page = pages.BY_NAME[_run.page]
    nbytes = budget.drawing_bytes(config, checks=pages.CHECKS_AS_IT_DRAWS in page.traits,
                                  traces=page.traces)
    if nbytes <= _run.held:
        return
    if not _run.held:
        _run.stack.callback(budget.trim_malloc)  # last, once the bytes are released
    try:
        _run.stack.enter_context(budget.WORK.reserve(
            nbytes - _run.held, timeout=budget.DRAWING_WAIT_SECONDS, on_wait=waiting_note()))
    except budget.BudgetError as error:  # the server stayed busy: say so, draw nothing
        st.warning(literal.markdown(str(error)), icon=":material/hourglass_disabled:")
        st.stop()
    _run.held = nbytes


SENT_POLL_SECONDS = 0.05
SEND_WAIT_SECONDS = 30.0
"""How long a page that drew large charts keeps their bytes while its browser reads them."""


def _wait_until_sent(timeout: float) -> None:
    """Wait, up to ``timeout`` seconds, until this session's messages have all
    been handed to its websocket, or it is gone: a browser still drawing reads
    them slowly, and until then the server holds the charts' payloads
    (measured: sockets full, 3–4 MB queued in the kernel, the rest in the
    server). `drawing` keeps its bytes reserved until then. Reads Streamlit's
    internals (`explorer.ui.private.unsent_messages`); where they cannot be
    read, it does not wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not private.unsent_messages():  # all sent, gone, or not readable (None)
            return
        time.sleep(SENT_POLL_SECONDS)


def waiting_note() -> Callable[[int], None]:
    """A callback for `explorer.server.budget.WorkBudget.reserve`: while the request
    waits for memory, the page says so where the result will appear ("Waiting
    for memory: 2 visitors ahead…"), and the note goes once it may go on."""
    place = None

    def tell(ahead: int) -> None:
        nonlocal place
        if ahead == 0:
            if place is not None:
                place.empty()
            return
        if place is None:
            place = st.empty()
        visitors = "1 visitor" if ahead == 1 else f"{ahead} visitors"
        place.info(f"Waiting for memory: {visitors} ahead. Other visitors' large "
                   "configurations are being computed; this one follows in turn.",
                   icon=WAITING_ICON)

    return tell


T = TypeVar("T")
SMALL_RESULT_BYTES = 4096
"""What a cached model result without ``nbytes`` (a check, a measured example) counts as."""
_models = cachetools.LRUCache(
    maxsize=budget.MODEL_BYTES,
    getsizeof=lambda model: model.memory_bytes + model.tokenizer_bytes)
"""The loaded models, each with its tokenizer (`explorer.models.LoadedModel`,
the one place either is held, so both go when the entry goes), counted by
their weights' bytes and the tokenizer's estimate."""
_model_results = cachetools.LRUCache(
    maxsize=budget.MODEL_TRACE_CACHE_BYTES,
    getsizeof=lambda value: getattr(value, "nbytes", SMALL_RESULT_BYTES))
_loading: dict[str, threading.Lock] = {}


def cached_model(key: str, load: Callable[[], T], label: str,
                 expected_bytes: int | None = None) -> T:
    """The model under ``key`` (a Hub name or a folder's path), loaded by
    ``load()`` the first time and then shared by every session.

    ``expected_bytes`` (its float32 weights, when known before loading) is
    checked against `explorer.server.budget.MODEL_BYTES` first, and the loaded
    model's ``memory_bytes`` and ``tokenizer_bytes`` after, so a model that does not
    fit is refused with the figures (`explorer.server.budget.BudgetError`, naming it ``label``). To
    make room, the least recently used models are dropped before loading. Two
    sessions asking for the same model at once load it once. Errors of
    ``load`` (e.g. `explorer.models.ModelUnavailable`) pass through.
    """
    with _lock:
        model = _models.get(key)
        waiting = _loading.setdefault(key, threading.Lock())
    if model is not None:
        return model
    with waiting:  # one load per key at a time; the others then find it cached
        with _lock:
            model = _models.get(key)
        if model is not None:
            return model
        if expected_bytes is not None:
            budget.check_model_fits(label, expected_bytes)
            with _lock:
                while _models and _models.currsize + expected_bytes > _models.maxsize:
                    _models.popitem()
        try:
            model = load()
            budget.check_model_fits(label, _models.getsizeof(model))
            with _lock:
                _models[key] = model
        finally:
            with _lock:  # later callers find the model cached, or try again
                _loading.pop(key, None)
        return model


def loaded_model(key: str) -> Any | None:
    """The model under ``key`` if it is loaded, else None (never loads)."""
    with _lock:
        return _models.get(key)


def cached_model_result(key: Hashable, compute: Callable[[], T], work_bytes: int,
                        what: str = "this input") -> T:
    """``compute()`` of a real model, kept under ``key`` (e.g. ``("trace",
    model location, input ids, layer)``) within
    `explorer.server.budget.MODEL_TRACE_CACHE_BYTES`, counted by the value's
    ``nbytes`` (`SMALL_RESULT_BYTES` without one).

    A miss reserves ``work_bytes`` from `explorer.server.budget.WORK` while computing,
    so it raises `explorer.server.budget.BudgetError` when that is more than the
    server's allowance (the message names ``what``). A value larger than the
    whole cache is computed but not kept.
    """
    with _lock:
        value = _model_results.get(key)
    if value is not None:
        return value
    with budget.WORK.reserve(int(work_bytes), what=what, on_wait=waiting_note()):
        value = compute()
    if _model_results.getsizeof(value) <= _model_results.maxsize:
        with _lock:
            _model_results[key] = value
    return value


def cache_bytes() -> dict[str, int]:
    """Bytes held by each cache now (for the memory benchmark and tests)."""
    with _lock:
        return {"traces": int(_traces.currsize), "tables": int(_tables.currsize),
                "models": int(_models.currsize), "model results": int(_model_results.currsize)}


def clear() -> None:
    """Empty every cache (tests)."""
    with _lock:
        _traces.clear()
        _tables.clear()
        _models.clear()
        _model_results.clear()
