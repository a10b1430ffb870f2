"""The box a visitor's pasted code runs in: Debian's bubblewrap (``bwrap``).

`command` wraps a command in ``bwrap`` with:

- its own PID, network, mount, IPC, UTS and cgroup namespaces: the code sees
  only its own processes (``/proc`` is the box's, read-only), cannot signal
  anything outside, and has no network but its own empty loopback;
- never the host's root. A server run by another user gives the box a new user
  namespace (its uid is the server's, with every capability dropped and no
  further user namespace: ``--disable-userns``). A root server's user namespace
  would map the box's uid 0 to the host's uid 0, which the kernel's files (such
  as ``/proc/sys``) obey whatever the capabilities, so a root server makes none:
  bwrap lays out the box as root, and ``setpriv`` then runs the command as the
  host's unprivileged `BOX_ID`, with no capability, no supplementary group and
  ``no_new_privs``;
- a system-call filter (seccomp, `syscall_filter`): no ``ptrace`` (so the code
  cannot drive the box's init, which runs free of the worker's limits), no new
  user namespaces, no joining of namespaces, no keyrings, eBPF, perf events or
  userfaultfd;
- a read-only view of what Python needs and nothing else: the system's
  libraries (``/usr`` and its ``/bin``, ``/lib`` links, ``/etc/ld.so.cache``),
  the Python installation and its environment (`sys.base_prefix`,
  `sys.prefix`) and this project's ``explorer`` package; no home folder, no
  project folder, no ``/etc/passwd``, no server files; ``/proc`` and ``/dev``
  read-only;
- two writable folders, in memory and gone with the box: a private ``/tmp`` of
  `TMP_BYTES` and a private ``/dev/shm`` of `SHM_BYTES`;
- every file any of its processes writes at most `OUTPUT_BYTES` (``prlimit``),
  what it prints included;
- a clean environment (`ENVIRONMENT` only), a new session (no terminal to
  write into) and ``--die-with-parent``: when the process that started the
  box dies or kills it, the box's init dies and the kernel kills every process
  in its PID namespace, ``setsid`` or not.

Processes and memory (`limits`): fresh pids and memory cgroups cap the box's
processes and threads (`MAX_PROCESSES`) and their memory in total
(`MEMORY_BYTES`), where this server may create them (a root server must: root
is exempt from ``RLIMIT_NPROC``); elsewhere ``RLIMIT_NPROC``, which the new
user namespace counts for the box alone, and ``RLIMIT_AS`` per process.

`problem` says why the box cannot be made on this machine ("" when it can).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from explorer.server import budget

PACKAGE = Path(__file__).resolve().parents[1]
"""The ``explorer`` package, shown read-only in the box at the same path."""
TMP_BYTES = 64 * 2**20
"""The size of the box's private /tmp (memory)."""
SHM_BYTES = 4 * 2**20
"""The size of the box's private /dev/shm (memory; torch's shared tensors only)."""
MEMORY_BYTES = budget.CHECK_BYTES
"""The memory all the box's processes may hold together where it has a memory
cgroup (their pages, /tmp, /dev/shm and memfds included), counted in the
server's memory budget (`explorer.server.budget.CHECK_BYTES`)."""
OUTPUT_BYTES = 16 * 2**20
"""The largest file the box's processes may write (their printed output included)."""
BOX_ID = 65534
"""The host's uid and gid ("nobody") a root server's box runs as."""
MAX_PROCESSES = 32
"""Processes and threads the box may hold at once (torch's own threads included)."""
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/tmp",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
"""The box's whole environment (nothing of the server's)."""
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level folders that are links into /usr on a merged-/usr system (else bound)."""


_BWRAP = "/usr/bin/bwrap"
_SETPRIV = "/usr/bin/setpriv"
_PRLIMIT = "/usr/bin/prlimit"
"""util-linux's programs (Debian's essential ``util-linux`` package)."""
_SWITCH_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
"""What a root server's box keeps until ``setpriv`` becomes `BOX_ID` (and drops them all)."""
"""Where Debian installs bubblewrap (used when ``bwrap`` is not on the PATH)."""


def bwrap() -> str | None:
    """The ``bwrap`` program, or None when bubblewrap is not installed."""
    return shutil.which("bwrap") or (_BWRAP if os.access(_BWRAP, os.X_OK) else None)


