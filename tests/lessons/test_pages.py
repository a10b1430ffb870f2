"""The page catalogue (issue 46): each page is one declared unit, and the menu,
Home, the settings, the README and the guide all follow it, so that a page added
or renamed in `explorer.lessons.pages` leaves nothing stale behind."""

from __future__ import annotations

import re

import pytest

from explorer.lessons import pages
from explorer.lessons.pages import CATALOGUE
from explorer.ui.navigation import PAGES
from explorer.ui.state import entries
from tests.support.apptest import open_link, open_page
from tests.support.server import ROOT

OTHERS = [page for page in CATALOGUE if page is not pages.HOME]


def test_the_pages_folder_holds_the_catalogues_scripts_and_nothing_else():
    scripts = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py"))
    assert scripts == sorted(page.script for page in OTHERS)
    assert pages.HOME.script == "streamlit_app.py"


@pytest.mark.parametrize("page", CATALOGUE, ids=lambda page: page.name)
def test_each_script_draws_its_own_page(page):
    """A script names its page by the catalogue's constant (or Home its
    settings), so its sidebar, settings and report are that page's."""
    source = (ROOT / page.script).read_text()
    constant = next(name for name, value in vars(pages).items()
                    if name.endswith("_PAGE") and value == page.name)
    assert constant in source or page is pages.HOME and "pages.HOME_PAGE" in source


def test_the_menu_is_the_catalogue_in_its_order():
    assert list(PAGES) == [page.name for page in CATALOGUE]
    assert [script for script, _ in PAGES.values()] == [page.script for page in CATALOGUE]
    numbers = [int(page.script.split("/")[1].split("_")[0]) for page in OTHERS]
    assert numbers == list(range(1, len(OTHERS) + 1))  # Streamlit's own order too


def test_each_address_is_the_one_streamlit_gives_the_script():
    assert [page.url_path for page in CATALOGUE] == [
        "", "Simplified_attention", "Self_attention", "Causal_and_multi_head", "Experiments",
        "Real_model", "Check_your_code", "Modern_attention", "Backward_pass",
        "Frontier_attention"]


def test_home_lists_every_other_page_with_its_summary():
    at = open_page(pages.HOME.script)
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    listed = re.findall(r"^   - \*\*(.+?)\*\*: (.+)$", text, flags=re.M)
    assert [(name.replace("\\", ""), summary) for name, summary in listed] == [
        (page.name, page.summary) for page in OTHERS]


def test_home_no_longer_calls_the_real_model_page_gpt2_or_bert():
    assert "GPT-2 or BERT" not in pages.REAL_MODEL.summary
    assert "Llama-family" in pages.REAL_MODEL.summary


@pytest.mark.parametrize("document", ["README.md", "docs/guide/index.md"])
def test_the_readme_and_the_guide_list_every_page_in_menu_order(document):
    text = (ROOT / document).read_text()
    named = [m for m in re.findall(r"^- \*\*(.+?)\*\*", text, flags=re.M)
             if m in pages.BY_NAME]
    assert named == [page.name for page in CATALOGUE], document


@pytest.mark.parametrize("page", CATALOGUE, ids=lambda page: page.name)
def test_each_pages_guide_is_a_page_of_the_docs(page):
    assert (ROOT / "docs" / page.guide).is_file(), page.guide


def test_the_settings_follow_the_traits():
    assert entries.CONFIG_PAGES == {page.name for page in CATALOGUE
                                    if pages.CONFIG in page.traits}
    assert pages.SIMPLIFIED_PAGE in entries.CONFIG_PAGES - entries.WEIGHT_PAGES
    assert entries.MULTI_HEAD_SETTINGS == {pages.MULTI_HEAD_PAGE, pages.BACKWARD_PAGE}
    assert pages.MODEL_PAGE in entries.CHART_PAGES and pages.MODEL_PAGE in entries.HEAD_PAGES
    with pytest.raises(ValueError, match="no such trait"):
        pages.having("charts")


def test_the_backward_pages_report_says_what_it_holds():
    """Its HTML report holds the forward pass only; the button says so."""
    assert "Every chart of this page" not in pages.BACKWARD.report
    assert "forward pass" in pages.BACKWARD.report
    at = open_link(pages.BACKWARD.script)
    assert not at.exception
    helps = [b.help for b in at.get("download_button") if b.proto.label == "Report (HTML)"]
    assert helps == [pages.BACKWARD.report], helps
