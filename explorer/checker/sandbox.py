"""Check a learner's attention class from its source code, within limits.

- `check_code`: in this process (a notebook), within
  `explorer.checker.limits.limits`.
- `check_source`: in a child process in a box (`explorer.checker.box`:
  bubblewrap's namespaces, read-only files, no network), with limits on time,
  memory, processes and output, for the "Check your code" page and the command
  line (``python -m explorer check``). Whatever the code does (loops forever,
  allocates 100 GB, prints megabytes, calls ``exit()`` or ``os._exit()``,
  ignores signals, starts processes that call ``setsid``, writes on every file
  descriptor it has), the caller gets a `explorer.checker.report.CheckReport` or a
  `explorer.checker.report.CheckFailure` back within the time limit, never an
  exception, and only after checking it (`explorer.checker.results.parse`).

What the box does not stop: the learner's code runs in the process that
computes its report, so it can make its own report say anything the report's
schema allows (it can only fool the one who pasted it). Every text of a
report is shown as text.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import inspect
import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from explorer.checker import box, results
from explorer.checker.check import check_module
from explorer.checker.learner import MEMORY_MB, TIMEOUT_S, CheckError, build_module, load_class
from explorer.checker.limits import address_space, limit_hint, limits, memory_message, out_of_memory
from explorer.checker.listings import CONTEXT_MARGIN, DEFAULT_SIZES
from explorer.checker.report import CheckFailure, CheckReport
from explorer.core.config import ConfigError
from explorer.core.tokenizer import tokenize
from explorer.lessons.presets import JOURNEY_SENTENCE
from explorer.server import settings

ENABLED = settings.RUN_CODE
"""Whether this server is asked to run visitors' code (the "Check your code" page):
``EXPLORER_RUN_CODE=1`` (`explorer.server.settings`); `make run` does not set it. It
then runs it only in its box: `explorer.checker.box.problem` says why not where
the box cannot be made."""
ROOT = Path(__file__).resolve().parents[2]
"""The folder holding the ``explorer`` package (the child imports it from there)."""
MAX_OUTPUT_BYTES = box.OUTPUT_BYTES
"""What the learner's code may print or write to files before it is stopped."""
FILENAME = "your_code.py"
"""The name the pasted code goes by in tracebacks."""


def check_code(source: str, class_name: str, *, d_in: int = DEFAULT_SIZES["d_in"],
               d_out: int = DEFAULT_SIZES["d_out"], num_heads: int = DEFAULT_SIZES["num_heads"],
               sentence: str | None = None, seed: int = 123,
               dropout: float = 0.0, qkv_bias: bool = False, context_length: int | None = None,
               causal: bool | None = None, n_heads: int | None = None,
               dropout_seed: int | None = None, filename: str = FILENAME,
               timeout: float | None = TIMEOUT_S, memory_mb: int | None = MEMORY_MB,
               interface: str = "api") -> CheckReport:
    """Run ``source``, build its class ``class_name`` as the book builds
    chapter 3's classes, and `explorer.checker.check.check_module` it, in this
    process, within `limits` (``timeout`` s, ``memory_mb`` MB; None: none).

    The constructor gets ``d_in`` and ``d_out`` (`DEFAULT_SIZES`: d_in, d_out,
    head_dim and num_heads all differ, so that every scaling mistake shows), and
    where its ``__init__`` takes them ``context_length`` (default: the sentence's
    number of tokens plus `CONTEXT_MARGIN`, so that a mask not cut to the
    sentence shows; also as ``block_size``), ``dropout``, ``num_heads`` and
    ``qkv_bias``, after
    ``torch.manual_seed(seed)`` (`explorer.checker.learner.build_module`). ``sentence``
    (default the book's "Your journey starts with one step") and ``seed`` give
    the inputs as in `check_module`, and ``causal`` and ``n_heads`` what it
    assumes (None: read from the module); ``interface`` how the advice spells
    settings. Raises `explorer.checker.learner.CheckError` (a syntax error, an error in
    the file, in ``__init__`` or ``forward``, weights not found, a limit) or
    `explorer.core.config.ConfigError` (sizes beyond the limits).
    """
    sentence = JOURNEY_SENTENCE if sentence is None else sentence
    with limits(timeout, memory_mb, interface):
        cls = load_class(source, filename, class_name)
        n_tokens = len(tokenize(sentence))
        module = build_module(cls, d_in=d_in, d_out=d_out, num_heads=num_heads,
                              dropout=dropout, qkv_bias=qkv_bias, seed=seed,
                              interface=interface,
                              context_length=n_tokens + CONTEXT_MARGIN if context_length is None
                              else context_length)
        return check_module(module, sentence, seed=seed, causal=causal, n_heads=n_heads,
                            dropout_seed=dropout_seed, interface=interface)


