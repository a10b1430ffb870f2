"""axe-core (``axe-playwright-python``) over every page of the catalogue at 1400 and
390 px (issue 50): no violation of the WCAG 2.0, 2.1 and 2.2 A and AA rules, nor of
2.5.8's target size. axe sees little of a chart (a Plotly SVG is one image to it):
the charts' own names, tables and keys are tested in test_browser_a11y.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from explorer.lessons.pages import CATALOGUE
from tests.support.browser import page_url, settle
from tests.support.server import RUN_COUNTER

TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa")
"""The WCAG 2.0, 2.1 and 2.2 success criteria of levels A and AA."""
RULES = ("target-size",)
"""Rules turned on by name as well: 2.5.8 Target Size (Minimum), which axe-core's
rule list ships with ``enabled: false`` (its ``wcag22aa`` tag runs it today; naming
it keeps it on whatever a later axe does by default)."""
WIDTHS = (1400, 390)
"""A desktop window and a phone (tests/browser/test_browser_phone.py)."""


@dataclass(frozen=True)
class Exclusion:
    """A part of Streamlit's own page that the explorer can change neither through its
    options nor its theme, left out of one rule, and why."""

    rule: str
    selector: str
    reason: str


EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion("color-contrast", "[data-testid=stCode] .token",
              "Streamlit 1.67 colours highlighted code from a fixed palette (its "
              "lightBlue80, blueGreen80, green80 ... in the code block's CSS), which no theme "
              "option reaches; the code's own text colour is AA"),
    Exclusion("scrollable-region-focusable", ".katex-display",
              "KaTeX's display block (st.latex, $$ in Markdown) scrolls sideways, and an "
              "equation is 2 px wider than it (KaTeX's struts): Streamlit renders it and "
              "gives no option to give it a tabindex or to not scroll. The keyboard still "
              "reaches it: Chromium makes a scroller without focusable content a Tab stop "
              "of its own (test_browser_a11y.py tabs past one), which axe 4.12 does not "
              "model"),
)
"""Every part left out, each for one rule, with its reason (issue 50 allows no
rule turned off as a whole)."""


def _wait_for_charts(page: Page) -> None:
    page.wait_for_function("""() => [...document.querySelectorAll(".explorer-chart")]
        .every((c) => c.querySelector(".main-svg") && !c.dataset.drawing)""")


def open_page(server, browser: Browser, name: str, width: int):
    """A new context at ``width`` px (a phone's touch screen at 390) on the page
    ``name`` (its URL path), every chart drawn: the page is scrolled through, as
    charts far below the window are drawn when they come near."""
    phone = width < 600
    context = browser.new_context(viewport={"width": width, "height": 900},
                                  is_mobile=phone, has_touch=phone)
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    page.goto(page_url(server, name or "Home"))
    settle(page)
    expect(page.get_by_test_id("stMain").locator("h1").first).to_be_visible()
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0)
    main = page.get_by_test_id("stMain")
    height = main.evaluate("(el) => el.scrollHeight")
    for top in range(0, int(height) + 900, 800):
        main.evaluate("(el, top) => el.scrollTo(0, top)", top)
        page.wait_for_timeout(60)
    main.evaluate("(el) => el.scrollTo(0, 0)")
    _wait_for_charts(page)
    return context, page


def violations(page: Page) -> list[dict]:
    """axe's violations of `TAGS` and `RULES` on the page, less `EXCLUSIONS`: each
    {"id", "impact", "help", "nodes": [target selectors]}."""
    options = {"runOnly": {"type": "tag", "values": list(TAGS)},
               "rules": {rule: {"enabled": True} for rule in RULES},
               "resultTypes": ["violations"]}
    found = {}
    for violation in Axe().run(page, options=options).response["violations"]:
        nodes = [node for node in violation["nodes"] if not _excluded(page, violation["id"], node)]
        if nodes:
            found[violation["id"]] = {
                "id": violation["id"], "impact": violation["impact"], "help": violation["help"],
                "nodes": [" ".join(map(str, node["target"])) for node in nodes],
                "summaries": [node.get("failureSummary", "") for node in nodes]}
    return list(found.values())


def _excluded(page: Page, rule: str, node: dict) -> bool:
    target = node["target"]
    if not target or not isinstance(target[-1], str):
        return False
    for exclusion in EXCLUSIONS:
        if exclusion.rule == rule and page.evaluate(
                "([target, selector]) => !!document.querySelector(target)?.closest(selector)",
                [target[-1], exclusion.selector]):
            return True
    return False


PAGES = [page.url_path for page in CATALOGUE]
"""Every page of the catalogue (a page added to it is tested here too)."""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_axe_finds_no_wcag_violation(offline_server, browser: Browser, name, width):
    # The Real model page offline draws its form and the tiny model's note, no model.
    context, page = open_page(offline_server, browser, name, width)
    found = violations(page)
    context.close()
    assert found == [], "\n".join(
        f"{v['id']} ({v['impact']}): {v['help']}\n  " + "\n  ".join(
            f"{n}: {s}" for n, s in zip(v["nodes"], v["summaries"])) for v in found)

