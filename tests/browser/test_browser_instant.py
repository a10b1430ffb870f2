"""What the browser already holds, it shows at once (issue 18): a clicked cell's
outline and its row as the query, a query picked, a head switched, the weights
as lines. Each test holds back everything the server sends after the input
(Playwright routes the page's websocket), checks that the page has changed
without the server, then lets the server's answer through and checks that
the page agrees with it: the explanation, the link, the outlines the server's
own figure code draws."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from explorer import AttentionConfig, compute_trace
from explorer.core.steps import STEPS
from explorer.lessons.explain import explain_cell
from explorer.render import figures
from tests.support.browser import chart_count, page_url, settle, sidebar_link


class HeldServer:
    """The page's websocket to the server, through Playwright: the page's
    messages always go through; the server's are held while `held` is set
    and delivered, in order, by `release`. ``seen`` lists every message
    the server sent, in order."""

    def __init__(self, page: Page) -> None:
        self.held = False
        self.queue: list[tuple[WebSocketRoute, str | bytes]] = []
        self.seen: list[str | bytes] = []
        self.lock = threading.Lock()
        self.page = page
        page.route_web_socket("**/_stcore/stream", self._route)

    def _route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        ws.on_message(server.send)
        server.on_message(lambda message: self._from_server(ws, message))

    def _from_server(self, ws: WebSocketRoute, message: str | bytes) -> None:
        with self.lock:
            self.seen.append(message)
            if self.held:
                self.queue.append((ws, message))
                return
        ws.send(message)

    def hold(self) -> None:
        with self.lock:
            self.held = True

    def wait_for(self, found: Callable[[], Any]) -> Any:
        """Poll ``found()`` (under the lock) until it is truthy, up to 30 s;
        returns its last value. Playwright hands over messages while it waits."""
        for _ in range(300):
            with self.lock:
                value = found()
            if value:
                return value
            self.page.wait_for_timeout(100)
        return value

    def first_seen(self, text: str) -> int | None:
        """The index in `seen` of the server's first message holding ``text``,
        waiting up to 30 s for it."""
        found = self.wait_for(lambda: [i for i, m in enumerate(self.seen) if text.encode() in m])
        return found[0] if found else None

    def release(self) -> int:
        """Deliver what was held, once the server has answered (waiting up to
        30 s for its first message: under load the page can follow an input
        before the server says anything); returns how many messages that was."""
        self.wait_for(lambda: self.queue)
        with self.lock:
            self.held = False
            queue, self.queue = self.queue, []
        for ws, message in queue:
            ws.send(message)
        return len(queue)


@pytest.fixture
def held(page: Page) -> HeldServer:
    return HeldServer(page)


OUTLINES = """(key) => {
  const gd = document.querySelector(`.st-key-${key} .explorer-chart`);
  return (gd.layout.shapes || []).filter((s) => s.name === 'query' || s.name === 'cell')
    .map((s) => [s.name, s.x0, s.x1, s.y0, s.y1]);
}"""


def outlines(page: Page, key: str) -> list:
    return page.evaluate(OUTLINES, key)


def server_outlines(trace, name: str, head: int, query: int | None, cell) -> list:
    """The outlines the server's figure code draws for this view."""
    chart = figures.heatmap_chart(trace, name, head, highlight_row=query, marked_cell=cell)
    return [[s["name"], s["x0"], s["x1"], s["y0"], s["y1"]]
            for s in chart.figure["layout"]["shapes"] if s.get("name") in ("query", "cell")]


def click_cell(page: Page, key: str, row: int, col: int, rows: int, cols: int) -> None:
    plot = page.locator(f".st-key-{key} .explorer-chart")
    plot.scroll_into_view_if_needed()
    area = plot.locator(".nsewdrag").bounding_box()
    page.mouse.click(area["x"] + area["width"] * (col + 0.5) / cols,
                     area["y"] + area["height"] * (row + 0.5) / rows)


def open_charts(page: Page, server, name: str, **params: str) -> None:
    """Open page ``name`` with the link ``params`` and wait until its charts are drawn."""
    page.goto(page_url(server, name, **params))
    settle(page)
    chart_count(page)


def link(page: Page) -> dict[str, str]:
    text = sidebar_link(page, close=True)
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(text).query))