def command(argv: list[str], *, readable: list[Path] = (), syscall_filter: int,
            output_bytes: int = OUTPUT_BYTES) -> list[str]:
    """``argv`` wrapped in ``bwrap`` as described above, run in ``/tmp``;
    ``readable``: more folders or files shown read-only at their own paths (the
    command line's folder of the learner's file, or the file alone);
    ``syscall_filter``: a file descriptor holding `syscall_filter`'s program
    (`filter_descriptor`), which the caller passes on to ``bwrap``;
    ``output_bytes``: the largest file any process of the box may write
    (``RLIMIT_FSIZE`` from ``prlimit``, for the box's init too), which bounds
    the server's file of what the box prints. Raises
    OSError when bubblewrap is not installed."""
    program = bwrap()
    if program is None:
        raise OSError("bubblewrap is not installed (apt-get install bubblewrap)")
    root = os.geteuid() == 0
    if root:  # a user namespace would map the box's uid 0 to the host's: none, see below
        args = [program, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--cap-drop", "ALL",
                *(word for cap in _SWITCH_CAPS for word in ("--cap-add", cap))]
    else:
        args = [program, "--unshare-all", "--unshare-user", "--disable-userns",
                "--cap-drop", "ALL"]
    args = [_PRLIMIT, f"--fsize={output_bytes}", "--", *args,
            "--die-with-parent", "--new-session", "--clearenv",
             "--seccomp", str(syscall_filter), "--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_LINKS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/localtime", "/etc/localtime"]
    args += ["--proc", "/proc", "--remount-ro", "/proc",
             "--dev", "/dev", "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
             "--remount-ro", "/dev",
             "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    shown = [*_python_folders(), PACKAGE, *readable]  # after /tmp: one may be in it
    made: set[Path] = set()
    for path in shown:  # their parents readable by the box's user (bwrap makes them 0700)
        for parent in reversed(Path(path).parents):
            if parent != Path("/") and parent not in made and not _covered(parent, shown):
                made.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", str(path), str(path)]
    args += ["--chdir", "/tmp", "--remount-ro", "/"]
    for name, value in ENVIRONMENT.items():
        args += ["--setenv", name, value]
    if root:
        args += ["--", _SETPRIV, f"--reuid={BOX_ID}", f"--regid={BOX_ID}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    return args + ["--", *argv]


def shown_of(folder: Path, file_name: str) -> Path:
    """What the box shows of a learner's file ``file_name`` in ``folder`` (the
    command line's): the folder, for the file's own imports, or the file alone
    when the folder is a shared one (others may write in it, as in ``/tmp``:
    its other files are not the learner's to show)."""
    import stat

    try:
        mode = folder.stat().st_mode
    except OSError:
        return folder / file_name
    shared = mode & (stat.S_IWOTH | stat.S_ISVTX) or folder == Path(tempfile.gettempdir())
    return folder / file_name if shared else folder


def _covered(folder: Path, shown: list[Path]) -> bool:
    """Whether ``folder`` lies inside (or is) a folder of ``shown``, already bound."""
    return any(folder == Path(s) or Path(s) in folder.parents for s in shown)


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
# System calls
# ---------------------------------------------------------------------------
REFUSED_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "setns", "keyctl",
                 "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd")
"""System calls the box's processes are refused (EPERM): tracing or reading another
process (the box's init, which runs free of the worker's limits), joining
namespaces, the kernel's keyrings (not namespaced), and the kernel's
eBPF, perf and userfaultfd interfaces. New user namespaces are refused too
(``clone`` and ``unshare`` with ``CLONE_NEWUSER``; ``clone3``, whose flags a
filter cannot read, answers ENOSYS, so the C library falls back to ``clone``)."""
_CLONE_NEWUSER = 0x10000000


@functools.cache
def syscall_filter() -> bytes:
    """The box's seccomp program (classic BPF, for this machine's architecture;
    a system call of another architecture kills the process), made by libseccomp
    through ``pyseccomp``: every call allowed but `REFUSED_CALLS` and new user
    namespaces. Raises OSError when libseccomp cannot be loaded."""
    import errno

    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as error:
        raise OSError(f"libseccomp cannot be loaded ({error})") from None
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    refuse = seccomp.ERRNO(errno.EPERM)
    for name in REFUSED_CALLS:
        rules.add_rule(refuse, name)
    new_user = seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_NEWUSER, _CLONE_NEWUSER)
    rules.add_rule(refuse, "unshare", new_user)
    rules.add_rule(refuse, "clone", new_user)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


@contextlib.contextmanager
def filter_descriptor():
    """A context giving a file descriptor that holds `syscall_filter`'s program
    from its start (closed after), for `command`'s ``syscall_filter``."""
    fd = os.memfd_create("explorer-box-filter", os.MFD_CLOEXEC)
    try:
        os.write(fd, syscall_filter())
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------
def _hierarchy(controller: str) -> Path | None:
    """This process's own cgroup folder in the hierarchy of ``controller``
    (``pids`` or ``memory``: a v1 hierarchy of its own, or v2 with that
    controller), when it can create cgroups in it; else None."""
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
        if fstype == "cgroup" and controller in options.split(","):
            key = next((c for c in own if controller in c.split(",")), None)
        elif (fstype == "cgroup2"
              and controller in _read(Path(target, "cgroup.controllers")).split()):
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
                 "create a pids and a memory cgroup to cap the box's processes and their "
                 "memory in total (run it as another user, or give it cgroups)")

_SETTINGS = {"pids": [("pids.max", MAX_PROCESSES)],
             "memory": [("memory.limit_in_bytes", MEMORY_BYTES),  # v1
                        ("memory.memsw.limit_in_bytes", MEMORY_BYTES),
                        ("memory.max", MEMORY_BYTES),  # v2
                        ("memory.swap.max", 0)]}
"""Each controller's files in a box's cgroup (those present are written, in order)."""


