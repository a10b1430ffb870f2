"""Shared fixtures: the app's paths, a freshly started server, and Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.server import RUN_COUNTER, RUN_TIMEOUT_MS, serve

expect.set_options(timeout=RUN_TIMEOUT_MS)


@pytest.fixture
def fresh_server():
    """A server started for this test alone, so the first page opened is the
    first session it ever serves."""
    yield from serve()


@pytest.fixture(scope="module")
def shared_server():
    """One server for a module's tests that need no fresh start."""
    yield from serve()


@pytest.fixture(scope="module")
def offline_server():
    """One server for a module, offline: the Real model page fetches nothing. Its
    folder option is on, as `make run` has it (``EXPLORER_MODEL_FOLDERS=1``)."""
    yield from serve({"HF_HUB_OFFLINE": "1", "EXPLORER_MODEL_FOLDERS": "1"})


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


@pytest.fixture(autouse=True)
def _count_script_runs(request):
    """Browser tests' pages count Streamlit's script runs from the first one."""
    if "page" in request.fixturenames:
        request.getfixturevalue("context").add_init_script(RUN_COUNTER)