def test_a_clicked_cell_is_outlined_before_the_server_answers(shared_server, page: Page,
                                                              held: HeldServer):
    open_charts(page, shared_server, "Causal_and_multi_head")
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2))
    held.hold()
    click_cell(page, "chart-attn_scores", 3, 1, 6, 6)  # ω_0["eat", "is"]
    # Without a word from the server: the cell outlined, and "eat" the query everywhere.
    page.wait_for_function(f"() => ({OUTLINES})('chart-attn_scores').length === 2")
    assert outlines(page, "chart-attn_scores") == server_outlines(trace, "attn_scores", 0, 3,
                                                                  (3, 1))
    assert outlines(page, "chart-values") == server_outlines(trace, "values", 0, 3, None)
    expect(page.get_by_text('ω_0["eat", "is"]', exact=True)).to_have_count(0)
    assert held.release() > 0
    settle(page)
    # The server agrees: it explains that cell, links it, and draws nothing else.
    expect(page.get_by_text('ω_0["eat", "is"]', exact=True)).to_be_visible()
    assert {k: v for k, v in link(page).items() if k in ("query", "cell")} == {
        "query": "3", "cell": "attn_scores:3,1"}
    assert outlines(page, "chart-attn_scores") == server_outlines(trace, "attn_scores", 0, 3,
                                                                  (3, 1))


def test_a_click_is_explained_by_its_chart_before_the_page_follows(shared_server, page: Page,
                                                                  held: HeldServer):
    open_charts(page, shared_server, "Causal_and_multi_head")
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2))

    held.seen.clear()
    click_cell(page, "chart-attn_scores", 3, 1, 6, 6)
    scores = explain_cell(trace, "attn_scores", 3, 1, 0)
    # The chart reran alone and sent its explanation; then the whole page
    # followed, writing the link into the address bar (a page's run draws the
    # sidebar first), as Streamlit encodes a query string.
    explained, linked = held.first_seen(scores.written()), held.first_seen(
        urllib.parse.urlencode({"cell": "attn_scores:3,1"}))
    assert explained is not None and linked is not None
    assert explained < linked
    settle(page)
    expect(page.get_by_text(scores.written())).to_be_visible()
    click_cell(page, "chart-attn_weights", 2, 1, 6, 6)
    # The page followed: one explanation, the new cell's, and the link is of it.
    weights = explain_cell(trace, "attn_weights", 2, 1, 0)
    expect(page.get_by_text(weights.written())).to_be_visible()
    expect(page.get_by_text(scores.written())).to_have_count(0)
    assert link(page)["cell"] == "attn_weights:2,1"


def test_a_head_and_a_query_picked_show_before_the_server_answers(shared_server, page: Page,
                                                                  held: HeldServer):
    open_charts(page, shared_server, "Causal_and_multi_head", d_k="4", d_v="4")
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4))
    weights = ".st-key-chart-attn_weights .explorer-chart"
    held.hold()
    page.get_by_role("radio", name="head 1", exact=True).click()
    page.wait_for_function(f"() => document.querySelector('{weights}').layout.title.text"
                           ".endsWith('head 1')")
    drawn = np.array(page.evaluate(f"() => document.querySelector('{weights}').data[0].z"
                                   ".map((row) => Array.from(row))"), dtype=np.float32)
    np.testing.assert_array_equal(drawn, trace["attn_weights"][1].numpy())
    frame = page.evaluate(f"""() => document.querySelector('{weights}').layout.shapes
                              .find((s) => s.name === 'frame').line.color""")
    assert frame == figures.head_colour(1)
    page.get_by_label("Highlight a query token in every chart").select_option(label="dessert")
    page.wait_for_function(f"() => ({OUTLINES})('chart-attn_weights').length === 1")
    assert outlines(page, "chart-attn_weights") == server_outlines(
        trace, "attn_weights", 1, 4, None)
    held.release()
    settle(page)
    assert {k: v for k, v in link(page).items() if k in ("head", "query")} == {
        "head": "1", "query": "4"}
    assert page.evaluate(f"() => document.querySelector('{weights}').layout.title.text") == (
        STEPS["attn_weights"].title(trace.config, (6, 6)) + ", head 1")


LINES = """(selector) => {
  const box = document.querySelector(selector);
  if (!box || !box.data || box.classList.contains('explorer-offscreen')) return null;
  return {segments: box.data.filter((t) => t.mode === 'lines')
            .reduce((n, t) => n + t.x.filter((v) => v === null).length, 0),
          title: box.layout.title.text};
}"""


