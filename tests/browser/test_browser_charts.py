"""Every chart of every page, as Chromium draws it at 1400 and 390 px: line and bar
charts in distinct, real colours, no label cut by the chart's edge or lying
on another label (measured from the SVG's own boxes, rotated labels as drawn),
and the numbers printed in cells inside the plot with at least 2 px between
neighbours (issue 31), also for long tokens, 32 and 77 tokens, and 64 columns.

One server for the module and one browser page per width, reused for every page.
The Real model page needs model weights: tests/browser/test_browser_models.py covers it.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page

from explorer.core.tokenizer import token_labels
from explorer.ui.experiments import EXPERIMENTS
from tests.support.browser import chart_count, page_url, settle
from tests.support.server import RUN_COUNTER

WIDTHS = (1400, 390)
LONG_TOKENS = "we saw extraordinarily unbelievable cats today"
BOOK = "your journey starts with one step "


def words(n: int) -> str:
    """A sentence of ``n`` tokens (the book's, repeated: labels like ``step (35)``)."""
    return " ".join((BOOK * (n // 6 + 1)).split()[:n])


VIEWS = [("Home", {}), ("Simplified_attention", {}), ("Self_attention", {}),
         ("Self_attention", {"sentence": "the cat sat on the mat and then it slept"}),
         ("Self_attention", {"sentence": LONG_TOKENS}),
         ("Self_attention", {"sentence": words(32)}),
         ("Self_attention", {"sentence": words(77)}),
         ("Self_attention", {"sentence": words(8), "d_in": "64"}),
         ("Simplified_attention", {"sentence": LONG_TOKENS}),
         ("Causal_and_multi_head", {}),
         ("Causal_and_multi_head", {"d_k": "4", "d_v": "4", "n_heads": "4"}),
         ("Causal_and_multi_head", {"d_k": "32", "d_v": "32"}),
         ("Causal_and_multi_head", {"sentence": LONG_TOKENS}),
         *(("Experiments", {"experiment": label}) for label in EXPERIMENTS)]
"""Each page with its default settings (the Self-attention page also with 10
tokens, long tokens, 32 and 77 tokens, and 8 tokens of d_in = 64; the multi-head
page with 4 heads, whose grid is the narrowest, with 64 columns of two heads,
and with long tokens), and every tab of the Experiments page."""

CHARTS = """() => [...document.querySelectorAll('.explorer-chart')].map((gd) => {
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const quad = (el) => {  // the label's box as drawn: four corners on the screen
    const b = el.getBBox(), m = el.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
            [b.x, b.y + b.height]].map(([x, y]) => [m.a * x + m.c * y + m.e,
                                                    m.b * x + m.d * y + m.f]);
  };
  const kinds = [['[class$="tick"] > text', 'tick'], ['.g-gtitle text', 'title'],
                 ['[class$="title"] > text:not(.gtitle)', 'axis title'],
                 ['.annotation-text', 'annotation'], ['.legendtext', 'legend']];
  const seen = new Set(), labels = [];
  for (const [selector, kind] of kinds) {
    for (const el of gd.querySelectorAll(selector)) {
      if (seen.has(el) || !el.textContent.trim() || el.closest('.heatmaplayer')) continue;
      const box = el.getBBox();
      if (!box.width || getComputedStyle(el).display === 'none') continue;
      seen.add(el);
      labels.push({kind, text: el.textContent, quad: quad(el)});
    }
  }
  const series = [];
  for (const trace of gd.querySelectorAll('.scatterlayer .trace, .barlayer .trace')) {
    const colours = new Set();
    for (const path of trace.querySelectorAll('path.js-line')) colours.add(path.style.stroke);
    for (const path of trace.querySelectorAll('path.point, .point > path')) {
      colours.add(path.style.fill);
    }
    colours.delete(''); colours.delete('none');
    for (const c of [...colours]) if (/rgba\\(.*, 0\\)$/.test(c)) colours.delete(c);
    if (colours.size) series.push([...colours]);
  }
  const box = (el) => { const b = el.getBoundingClientRect();
                        return [b.left, b.top, b.right, b.bottom]; };
  const cells = [...gd.querySelectorAll('.heatmaplayer text')]
    .filter((t) => t.textContent.trim()).map((t) => ({text: t.textContent, box: box(t)}));
  const plots = [...gd.querySelectorAll('.nsewdrag')].map(box);
  return {title: gd.layout.title?.text ?? '', svg: [svg.left, svg.top, svg.right, svg.bottom],
          labels, series, view: [0, document.documentElement.clientWidth], cells,
          plots};
})"""
"""Per chart: its title, the SVG's box, every label (tick labels, titles, axis
titles, annotations, legend entries) with its drawn corners, each series'
colours (line strokes, marker and bar fills; invisible hover markers left out),
the numbers printed in its cells with their boxes, and its plot areas."""
MIN_GAP_PX = 2.0
"""Numbers in cells must have this much air between them (issue 31)."""


def _placeholder(colour: str) -> bool:
    """Streamlit's stand-in colours, #000001 to #000030 (only st.plotly_chart replaces them)."""
    parts = colour.removeprefix("rgb(").removesuffix(")").split(",")
    return len(parts) == 3 and [p.strip() for p in parts[:2]] == ["0", "0"] and \
        0 < int(parts[2]) <= 30


def _projection(quad, axis) -> tuple[float, float]:
    values = [x * axis[0] + y * axis[1] for x, y in quad]
    return min(values), max(values)


def _overlap(a, b, slack: float = 1.0) -> bool:
    """Whether two drawn boxes (convex quads) overlap by more than ``slack`` px:
    no edge direction of either separates them (the separating axis theorem)."""
    for quad in (a, b):
        for i in range(4):
            (x0, y0), (x1, y1) = quad[i], quad[(i + 1) % 4]
            length = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5 or 1.0
            axis = (-(y1 - y0) / length, (x1 - x0) / length)
            lo_a, hi_a = _projection(a, axis)
            lo_b, hi_b = _projection(b, axis)
            if min(hi_a, hi_b) - max(lo_a, lo_b) <= slack:
                return False
    return True


def _outside(quad, box, slack: float = 1.0) -> bool:
    left, top, right, bottom = box
    return any(x < left - slack or x > right + slack or y < top - slack or y > bottom + slack
               for x, y in quad)


def chart_problems(chart: dict) -> list[str]:
    """What is wrong with one chart as drawn: a label cut by the chart's or the
    window's edge, two labels on top of each other, a series in a stand-in
    colour or in the colour of another series."""
    problems = []
    left, top, right, bottom = chart["svg"]
    window = (max(left, chart["view"][0]), top, min(right, chart["view"][1]), bottom)
    labels = chart["labels"]
    for i, label in enumerate(labels):
        if _outside(label["quad"], window):
            problems.append(f"{label['kind']} {label['text']!r} is cut by the edge")
        for other in labels[i + 1:]:
            if _overlap(label["quad"], other["quad"]):
                problems.append(f"{label['kind']} {label['text']!r} lies on "
                                f"{other['kind']} {other['text']!r}")
    problems += cell_problems(chart)
    firsts = [colours[0] for colours in chart["series"]]
    for colour in {c for colours in chart["series"] for c in colours}:
        if _placeholder(colour):
            problems.append(f"a series has Streamlit's stand-in colour {colour}")
    if len(set(firsts)) < len(firsts):
        problems.append(f"two series share a colour: {firsts}")
    return problems


def cell_problems(chart: dict) -> list[str]:
    """Numbers printed in cells that leave the plot area, or that come closer
    than `MIN_GAP_PX` to a neighbour in their row or column."""
    problems = []
    cells = chart["cells"]
    for cell in cells:  # inside a plot area (a grid of heads has one per head)
        x0, y0, x1, y1 = cell["box"]
        if not any(x0 >= left - 0.5 and x1 <= right + 0.5 and y0 >= top - 0.5
                   and y1 <= bottom + 0.5 for left, top, right, bottom in chart["plots"]):
            problems.append(f"cell number {cell['text']!r} leaves the plot")
            break
    for along, across in ((0, 1), (1, 0)):  # neighbours in a row, then in a column
        lines: dict[int, list] = {}
        for cell in cells:
            box = cell["box"]
            lines.setdefault(round((box[across] + box[across + 2]) / 2), []).append(cell)
        for line in lines.values():
            line.sort(key=lambda c: c["box"][along])
            for a, b in zip(line, line[1:]):
                gap = b["box"][along] - a["box"][along + 2]
                if gap < MIN_GAP_PX:
                    problems.append(f"cell numbers {a['text']!r} and {b['text']!r} are "
                                    f"{gap:.1f} px apart")
                    break
    return problems


@pytest.fixture(scope="module")
def windows(shared_server, browser: Browser):
    """One browser page per width, reused for every page of the module."""
    opened = {}
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 1000})
        context.add_init_script(RUN_COUNTER)
        opened[width] = context.new_page()
    yield opened
    for page in opened.values():
        page.context.close()


def _open(page: Page, url: str, charts: bool = True) -> list[dict]:
    """Open ``url`` and measure its charts once every one of them is drawn (the
    components mount a moment after the run: the count must hold for 0.5 s)."""
    page.goto(url)
    settle(page)
    count = chart_count(page) if charts else 0
    while charts:
        page.wait_for_timeout(500)
        count, before = chart_count(page), count
        if count == before:
            break
    return page.evaluate(CHARTS)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name,query", VIEWS, ids=[
    f"{n}-{'-'.join(q.values()) or 'default'}" for n, q in
    (v.values if hasattr(v, "values") else v for v in VIEWS)])
