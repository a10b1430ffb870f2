"""Check a learner's attention class from its source code, within limits.

- `check_code`: in this process (the command line, ``python -m explorer check``),
  within `explorer.checker.limits.limits`.
- `check_source`: in a child process with a time limit and a memory limit, for
  a page where visitors paste their code. Whatever their code does (loops
  forever, allocates 100 GB, prints megabytes, calls ``exit()``, crashes),
  the caller gets a `explorer.checker.check.CheckReport` or a
  `explorer.checker.check.CheckFailure` back, never an exception. The result crosses
  the process boundary as JSON (`explorer.checker.check.result_from_json`).

The limits keep one visitor's code from taking the server's time and memory;
they are not a security boundary. The code runs with the server's user, files
and network: run the page only where that is acceptable (a container).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from explorer.server import settings
from explorer.checker.check import CheckFailure, CheckReport, check_module, result_from_json
from explorer.core.config import ConfigError
from explorer.checker.learner import MEMORY_MB, TIMEOUT_S, CheckError, build_module, load_class
from explorer.checker.limits import address_space, limits, memory_message, out_of_memory
from explorer.lessons.presets import JOURNEY_SENTENCE
from explorer.core.tokenizer import tokenize

ENABLED = settings.RUN_CODE
"""Whether this server runs visitors' code (the "Check your code" page):
``EXPLORER_RUN_CODE=1`` (`explorer.server.settings`), never on a public server (the limits below are not a
security boundary). `make run` does not set it."""
ROOT = Path(__file__).resolve().parents[2]
"""The folder holding the ``explorer`` package (the child imports it from there)."""
MAX_OUTPUT_BYTES = 16 * 2**20
"""What the learner's code may print or write to files before it is stopped."""
FILENAME = "your_code.py"
"""The name the pasted code goes by in tracebacks."""


