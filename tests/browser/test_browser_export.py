"""Playwright in real headless Chromium: the sidebar's downloads deliver files, the
downloaded report draws every chart from disk with no server, and a chart's
toolbar saves it as SVG."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from explorer import AttentionConfig, compute_trace
from explorer.render.export import html_report
from tests.support.browser import chart_count, page_url, settle

DOWNLOADS = {"attention.py": ".py", "Report (HTML)": ".html", "Every matrix (JSON)": ".json",
             "CSV": ".csv"}
"""Each button of "Take it with you" and the file type it delivers."""
NUMBER = re.compile(r"^−?-?\d+\.\d{2,4}$")


def _download(page: Page, button, folder: Path) -> Path:
    """Click ``button`` and save the file it delivers in ``folder``."""
    with page.expect_download() as info:
        button.click()
    download = info.value
    path = folder / download.suggested_filename
    download.save_as(path)
    return path


def test_every_download_delivers_its_file_and_the_report_draws_offline(
        fresh_server, page: Page, tmp_path):
    page.goto(page_url(fresh_server, "Self_attention"))
    settle(page)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Take it with you").click()
    files = {}
    for label, suffix in DOWNLOADS.items():
        button = sidebar.get_by_role("button", name=label)
        path = _download(page, button, tmp_path)
        assert path.suffix == suffix and path.stat().st_size > 0, label
        files[suffix] = path
    assert files[".py"].name == "attention.py"
    compile(files[".py"].read_text(), "attention.py", "exec")
    json.loads(files[".json"].read_text())
    assert files[".csv"].read_text().startswith("query,key: Life")

    # From here on no server: the report must draw from disk alone.
    assert "Traceback" not in fresh_server.stop()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else problems.append(f"fetched {r.url}"))
    page.goto(files[".html"].as_uri())
    n_charts = page.locator("div.chart[data-chart]").count()
    assert n_charts == 11  # every heatmap of the Self-attention page
    drawn = page.locator(".explorer-chart:has(.main-svg)")
    expect(drawn).to_have_count(n_charts)
    cells = page.locator(".explorer-chart").first.locator(".heatmaplayer text")
    expect(cells.first).to_be_attached()
    numbers = [text for text in cells.all_text_contents() if NUMBER.match(text)]
    assert "0.3374" in numbers  # X[Life, 0]: 002_8c91a21803773e04.txt, cell 9
    page.wait_for_load_state("networkidle")  # any late request would be in `problems` now
    assert problems == []


def test_a_chart_toolbar_saves_it_as_svg(fresh_server, page: Page):
    page.goto(page_url(fresh_server, "Self_attention"))
    settle(page)
    chart_count(page)
    chart = page.locator(".explorer-chart").first
    chart.hover()
    button = chart.locator("[data-title='Download as SVG (for print)']")
    with page.expect_download() as info:
        button.click()
    download = info.value
    assert download.suggested_filename.endswith(".svg")
    assert download.suggested_filename.startswith("embeddings_life-is-short")
    assert "<svg" in Path(download.path()).read_text()[:2000]


@pytest.mark.parametrize("width", [1400, 390])
def test_the_report_fits_the_window_with_a_long_link(browser: Browser, tmp_path, width):
    # The link did not wrap: the page was 1,772 px wide at 1400 and 1,663 at 390.
    trace = compute_trace(AttentionConfig(n_heads=2, d_k=4, d_v=4, causal=True))
    link = "http://127.0.0.1:8501/Causal_and_multi_head?" + "&".join(
        f"embeddings{i}=0.{i}1234,0.{i}5678,0.{i}9012" for i in range(30))
    report = tmp_path / "report.html"
    report.write_text(html_report(trace, link=link), encoding="utf-8")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(report.as_uri())
    expect(page.locator(".explorer-chart:has(.main-svg)")).to_have_count(
        page.locator("div.chart[data-chart]").count(), timeout=30_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()


REPORT_LAYOUT = """() => {
  const box = (e) => { const b = e.getBoundingClientRect();
                       return {x0: b.left, x1: b.right, y0: b.top, y1: b.bottom}; };
  const visible = (e) => e.textContent.trim() && box(e).x1 > box(e).x0;
  const rows = [...document.querySelectorAll('.row')].map((row) =>
    [...row.children].map((step) => box(step)));
  const charts = [...document.querySelectorAll('.explorer-chart')].map((gd) => ({
    title: gd.layout.title.text, chart: box(gd),
    ticks: [...gd.querySelectorAll('.xtick text, .ytick text')].filter(visible).map(box),
    titles: [...gd.querySelectorAll('.xtitle, .ytitle, [class^="xtitle"], [class^="ytitle"]')]
      .filter(visible).map(box),
    colorbars: [...gd.querySelectorAll('.colorbar')].map((bar) =>
      [...bar.querySelectorAll('.cbaxis text, text.ytick, .ytick text')].filter(visible).length),
    heads: [...gd.querySelectorAll('.annotation-text, .shapelayer text, .layer-above text')]
      .filter((t) => /^head \\d+$/.test(t.textContent.trim())).map(box),
  }));
  return {rows, charts, width: document.documentElement.scrollWidth};
}"""


def _overlap(a: dict, b: dict) -> bool:
    return min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > 0.5 and \
        min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > 0.5


LONG_TOKENS = "we saw extraordinarily unbelievable cats today"


@pytest.mark.parametrize("width, sentence", [
    (390, LONG_TOKENS), (1400, LONG_TOKENS),
    (390, " ".join((LONG_TOKENS.split() * 6)[:32])),  # 32 tokens
])
def test_the_report_reflows_on_a_phone_as_the_app_does(browser: Browser, tmp_path, width,
                                                       sentence):
    """Issue 31, point 6: at 390 px the report kept 3 charts a row: token labels
    clipped, axis titles over the ticks, "head 0" over "head 1", colour bars
    without numbers. On a phone it shows one chart a row, as the app does."""
    trace = compute_trace(AttentionConfig(sentence=sentence, n_heads=2, d_k=4, d_v=4,
                                          causal=True))
    report = tmp_path / "report.html"
    report.write_text(html_report(trace), encoding="utf-8")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(report.as_uri())
    expect(page.locator(".explorer-chart:has(.main-svg)")).to_have_count(
        page.locator("div.chart[data-chart]").count(), timeout=30_000)
    page.wait_for_timeout(500)
    seen = page.evaluate(REPORT_LAYOUT)
    assert seen["width"] <= width
    wide_rows = [row for row in seen["rows"] if len(row) > 1]
    assert wide_rows
    for row in wide_rows:
        lefts, tops = {round(s["x0"]) for s in row}, {round(s["y0"]) for s in row}
        if width < 640:  # one chart a row, one under the other
            assert len(lefts) == 1 and len(tops) == len(row), row
        else:
            assert len(tops) == 1 and len(lefts) == len(row), row
    for chart in seen["charts"]:
        inside = chart["chart"]
        for tick in chart["ticks"]:  # no token label cut at the chart's edge
            assert tick["x0"] >= inside["x0"] - 0.5 and tick["x1"] <= inside["x1"] + 0.5, \
                (chart["title"], tick, inside)
        for title in chart["titles"]:
            assert not any(_overlap(title, tick) for tick in chart["ticks"]), chart["title"]
        assert all(count >= 2 for count in chart["colorbars"]), (chart["title"],
                                                                chart["colorbars"])
        heads = chart["heads"]
        assert not any(_overlap(a, b) for i, a in enumerate(heads) for b in heads[i + 1:]), \
            chart["title"]
    context.close()


def test_the_modern_attention_report_draws_every_chart_from_disk(browser: Browser, tmp_path):
    """The Modern attention page's report (`modern_report`): every chart of the
    page drawn from disk with no request, each part's check line, a hostile
    sentence as text."""
    from explorer.core.tokenizer import token_labels
    from explorer.modern import attention as modern
    from explorer.modern.explain import CHARTS
    from explorer.render.modern.export import modern_report

    config = AttentionConfig(sentence="<b>bold</b> & <script>x</script> go")
    x = compute_trace(config)
    trace = modern.modern_attention(x["embeddings"], modern.ModernConfig(), config.seed, (0, 0))
    report = tmp_path / "modern.html"
    report.write_text(modern_report(trace, token_labels(x.tokens), config.sentence, head=1),
                      encoding="utf-8")
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else problems.append(f"fetched {r.url}"))
    page.goto(report.as_uri())
    assert page.locator("div.chart[data-chart]").count() == len(CHARTS)
    expect(page.locator(".explorer-chart:has(.main-svg)")).to_have_count(len(CHARTS))
    checks = page.locator("p.check").all_text_contents()
    assert len(checks) == 5 and all(line.startswith("✓") for line in checks), checks
    assert page.locator("q.sentence").inner_text() == config.sentence
    assert page.locator("b, script:not([type])").count() == 1  # Plotly's own script alone
    page.close()
    assert problems == []