def test_every_chart_is_readable(shared_server, windows, width, name, query):
    charts = _open(windows[width], page_url(shared_server, name, **query), name != "Home")
    problems = [f"{chart['title']}: {problem}" for chart in charts
                for problem in chart_problems(chart)]
    assert not problems, "\n".join(problems)


def test_line_and_bar_charts_draw_each_series_in_its_own_real_colour(shared_server, windows):
    # The two charts the issue names: Streamlit's template made every series black.
    for label, least in (("Why divide by √d_k", 5), ("Temperature", 1)):
        charts = _open(windows[1400], page_url(shared_server, "Experiments", experiment=label))
        series = [colours for chart in charts for colours in chart["series"]]
        assert len(series) >= least, label
        for chart in charts:
            assert not [p for p in chart_problems(chart) if "colour" in p], chart["title"]


TABLES = """() => [...document.querySelectorAll("[data-testid='stDataFrame'] .dvn-scroller")]
  .map((s) => ({wide: s.scrollWidth - s.clientWidth, tall: s.scrollHeight - s.clientHeight,
                headers: [...s.closest("[data-testid='stDataFrame']")
                  .querySelectorAll("[role='columnheader']")].map((h) => h.textContent)}))"""


def test_tables_show_every_row_and_the_sums_fit_a_phone(shared_server, windows):
    # The context table scrolled inside itself, hiding its last row; the softmax-dim
    # sums needed sideways scrolling at 390 px.
    page = windows[390]
    twelve = "the cat sat on the mat and then it slept all day"  # a context table of 13 rows
    _open(page, page_url(shared_server, "Simplified_attention", sentence=twelve))
    tables = page.evaluate(TABLES)  # the query's written sums are a static table now
    assert len(tables) == 2 and all(t["tall"] <= 1 for t in tables), tables
    static = page.evaluate("""() => [...document.querySelectorAll("[data-testid='stTable']")]
      .map((s) => s.scrollWidth - s.clientWidth)""")
    assert len(static) == 1 and static[0] <= 1, static
    _open(page, page_url(shared_server, "Experiments", experiment="softmax dim & keepdim"))
    (sums,) = page.evaluate(TABLES)
    assert sums["wide"] <= 1 and sums["tall"] <= 1, sums


