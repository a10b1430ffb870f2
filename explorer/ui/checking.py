"""The "Check your code" page's own pieces: the settings of the learner's class,
running it (`explorer.checker.sandbox.check_source`: in a child process in its box,
`explorer.checker.box`, with limits on time, memory, processes and output), and
the report: the table of steps, the first difference, the diagnosis, and our
matrix beside theirs with the differing cells outlined
(`explorer.render.check_view.difference_charts`, drawn like every other chart).

Running visitors' code is off unless the server was started with
``EXPLORER_RUN_CODE=1`` (`explorer.checker.sandbox.ENABLED`) and the box can be
made (`explorer.checker.box.problem`, which the page quotes when it cannot);
when off, the page explains how to run the same check in a notebook or a shell.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import threading
from dataclasses import asdict, dataclass

import cachetools
import pandas as pd
import streamlit as st

from explorer.checker import box, results, sandbox
from explorer.checker.learner import class_name_problem
from explorer.checker.listings import CONTEXT_MARGIN, MULTI_HEAD_ATTENTION_CLASS
from explorer.checker.report import CheckFailure, CheckReport
from explorer.core import literal
from explorer.core.config import ConfigError, parse_field, sentence_tokens
from explorer.lessons.pages import CHECK_PAGE
from explorer.server import budget
from explorer.server.budget import BudgetError
from explorer.ui import component, private, widgets
from explorer.ui.sidebar import Frame

RESULT_CACHE_BYTES = 32 * 2**20
"""Checks already run, kept by their request, counted by their JSON's size."""
MAX_RUNNING = budget.CHECKS_AT_ONCE
"""Checks that run at once (each a Python process importing torch, about 2–3 s); the
others wait in line (`explorer.server.budget.CHECKS`), told their place."""
WAIT_S = 60.0
"""How long a check waits for its turn before the page says to try again."""
_results = cachetools.LRUCache(maxsize=RESULT_CACHE_BYTES, getsizeof=lambda item: item[1])
_lock = threading.Lock()
_visitors: set[str] = set()
"""The visitors with a check running or waiting (`visitor`): one each at a time."""

RUNS_HERE = ("Your code runs on this server in a box (bubblewrap): its own process, "
             "network and mount namespaces, as an unprivileged user with no capabilities. "
             "It reads, and cannot change, only the system's libraries, Python with its "
             "packages and this app's explorer package; its one writable folder is a "
             "private /tmp of {tmp_mb} MB, gone after the check. It has no network, sees "
             "and signals none of the server's processes and none of its settings. The "
             "whole check may take {timeout:g} s, {processes} processes and threads, "
             "{memory:,} MB of address space each{total}, and print or write "
             "{output_mb} MB. Your code runs in the process that writes your report, so it "
             "could make its report say anything: it would fool only you.")
"""What the enabled page says above the editor (the box: `explorer.checker.box`)."""
NO_BOX = ("This server was started with EXPLORER_RUN_CODE=1, but it runs pasted code only "
          "in its box, and the box cannot be made here: {problem}.")
"""What the page says when the server asks for pasted code but has no box."""
NO_ROOM = "This server was started with EXPLORER_RUN_CODE=1, but {problem}."
"""What the page says when the server's memory budget cannot hold its checks
(`explorer.server.budget.checks_problem`)."""