@dataclass
class Limits:
    """The cgroups a box runs in: ``prefix`` starts a command inside them (``[]``
    when there are none); `out_of_memory` tells whether the kernel killed a
    process of the box for `MEMORY_BYTES`."""

    prefix: list[str]
    groups: list[Path]

    def out_of_memory(self) -> bool:
        """Whether a process of the box was killed for its cgroup's memory limit
        (``oom_kill`` in v1's ``memory.oom_control`` or v2's ``memory.events``)."""
        for group in self.groups:
            for name in ("memory.oom_control", "memory.events"):
                for line in _read(group / name).splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip() not in ("", "0"):
                        return True
        return False


def bounded_in_total() -> bool:
    """Whether this server's boxes get a memory cgroup (`MEMORY_BYTES` for all their
    processes together), not only each process's ``RLIMIT_AS``."""
    return _hierarchy("memory") is not None


_ENTER = 'for g do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs" || exit 125; shift; done; ' \
         'shift; exec "$@"'
"""The shell that moves itself into each cgroup named before ``--``, then runs the rest."""


@contextlib.contextmanager
def limits(required: bool = True):
    """A context giving the `Limits` of a box: fresh cgroups with ``pids.max`` =
    `MAX_PROCESSES` and a memory limit of `MEMORY_BYTES` for all its processes
    together (page cache, ``/dev/shm``, ``/tmp`` and memfds included), removed
    after with whatever is left in them, where this server may create them (a
    root server, or one given a delegated cgroup). Without them, a non-root
    server's box is limited per process (``RLIMIT_AS``), and its processes by
    ``RLIMIT_NPROC`` (`child_nproc`). Raises OSError when root cannot make both
    and they are ``required`` (``[]`` otherwise: the command line's unboxed
    child)."""
    made: list[Path] = []
    try:
        for controller, files in _SETTINGS.items():
            hierarchy = _hierarchy(controller)
            if hierarchy is None:
                if required and os.geteuid() == 0:
                    raise OSError(ROOT_UNCAPPED)
                continue
            group = hierarchy / f"explorer-check-{_RUN}-{uuid.uuid4().hex}"
            if group.parent not in [m.parent for m in made]:
                group.mkdir()
                made.append(group)
            else:  # v2: one group holds every controller
                group = next(m for m in made if m.parent == group.parent)
            for name, value in files:
                if (group / name).exists():
                    (group / name).write_text(str(value))
    except OSError as error:
        for group in made:
            _remove(group)
        if required and os.geteuid() == 0:
            raise OSError(str(error) if str(error) == ROOT_UNCAPPED
                          else f"the box's cgroups could not be made ({error})") from None
        made = []
    try:
        prefix = ["/bin/sh", "-c", _ENTER, "sh", *map(str, made), "--"] if made else []
        yield Limits(prefix, made)
    finally:
        for group in made:
            _remove(group)


_RUN = os.getpid()
"""This server's pid, in its boxes' cgroup names (which server left one behind)."""


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
    on a root server, whose box a pids cgroup holds (its uid, `BOX_ID`, may be
    shared with other processes of the host), or when unboxed (the limit would
    count every process of the user)."""
    return MAX_PROCESSES if boxed and os.geteuid() != 0 else None


_TRIAL = ("import sys, importlib.util; sys.path.insert(0, sys.argv[1]); import explorer; "
          "sys.exit(0 if importlib.util.find_spec('torch') else 'torch is not visible in the box')")
"""What `problem` runs in a trial box: the project's package imports, torch is found."""


@functools.cache
def problem() -> str:
    """Why the box cannot be made here, in one sentence ("" when it can): no
    bubblewrap, no setpriv or prlimit (util-linux), no libseccomp, namespaces
    refused (bwrap's own message), Python not usable in it, or, on a root
    server, no cgroups to cap the box's processes and memory."""
    if sys.platform != "linux":
        return f"the box needs Linux (this is {sys.platform})"
    if bwrap() is None:
        return ("bubblewrap is not installed (apt-get install bubblewrap): pasted code runs "
                "only in its box")
    for tool in (_PRLIMIT, *([_SETPRIV] if os.geteuid() == 0 else [])):
        if not os.access(tool, os.X_OK):
            return f"{tool} is not installed (apt-get install util-linux)"
    try:
        syscall_filter()
    except OSError as error:
        return f"the box's system-call filter cannot be made: {error} (apt-get install libseccomp2)"
    if os.geteuid() == 0 and (_hierarchy("pids") is None or _hierarchy("memory") is None):
        return ROOT_UNCAPPED
    try:
        with limits() as box, filter_descriptor() as rules:
            done = subprocess.run(
                box.prefix + command([sys.executable, "-I", "-c", _TRIAL, str(PACKAGE.parent)],
                                     syscall_filter=rules),
                capture_output=True, timeout=60, stdin=subprocess.DEVNULL, pass_fds=(rules,))
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not be started ({error})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return ("bubblewrap could not make the box here"
                + (f" ({said[-1][:300]})" if said else f" (exit status {done.returncode})"))
    return ""
