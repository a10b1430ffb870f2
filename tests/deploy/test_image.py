"""The repository's Dockerfile builds an image that serves the explorer (issue 49), with
nginx in front of Streamlit as on a host of its own (issue 52, item 12).

No registry of base images is reachable here, so ``debian:bookworm-slim`` is made from
Debian's own packages, as the official image is: ``mmdebstrap --variant=minbase
bookworm``, then ``podman import``. The root file system is kept in
``~/.cache/explorer-image/`` for the ISO week it was made in (`ROOTFS_CACHE`), and the
import is skipped while the imported image is that week's, so that podman's layer cache
keeps the build quick until then. The imported image replaces any
``docker.io/library/debian:bookworm-slim`` in podman's store (root's).

Then the Dockerfile is built with ``--pull=never``; the container is run with ``$PORT``
set as a host sets it, and the test reads its health, its home page, its headers, its
user and its metrics, and Chromium draws a page through it. Each step's time is printed
(``-s``, or ``make test-image``).

What this machine needs, measured: podman with ``--runtime runc --cgroup-manager
cgroupfs``, the file and process limits given explicitly (`ulimits`), and pip in the
build reaching the package index with ``--network host`` and the machine's pip settings
(its certificate and its local wheels, where it has them: `host_pip_mounts`).
"""

from __future__ import annotations

import datetime
import os
import re
import resource
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Page

from explorer.lessons.pages import SELF_ATTENTION_PAGE
from explorer.lessons.presets import PRESETS
from tests.server.test_replicas import DRAWN_X_JS
from tests.support import soak
from tests.support.server import ROOT

pytestmark = pytest.mark.slow

ROOTFS_CACHE = Path(os.environ.get("EXPLORER_IMAGE_CACHE",
                                   Path.home() / ".cache" / "explorer-image"))
"""Where the root file systems made by mmdebstrap are kept between runs."""
BASE = "docker.io/library/debian:bookworm-slim"
IMAGE = "localhost/attention-explorer:test"
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
HOST_PORT_IN_CONTAINER = 7860
"""The $PORT the test sets, as Hugging Face Spaces' app_port would (the image's is 8501)."""
BUILD_TIMEOUT_S = 1800
HEALTH_TIMEOUT_S = 180
TIMES: dict[str, float] = {}
"""Each step's wall time in seconds, printed at the end of the module."""