def check_code(source: str, class_name: str, *, d_in: int = 3, d_out: int = 4,
               num_heads: int = 2, sentence: str | None = None, seed: int = 123,
               dropout: float = 0.0, qkv_bias: bool = False, context_length: int | None = None,
               dropout_seed: int | None = None, filename: str = FILENAME,
               timeout: float | None = TIMEOUT_S, memory_mb: int | None = MEMORY_MB,
               interface: str = "api") -> CheckReport:
    """Run ``source``, build its class ``class_name`` as the book builds
    chapter 3's classes, and `explorer.checker.check.check_module` it, in this
    process, within `limits` (``timeout`` s, ``memory_mb`` MB; None: none).

    The constructor gets ``d_in`` and ``d_out`` (default 4, with 2 heads:
    head_dim 2, where a missing √head_dim shows), and where its ``__init__``
    takes them ``context_length`` (default: the sentence's number of tokens;
    also as ``block_size``), ``dropout``, ``num_heads`` and ``qkv_bias``, after
    ``torch.manual_seed(seed)`` (`explorer.checker.learner.build_module`). ``sentence``
    (default the book's "Your journey starts with one step") and ``seed`` give
    the inputs as in `check_module`; ``interface`` how the advice spells
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
                              context_length=n_tokens if context_length is None
                              else context_length)
        return check_module(module, sentence, seed=seed, dropout_seed=dropout_seed,
                            interface=interface)


# ---------------------------------------------------------------------------
# In a child process
# ---------------------------------------------------------------------------
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from explorer.checker.sandbox import _child_main; _child_main()")


def check_source(source: str, class_name: str, *, d_in: int = 3, d_out: int = 4,
                 num_heads: int = 2, sentence: str | None = None, seed: int = 123,
                 dropout: float = 0.0, qkv_bias: bool = False,
                 dropout_seed: int | None = None, timeout: float = TIMEOUT_S,
                 memory_mb: int = MEMORY_MB, interface: str = "app"
                 ) -> CheckReport | CheckFailure:
    """`check_code` in a child process that may use ``timeout`` seconds (wall
    clock, starting Python and torch included) and ``memory_mb`` MB of memory.

    The child (``python -I``, in an empty temporary folder, one torch thread)
    sets its own limits with ``resource.setrlimit`` before it runs the code:
    ``RLIMIT_AS`` (its address space at start-up plus ``memory_mb``),
    ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (`MAX_OUTPUT_BYTES`; what the code prints
    goes to a file) and no core dumps. It runs in its own session, so on time
    out the parent kills it and anything it started.

    Returns the `CheckReport`, or a `CheckFailure` whose ``kind`` says why
    there is none: ``"syntax"``, ``"source"``, ``"__init__"``, ``"forward"``
    (with the last lines of the learner's traceback in ``details``),
    ``"module"``, ``"inputs"``, ``"timeout"``, ``"memory"`` or ``"crash"``.
    Never raises for anything the code does.
    """
    request = json.dumps({
        "source": source, "class_name": class_name, "sentence": sentence, "seed": seed,
        "d_in": d_in, "d_out": d_out, "num_heads": num_heads, "dropout": dropout,
        "qkv_bias": qkv_bias, "dropout_seed": dropout_seed, "timeout": timeout,
        "memory_mb": memory_mb, "interface": interface})
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "LC_ALL": "C.UTF-8"}
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile() as printed:
        try:
            child = subprocess.Popen([sys.executable, "-I", "-c", _CHILD, str(ROOT)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=printed, cwd=folder, env=env,
                                     start_new_session=True)
        except OSError as error:
            return CheckFailure("crash", f"the check could not start a Python process: {error}")
        try:
            out, _ = child.communicate(request.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_session(child)
            child.communicate()
            return CheckFailure("timeout", f"your code ran for more than {timeout:g} s and "
                                           "was stopped: does a loop never end?")
        finally:
            _end_session(child)  # and whatever the code started and left running
        return _outcome(child.returncode, out, printed, timeout, memory_mb)


def _end_session(child: subprocess.Popen) -> None:
    """Kill the child's session: the child and anything it started."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(printed) -> str:
    """The last lines the learner's code printed (at most 2,000 characters)."""
    printed.seek(0, os.SEEK_END)
    printed.seek(max(0, printed.tell() - 2000))
    return printed.read().decode("utf-8", "replace").strip()


def _outcome(returncode: int, out: bytes, printed, timeout: float, memory_mb: int
             ) -> CheckReport | CheckFailure:
    """The child's result, or what its end says: a signal from a limit, a crash."""
    if returncode == 0 and out:
        try:
            return result_from_json(out.decode("utf-8"))
        except (ValueError, KeyError, TypeError) as error:
            return CheckFailure("crash", f"the check's result could not be read ({error})")
    if returncode == -signal.SIGXCPU:
        return CheckFailure("timeout", f"your code used more than {timeout:g} s of CPU time "
                                       "and was stopped: does a loop never end?")
    if returncode == -signal.SIGXFSZ:
        return CheckFailure("crash", f"your code printed or wrote more than "
                                     f"{MAX_OUTPUT_BYTES // 2**20} MB and was stopped")
    if returncode in (-signal.SIGKILL, -signal.SIGSEGV) and memory_mb:
        return CheckFailure("memory", f"your code was stopped (signal {-returncode}), most "
                                      f"likely for using more than {memory_mb:,} MB of memory",
                            _tail(printed))
    return CheckFailure("crash", f"the check ended without a result (exit status {returncode})",
                        _tail(printed))


def _set_limits(timeout: float, memory_mb: int) -> None:
    """The child's own limits (see `check_source`), set after its imports."""
    import resource

    memory = address_space() + memory_mb * 2**20
    cpu = math.ceil(timeout) + 1
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, MAX_OUTPUT_BYTES), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))


def _failure(error: BaseException, memory_mb: int) -> CheckFailure:
    """A `CheckFailure` for whatever stopped the check in the child."""
    text = str(error)
    if out_of_memory(error):
        return CheckFailure("memory", memory_message(memory_mb),
                            getattr(error, "details", "") or text)
    if isinstance(error, CheckError):
        return CheckFailure(error.field, text, error.details)
    if isinstance(error, ConfigError):
        return CheckFailure("inputs", text)
    if isinstance(error, RecursionError):
        return CheckFailure("forward", f"your code recursed too deeply: {text}")
    if isinstance(error, SystemExit):
        return CheckFailure("source", f"your code called exit({error.code!r})")
    return CheckFailure("crash", f"the check stopped: {type(error).__name__}: {text}")


def _child_main() -> None:
    """The child: read the request from stdin, limit itself, check, and write
    the result as JSON to the real stdout (the learner's prints go to stderr)."""
    result_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    request = json.loads(sys.stdin.read())
    import torch

    torch.set_num_threads(1)
    _set_limits(request["timeout"], request["memory_mb"])
    try:
        result = check_code(request["source"], request["class_name"], d_in=request["d_in"],
                            d_out=request["d_out"], num_heads=request["num_heads"],
                            sentence=request["sentence"], seed=request["seed"],
                            dropout=request["dropout"], qkv_bias=request["qkv_bias"],
                            dropout_seed=request["dropout_seed"], timeout=None,
                            memory_mb=None, interface=request["interface"])
    except BaseException as error:  # noqa: BLE001 - everything becomes a failure
        result = _failure(error, request["memory_mb"])
    result_out.write(result.to_json().encode("utf-8"))
    result_out.flush()
    os._exit(0)  # no atexit handlers of the learner's code