# ---------------------------------------------------------------------------
# In a child process, in its box
# ---------------------------------------------------------------------------
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from explorer.checker.sandbox import _child_main; _child_main()")
OPTIONS = {name for name, p in inspect.signature(check_code).parameters.items()
           if p.kind is p.KEYWORD_ONLY} - {"filename", "timeout", "memory_mb", "interface"}
"""`check_code`'s settings that `check_source` passes on to its child."""
_MAC_BYTES = 64
"""The result's HMAC-SHA256, in hex, written before its JSON."""
_SECRET_BYTES = 32


def check_source(source: str, class_name: str, *, filename: str = FILENAME,
                 folder: str | None = None, timeout: float | None = TIMEOUT_S,
                 memory_mb: int | None = MEMORY_MB, interface: str = "app",
                 boxed: bool = True, **options) -> CheckReport | CheckFailure:
    """`check_code` in a child process, in its box (`explorer.checker.box`), within
    ``timeout`` seconds of wall clock for the whole check (starting Python and
    torch, and every process the code starts, included) and ``memory_mb`` MB of
    address space per process (None or 0: no limit).

    In the box, a supervisor that never runs the learner's code forks a worker
    that does. The worker sets its limits (``RLIMIT_AS``, ``RLIMIT_CPU``,
    ``RLIMIT_FSIZE`` at `MAX_OUTPUT_BYTES`, no core dumps, ``RLIMIT_NPROC``
    where no pids cgroup holds the box: `explorer.checker.box.child_nproc`), runs
    `check_code` and hands its result to the supervisor, which judges the
    worker's end (an exit, a signal, the CPU it used), validates the result
    (`explorer.checker.results.parse`) and sends it on a pipe the worker closed
    before running anything, authenticated with a secret the supervisor reads
    only after the fork (HMAC-SHA256). This process checks the HMAC, validates
    again and, at the time limit, kills the box: its init's death kills every
    process in it.

    ``options``: `check_code`'s keyword arguments (``d_in``, ``d_out``,
    ``num_heads``, ``sentence``, ``seed``, ...; TypeError for any other).
    ``folder``: the folder put on the code's ``sys.path`` (the command line's
    folder of the learner's file), shown read-only in the box, or only the file
    ``filename`` in it when others may write there (`explorer.checker.box.shown_of`);
    ``filename``: the name in tracebacks. ``boxed=False`` runs the same
    child without the box (the command line where bubblewrap is missing; not a
    security boundary).

    Returns the `CheckReport`, or a `CheckFailure` whose ``kind`` is one of
    `explorer.checker.results.FAILURES`. Never raises for anything the code does.
    """
    unknown = set(options) - OPTIONS
    if unknown:
        raise TypeError(f"check_source() got unexpected arguments {sorted(unknown)}")
    timeout, memory_mb = timeout or None, memory_mb or None
    request = json.dumps({
        "source": source, "class_name": class_name, "options": options, "filename": filename,
        "folder": folder, "timeout": timeout, "memory_mb": memory_mb,
        "interface": interface, "nproc": box.child_nproc(boxed)}).encode("utf-8")
    secret = os.urandom(_SECRET_BYTES)
    argv = [sys.executable, "-I", "-c", _CHILD, str(ROOT)]
    with contextlib.ExitStack() as stack:
        requested = stack.enter_context(tempfile.TemporaryFile())
        printed = stack.enter_context(tempfile.TemporaryFile())
        try:
            limits = stack.enter_context(box.limits(required=boxed))
            rules = stack.enter_context(box.filter_descriptor()) if boxed else None
        except OSError as error:
            return results.failure("crash", f"the check could not make its box: {error}")
        requested.write(len(request).to_bytes(8, "big") + request + secret)
        requested.seek(0)
        reader, writer = os.pipe()
        try:
            argv += [str(requested.fileno()), str(writer)]
            shown = [box.shown_of(Path(folder), Path(filename).name)] if folder else []
            child = subprocess.Popen(
                limits.prefix + (box.command(argv, readable=shown, syscall_filter=rules,
                                             output_bytes=MAX_OUTPUT_BYTES)
                                 if boxed else argv),
                stdin=subprocess.DEVNULL, stdout=printed, stderr=printed,
                pass_fds=(requested.fileno(), writer, *([rules] if boxed else [])),
                start_new_session=True,
                env=box.ENVIRONMENT,  # bwrap's own too: its init's /proc/1/environ
                cwd=tempfile.gettempdir())
        except OSError as error:
            os.close(reader)
            return results.failure("crash", f"the check could not start its box: {error}")
        finally:
            os.close(writer)
        data, timed_out = b"", True
        try:
            data, timed_out = _read_result(reader, timeout)
        finally:
            os.close(reader)
            _end(child, grace=0 if timed_out else 5)
        if timed_out:
            return results.failure("timeout", f"your code ran for more than {timeout:g} s and "
                                              "was stopped, with every process it started: "
                                              "does a loop never end?"
                                              + limit_hint(interface, "timeout"), _tail(printed))
        if limits.out_of_memory():
            return results.failure("memory", f"your code's processes held more than "
                                             f"{box.MEMORY_BYTES // 2**20:,} MB of memory "
                                             "together, and the system stopped one: does it "
                                             "allocate too much, or start many processes?",
                                   _tail(printed))
        return _verified(data, secret, child.returncode, printed)