def _why_not() -> str | None:
    """Why the image cannot be built and run here, or None when it can."""
    for tool in ("podman", "runc", "mmdebstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (Debian: apt-get install podman runc mmdebstrap)"
    if os.geteuid() != 0:
        return "podman and mmdebstrap are run as root here (rootless is not tested)"
    return None


def _run(args: list[str], timeout: float, step: str | None = None,
         **kwargs) -> subprocess.CompletedProcess:
    """Run ``args``, failing with its output when it fails; time it as ``step``."""
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    if step:
        TIMES[step] = TIMES.get(step, 0) + time.monotonic() - start
    assert done.returncode == 0, (f"{' '.join(args[:6])} ... failed ({done.returncode}):\n"
                                  f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def ulimits() -> list[str]:
    """``--ulimit`` options: the open files this process may have, and at most 4,096
    processes (runc cannot set the machine's own values here, only lower ones)."""
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ["--ulimit", f"nofile={files}:{files}", "--ulimit", "nproc=4096:4096"]


def host_pip_mounts(folder: Path) -> list[str]:
    """``--volume`` options that give pip in the build this machine's certificate and its
    folders of wheels (``cert``, ``find-links``: pip's settings or PIP_* variables), in a
    pip.conf in root's home (the folder ``folder``, mounted read-only over /root, which
    exists in the image: nothing is left behind). [] where there is neither."""
    listed = subprocess.run([str(ROOT / ".venv" / "bin" / "pip"), "config", "list"],
                            capture_output=True, text=True).stdout
    settings = dict(re.findall(r"^\w+\.([\w-]+)='(.*)'$", listed, re.MULTILINE))
    cert = os.environ.get("PIP_CERT") or settings.get("cert")
    links = (os.environ.get("PIP_FIND_LINKS") or settings.get("find-links") or "").split()
    links = [link for link in links if Path(link).is_dir()]
    if not cert and not links:
        return []
    (folder / ".config" / "pip").mkdir(parents=True)
    lines, mounts = ["[global]"], ["--volume", f"{folder}:/root:ro"]
    if cert:
        (folder / "ca.crt").touch()
        lines.append("cert = /root/ca.crt")
        mounts += ["--volume", f"{cert}:/root/ca.crt:ro"]
    for i, link in enumerate(links):
        (folder / f"wheels-{i}").mkdir()
        mounts += ["--volume", f"{link}:/root/wheels-{i}:ro"]
    if links:
        lines.append("find-links = " + " ".join(f"/root/wheels-{i}" for i in range(len(links))))
    (folder / ".config" / "pip" / "pip.conf").write_text("\n".join(lines) + "\n")
    return mounts


def _base_image() -> None:
    """debian:bookworm-slim made by mmdebstrap, this ISO week's (cached), imported."""
    year, week, _ = datetime.date.today().isocalendar()
    name = f"bookworm-minbase-{year}-w{week:02d}.tar"
    tar = ROOTFS_CACHE / name
    if not tar.exists():
        ROOTFS_CACHE.mkdir(parents=True, exist_ok=True)
        for old in ROOTFS_CACHE.glob("bookworm-minbase-*.tar"):
            old.unlink()
        partial = tar.with_suffix(".partial")
        _run(["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet", "bookworm",
              str(partial)],
             timeout=900, step="mmdebstrap")
        partial.rename(tar)
    else:
        TIMES["mmdebstrap"] = 0.0
    label = subprocess.run(PODMAN + ["image", "inspect", BASE, "--format",
                                     '{{index .Labels "explorer.rootfs"}}'],
                           capture_output=True, text=True).stdout.strip()
    TIMES["import"] = 0.0
    if label != name:
        _run(PODMAN + ["import", "--change", f"LABEL explorer.rootfs={name}",
                       str(tar), BASE], timeout=600, step="import")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of a GET, whatever the status."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode(errors="replace")


@pytest.fixture(scope="module")
def container(tmp_path_factory):
    """The image built from the Dockerfile, run with PORT=7860 on a free port of
    127.0.0.1: (its name, the URL it serves)."""
    why = _why_not()
    if why:
        pytest.skip(why)
    start = time.monotonic()
    _base_image()
    before = _image_id()
    _run(PODMAN + ["build", "--pull=never", "--format", "docker", "--network", "host",
                   *ulimits(), *host_pip_mounts(tmp_path_factory.mktemp("pip")),
                   "--tag", IMAGE, str(ROOT)], timeout=BUILD_TIMEOUT_S, step="build")
    if before and before != _image_id():  # the last run's image, no longer tagged
        subprocess.run(PODMAN + ["rmi", before], capture_output=True, timeout=120)
    name = f"explorer-image-test-{os.getpid()}"
    port = _free_port()
    run_start = time.monotonic()
    _run(PODMAN + ["run", "--detach", "--name", name, *ulimits(),
                   "--env", f"PORT={HOST_PORT_IN_CONTAINER}",
                   "--publish", f"127.0.0.1:{port}:{HOST_PORT_IN_CONTAINER}", IMAGE],
         timeout=120)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while _health(url) != 200:
            running = subprocess.run(PODMAN + ["inspect", name, "--format",
                                               "{{.State.Running}}"],
                                     capture_output=True, text=True).stdout.strip()
            if running != "true" or time.monotonic() > deadline:
                logs = subprocess.run(PODMAN + ["logs", name], capture_output=True,
                                      text=True)
                pytest.fail(f"the container was not healthy within {HEALTH_TIMEOUT_S} s "
                            f"(running: {running}):\n{logs.stdout}\n{logs.stderr}")
            time.sleep(1)
        TIMES["run (to healthy)"] = time.monotonic() - run_start
        yield name, url
    finally:
        subprocess.run(PODMAN + ["rm", "--force", "--time", "10", name],
                       capture_output=True, timeout=120)
        TIMES["whole test"] = time.monotonic() - start
        size = subprocess.run(PODMAN + ["image", "inspect", IMAGE, "--format", "{{.Size}}"],
                              capture_output=True, text=True).stdout.strip()
        print("\nimage test:", ", ".join(f"{step} {s:.0f} s" for step, s in TIMES.items()),
              f"(image: {int(size) / 1e6:.0f} MB)" if size.isdigit() else "")


def _image_id() -> str:
    """The ID of the image this test builds, or "" before its first build."""
    return subprocess.run(PODMAN + ["image", "inspect", IMAGE, "--format", "{{.Id}}"],
                          capture_output=True, text=True).stdout.strip()


def _health(url: str) -> int | None:
    try:
        return _get(url + "/_stcore/health")[0]
    except OSError:
        return None


def test_it_serves_the_explorer_on_the_port_the_host_sets(container):
    _, url = container
    status, _, body = _get(url + "/")
    assert status == 200
    assert '<div id="root">' in body  # Streamlit's page, which then opens the app's websocket
    status, _, body = _get(url + "/_stcore/health")
    assert (status, body) == (200, "ok")
    status, _, body = _get(url + "/app/static/explorer-chart.js")  # the committed static/
    assert status == 200 and len(body) > 1000


def test_a_page_draws_its_numbers_in_chromium_through_the_container(container, page: Page):
    # Streamlit's websocket and the chart's scripts, through nginx, as a learner opens a link.
    _, url = container
    page.goto(f"{url}/{soak.url_path(SELF_ATTENTION_PAGE)}?preset=illustrated")
    drawn = page.wait_for_function(f"() => {DRAWN_X_JS}")
    assert drawn.json_value() == [list(row) for row in
                                  PRESETS["illustrated"].config.embeddings]


def test_no_other_site_may_frame_it(container):
    _, url = container
    for path in ("/", "/_stcore/health", "/no-such-page"):
        _, headers, _ = _get(url + path)
        assert headers.get("Content-Security-Policy") == "frame-ancestors 'none'", path
        assert headers.get("X-Frame-Options") == "DENY", path


def test_its_metrics_are_not_served_to_visitors(container):
    name, url = container
    assert _get(url + "/_stcore/metrics")[0] == 404
    inside = _run(PODMAN + ["exec", name, "python3", "-c",
                            "import urllib.request as u; print(u.urlopen("
                            "'http://127.0.0.1:8601/_stcore/metrics').status)"], timeout=60)
    assert inside.stdout.strip() == "200"  # ... where the host may read them


def test_it_runs_as_an_ordinary_user(container):
    name, _ = container
    users = _run(PODMAN + ["top", name, "user", "args"], timeout=60).stdout
    rows = [line.split(None, 1) for line in users.splitlines()[1:] if line.strip()]
    assert len(rows) >= 4, users  # the shell, streamlit, nginx's master and worker
    assert {row[0] for row in rows} == {"explorer"}, users
    uid = _run(PODMAN + ["exec", name, "id", "-u"], timeout=60).stdout.strip()
    assert uid == "1000"  # a number, as Kubernetes' runAsNonRoot checks it


def test_its_health_check_passes_and_its_settings_are_the_public_ones(container):
    name, _ = container
    _run(PODMAN + ["healthcheck", "run", name], timeout=60)
    env = _run(PODMAN + ["image", "inspect", IMAGE, "--format",
                         "{{range .Config.Env}}{{println .}}{{end}}"], timeout=60).stdout
    assert "PORT=8501" in env.split() and "EXPLORER_MEMORY_BUDGET_MB=1024" in env.split()
    assert "EXPLORER_MODEL_FOLDERS" not in env and "EXPLORER_RUN_CODE" not in env


def test_it_holds_no_build_tools(container):
    name, _ = container
    found = subprocess.run(PODMAN + ["exec", name, "sh", "-c", "for tool in gcc cc make "
                                     "dpkg-dev apt-get; do command -v $tool; done"],
                           capture_output=True, text=True, timeout=60).stdout.split()
    assert found == ["/usr/bin/apt-get"], found  # Debian's apt, no compiler
