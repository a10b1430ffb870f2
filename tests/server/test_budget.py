"""The memory budget: exact trace sizes, the shared work allowance, byte-bounded caches."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import cachetools
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import AttentionConfig, compute_trace
from explorer.server import budget
from explorer.server.budget import BudgetError, WorkBudget, trace_bytes
from explorer.ui import cache
from tests.core.test_seeds import OMEGA_1_002
from tests.support.server import ROOT


@settings(max_examples=60, deadline=None)
@given(n_tokens=st.integers(1, 12), d_in=st.integers(1, 6), head_dim=st.integers(1, 3),
       head_dim_v=st.integers(1, 3), n_heads=st.integers(1, 3), causal=st.booleans(),
       dropout=st.sampled_from([0.0, 0.2]), out_proj=st.sampled_from([None, True, False]))
def test_trace_bytes_is_exactly_what_compute_trace_holds(n_tokens, d_in, head_dim, head_dim_v,
                                                          n_heads, causal, dropout, out_proj):
    config = AttentionConfig(sentence=" ".join(f"t{i}" for i in range(n_tokens)), d_in=d_in,
                             d_k=head_dim * n_heads, d_v=head_dim_v * n_heads, n_heads=n_heads,
                             causal=causal, dropout=dropout, out_proj=out_proj, vocab_size=50)
    assert trace_bytes(config) == compute_trace(config).nbytes


def test_a_request_larger_than_the_allowance_is_refused_with_the_figures():
    work = WorkBudget(limit=100 * 2**20)
    with pytest.raises(BudgetError, match=r"needs about 300 MB of memory; this server allows "
                                          r"100 MB at a time"):
        with work.reserve(300 * 2**20):
            pass
    assert work.in_use == 0


class Reports:
    """What threads report, under one condition, and a wait until the reports show
    something: the order of threads observed, not hoped for after a sleep."""

    def __init__(self):
        self.changed = threading.Condition()

    def note(self, change: Callable[[], object]) -> None:
        """Apply ``change`` (a thread's report) and wake whoever waits for one."""
        with self.changed:
            change()
            self.changed.notify_all()

    def until(self, holds: Callable[[], bool]) -> None:
        """Wait (at most 30 s) until ``holds()``; fail if it never does."""
        with self.changed:
            assert self.changed.wait_for(holds, timeout=30), "the threads never got there"


def test_concurrent_requests_wait_for_room_and_never_exceed_the_allowance():
    work = WorkBudget(limit=100)
    peak: list[int] = []  # the allowance in use as each job starts
    waited: set[int] = set()  # the jobs told that they wait for room
    reports = Reports()

    def job(i: int):
        def told(ahead: int) -> None:
            if ahead:
                reports.note(lambda: waited.add(i))

        with work.reserve(60, on_wait=told):
            peak.append(work.in_use)
            reports.until(lambda: len(waited) == 5)  # the first holds on until all others wait

    threads = [threading.Thread(target=job, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(waited) == 5  # all but the first waited for room...
    assert peak == [60] * 6  # ... and two 60-byte jobs never ran together
    assert work.in_use == 0


def test_a_busy_server_says_so_after_the_timeout():
    work = WorkBudget(limit=100)
    held, done = threading.Event(), threading.Event()

    def other_visitor():
        with work.reserve(80):
            held.set()
            done.wait(timeout=10)

    holder = threading.Thread(target=other_visitor)
    holder.start()
    held.wait(timeout=10)
    try:
        with pytest.raises(BudgetError, match="busy"):
            with work.reserve(50, timeout=0.05):
                pass
    finally:
        done.set()
        holder.join()


def test_a_thread_holding_bytes_is_served_at_once():
    """A page drawing (holding bytes) that computes another trace must not wait
    for its own reservation: it goes ahead, over the limit for a moment."""
    work = WorkBudget(limit=100)
    with work.reserve(80):
        with work.reserve(50, timeout=0.05):
            assert work.in_use == 130
    assert work.in_use == 0


def test_waiting_requests_go_in_turn_and_are_told_their_place():
    """First come, first served: a waiting request is told how many are ahead of
    it at once and as the queue moves, then 0 when it may go on."""
    work = WorkBudget(limit=100)
    told: dict[str, list[int]] = {"B": [], "C": []}
    order: list[str] = []
    done = {name: threading.Event() for name in "ABC"}
    reports = Reports()

    def job(name: str, nbytes: int):
        tell = ((lambda ahead: reports.note(lambda: told[name].append(ahead)))
                if name in told else None)
        with work.reserve(nbytes, on_wait=tell):
            reports.note(lambda: order.append(name))
            assert done[name].wait(timeout=30)

    threads = [threading.Thread(target=job, args=("A", 80))]
    threads[0].start()
    reports.until(lambda: order == ["A"])
    for name in "BC":  # B comes while A runs, C while B waits
        threads.append(threading.Thread(target=job, args=(name, 60)))
        threads[-1].start()
        reports.until(lambda: told[name] != [])
    done["A"].set()
    reports.until(lambda: order == ["A", "B"] and told["C"] == [2, 1])  # C's turn is next
    done["B"].set()
    done["C"].set()
    for thread in threads:
        thread.join()
    assert order == ["A", "B", "C"]
    assert told == {"B": [1, 0], "C": [2, 1, 0]}
    assert work.in_use == 0 and work._queue == []


def test_a_large_request_is_not_passed_over_by_later_small_ones():
    work = WorkBudget(limit=100)
    order: list[str] = []
    waiting: list[str] = []
    go_on = threading.Event()
    reports = Reports()

    def job(name: str, nbytes: int):
        def told(ahead: int) -> None:
            if ahead and name not in waiting:
                reports.note(lambda: waiting.append(name))

        with work.reserve(nbytes, on_wait=told):
            reports.note(lambda: order.append(name))
            assert go_on.wait(timeout=30)

    threads = []
    for name, nbytes in [("small 1", 40), ("large", 90), ("small 2", 40)]:
        threads.append(threading.Thread(target=job, args=(name, nbytes)))
        threads[-1].start()
        # each comes once the one before runs or waits
        reports.until(lambda: order + waiting == ["small 1", "large", "small 2"][:len(threads)])
    # "small 2" would fit beside "small 1" (80 of 100) but waits behind "large".
    assert (order, waiting, work.in_use) == (["small 1"], ["large", "small 2"], 40)
    go_on.set()
    for thread in threads:
        thread.join()
    assert order == ["small 1", "large", "small 2"]


def test_a_page_that_waits_for_memory_says_so(monkeypatch):
    """A visitor whose trace must wait is told at once, with the queue ahead; the
    other visitor's work (here: the whole allowance) ends only once it was told."""
    from tests.support.apptest import all_charts, open_link
    notes: list[int] = []
    told = threading.Event()
    original = cache.waiting_note

    def recorded():
        tell = original()

        def record(ahead: int) -> None:
            notes.append(ahead)
            tell(ahead)
            told.set()
        return record

    def other_visitor():
        with cache.budget.WORK.reserve(cache.budget.WORK.limit):
            told.wait(timeout=60)

    monkeypatch.setattr(cache, "waiting_note", recorded)
    holder = threading.Thread(target=other_visitor)
    holder.start()
    at = open_link("pages/2_Self_attention.py", {"seed": "9876"})
    holder.join()
    assert not at.exception and notes == [1, 0]
    assert "chart-attn_weights" in all_charts(at)  # then drawn as usual
    assert not [e for e in at.info if "Waiting for memory" in e.value]  # gone once served


def test_the_trace_cache_never_holds_more_bytes_than_its_share(monkeypatch):
    small = cachetools.LRUCache(maxsize=3 * trace_bytes(AttentionConfig()),
                                getsizeof=cache._traces.getsizeof)
    monkeypatch.setattr(cache, "_traces", small)
    for seed in range(20):
        cache.cached_trace(AttentionConfig(seed=seed))
        assert cache.cache_bytes()["traces"] <= cache._traces.maxsize
    assert len(cache._traces) == 3
    # The most recent configs are the ones kept, and a hit returns the same object.
    assert cache.cached_trace(AttentionConfig(seed=19)) is cache.cached_trace(
        AttentionConfig(seed=19))


def test_a_cached_trace_equals_a_fresh_one():
    config = AttentionConfig(seed=3, causal=True, d_k=4, d_v=4, n_heads=2)
    cached, fresh = cache.cached_trace(config), compute_trace(config)
    assert list(cached) == list(fresh)
    for name in fresh:
        assert (cached[name] == fresh[name]).all(), name
    # And a cache hit holds the book's numbers (seed 002, ω for the query "is").
    hit = cache.cached_trace(AttentionConfig())
    assert hit is cache.cached_trace(AttentionConfig())
    torch.testing.assert_close(hit["attn_scores"][1], torch.tensor(OMEGA_1_002),
                               rtol=0, atol=5e-5)


def test_drawing_counts_a_pages_traces_and_payloads_within_the_allowance():
    """The Self-attention page at 512 tokens × d = 1024 counts its 25 MB trace
    and 4 copies of it for the payloads (a page holding 2 traces, one more);
    the multi-head page with 16 heads would need more than the allowance and so
    draws alone; the defaults draw without counting."""
    big = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(512)), d_in=1024,
                          d_k=1024, d_v=1024)
    assert budget.drawing_bytes(big) == (1 + budget.PAYLOAD_COPIES) * trace_bytes(big)
    assert budget.drawing_bytes(big, traces=2) == (2 + budget.PAYLOAD_COPIES) * trace_bytes(big)
    assert budget.drawing_bytes(big.replace(n_heads=16, causal=True),
                                checks=True) == budget.WORK_BYTES
    assert budget.drawing_bytes(AttentionConfig()) == 0


FREED_MIB = """
import os, sys, torch
from explorer.server import budget
from tests.support.server import rss_mib
if sys.argv[1] == "tuned":
    assert budget.tune_malloc()
first = torch.ones(8 * 2**20); del first  # 32 MiB freed: glibc raises its mmap threshold
before = rss_mib(os.getpid())
blocks = [torch.ones(2**18) for _ in range(64)]  # 64 × 1 MiB
kept = [torch.ones(2**15) for _ in range(4)]  # small ones after them, kept
del blocks
print(round(rss_mib(os.getpid()) - before))
"""


def test_freed_tensors_go_back_to_the_system_once_tuned():
    """With glibc's defaults, 64 freed 1 MiB tensors stay resident (the first
    free raised the mmap threshold, and small blocks after them pin the heap);
    after `budget.tune_malloc` they leave. A fresh process each, so that this
    one's settings do not count."""
    def still_resident(settings: str) -> int:
        result = subprocess.run([sys.executable, "-c", FREED_MIB, settings], cwd=ROOT,
                                capture_output=True, text=True, check=True)
        return int(result.stdout.strip())

    assert still_resident("plain") >= 48
    assert still_resident("tuned") <= 8


def test_a_download_holds_the_config_not_the_trace():
    """Streamlit keeps a page's download functions until its session ends: they
    must not keep a large trace alive outside the cache's bound."""
    import weakref

    from explorer.ui.downloads import _later
    config = AttentionConfig(seed=4321)
    trace = cache.cached_trace(config)
    expected = trace.to_json()
    download = _later(trace, type(trace).to_json)
    gone = weakref.ref(trace)
    del trace
    cache.clear()
    assert gone() is None  # nothing but the cache held it
    assert download() == expected  # computed again on the click


def _counted_compute(monkeypatch, started: threading.Event | None = None,
                     go_on: threading.Event | None = None) -> Counter:
    """Count `compute_trace`'s calls in `cache.cached_trace` by config; each call
    sets ``started`` and waits for ``go_on`` (at most 30 s) before computing."""
    calls: Counter = Counter()
    real = cache.compute_trace

    def counted(config, **kwargs):
        calls[config] += 1
        if started is not None:
            started.set()
        if go_on is not None:
            go_on.wait(timeout=30)
        return real(config, **kwargs)

    monkeypatch.setattr(cache, "compute_trace", counted)
    return calls


def _watch_waiting(monkeypatch) -> tuple[list[Future], Reports, Callable[[], int]]:
    """Make `cache.cached_trace`'s shared computations count the sessions blocked
    on them: returns the futures made (one per computation), the `Reports` they
    note to, and how many sessions wait in a ``result`` now."""
    made: list[Future] = []
    waiting = Counter()  # "now": sessions blocked in a result
    reports = Reports()

    class Watched(Future):
        def __init__(self):
            super().__init__()
            made.append(self)

        def result(self, timeout=None):
            reports.note(lambda: waiting.update(now=1))
            try:
                return super().result(timeout)
            finally:
                reports.note(lambda: waiting.subtract(now=1))

    monkeypatch.setattr(cache, "Future", Watched)
    return made, reports, lambda: waiting["now"]


def test_a_class_opening_one_link_at_once_computes_its_trace_once(monkeypatch):
    """30 sessions ask for one config while it is being computed: one computes it,
    the others wait for that computation and get the same trace."""
    cache.clear()
    started, go_on = threading.Event(), threading.Event()
    calls = _counted_compute(monkeypatch, started, go_on)
    made, reports, waiting = _watch_waiting(monkeypatch)
    config = AttentionConfig(seed=4242)
    with ThreadPoolExecutor(max_workers=30) as pool:
        traces = [pool.submit(cache.cached_trace, config, False) for _ in range(30)]
        assert started.wait(timeout=30)
        reports.until(lambda: waiting() == 29)  # the 29 others wait on the held computation
        assert len(made) == 1 and not made[0].done() and calls == {config: 1}
        assert sum(future.done() for future in traces) == 0
        go_on.set()
        traces = [future.result(timeout=60) for future in traces]
    assert waiting() == 0 and len(made) == 1 and made[0].result() is traces[0]
    assert calls == {config: 1}
    assert all(trace is traces[0] for trace in traces)
    torch.testing.assert_close(traces[0]["context"], compute_trace(config)["context"])


def test_different_configs_are_computed_independently(monkeypatch):
    """While one config's computation is held, another config is computed and served."""
    cache.clear()
    go_on = threading.Event()
    calls = _counted_compute(monkeypatch)
    real = cache.compute_trace
    held = AttentionConfig(seed=1)

    def holding(config, **kwargs):  # the held config waits until the other one is served
        if config == held:
            go_on.wait(timeout=30)
        return real(config, **kwargs)

    monkeypatch.setattr(cache, "compute_trace", holding)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(cache.cached_trace, held, False)
        other = cache.cached_trace(AttentionConfig(seed=2), tell=False)
        assert not first.done()  # served while the held one is still being computed
        go_on.set()
        assert first.result(timeout=60)["context"].shape == other["context"].shape
    assert calls == {held: 1, AttentionConfig(seed=2): 1}


def test_when_the_computing_session_fails_a_waiting_one_computes(monkeypatch):
    cache.clear()
    started, go_on = threading.Event(), threading.Event()
    real = cache.compute_trace
    calls = []

    def failing_once(config, **kwargs):
        calls.append(config)
        if len(calls) == 1:
            started.set()
            go_on.wait(timeout=30)
            raise RuntimeError("the first session stopped")
        return real(config, **kwargs)

    monkeypatch.setattr(cache, "compute_trace", failing_once)
    made, reports, waiting = _watch_waiting(monkeypatch)
    config = AttentionConfig(seed=77)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(cache.cached_trace, config, False)
        assert started.wait(timeout=30)
        second = pool.submit(cache.cached_trace, config, False)
        reports.until(lambda: waiting() == 1)  # the second waits on the first's computation
        go_on.set()
        with pytest.raises(RuntimeError, match="stopped"):
            first.result(timeout=60)
        assert second.result(timeout=60)["context"].shape[0] == 6
    assert len(calls) == 2 and len(made) == 2 and not cache._computing  # computed anew


def test_a_page_waiting_for_another_visitors_computation_says_so(monkeypatch):
    """A visitor opening a link whose trace another visitor is computing is told
    why it waits, shares that trace (one computation) and then draws as usual."""
    from tests.support.apptest import all_charts, open_link
    cache.clear()
    started, go_on = threading.Event(), threading.Event()
    calls = _counted_compute(monkeypatch, started, go_on)
    config = AttentionConfig(seed=9877)
    other = threading.Thread(target=cache.cached_trace, args=(config, False))
    other.start()
    assert started.wait(timeout=30)
    seen: list[str] = []
    real_empty = cache.st.empty

    def noted():  # the note's placeholder: release the other visitor once it is shown
        place = real_empty()
        real_info = place.info

        def info(body, **kwargs):
            seen.append(body)
            go_on.set()
            return real_info(body, **kwargs)
        place.info = info
        return place

    monkeypatch.setattr(cache.st, "empty", noted)
    at = open_link("pages/2_Self_attention.py", {"seed": "9877"})
    other.join(timeout=60)
    assert not at.exception
    assert seen and "another visitor's computation" in seen[0]
    assert calls == {config: 1}
    assert "chart-attn_weights" in all_charts(at)
    assert not [e for e in at.info if "another visitor" in e.value]  # gone once served