def snippets(values: dict) -> tuple[str, str]:
    """The same check in a notebook and in a shell, with every sidebar value:
    the class, d_in, d_out, num_heads, qkv_bias, what the check assumes (causal,
    n_heads), the sentence and the seed.

    The notebook builds the class as the page does (``torch.manual_seed(seed)``
    first, context_length = the sentence's tokens + `CONTEXT_MARGIN`); the shell
    passes each value as its flag (`explorer.__main__`), quoted for a POSIX
    shell. Every value is written as a literal: numbers as ``int``, texts by
    ``repr`` or ``shlex.quote``, and the class name only once it is an identifier
    (`explorer.checker.learner.class_name_problem`), and the sentence only
    within its limits (`explorer.core.config.sentence_tokens`). Raises
    `ConfigError` naming ``check_class`` or ``sentence`` otherwise: no snippet
    is written with it."""
    cls = values["check_class"].strip() or MULTI_HEAD_ATTENTION_CLASS
    problem = class_name_problem(cls)
    if problem is not None:
        raise ConfigError("check_class", f"check_class: {problem}")
    sentence, seed = values["sentence"], values["seed"].strip()
    d_in, d_out, num_heads = (int(values[name]) for name in ("d_in", "d_out", "num_heads"))
    context_length = len(sentence_tokens(sentence)) + CONTEXT_MARGIN
    try:
        seed_python = str(int(parse_field("seed", seed)))
    except ConfigError:
        seed_python = repr(seed)
    causal, n_heads = assumed(values)
    bias = ", qkv_bias=True" if values["qkv_bias"] else ""
    stated = "".join([*([] if causal is None else [f", causal={causal!r}"]),
                      *([] if n_heads is None else [f", n_heads={n_heads}"])])
    notebook = (
        "import torch\n"
        "from explorer.checker.check import check_module\n\n"
        f"torch.manual_seed({seed_python})  # as the page builds your class\n"
        f"module = {cls}(d_in={d_in}, d_out={d_out}, "
        f"context_length={context_length},\n"
        f"    dropout=0.0, num_heads={num_heads}{bias})"
        "  # leave out what your __init__ does not take\n"
        f"report = check_module(module, {sentence!r}, seed={seed_python}{stated})\n"
        "report          # in a notebook: the table, and your matrix beside ours\n"
        "print(report)   # anywhere else: the same as text\n")
    shell = " ".join([
        "python -m explorer check", shlex.quote(f"my_attention.py:{cls}"),
        f"--d_in {d_in} --d_out {d_out} --num_heads {num_heads}",
        *(["--qkv_bias"] if values["qkv_bias"] else []),
        *([] if causal is None else ["--causal" if causal else "--no-causal"]),
        *([] if n_heads is None else [f"--n_heads {n_heads}"]),
        "--sentence", shlex.quote(sentence), "--seed", shlex.quote(seed)])
    return notebook, shell


def assumed(values: dict) -> tuple[bool | None, int | None]:
    """What the sidebar says the check assumes: (causal, n_heads), None where it
    is to be read from the code."""
    from explorer.ui.state.entries import CAUSAL_CHOICES

    heads = int(values.get("check_n_heads") or 0)
    return CAUSAL_CHOICES[values.get("check_causal", "auto")], heads or None


@dataclass(frozen=True)
class Request:
    """What to check: the learner's ``source``, its class and how to build and
    feed it (`explorer.checker.sandbox.check_source`'s arguments)."""

    source: str
    class_name: str
    d_in: int
    d_out: int
    num_heads: int
    qkv_bias: bool
    sentence: str
    seed: str
    causal: bool | None = None
    n_heads: int | None = None

    @property
    def key(self) -> str:
        """A digest of the whole request: the cache's key."""
        return hashlib.blake2b(json.dumps(asdict(self)).encode(), digest_size=16).hexdigest()