def _read_result(reader: int, timeout: float | None) -> tuple[bytes, bool]:
    """What the box writes on ``reader`` until it closes it (at most
    `explorer.checker.results.MAX_RESULT_BYTES` and the HMAC, plus one byte to
    tell more), and whether ``timeout`` s passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    limit = results.MAX_RESULT_BYTES + _MAC_BYTES + 1
    chunks, size = [], 0
    while size < limit:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return b"", True
        ready, _, _ = select.select([reader], [], [], left)
        if not ready:
            continue
        chunk = os.read(reader, min(2**16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _end(child: subprocess.Popen, grace: float) -> None:
    """Give the box ``grace`` seconds to end by itself, then kill it and its
    session (the box's init dies with it, and every process in the box with that)."""
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    for kill in (lambda: os.killpg(child.pid, signal.SIGKILL), child.kill):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    child.wait()


def _tail(printed) -> str:
    """The last lines the learner's code printed (at most 2,000 characters)."""
    printed.seek(0, os.SEEK_END)
    printed.seek(max(0, printed.tell() - 2000))
    return printed.read().decode("utf-8", "replace").strip()


def _verified(data: bytes, secret: bytes, returncode: int, printed) -> CheckReport | CheckFailure:
    """The supervisor's result in ``data``: its HMAC checked, then validated
    (`explorer.checker.results.parse`); a `CheckFailure` saying what is wrong
    otherwise."""
    if not data:
        return results.failure("crash", f"the check ended without a result (exit status "
                                        f"{returncode})", _tail(printed))
    if len(data) > results.MAX_RESULT_BYTES + _MAC_BYTES:
        return results.failure("crash", f"the check's result was refused: more than "
                                        f"{results.MAX_RESULT_BYTES // 2**20} MB")
    mac, body = data[:_MAC_BYTES], data[_MAC_BYTES:]
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(mac, expected):
        return results.failure("crash", "the check's result was refused: it was not written "
                                        "by the checker (was it forged by the code?)")
    try:
        return results.parse(body)
    except ValueError as error:
        return results.failure("crash", f"the check's result was refused: {error}")


# ---------------------------------------------------------------------------
# Inside the box: the supervisor and the worker
# ---------------------------------------------------------------------------
def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the request ended early")
        data += chunk
    return data


def _undumpable() -> None:
    """Make this process non-dumpable: a process of the same user without
    ``CAP_SYS_PTRACE`` (the box drops every capability) can then neither trace
    it nor open its ``/proc/<pid>/fd`` or ``mem``."""
    import ctypes

    PR_SET_DUMPABLE = 4
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _child_main() -> None:
    """The supervisor, in the box: read the request, fork the worker, judge
    its end, and write the validated, authenticated result (see `check_source`)."""
    request_fd, result_fd = int(sys.argv[2]), int(sys.argv[3])
    size = int.from_bytes(_read_exactly(request_fd, 8), "big")
    request = json.loads(_read_exactly(request_fd, size))
    import torch

    torch.set_num_threads(1)
    _undumpable()
    reader, writer = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(reader)
        os.close(request_fd)
        os.close(result_fd)
        _worker(request, writer)
    os.close(writer)
    secret = _read_exactly(request_fd, _SECRET_BYTES)
    os.close(request_fd)
    outcome = _judge(request, *_collect(reader, worker))
    body = outcome.to_json().encode("utf-8")
    mac = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
    with os.fdopen(result_fd, "wb") as out:
        out.write(mac + body)
    os._exit(0)


def _collect(reader: int, worker: int) -> tuple[bytes, int, float]:
    """The worker's message (at most `explorer.checker.results.MAX_RESULT_BYTES`
    and one byte: the worker is killed past that), its wait status and the CPU
    seconds it used. Stops reading when the worker has ended, whoever else
    holds the pipe open."""
    limit = results.MAX_RESULT_BYTES + 1
    ended = os.pidfd_open(worker)
    os.set_blocking(reader, False)
    chunks, size, reading = [], 0, True
    while True:
        ready, _, _ = select.select([reader, ended] if reading else [ended], [], [])
        while reading and (reader in ready or ended in ready):
            try:
                chunk = os.read(reader, limit - size)
            except BlockingIOError:
                break
            chunks.append(chunk)
            size += len(chunk)
            if not chunk or size >= limit:
                reading = False
                if chunk:
                    os.kill(worker, signal.SIGKILL)
        if ended in ready:
            _, status, usage = os.wait4(worker, 0)
            return b"".join(chunks), status, usage.ru_utime + usage.ru_stime


def _judge(request: dict, message: bytes, status: int, cpu: float
           ) -> CheckReport | CheckFailure:
    """The result: the worker's message when it ended normally with a valid
    one, else what its end says (an exit, a signal from a limit, a crash)."""
    timeout = request["timeout"]
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and message:
        try:
            return results.parse(message)
        except ValueError as error:
            return results.failure("crash", f"the check's result could not be read ({error})")
    if os.WIFEXITED(status):
        return results.failure("exit", f"your code ended the Python process with exit "
                                       f"status {os.WEXITSTATUS(status)} (os._exit or a "
                                       "signal handler?) before the check finished")
    number = os.WTERMSIG(status)
    name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
    if timeout and (number == signal.SIGXCPU or cpu >= math.ceil(timeout)):
        return results.failure("timeout", f"your code used {cpu:.0f} s of CPU time, more than "
                                          f"the {math.ceil(timeout):g} s allowed, and was "
                                          "stopped")
    if number == signal.SIGXFSZ:
        return results.failure("output", f"your code printed or wrote more than "
                                         f"{MAX_OUTPUT_BYTES // 2**20} MB and was stopped")
    if number == signal.SIGSEGV:
        return results.failure("crash", "your code crashed Python (SIGSEGV): most often a "
                                        "recursion deeper than the C stack allows, after "
                                        "sys.setrecursionlimit raised the limit")
    return results.failure("exit", f"your code's process was ended by signal {name} before "
                                   "the check finished" + (
                                       " (by the code itself, or by the system when memory "
                                       "ran out)" if number == signal.SIGKILL else ""))


def _set_limits(timeout: float | None, memory_mb: int | None, nproc: int | None) -> None:
    """The worker's own limits (see `check_source`)."""
    import resource

    wanted = [(resource.RLIMIT_FSIZE, MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES),
              (resource.RLIMIT_CORE, 0, 0)]
    if memory_mb:
        memory = address_space() + memory_mb * 2**20
        wanted.append((resource.RLIMIT_AS, memory, memory))
    if timeout:
        cpu = math.ceil(timeout)
        wanted.append((resource.RLIMIT_CPU, cpu, cpu + 1))  # SIGXCPU, then SIGKILL
    if nproc:
        wanted.append((resource.RLIMIT_NPROC, nproc, nproc))
    for limit, soft, hard in wanted:
        resource.setrlimit(limit, (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: a write past the limit kills


def _failure(error: BaseException, memory_mb: int | None, interface: str) -> CheckFailure:
    """A `CheckFailure` for whatever stopped the check in the worker (``interface``:
    how the message says to change a limit, `limit_hint`)."""
    text = str(error)
    if out_of_memory(error):
        return results.failure("memory", memory_message(memory_mb or 0)
                               + limit_hint(interface, "memory"),
                               getattr(error, "details", "") or text)
    if isinstance(error, CheckError):
        kind = error.field if error.field in results.FAILURES else "crash"
        return results.failure(kind, text, error.details)
    if isinstance(error, ConfigError):
        return results.failure("inputs", text)
    if isinstance(error, RecursionError):
        return results.failure("forward", f"your code recursed too deeply: {text}")
    if isinstance(error, SystemExit):
        return results.failure("exit", f"your code called exit({results.cut(repr(error.code), 200)})"
                                       " before the check finished")
    return results.failure("crash", f"the check stopped: {type(error).__name__}: {text}")


def _worker(request: dict, writer: int) -> None:
    """The worker, in the box: limit itself, run `check_code` and write the
    result (its texts cut) on ``writer``; never returns."""
    try:
        if request["folder"]:
            sys.path.insert(0, request["folder"])
        _set_limits(request["timeout"], request["memory_mb"], request["nproc"])
        try:
            result = check_code(request["source"], request["class_name"],
                                filename=request["filename"], timeout=None, memory_mb=None,
                                interface=request["interface"], **request["options"])
        except BaseException as error:  # noqa: BLE001 - everything becomes a failure
            result = _failure(error, request["memory_mb"], request["interface"])
        message = results.bounded(result).to_json().encode("utf-8")
        with os.fdopen(writer, "wb") as out:
            out.write(message)
    except BaseException:  # noqa: BLE001 - the checker's own error, told by the supervisor
        traceback.print_exc()
        os._exit(70)
    os._exit(0)  # no atexit handlers of the learner's code
