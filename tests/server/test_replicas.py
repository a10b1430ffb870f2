"""Two replicas behind nginx (`deploy/replicas.sh`, `deploy/explorer.conf`):
each browser sticks to one replica by its cookie, browsers spread over both,
and two visitors' sessions work through the proxy with their own numbers (a
short `tests.support.soak`), a CSV import too. Skipped where Debian's nginx is not installed."""

from __future__ import annotations

import os
import shutil
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import Page

from explorer.lessons.pages import MULTI_HEAD_PAGE, SELF_ATTENTION_PAGE
from tests.support import soak
from tests.support.server import Replicas

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.access(NGINX, os.X_OK),
                                 reason="nginx is not installed (apt-get install nginx)")]
SHORT = soak.Workload(pages=(SELF_ATTENTION_PAGE, MULTI_HEAD_PAGE),
                      kinds=("page", "seed", "sentence", "query", "cell"), max_words=7)
STICKY_COOKIE = "explorer_replica"
"""The cookie deploy/explorer.conf gives each browser, which picks its replica."""
EMBEDDINGS = [[1, 2, 3, 4], [0, 0, 0, 1], [2, 2, 2, 2]]
"""X for the illustrated example (3 tokens, d_in 4), imported as a CSV file."""
DRAWN_X_JS = """(() => {
  const gd = document.querySelector('.st-key-chart-embeddings .explorer-chart');
  return gd && gd.data ? Array.from(gd.data[0].z, (row) => Array.from(row, Number)) : null;
})()"""
"""The embeddings chart's numbers as nested arrays (its rows are Float32Arrays), or null."""


def _get(url: str, cookie: str | None = None) -> tuple[str, str | None]:
    """(the replica that answered, the sticky cookie set, if any) for one GET.
    Streamlit sets cookies of its own (``_streamlit_xsrf``): only nginx's counts."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        sticky = [c.split(";", 1)[0] for c in response.headers.get_all("Set-Cookie") or []
                  if c.startswith(f"{STICKY_COOKIE}=")]
        return response.headers["X-Explorer-Replica"], (sticky[0] if sticky else None)


@pytest.fixture(scope="module")
def replicas():
    """deploy/replicas.sh 2 on free ports: (proxy url, replica pids); afterwards, the
    check that no replica logged an exception."""
    proxy = Replicas(2)
    yield proxy.url, proxy.pids
    log = proxy.stop()
    assert "Traceback" not in log, f"a replica logged an exception:\n{log}"


def test_a_browser_sticks_to_one_replica_and_browsers_spread(replicas):
    url, _ = replicas
    first = [_get(f"{url}/") for _ in range(16)]
    assert all(cookie and cookie.startswith(f"{STICKY_COOKIE}=") for _, cookie in first)
    assert len({replica for replica, _ in first}) == 2, first  # 2**-15 to fail by chance
    for replica, cookie in first[:4]:
        again = {_get(f"{url}/{path}", cookie) for path in ("", "_stcore/health",
                                                           soak.url_path(SELF_ATTENTION_PAGE))}
        assert again == {(replica, None)}  # the same replica, and no new cookie


def test_two_visitors_through_the_proxy_see_their_own_numbers(replicas):
    url, pids = replicas
    with ThreadPoolExecutor(1) as pool:  # the soak runs its own asyncio loop
        report = pool.submit(soak.run, seconds=15, contexts=2, seed=2, url=url, pids=pids,
                             workload=SHORT).result()
    print(report.text())
    assert report.failures == [] and report.messages == [], report.text()
    assert sum(v.checks for v in report.visitors) >= 2 * len(SHORT.pages), report.text()
    assert len(pids) == 2 and report.memory, report.text()  # memory_ok holds with no pid
    assert report.memory_ok, report.text()


def test_a_csv_import_through_the_proxy_reaches_the_visitors_replica(replicas, page: Page):
    # The upload is a PUT to /_stcore/upload_file/<session>/<file>, checked against the
    # XSRF cookie and the session, which live in the replica that served the page.
    url, _ = replicas
    answered = []  # (path, status, replica) of every HTTP response the page got
    page.on("response", lambda r: answered.append(
        (urllib.parse.urlsplit(r.url).path, r.status, r.headers.get("x-explorer-replica"))))
    page.goto(f"{url}/{soak.url_path(SELF_ATTENTION_PAGE)}?preset=illustrated")
    drawn = page.wait_for_function(f"() => {DRAWN_X_JS}")  # the preset's own X
    assert drawn.json_value() != EMBEDDINGS
    expander = page.get_by_test_id("stExpander").filter(has_text="Your matrices")
    csv = "".join(",".join(map(str, row)) + "\n" for row in EMBEDDINGS).encode()
    expander.locator("input[type='file']").first.set_input_files(files=[
        {"name": "x.csv", "mimeType": "text/csv", "buffer": csv}])
    page.wait_for_function(f"(want) => JSON.stringify({DRAWN_X_JS}) === JSON.stringify(want)",
                           arg=EMBEDDINGS)
    uploads = [(status, replica) for path, status, replica in answered
               if path.startswith("/_stcore/upload_file/")]
    assert uploads and all(status < 300 for status, _ in uploads), answered
    assert len({replica for _, _, replica in answered if replica}) == 1, answered