def test_the_lines_show_before_the_server_answers_and_follow_the_head(shared_server,
                                                                       page: Page,
                                                                       held: HeldServer):
    open_charts(page, shared_server, "Causal_and_multi_head")
    held.hold()
    page.get_by_role("switch", name="Show as lines").click()
    box = ".st-key-chart-attn_weights .explorer-lines"
    page.wait_for_function(f"() => ({LINES})('{box}') !== null")
    # causal, 6 tokens: query i has i + 1 nonzero weights
    assert page.evaluate(LINES, box) == {"segments": 21,
                                         "title": "Attention weights, head 0: query → key"}
    page.get_by_role("radio", name="head 1", exact=True).click()
    page.wait_for_function(f"() => ({LINES})('{box}').title.includes('head 1')")
    held.release()
    settle(page)
    assert link(page).get("lines") == "true"
    assert page.evaluate(LINES, box)["title"] == "Attention weights, head 1: query → key"


def test_long_sentences_draw_only_the_heavier_lines(shared_server, page: Page):
    sentence = " ".join(f"w{i}" for i in range(40))
    open_charts(page, shared_server, "Self_attention", sentence=sentence, d_in="4", d_k="4",
                lines="true")
    box = ".st-key-chart-attn_weights .explorer-lines"
    page.wait_for_function(f"() => ({LINES})('{box}') !== null")
    drawn = page.evaluate(LINES, box)
    weights = compute_trace(AttentionConfig(sentence=sentence, d_in=4, d_k=4))["attn_weights"]
    assert drawn["segments"] == int((weights.numpy() >= figures.LINES_MIN_WEIGHT).sum()) < 1600
    assert "weights ≥ 0.05 only (40 tokens)" in drawn["title"]


def test_the_server_confirms_a_view_without_drawing_again(shared_server, page: Page):
    open_charts(page, shared_server, "Causal_and_multi_head")
    drawn = ("() => [...document.querySelectorAll(\"[class*='st-key-chart-'] .explorer-chart\")]"
             ".map((d) => d.dataset.drawn)")
    before = page.evaluate(drawn)
    click_cell(page, "chart-attn_weights", 2, 1, 6, 6)
    settle(page)
    page.get_by_role("radio", name="head 1", exact=True).click()
    settle(page)
    # A click moves outlines and a head switch redraws the per-head step charts in place;
    # the server's payloads that confirm them draw no step chart again (dataset.drawn
    # counts full draws).
    assert json.dumps(page.evaluate(drawn)) == json.dumps(before)


SPARES = """() => Object.fromEntries([...document.querySelectorAll("[class*='st-key-chart-']")]
  .filter((box) => box.querySelector(':scope .explorer-spare .main-svg'))
  .map((box) => [[...box.classList].find((c) => c.startsWith('st-key-')).slice(7),
                 box.querySelectorAll(':scope .explorer-spare').length]))"""
SHOWN = """(key) => {
  const gd = document.querySelector(`.st-key-${key} .explorer-chart`);
  return {z: gd.data[0].z.map((row) => Array.from(row)), title: gd.layout.title.text,
          spare: Boolean(gd.__wasSpare), drawn: gd.dataset.drawn};
}"""


def spares_ready(page: Page, names: list[str]) -> dict[str, int]:
    """Wait until the charts of the steps `names` hold their other heads off-screen;
    returns how many each chart holds, by key."""
    page.wait_for_function("(keys) => keys.every((key) => key in (" + SPARES + ")())",
                           arg=[f"chart-{name}" for name in names], timeout=30_000)
    return page.evaluate(SPARES)