def settings() -> Request | None:
    """Draw the page's settings and return what to check, or None when this
    server does not run visitors' code (the page then says how to check it
    in a notebook or a shell)."""
    frame = Frame(CHECK_PAGE)
    values = frame.values
    with frame.sidebar:
        st.header(CHECK_PAGE)
        for name in ("check_class", "d_out", "num_heads", "qkv_bias", "check_causal",
                     "check_n_heads"):
            values[name] = widgets.draw(name)
        problem = class_name_problem(values["check_class"].strip() or MULTI_HEAD_ATTENTION_CLASS)
        if problem is not None:
            st.error(literal.markdown(f"check_class: {problem}"))
        st.header("Inputs")
        for name in ("sentence", "d_in", "seed"):
            values[name] = widgets.draw(name)
        st.caption("“Your journey starts with one step” with d_in = 3 uses the book's "
                   "hand-picked vectors; any other input is drawn as on the other pages "
                   "(an nn.Embedding table from the seed).")
    problem = sandbox.ENABLED and why_not_run()
    if not sandbox.ENABLED or problem:
        frame.finish(None, values)
        if problem:
            st.error(literal.markdown(problem))
        _elsewhere(values)
        return None
    st.warning(RUNS_HERE.format(timeout=sandbox.TIMEOUT_S, memory=sandbox.MEMORY_MB,
                                processes=box.MAX_PROCESSES, tmp_mb=box.TMP_BYTES // 2**20,
                                total=(f" and {box.MEMORY_BYTES // 2**20:,} MB of memory in all"
                                       if box.bounded_in_total() else ""),
                                output_mb=sandbox.MAX_OUTPUT_BYTES // 2**20),
               icon=":material/warning:")
    values["check_code"] = widgets.draw("check_code", style="area", height=420)
    frame.finish(None, values)
    return Request(values["check_code"], values["check_class"].strip(), values["d_in"],
                   values["d_out"], values["num_heads"], values["qkv_bias"],
                   values["sentence"], values["seed"], *assumed(values))


def why_not_run() -> str:
    """Why this server, asked to run pasted code, cannot ("" when it can): no box
    (`NO_BOX`), or a memory budget that cannot hold its checks (`NO_ROOM`)."""
    if box.problem():
        return NO_BOX.format(problem=box.problem())
    room = budget.checks_problem()
    return NO_ROOM.format(problem=room) if room else ""


def _elsewhere(values: dict) -> None:
    """How to run the check where the code lives: a notebook or a shell, with
    the sidebar's values (`snippets`)."""
    try:
        notebook, shell = snippets(values)
    except ConfigError as error:  # a class name that is no identifier: no code is written
        st.error(literal.markdown(str(error)))
        return
    st.info("This server does not run visitors' code, so paste nothing here: run the same "
            "check where your code lives. It prints the same report.")
    st.markdown("**In a notebook**, after defining your class:")
    st.code(notebook, language="python", wrap_lines=True)  # no sideways scroll
    st.markdown("**In a shell**, from this project's folder, with your class in "
                "my_attention.py (it exits with 1 on a difference):")
    st.code(shell, language="bash", wrap_lines=True)
    st.caption("To check pasted code on this page, start your own server with "
               "EXPLORER_RUN_CODE=1 and bubblewrap installed (the code then runs in a box "
               "with no network and read-only files, within limits of time, memory and "
               "processes).")


def result(request: Request) -> CheckReport | CheckFailure | None:
    """The check of ``request``: from the cache, or run now when the visitor
    presses "Check" (at most `MAX_RUNNING` at once; a run waits its turn)."""
    with _lock:
        found = _results.get(request.key)
    if found is not None:
        return found[0]
    if not st.button("Check my code", key="check-run", type="primary",
                     icon=":material/play_arrow:"):
        st.caption("Press “Check my code” to run it (a few seconds: it starts a fresh Python).")
        return None
    try:
        seed = parse_field("seed", request.seed)
        sentence_tokens(request.sentence)  # its limits, before anything runs
    except ConfigError as error:
        st.error(literal.markdown(str(error)))
        return None
    who = visitor()
    with _lock:
        busy = who in _visitors
        _visitors.add(who)
    if busy:
        st.warning("Your other check is still running or waiting its turn (in this tab or "
                   "another): one check at a time for each visitor. Press “Check my code” "
                   "again once it is done.", icon=":material/hourglass:")
        return None
    place = st.empty()

    def waiting(ahead: int) -> None:  # told by the queue whenever its place changes
        if ahead:
            place.info(wait_message(ahead), icon=":material/hourglass:")
        else:
            place.empty()

    try:
        with budget.CHECKS.reserve(budget.CHECK_BYTES, "a check", timeout=WAIT_S,
                                   on_wait=waiting):
            with st.spinner("Running your code in a separate process (at most "
                            f"{sandbox.TIMEOUT_S:g} s)…"):
                outcome = sandbox.check_source(
                    request.source, request.class_name, d_in=request.d_in, d_out=request.d_out,
                    num_heads=request.num_heads, qkv_bias=request.qkv_bias,
                    sentence=request.sentence, seed=seed, causal=request.causal,
                    n_heads=request.n_heads)
    except BudgetError:
        place.warning(f"Other visitors' checks kept this server busy for {WAIT_S:g} s: press "
                      "“Check my code” again in a moment.", icon=":material/hourglass:")
        return None
    finally:
        with _lock:
            _visitors.discard(who)
    size = len(outcome.to_json())  # its texts cut by the box: a few kB at most for a failure
    with _lock:
        if size <= _results.maxsize:
            _results[request.key] = (outcome, size)
    return outcome


def visitor() -> str:
    """Who asks for a check, for the one-at-a-time rule: the visitor's address
    (every tab of one browser, and a script opening sessions), or this session
    where the address is this machine's own (behind a proxy such as the nginx
    recipe, whose replicas each serve a class)."""
    address = st.context.ip_address
    if address and address not in ("127.0.0.1", "::1"):
        return address
    return f"session {private.session_id()}"


def wait_message(ahead: int) -> str:
    """What a visitor waiting for a check is told: its place and its longest wait
    (each check ahead of it runs at most `explorer.checker.sandbox.TIMEOUT_S`,
    `MAX_RUNNING` at a time)."""
    rounds = -(-ahead // MAX_RUNNING)
    return (f"Your check waits its turn: {ahead} {'check is' if ahead == 1 else 'checks are'} "
            f"ahead of it, so it starts within {rounds * sandbox.TIMEOUT_S:g} s.")


FAILURES = results.FAILURES
"""Why a check could not run, by `explorer.checker.report.CheckFailure.kind`, for the headline
(`explorer.checker.results.FAILURES`: no other kind comes back from the box)."""


def report(outcome: CheckReport | CheckFailure) -> None:
    """The report: the verdict, the table of steps, what was found and, for the
    first difference, our matrix beside yours with the differing cells outlined;
    or why the code could not be checked.

    The verdict is the explorer's own text; everything that may quote the
    learner's code (messages, findings) is drawn with ``st.text``, which reads
    no Markdown, so it is shown and copied as written (no escapes, no invisible
    word joiners)."""
    if isinstance(outcome, CheckFailure):
        st.error(f"✗ Your code could not be checked: "
                 f"{literal.markdown(FAILURES.get(outcome.kind, 'an unknown reason'))} "
                 f"({literal.markdown(outcome.kind)}).")
        st.text(outcome.message)
        if outcome.details:
            st.code(outcome.details, language=None)
        return
    if outcome.uncertain:  # it may name the code's parameters: drawn as text
        st.warning(literal.markdown(outcome.summary()), icon=":material/help:")
    else:  # its step names and places come from the box, which the code could forge
        (st.success if outcome.ok else st.error)(literal.markdown(outcome.summary()))
    if outcome.settings:  # what was assumed, and why (it may quote the code's names)
        st.text(outcome.settings[0])
    if outcome.steps:  # (none when it raised before any step could be compared)
        st.dataframe(pd.DataFrame(outcome.rows()).set_index("step"), width="content")
    for label, text in outcome.findings():
        st.text(f"{label}: {text}")
    if outcome.first_difference is None:
        return
    from explorer.render.check_view import difference_charts

    charts = difference_charts(outcome)
    for i, (column, shown) in enumerate(zip(st.columns(len(charts) or 1), charts)):
        with column:
            component.show(shown, key=f"check-difference-{i}")
