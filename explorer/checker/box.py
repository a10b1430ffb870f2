"""The box a visitor's pasted code runs in: Debian's bubblewrap (``bwrap``).

`command` wraps a command in ``bwrap`` with:

- new user, PID, network, mount, IPC, UTS and cgroup namespaces, every
  capability dropped and no further user namespace (``--disable-userns``):
  the code sees only its own processes (``/proc`` is the box's), cannot signal
  or trace anything outside, and has no network but its own empty loopback;
- a read-only view of what Python needs and nothing else: the system's
  libraries (``/usr`` and its ``/bin``, ``/lib`` links, ``/etc/ld.so.cache``),
  the Python installation and its environment (`sys.base_prefix`,
  `sys.prefix`) and this project's ``explorer`` package; no home folder, no
  project folder, no ``/etc/passwd``, no server files;
- one writable folder, a private ``/tmp`` of `TMP_BYTES` (in memory, gone
  with the box); everything else read-only, the root included;
- a clean environment (`ENVIRONMENT` only), a new session (no terminal to
  write into) and ``--die-with-parent``: when the process that started the
  box dies or kills it, the box's init dies and the kernel kills every process
  in its PID namespace, ``setsid`` or not.

Processes: `process_limit` caps the box's processes and threads
(`MAX_PROCESSES`): a pids cgroup where this server may create one (a root
server; root is exempt from ``RLIMIT_NPROC``), else ``RLIMIT_NPROC``, which
the new user namespace counts for the box alone.

`problem` says why the box cannot be made on this machine ("" when it can).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
"""The ``explorer`` package, shown read-only in the box at the same path."""
TMP_BYTES = 64 * 2**20
"""The size of the box's private /tmp (memory)."""
MAX_PROCESSES = 32
"""Processes and threads the box may hold at once (torch's own threads included)."""
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/tmp",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
"""The box's whole environment (nothing of the server's)."""
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level folders that are links into /usr on a merged-/usr system (else bound)."""


_BWRAP = "/usr/bin/bwrap"
"""Where Debian installs bubblewrap (used when ``bwrap`` is not on the PATH)."""


def bwrap() -> str | None:
    """The ``bwrap`` program, or None when bubblewrap is not installed."""
    return shutil.which("bwrap") or (_BWRAP if os.access(_BWRAP, os.X_OK) else None)


def command(argv: list[str], *, readable: list[Path] = ()) -> list[str]:
    """``argv`` wrapped in ``bwrap`` as described above, run in ``/tmp``;
    ``readable``: more folders shown read-only at their own paths (the command
    line's folder of the learner's file). Raises OSError when bubblewrap is not
    installed."""
    program = bwrap()
    if program is None:
        raise OSError("bubblewrap is not installed (apt-get install bubblewrap)")
    args = [program, "--unshare-all", "--unshare-user", "--disable-userns",
            "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv",
            "--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_LINKS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/localtime", "/etc/localtime"]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for folder in [*_python_folders(), PACKAGE, *readable]:  # after /tmp: one may be in it
        args += ["--ro-bind", str(folder), str(folder)]
    args += ["--chdir", "/tmp", "--remount-ro", "/"]
    for name, value in ENVIRONMENT.items():
        args += ["--setenv", name, value]
    return args + ["--", *argv]


def _python_folders() -> list[Path]:
    """The Python installation and its environment, outermost first, each once."""
    folders: list[Path] = []
    for prefix in (sys.base_prefix, sys.prefix, sys.exec_prefix,
                   os.path.dirname(os.path.realpath(sys.executable))):
        path = Path(prefix).resolve()
        if not any(path == f or f in path.parents for f in folders) and path != Path("/usr"):
            folders = [f for f in folders if path not in f.parents] + [path]
    return folders


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------
def _pids_hierarchy() -> Path | None:
    """This process's own pids cgroup folder (v1 ``pids`` hierarchy, or v2 with
    the pids controller), when it can create cgroups in it; else None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    own = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        own[controllers] = path
    for mount in mounts:
        _, target, fstype, options, *_ = mount.split()
        if fstype == "cgroup" and "pids" in options.split(","):
            key = next((c for c in own if "pids" in c.split(",")), None)
        elif fstype == "cgroup2" and "pids" in _read(Path(target, "cgroup.controllers")).split():
            key = ""
        else:
            continue
        if key is None or key not in own:
            continue
        folder = Path(target + own[key])
        if os.access(folder, os.W_OK):
            return folder
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


ROOT_UNCAPPED = ("this server runs as root, which RLIMIT_NPROC does not limit, and it cannot "
                 "create a pids cgroup to cap the box's processes (run it as another user)")


@contextlib.contextmanager
def process_limit(required: bool = True):
    """A context giving the argv prefix that starts a command inside a fresh
    pids cgroup with ``pids.max`` = `MAX_PROCESSES` (removed after), when this
    server runs as root (which ``RLIMIT_NPROC`` exempts); ``[]`` for another
    user (the child then sets ``RLIMIT_NPROC`` itself: `child_nproc`). Raises
    OSError when root cannot make the cgroup and the cap is ``required``
    (``[]`` otherwise: the command line's unboxed child)."""
    hierarchy = _pids_hierarchy() if os.geteuid() == 0 else None
    if hierarchy is None:
        if required and os.geteuid() == 0:
            raise OSError(ROOT_UNCAPPED)
        yield []
        return
    group = hierarchy / f"explorer-check-{uuid.uuid4().hex}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(MAX_PROCESSES))
    except OSError as error:
        with contextlib.suppress(OSError):
            group.rmdir()
        if required:
            raise OSError(f"the box's pids cgroup could not be made ({error})") from None
        yield []
        return
    try:
        yield ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group)]
    finally:
        _remove(group)


def _remove(group: Path) -> None:
    """Kill what is left in cgroup ``group`` and remove it."""
    import signal
    import time

    for _ in range(50):
        pids = _read(group / "cgroup.procs").split()
        for pid in pids:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.02)


def child_nproc(boxed: bool) -> int | None:
    """The ``RLIMIT_NPROC`` a boxed child sets for itself: `MAX_PROCESSES`, or None
    when the pids cgroup holds the limit (root, which ``RLIMIT_NPROC`` exempts)
    or when unboxed (the limit would count every process of the user)."""
    return MAX_PROCESSES if boxed and os.geteuid() != 0 else None


_TRIAL = ("import sys, importlib.util; sys.path.insert(0, sys.argv[1]); import explorer; "
          "sys.exit(0 if importlib.util.find_spec('torch') else 'torch is not visible in the box')")
"""What `problem` runs in a trial box: the project's package imports, torch is found."""


@functools.cache
def problem() -> str:
    """Why the box cannot be made here, in one sentence ("" when it can): no
    bubblewrap, namespaces refused (bwrap's own message), Python not usable in
    it, or no way to cap the box's processes."""
    if sys.platform != "linux":
        return f"the box needs Linux (this is {sys.platform})"
    if bwrap() is None:
        return ("bubblewrap is not installed (apt-get install bubblewrap): pasted code runs "
                "only in its box")
    if os.geteuid() == 0 and _pids_hierarchy() is None:
        return ROOT_UNCAPPED
    try:
        with process_limit() as prefix:
            done = subprocess.run(
                prefix + command([sys.executable, "-I", "-c", _TRIAL, str(PACKAGE.parent)]),
                capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not be started ({error})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return ("bubblewrap could not make the box here"
                + (f" ({said[-1][:300]})" if said else f" (exit status {done.returncode})"))
    return ""
