"""Shared fixtures: the app's paths, a freshly started server, and Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from explorer.lessons.pages import HOME_PAGE
from explorer.ui.navigation import PAGES
from tests.support.server import ROOT, Server  # noqa: F401 (ROOT: the tests' import of the app's root)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
HOME = PAGES[HOME_PAGE][0]
RUN_TIMEOUT_MS = 90_000
"""How long a browser test waits for anything a server run produces (a page, a
rerun, a chart, a download): generous, since on a loaded 2-core machine a run
can take tens of seconds. Every wait uses it: `expect`'s default is set to it
here, and `tests.browser.test_browser.settle`, page actions and downloads use it too."""
expect.set_options(timeout=RUN_TIMEOUT_MS)


def url_path(script: str) -> str:
    """A page's URL path: its file name without the number prefix ("Home" for the entry)."""
    return "Home" if script == HOME else Path(script).stem.split("_", 1)[1]


PAGE_FILES = {url_path(path): path for path, _ in PAGES.values()}
"""URL path of each page -> its script."""


def _serve(env: dict[str, str] | None = None, script: str | None = None,
           read_only: bool = False):
    """A started server (of ``script``, default the app; ``read_only``: seeing the
    project's tree read-only), then (after the tests) the check that it logged no
    exception."""
    server = Server(env=env, script=script, read_only=read_only)
    yield server
    log = server.stop()
    assert "Traceback" not in log, f"the server logged an exception:\n{log}"


@pytest.fixture
def fresh_server():
    """A server started for this test alone, so the first page opened is the
    first session it ever serves."""
    yield from _serve()


@pytest.fixture(scope="module")
def shared_server():
    """One server for a module's tests that need no fresh start."""
    yield from _serve()


@pytest.fixture(scope="module")
def offline_server():
    """One server for a module, offline: the Real model page fetches nothing. Its
    folder option is on, as `make run` has it (``EXPLORER_MODEL_FOLDERS=1``)."""
    yield from _serve({"HF_HUB_OFFLINE": "1", "EXPLORER_MODEL_FOLDERS": "1"})


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright launches Debian's Chromium, not a downloaded browser."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (see .ci/run)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    """A desktop-sized window, as learners use the explorer."""
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}}


PLAYWRIGHT_FIXTURES = frozenset({"page", "context", "browser"})
"""pytest-playwright's fixtures: a test that takes one drives a real Chromium."""


def pytest_collection_modifyitems(items):
    """Mark every test that drives Chromium (takes a `PLAYWRIGHT_FIXTURES`
    fixture) ``browser``: `make test-fast` leaves them out, `make test` runs them."""
    for item in items:
        if PLAYWRIGHT_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def _generous_waits(request):
    """Page actions (clicks, typing, downloads) wait `RUN_TIMEOUT_MS` too."""
    if "context" in request.fixturenames:
        request.getfixturevalue("context").set_default_timeout(RUN_TIMEOUT_MS)


@pytest.fixture(autouse=True)
def _no_context_outlives_its_test(request):
    """Close the browser contexts a test opened itself (``browser.new_context()``)
    and left open because it failed before its ``context.close()``: the session's
    browser is shared, and a leftover page's renderer is counted by the next
    tests that measure the tab (in a CI run, test_browser_tab_budget measured
    1,589 MiB for a page estimated at 1,186, after a failed Modern-page test on
    the same worker had left its page open). Contexts of module-scoped fixtures,
    opened before the test, stay open."""
    if "browser" not in request.fixturenames:
        yield
        return
    browser = request.getfixturevalue("browser")
    before = set(browser.contexts)
    yield
    for context in browser.contexts:
        if context not in before:
            context.close()


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
"""Counts the Streamlit script runs that finished in the page (see `tests.browser.test_browser.settle`)."""


@pytest.fixture(autouse=True)
def _count_script_runs(request):
    """Browser tests' pages count Streamlit's script runs from the first one."""
    if "page" in request.fixturenames:
        request.getfixturevalue("context").add_init_script(RUN_COUNTER)
