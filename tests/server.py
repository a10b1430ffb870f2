"""A freshly started `streamlit run streamlit_app.py`, for the browser tests and
the browser benchmark (`benchmarks.browser`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from explorer.ui.navigation import HOME_PAGE, PAGES

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60


def rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of ``pid`` and all its descendants, in MiB."""
    total_kib, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
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


class Server:
    """A `streamlit run streamlit_app.py` subprocess on a free port.

    ``env`` adds to (or overrides) this process's environment. ``url`` is the
    server's address, ``pid`` the streamlit process's id; `stop` ends it and
    returns what it logged. The log is read as it comes, so that a long run
    cannot fill the pipe and stall the server.
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", PAGES[HOME_PAGE][0],
             "--server.port", str(self.port), "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        self._log: list[str] = []
        self._reader = threading.Thread(target=self._log.extend, args=(self.process.stdout,),
                                        daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"streamlit did not start:\n{self.stop()}")

    @property
    def pid(self) -> int:
        """The streamlit server's process id."""
        return self.process.pid

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
