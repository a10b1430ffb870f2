"""The time and memory limits of a check in this process (`limits`), for
`explorer.checker.check.check_module` in a notebook and the command line, and how an
out-of-memory error is recognised and told (`out_of_memory`, `memory_message`),
shared with `explorer.checker.sandbox`'s child process.

The limits keep a learner's code from taking the machine's time and memory;
they are not a security boundary.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

from explorer.checker.learner import MEMORY_MB, TIMEOUT_S, CheckError
from explorer.core.config import ConfigError

_OUT_OF_MEMORY = ("can't allocate memory", "cannot allocate memory", "out of memory")
"""Texts of the errors a refused allocation raises (torch's, numpy's, the OS's)."""


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says an allocation was refused (a `MemoryError`, or one
    of `_OUT_OF_MEMORY`'s texts in a torch ``RuntimeError``)."""
    return isinstance(error, MemoryError) or any(s in str(error).lower() for s in _OUT_OF_MEMORY)


def memory_message(memory_mb: int) -> str:
    """What a learner reads when their code outgrew ``memory_mb`` MB."""
    return f"your code needed more than {memory_mb:,} MB of memory and was stopped"


class _TimeUp(BaseException):
    """Raised by `limits`' timer inside the learner's code (a BaseException, so
    that no ``except Exception`` of theirs or ours catches it)."""


_limited = threading.local()
LIMIT_FLAGS = {"api": ("timeout=…", "memory_mb=…"), "cli": ("--timeout S", "--memory_mb MB"),
               "app": ("", "")}
"""How each interface changes the limits, for the messages."""


def limit_hint(interface: str, limit: str) -> str:
    """How ``interface`` (``"api"``, ``"cli"``, ``"app"``) changes ``limit``
    (``"timeout"`` or ``"memory"``), as a message ends it: ``" (--timeout S changes
    the limit)"``; empty where it has none (the app)."""
    flag = LIMIT_FLAGS.get(interface, LIMIT_FLAGS["api"])[("timeout", "memory").index(limit)]
    return f" ({flag} changes the limit)" if flag else ""


def address_space() -> int:
    """This process's address space in bytes (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _lower_address_space(memory_mb: int) -> tuple[int, int] | None:
    """Lower ``RLIMIT_AS`` to ``memory_mb`` MB beyond the address space held now
    (within the hard limit); returns the limits to put back, or None where it
    cannot be lowered."""
    import resource

    previous = resource.getrlimit(resource.RLIMIT_AS)
    wanted, hard = address_space() + memory_mb * 2**20, previous[1]
    try:
        resource.setrlimit(resource.RLIMIT_AS, (
            wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))
    except (ValueError, OSError):
        return None
    return previous


@contextmanager
def limits(timeout: float | None = TIMEOUT_S, memory_mb: int | None = MEMORY_MB,
           interface: str = "api"):
    """Run the block within ``timeout`` seconds (wall clock) and ``memory_mb``
    MB of address space beyond what the process holds now, in this process.

    Time: a ``SIGALRM`` timer whose handler raises inside whatever runs
    (a Python loop stops at once, one long torch call when it returns).
    Memory: ``RLIMIT_AS`` lowered for the block and put back after (Linux).
    Both only in the main thread (a notebook, the command line), where signals
    arrive and no other thread shares the limit; a server's threads use
    `explorer.checker.sandbox.check_source` instead. None or 0: no limit. Nested
    blocks keep the outer limits. Raises `explorer.checker.learner.CheckError` with
    field ``"timeout"`` or ``"memory"``, saying how to change the limit
    (`LIMIT_FLAGS`).
    """
    if getattr(_limited, "active", False):
        yield
        return
    main = threading.current_thread() is threading.main_thread()
    timer = bool(timeout) and main
    previous_handler = None
    if timer:
        def time_up(signum, frame):
            raise _TimeUp

        previous_handler = signal.signal(signal.SIGALRM, time_up)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    # the limit is the process's: never under a server's other threads
    previous_memory = _lower_address_space(memory_mb) if memory_mb and main else None
    _limited.active = True
    try:
        yield
    except _TimeUp:
        raise CheckError("timeout", f"your code ran for more than {timeout:g} s and was stopped: "
                                    "does a loop never end?" + limit_hint(interface, "timeout")
                         ) from None
    except (MemoryError, ConfigError, RuntimeError) as error:
        if memory_mb and out_of_memory(error):
            raise CheckError("memory", memory_message(memory_mb) + limit_hint(interface, "memory"),
                             getattr(error, "details", "") or str(error)) from None
        raise
    finally:
        _limited.active = False
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_handler)
        if previous_memory is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, previous_memory)
