"""Two replicas behind nginx (`deploy/replicas.sh`, `deploy/explorer.conf`):
each browser sticks to one replica by its cookie, browsers spread over both,
and two visitors' sessions work through the proxy with their own numbers (a
short `tests.soak`). Skipped where Debian's nginx is not installed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from explorer.presets import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from tests import soak
from tests.server import ROOT, START_TIMEOUT_S, _free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.access(NGINX, os.X_OK),
                                 reason="nginx is not installed (apt-get install nginx)")]
SHORT = soak.Workload(pages=(SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE),
                      kinds=("page", "seed", "sentence", "query", "cell"), max_words=7)


def _get(url: str, cookie: str | None = None) -> tuple[str, str | None]:
    """(the replica that answered, the sticky cookie set, if any) for one GET."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        set_cookie = response.headers.get("Set-Cookie")
        return (response.headers["X-Explorer-Replica"],
                set_cookie.split(";", 1)[0] if set_cookie else None)


@pytest.fixture(scope="module")
def replicas():
    """deploy/replicas.sh 2 on free ports: (proxy url, replica pids)."""
    run_dir = tempfile.mkdtemp()
    port = _free_port()
    # The replicas take BASE_PORT and the next one: free when asked, the next one
    # almost always.
    env = {**os.environ, "PORT": str(port), "BASE_PORT": str(_free_port()),
           "RUN_DIR": run_dir, "PYTHON": sys.executable}
    process = subprocess.Popen([str(ROOT / "deploy" / "replicas.sh"), "2"], cwd=ROOT,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 2 * START_TIMEOUT_S
    try:
        while True:
            try:
                _get(f"{url}/_stcore/health")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"replicas did not start:\n{process.stdout.read()}")
                time.sleep(0.5)
        pids = tuple(int(p) for p in Path(run_dir, "replicas.pids").read_text().split())
        yield url, pids
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_browser_sticks_to_one_replica_and_browsers_spread(replicas):
    url, _ = replicas
    first = [_get(f"{url}/") for _ in range(16)]
    assert all(cookie and cookie.startswith("explorer_replica=") for _, cookie in first)
    assert len({replica for replica, _ in first}) == 2, first  # 2**-15 to fail by chance
    for replica, cookie in first[:4]:
        again = {_get(f"{url}/{path}", cookie) for path in ("", "_stcore/health",
                                                           "self_attention")}
        assert again == {(replica, None)}  # the same replica, and no new cookie


def test_two_visitors_through_the_proxy_see_their_own_numbers(replicas):
    url, pids = replicas
    with ThreadPoolExecutor(1) as pool:  # the soak runs its own asyncio loop
        report = pool.submit(soak.run, seconds=15, contexts=2, seed=2, url=url, pids=pids,
                             workload=SHORT).result()
    print(report.text())
    assert report.failures == [] and report.messages == [], report.text()
    assert sum(v.checks for v in report.visitors) >= 2 * len(SHORT.pages), report.text()
    assert report.memory_ok, report.text()
