"""Playwright as a visitor uses the app: wait for a run and its charts, read the
link, choose an option, count the charts, read tick labels and cell texts."""

from __future__ import annotations

import urllib.parse

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page

from explorer.ui.navigation import PAGES
from explorer.ui.real_model import DEFAULT_MODEL
from tests.support.server import RUN_TIMEOUT_MS, url_path

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium, which every browser test and benchmark drives."""
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

PAGE_NAMES = {url_path(path): name for name, (path, _) in PAGES.items()}


HOSTILE = "<img src=x onerror=alert(1)>"


SETTLED = """async () => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.dataset.testScriptState !== "notRunning") return false;
  if ((window.__runsDone ?? 0) <= (window.__settledRuns ?? 0)) return false;
  // A run that asked for another (st.rerun) stops for a moment: wait for a quiet page.
  if (performance.now() - window.__stateChanged < 300) return false;
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  // Every component has mounted its chart or picker: the chart modules load after the
  // run has ended, so a component can still be empty when the page is otherwise quiet.
  const hosts = [...document.querySelectorAll("[data-testid='stBidiComponentRegular']")];
  if (!hosts.every((host) => host.querySelector(".explorer-chart, .explorer-picker"))) {
    return false;
  }
  return [...document.querySelectorAll(".explorer-chart")]
    .every((chart) => chart.querySelector(".main-svg") && !chart.dataset.drawing);
}"""


def settle(page: Page, timeout: float = RUN_TIMEOUT_MS) -> None:
    """Wait until a Streamlit run has finished since the last `settle` (or since
    the page opened) and every chart has drawn its picture. Call it after an
    action that reruns the script, or after opening a page."""
    page.wait_for_function(SETTLED, timeout=timeout)
    page.evaluate("window.__settledRuns = window.__runsDone")


def sidebar_link(page: Page, close: bool = False) -> str:
    """The "Link to this view" text, as a visitor copies it: the box opened (its
    code box is drawn by the run that opening starts), read, and closed again
    when ``close``."""
    box = page.get_by_test_id("stSidebar").get_by_text("Link to this view")
    box.click()
    settle(page)
    text = page.get_by_test_id("stSidebar").get_by_test_id("stCode").first.inner_text().strip()
    if close:
        box.click()
        settle(page)
    return text


def choose_option(page: Page, selectbox: Locator, option: str, tries: int = 5) -> None:
    """Open ``selectbox`` and click its ``option``, as a person would, opening it
    again if the list closed under the pointer. The list is a react-aria popover
    that closes when its scroll parent scrolls; a sidebar still settling from an
    expander that just opened scrolls a moment after the list appears (seen under
    CPU load: the options went from 5 to 0 with no rerun)."""
    for attempt in range(tries):
        selectbox.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=5_000)
            return
        except PlaywrightError:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")


def open_model_folder(page: Page, server, folder, sentence: str = "the cat sat on the mat"
                      ) -> None:
    """Open the Real model page, choose "a local folder…" in the sidebar and give
    ``folder`` (the server needs ``EXPLORER_MODEL_FOLDERS=1``: `offline_server`).
    The link names the catalogue's default model (no weights offline), not the
    page's offline default, so that no trained model is loaded first."""
    page.goto(page_url(server, "Real_model", sentence=sentence, model=DEFAULT_MODEL))
    settle(page)
    sidebar = page.get_by_test_id("stSidebar")
    choose_option(page, sidebar.get_by_test_id("stSelectbox").filter(has_text="Model"),
                  "a local folder…")
    settle(page)
    box = sidebar.get_by_role("textbox", name="Folder")
    box.fill(str(folder))
    box.press("Enter")
    settle(page)


def chart_count(page: Page) -> int:
    """How many charts the page drew, once every one of them is drawn."""
    page.wait_for_function("""() => {
      const charts = [...document.querySelectorAll(".explorer-chart")];
      return charts.length > 0
        && charts.every((chart) => chart.querySelector(".main-svg") && !chart.dataset.drawing);
    }""", timeout=RUN_TIMEOUT_MS)
    return page.locator(".explorer-chart").count()


def page_url(server, name: str, **query: str) -> str:
    path = "" if name == "Home" else name
    return f"{server.url}/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")


def tick_labels(page: Page, chart: int | Locator, axis: str = "y") -> list[str]:
    """The tick labels of a Plotly chart (the ``chart``-th, or a locator) as the
    browser shows them: top to bottom (y) or left to right (x)."""
    plot = page.locator(".explorer-chart").nth(chart) if isinstance(chart, int) else chart
    # Read in one go: a chart may redraw (a resize) between two reads of its ticks.
    return plot.evaluate("""(gd, axis) => [...gd.querySelectorAll(`.${axis}tick text`)]
        .map((tick) => [tick.getBoundingClientRect()[axis], tick.textContent])
        .sort((a, b) => a[0] - b[0]).map(([, text]) => text)""", axis)


def cell_texts(page: Page, chart: int) -> list[str]:
    """The numbers printed in the cells of the ``chart``-th heatmap, row by row."""
    texts = page.locator(".explorer-chart").nth(chart).locator("g.heatmaplayer text")
    return texts.all_text_contents()
