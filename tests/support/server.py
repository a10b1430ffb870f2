"""A freshly started `streamlit run streamlit_app.py`, for the browser tests and
the browser benchmark (`benchmarks.browser`); or several, behind nginx
(`Replicas`: `deploy/replicas.sh`), for tests/server/test_replicas.py and
`benchmarks.capacity --replicas`."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from explorer.lessons.pages import HOME_PAGE
from explorer.server.budget import MEMORY_BUDGET_BYTES, MIB
from explorer.ui.navigation import PAGES

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def rss_mib(pid: int, matching: str = "") -> float:
    """Resident memory (VmRSS) of ``pid`` and all its descendants, in MiB; with
    ``matching``, of those among them whose command line holds it (Chromium's
    renderers: ``"--type=renderer"``)."""
    total_kib, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            if matching.encode() in Path(f"/proc/{current}/cmdline").read_bytes():
                status = Path(f"/proc/{current}/status").read_text()
                total_kib += next(int(line.split()[1]) for line in status.splitlines()
                                  if line.startswith("VmRSS:"))
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total_kib / 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    """Whether ``url``/_stcore/health answers 200 within a second."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


class Server:
    """A `streamlit run streamlit_app.py` subprocess on a free port.

    ``env`` adds to (or overrides) this process's environment; ``script`` is the
    Streamlit script to run, relative to the project (default: the app's entry
    point). ``url`` is the
    server's address, ``pid`` the streamlit process's id; `stop` ends it and
    returns what it logged. The log is read as it comes, so that a long run
    cannot fill the pipe and stall the server.
    """

    def __init__(self, env: dict[str, str] | None = None, script: str | None = None,
                 read_only: bool = False) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "streamlit", "run", script or PAGES[HOME_PAGE][0],
                   "--server.port", str(self.port), "--server.headless", "true",
                   "--browser.gatherUsageStats", "false"]
        self.process = subprocess.Popen(
            in_read_only_tree(command) if read_only else command,
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        self._log: list[str] = []
        self._reader = threading.Thread(target=self._log.extend, args=(self.process.stdout,),
                                        daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if _healthy(self.url):
                return
            time.sleep(0.2)
        raise RuntimeError(f"streamlit did not start:\n{self.stop()}")

    @property
    def pid(self) -> int:
        """The streamlit server's process id."""
        return self.process.pid

    @property
    def pids(self) -> tuple[int]:
        """The streamlit process's id, as `Replicas.pids` gives its replicas'."""
        return (self.process.pid,)

    def stop(self) -> str:
        """End the server and return its log (stdout and stderr)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=10)
        self.process.stdout.close()
        return "".join(self._log)


def in_read_only_tree(command: list[str]) -> list[str]:
    """``command`` run where the project's tree is read-only, as in a read-only
    deploy: in a mount namespace of its own (``unshare``; as root, or in a user
    namespace of its own otherwise) where `ROOT` is bound onto itself read-only.
    Nothing outside that process sees the change."""
    namespace = ["--mount"] if os.geteuid() == 0 else ["--user", "--map-root-user", "--mount"]
    return ["unshare", *namespace, "--", "sh", "-c",
            'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
            str(ROOT), *command]


class Replicas:
    """``deploy/replicas.sh n``: ``n`` `streamlit run` processes behind nginx
    (sticky sessions by cookie, `deploy/explorer.conf`), on free ports.

    ``url`` is nginx's address, ``pids`` the replicas' process ids; each replica
    has this process's memory budget (`explorer.server.budget`). `stop` ends nginx and
    the replicas and returns what they logged. Needs Debian's nginx.
    """

    def __init__(self, n: int = 2) -> None:
        self.run_dir = Path(tempfile.mkdtemp(prefix="explorer-replicas-"))
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        # The replicas take BASE_PORT, BASE_PORT + 1, ...: free when asked, the next
        # ones almost always.
        env = {**os.environ, "PORT": str(port), "BASE_PORT": str(_free_port()),
               "RUN_DIR": str(self.run_dir), "PYTHON": sys.executable,
               "EXPLORER_MEMORY_BUDGET_MB": str(MEMORY_BUDGET_BYTES // MIB)}
        # Its output (nginx's warnings too) goes to a file: a pipe nobody reads during
        # a long run would fill up and stall nginx.
        self._out = self.run_dir / "replicas.out"
        with self._out.open("w") as out:
            self.process = subprocess.Popen([str(ROOT / "deploy" / "replicas.sh"), str(n)],
                                            cwd=ROOT, env=env, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 2 * START_TIMEOUT_S
        while not _healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the replicas did not start:\n{self.stop()}")
            time.sleep(0.5)
        self.pids = tuple(int(p) for p in (self.run_dir / "replicas.pids").read_text().split())

    def stop(self) -> str:
        """End nginx and the replicas; return replicas.sh's output and the replicas' logs."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        logs = [f"--- {log.name}\n{log.read_text()}"
                for log in [self._out, *sorted(self.run_dir.glob("replica-*.log"))]]
        shutil.rmtree(self.run_dir, ignore_errors=True)
        return "\n".join(logs)


# ---------------------------------------------------------------------------
# The app's pages, waits and servers, as every browser and AppTest test reads them
# ---------------------------------------------------------------------------
HOME = PAGES[HOME_PAGE][0]
RUN_TIMEOUT_MS = 90_000
"""How long a browser test waits for anything a server run produces (a page, a
rerun, a chart, a download): generous, since on a loaded 2-core machine a run
can take tens of seconds. Every wait uses it: `expect`'s default is set to it
in tests/conftest.py, and `tests.support.browser.settle`, page actions and downloads use it too."""


def url_path(script: str) -> str:
    """A page's URL path: its file name without the number prefix ("Home" for the entry)."""
    return "Home" if script == HOME else Path(script).stem.split("_", 1)[1]


PAGE_FILES = {url_path(path): path for path, _ in PAGES.values()}
"""URL path of each page -> its script."""


def serve(env: dict[str, str] | None = None, script: str | None = None,
           read_only: bool = False):
    """A started server (of ``script``, default the app; ``read_only``: seeing the
    project's tree read-only), then (after the tests) the check that it logged no
    exception."""
    server = Server(env=env, script=script, read_only=read_only)
    yield server
    log = server.stop()
    assert "Traceback" not in log, f"the server logged an exception:\n{log}"


RUN_COUNTER = """(() => {
  window.__runsDone = 0;
  window.__stateChanged = performance.now();
  new MutationObserver((changes) => {
    for (const change of changes) {
      window.__stateChanged = performance.now();
      if (change.oldValue === "running"
          && change.target.getAttribute("data-test-script-state") === "notRunning") {
        window.__runsDone++;
      }
    }
  }).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                        attributeFilter: ["data-test-script-state"]});
})()"""
"""Counts the Streamlit script runs that finished in the page (see `tests.support.browser.settle`)."""