def test_a_head_switch_swaps_in_the_heads_drawn_while_idle(shared_server, page: Page,
                                                           held: HeldServer):
    open_charts(page, shared_server, "Causal_and_multi_head", d_k="4", d_v="4")
    per_head = ["queries", "keys", "values", "attn_scores", "attn_weights"]
    spares = spares_ready(page, per_head)
    assert all(spares.get(f"chart-{name}") == 1 for name in per_head), spares  # 2 heads
    page.evaluate("() => document.querySelectorAll('.explorer-spare')"
                  ".forEach((gd) => { gd.__wasSpare = true; })")
    drawn = {name: page.evaluate(SHOWN, f"chart-{name}")["drawn"] for name in per_head}
    trace = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4))
    held.hold()
    # The query picked on head 0 is outlined on head 1's plots too, drawn before the pick.
    page.get_by_label("Highlight a query token in every chart").select_option(label="dessert")
    page.get_by_role("radio", name="head 1", exact=True).click()
    page.wait_for_function(f"() => ({SHOWN})('chart-attn_weights').spare")
    for name in per_head:
        shown = page.evaluate(SHOWN, f"chart-{name}")
        assert shown["spare"] and shown["title"].endswith("head 1"), (name, shown["title"])
        assert shown["drawn"] == drawn[name]  # swapped in, not drawn again
        np.testing.assert_array_equal(np.array(shown["z"], dtype=np.float32),
                                      trace[name][1].numpy(), err_msg=name)
        assert outlines(page, f"chart-{name}") == server_outlines(trace, name, 1, 4, None)
    held.release()
    settle(page)
    assert {k: v for k, v in link(page).items() if k in ("head", "query")} == {
        "head": "1", "query": "4"}
    # A swapped-in plot answers clicks like the one it replaced (Plotly's own CSS
    # class kept): the cell outlined at once, explained for head 1 by the server.
    click_cell(page, "chart-attn_scores", 3, 1, 6, 6)
    settle(page)
    expect(page.get_by_text(explain_cell(trace, "attn_scores", 3, 1, 1).cell,
                            exact=True)).to_be_visible()
    assert outlines(page, "chart-attn_scores") == server_outlines(trace, "attn_scores", 1, 3,
                                                                  (3, 1))
    # New numbers: the spares of the old ones go, and the new spares hold the new numbers.
    page.locator(".st-key-seed input").fill("7")
    page.locator(".st-key-seed input").press("Enter")
    settle(page)
    spares_ready(page, per_head)
    page.get_by_role("radio", name="head 0", exact=True).click()
    settle(page)
    other = compute_trace(AttentionConfig(causal=True, n_heads=2, d_k=4, d_v=4, seed=7))
    # Within a moment of the run: the seed's payload can reach the weights' chart
    # after its run has ended and the page looked settled (logged: its component
    # was handed the seed's numbers only after the head-0 click), and then the
    # click swaps in a spare of the old numbers until the new ones are drawn. Read
    # at once after the run, that showed in 1 of 4-5 runs.
    page.wait_for_function(
        "([key, row]) => JSON.stringify(Array.from(document.querySelector("
        "`.st-key-${key} .explorer-chart`).data[0].z[1]).map((v) => Math.fround(v)))"
        " === JSON.stringify(row)",
        arg=["chart-attn_weights", [float(v) for v in other["attn_weights"][0][1].numpy()]],
        timeout=5_000)
    for name in per_head:
        shown = page.evaluate(SHOWN, f"chart-{name}")
        np.testing.assert_array_equal(np.array(shown["z"], dtype=np.float32),
                                      other[name][0].numpy(), err_msg=name)
        assert outlines(page, f"chart-{name}") == server_outlines(other, name, 0, 3, None)


def test_a_chart_drawn_late_holds_the_edits_numbers_and_answers_a_click(shared_server,
                                                                         page: Page):
    """Issue 26: a chart far below the window is drawn when it comes near or when the
    page is idle. The context vectors, edited while off-screen (the window holds the
    embeddings), show the new seed's numbers once scrolled to, and a click on them is
    explained by the server."""
    open_charts(page, shared_server, "Self_attention")
    seed = page.locator(".st-key-seed input")
    seed.fill("7")
    seed.press("Enter")
    # The run over (its payloads sent), and only then the chart scrolled to.
    page.wait_for_function("() => window.__runsDone > window.__settledRuns"
                           " && document.querySelector(\"[data-testid='stApp']\")"
                           ".dataset.testScriptState === 'notRunning'")
    page.wait_for_timeout(300)
    plot = page.locator(".st-key-chart-context .explorer-chart")
    plot.scroll_into_view_if_needed()
    trace = compute_trace(AttentionConfig(seed=7))
    expected = trace["context"].numpy()
    page.wait_for_function("""([key, want]) => {
      const gd = document.querySelector(`.st-key-${key} .explorer-chart`);
      return Boolean(gd && !gd.dataset.drawing && gd.data
                     && Math.abs(gd.data[0].z[0][0] - want) < 1e-4);
    }""", arg=["chart-context", float(expected[0, 0])])
    shown = page.evaluate(SHOWN, "chart-context")
    np.testing.assert_allclose(np.array(shown["z"], dtype=np.float32), expected, atol=1e-5)
    settle(page)
    click_cell(page, "chart-context", 2, 1, *expected.shape)
    settle(page)
    expect(page.get_by_text(explain_cell(trace, "context", 2, 1).cell,
                            exact=True)).to_be_visible()
