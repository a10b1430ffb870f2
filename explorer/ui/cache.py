"""Traces and embedding tables shared by every session, bounded by bytes.

`cachetools` LRU caches whose size is each value's bytes (`explorer.budget`
sets the bounds), behind a lock, since Streamlit serves sessions in threads.
A cached `Trace` is shared, never copied: treat its tensors as read-only.
Computing a trace that is not cached reserves its bytes from the server's
work allowance first (`explorer.budget.WORK`).
"""

from __future__ import annotations

import threading

import cachetools

from explorer import budget, recipes
from explorer.config import AttentionConfig
from explorer.trace import Trace, compute_trace

_tables = cachetools.LRUCache(
    maxsize=budget.TABLE_CACHE_BYTES,
    getsizeof=lambda value: value[0].nbytes + value[1].nbytes)
_traces = cachetools.LRUCache(maxsize=budget.TRACE_CACHE_BYTES,
                              getsizeof=lambda trace: trace.nbytes)
_lock = threading.RLock()


@cachetools.cached(_tables, lock=_lock)
def embedding_table(seed: int, vocab_size: int, d_in: int):
    """`recipes.embedding_table`, cached per (seed, vocab_size, d_in): editing
    the sentence does not redraw the table."""
    return recipes.embedding_table(seed, vocab_size, d_in)


def cached_trace(config: AttentionConfig) -> Trace:
    """`compute_trace` of ``config``, from the cache when it is there.

    Raises `explorer.budget.BudgetError` (a `ConfigError`) when the trace alone
    needs more than the server's work allowance, or the server stays busy.
    A trace larger than the whole cache is computed but not kept.
    """
    with _lock:
        trace = _traces.get(config)
    if trace is not None:
        return trace
    nbytes = budget.trace_bytes(config)
    with budget.WORK.reserve(int(nbytes * budget.WORK_FACTOR)):
        trace = compute_trace(config, embedding_table=embedding_table)
    if trace.nbytes <= _traces.maxsize:
        with _lock:
            _traces[config] = trace
    return trace


def cache_bytes() -> dict[str, int]:
    """Bytes held by each cache now (for the memory benchmark and tests)."""
    with _lock:
        return {"traces": int(_traces.currsize), "tables": int(_tables.currsize)}


def clear() -> None:
    """Empty both caches (tests)."""
    with _lock:
        _traces.clear()
        _tables.clear()