def test_the_compare_panels_print_their_numbers(shared_server, windows):
    # Six 6×6 and 6×4 panels in three columns: 4 decimals did not fit, nor did 2 by the
    # old fixed widths.
    page = windows[1400]
    _open(page, page_url(shared_server, "Experiments", experiment="Compare two configurations"))
    printed = page.evaluate("""() => [...document.querySelectorAll('.explorer-chart')].map(
      (gd) => [...gd.querySelectorAll('.heatmaplayer text')].filter((t) => t.textContent)
        .map((t) => t.textContent))""")
    assert [len(texts) for texts in printed] == [36, 36, 36, 24, 24, 24]
    numbers = [text for texts in printed for text in texts]
    assert not [t for t in numbers if t.startswith("-") or t in ("\u22120.00", "\u22120.0000")]


AXES = """() => [...document.querySelectorAll('.explorer-chart')].map((gd) => {
  const texts = (selector) => [...gd.querySelectorAll(selector)].map((t) => t.textContent)
    .filter((t) => t.trim());
  return {title: gd.layout.title?.text ?? '', x: texts('.xtick text'), y: texts('.ytick text'),
          xtitle: texts('.g-xtitle text').join(' '), ytitle: texts('.g-ytitle text').join(' ')};
})"""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("n", [8, 32, 77])
def test_a_token_axis_labels_every_token_or_says_it_does_not(shared_server, windows, width, n):
    # Issue 31: at 8 tokens and d_in = 64, Plotly labelled every other token; at 32, 11.
    sentence = words(n)
    labels = token_labels(sentence.split())
    page = windows[width]
    _open(page, page_url(shared_server, "Self_attention", sentence=sentence,
                         d_in="64" if n == 8 else "4"))
    charts = page.evaluate(AXES)
    token_axes = 0
    for chart in charts:
        for axis in ("x", "y"):
            ticks = chart[axis]
            if not ticks or not set(ticks) <= set(labels):
                continue
            ticks = sorted(ticks, key=labels.index)  # a reversed axis draws them upwards
            token_axes += 1
            if n == 8:
                assert ticks == labels, (chart["title"], axis, ticks)
            elif len(ticks) < n:
                assert ", every " in chart[f"{axis}title"], (chart["title"], axis, ticks)
                step = labels.index(ticks[1]) - labels.index(ticks[0])
                assert ticks == labels[::step][:len(ticks)], (chart["title"], axis, ticks)
            else:
                assert ticks == labels
    assert token_axes >= 8
