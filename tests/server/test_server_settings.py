"""The public demo's server settings (issue 41, item 7), one test per setting:
`.streamlit/config.toml` read as Streamlit reads it, and `deploy/explorer.conf`
run by Debian's nginx in front of a stand-in upstream (cheap: no replicas)."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from explorer import AttentionConfig, compute_trace
from explorer.core.config import MAX_ATTENTION_CELLS, MAX_SENTENCE_CHARS
from explorer.render import figures
from explorer.render.export import matrix_csv
from explorer.render.payload import encode
from tests.support.server import ROOT, _free_port

CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
NGINX_CONF = (ROOT / "deploy" / "explorer.conf").read_text()
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


# --- .streamlit/config.toml -------------------------------------------------------------

def test_the_exception_box_has_no_search_or_chat_links_and_no_details(monkeypatch):
    from streamlit import config
    from streamlit.proto.NewSession_pb2 import Config
    from streamlit.runtime import app_session

    assert CONFIG["client"]["showErrorDetails"] == "none"
    assert CONFIG["client"]["toolbarMode"] == "minimal"
    monkeypatch.chdir(ROOT)  # Streamlit reads ./.streamlit/config.toml
    config.get_config_options(force_reparse=True)
    try:
        # "auto", the default, shows Google and ChatGPT links to a visitor on localhost.
        assert app_session._get_show_error_links() == Config.ShowErrorLinks.SHOW_ERROR_LINKS_FALSE
        assert config.get_option("client.allowedOrigins") == []
    finally:
        config.get_config_options(force_reparse=True)


def test_the_message_size_limit_fits_the_largest_chart_the_bounds_allow():
    limit = CONFIG["server"]["maxMessageSize"] * 10**6  # Streamlit's MB: 10**6 bytes
    assert limit < 200 * 10**6  # Streamlit's default, far more than any page sends
    # The largest chart: every head's attention weights at the most cells allowed.
    n_heads, n_tokens = 16, 512
    assert n_heads * n_tokens**2 == MAX_ATTENTION_CELLS
    trace = compute_trace(AttentionConfig(sentence=" ".join(["w"] * n_tokens), d_in=16,
                                          d_k=16, d_v=16, n_heads=n_heads))
    largest = max(len(encode(chart)) for chart in (
        figures.heatmap_chart(trace, "attn_weights", every_head=True),
        figures.heads_grid_chart(trace)))
    assert 4 * MAX_ATTENTION_CELLS <= largest < limit / 1.5, (largest, limit)
    # A Llama-family layer on the Real model page: 32 query heads at 512 tokens, float32.
    assert 4 * 32 * 512**2 * 1.1 < limit


def test_idle_websockets_are_pinged_and_the_upload_limit_is_the_importers():
    assert 10 <= CONFIG["server"]["websocketPingInterval"] <= 60
    assert CONFIG["server"]["maxUploadSize"] == 1
    assert CONFIG["server"]["enableXsrfProtection"] is True


# --- the CSV export ------------------------------------------------------------------------

def test_the_csv_of_a_sentence_with_a_lone_surrogate_is_valid_utf8():
    trace = compute_trace(AttentionConfig(sentence="Life \ud800is short"))
    text = matrix_csv(trace, "attn_weights")
    data = text.encode("utf-8")  # raised UnicodeEncodeError before
    assert "\\ud800is" in data.decode("utf-8")
    assert text.splitlines()[0].split(",")[2] == "key: \\ud800is"


# --- deploy/explorer.conf behind nginx -----------------------------------------------------

def test_the_recipe_keeps_no_idle_websocket_for_a_day():
    stream = NGINX_CONF.split("location /_stcore/stream", 1)[1]
    for name in ("proxy_read_timeout", "proxy_send_timeout"):
        value = stream.split(name, 1)[1].split(";", 1)[0].strip()
        seconds = int(value.rstrip("s"))
        assert value.endswith("s") and seconds <= 300, value


class _Upstream(http.server.BaseHTTPRequestHandler):
    """A stand-in replica: 200 and a line of text for every GET, metrics included."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = f"upstream saw {self.path[:40]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """nginx with deploy/explorer.conf (as deploy/replicas.sh writes its nginx.conf, but
    with no replica names and no unlimited addresses: a public deploy) in front of
    `_Upstream`; yields its URL."""
    if not Path(NGINX).exists():
        pytest.fail(f"{NGINX} is missing: install Debian's nginx package")
    run = tmp_path_factory.mktemp("nginx")
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = _free_port()
    (run / "explorer.conf").write_text(NGINX_CONF.replace("listen 8080;", f"listen {port};"))
    (run / "explorer-upstreams.conf").write_text(
        f"server 127.0.0.1:{upstream.server_address[1]};\n")
    (run / "tmp").mkdir()
    (run / "nginx.conf").write_text(f"""worker_processes 1;
pid {run}/nginx.pid;
error_log stderr error;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {run}/tmp/body;
    proxy_temp_path {run}/tmp/proxy;
    fastcgi_temp_path {run}/tmp/fastcgi;
    uwsgi_temp_path {run}/tmp/uwsgi;
    scgi_temp_path {run}/tmp/scgi;
    include explorer.conf;
}}
""")
    checked = subprocess.run([NGINX, "-t", "-q", "-p", str(run), "-c", str(run / "nginx.conf")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([NGINX, "-p", str(run), "-c", str(run / "nginx.conf"),
                                "-g", "daemon off;"], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(timeout=10)
    upstream.shutdown()


def _get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_no_other_site_may_frame_the_app(proxy):
    for path in ("/", "/_stcore/metrics", "/nope?" + "x" * 100_000):
        _, headers, _ = _get(proxy + path)
        assert headers.get("Content-Security-Policy") == "frame-ancestors 'none'", path
        assert headers.get("X-Frame-Options") == "DENY", path


def test_a_client_is_never_sent_its_replicas_address(proxy):
    status, headers, body = _get(proxy + "/")
    assert status == 200 and body == "upstream saw /"
    assert "X-Explorer-Replica" not in headers  # no names written: no header at all
    assert not any("127.0.0.1" in value for value in headers.values()), headers


def test_the_metrics_are_not_public(proxy):
    status, _, body = _get(proxy + "/_stcore/metrics")
    assert status == 404 and "upstream" not in body
    assert _get(proxy + "/_stcore/health")[0] == 200  # the rest of /_stcore passes


def test_a_too_long_link_gets_the_explorers_message(proxy):
    sentence = "w " * 100_000  # the probe's 200,000-character link
    status, _, body = _get(f"{proxy}/Self_attention?sentence={urllib.request.quote(sentence)}")
    assert status == 414
    assert "This link is too long" in body and "20,000 characters" in body
    assert f"{MAX_SENTENCE_CHARS:,}" in body  # the figure the app states
    # The longest sentence a link may carry, in plain words, still passes.
    words = ("attention " * (MAX_SENTENCE_CHARS // 10)).strip()
    status, _, body = _get(f"{proxy}/Self_attention?sentence={urllib.request.quote(words)}")
    assert status == 200 and body.startswith("upstream saw")


RATE, BURST = (int(NGINX_CONF.split("rate=", 1)[1].split("r/s", 1)[0]),
               int(NGINX_CONF.split("burst=", 1)[1].split(" ", 1)[0]))


PAGE_LOAD_REQUESTS = 130
"""Requests of a page's first open in Chromium (122-130 measured: scripts, styles, fonts,
the chart modules, the websocket)."""


def test_a_visitor_past_the_rate_limit_gets_429(proxy):
    assert BURST >= PAGE_LOAD_REQUESTS  # a first visit is never refused
    time.sleep(BURST / RATE + 0.5)  # the other tests' requests are forgotten
    statuses = [_get(proxy + "/_stcore/health")[0] for _ in range(BURST + 60)]
    assert statuses.count(200) >= BURST  # the burst a first page load needs passes
    assert statuses.count(429) > 0, statuses
