"""Visitor text stays inert on every page, in real headless Chromium.

A battery of hostile strings (Markdown images and links, Streamlit colour and
icon directives, HTML, LaTeX, entities, a heading, a line break, bidi and
control characters, bare addresses) goes everywhere a visitor's text reaches
the page: the sentence (by link and typed into the box), the explained cell's
token names, a hand-entered matrix imported from a CSV file (its cells and its
file name), link values echoed in error messages (bad values, an unknown
preset or model, a parameter of no known name) and, on the Real model page,
the folder typed into the sidebar. After each, the page must hold:

- no link or resource the text asked for: no element whose href, src and the
  like points to another origin, the hostile address or a ``javascript:``
  URL, and no ``img``;
- no element made from the text's markup: no <b>/<strong>/<a>/heading/tspan
  holding just the markup's inner text, no coloured span, material icon or
  formula of the visitor's, no script element;
- no dialog (no script ran) and no request to the text's 127.0.0.1:9;
- the text itself, shown literally: in the error messages, the charts' tick
  labels (whose Plotly data hold the escaped form), the explained cell's
  name, the tokens table, the file's name.

One server started for the module (offline: no model is downloaded); the
Real model page reads a tiny random GPT-2 from a folder (`tests.support.tiny_models`).
"""

from __future__ import annotations

import csv
import io
import time
import urllib.parse

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from explorer import compute_trace
from explorer.core import literal
from explorer.core.config import shown
from explorer.core.tokenizer import token_labels
from explorer.core.trace import Trace
from explorer.lessons.explain import explain_cell
from explorer.lessons.pages import (
    BACKWARD_PAGE,
    CHECK_PAGE,
    EXPERIMENTS_PAGE,
    FRONTIER_PAGE,
    HOME_PAGE,
    MODERN_PAGE,
    SIMPLIFIED_PAGE,
)
from explorer.ui.navigation import PAGES
from explorer.ui.state import ENTRIES
from tests.support.browser import choose_option
from tests.support.server import RUN_TIMEOUT_MS, url_path
from tests.support.soak import Settings, finished_run

BATTERY = {
    "image": "a ![PWNIMG](http://127.0.0.1:9/pwn.png)",
    "bold colour": "**:red-background[PWNRED]**",
    "html": '<b>z</b> <img src=x onerror=alert(1)> <a href="http://127.0.0.1:9/">lnk</a>',
    "icon colour": ":material/home: :red[R]",
    "latex": "$x^2$",
    "script": "<script>alert(1)</script>",
    "entities": "&lt;&amp;",
    "heading": "# heading",
    "newline": "line one\nline two",
    "bidi control": "\u202eevil\x07bell",
    "js link": "[link](javascript:alert(1))",
    "bare links": "www.pwn.example pwn@pwn.example HTTPS://127.0.0.1:9/pwn",
}
"""The hostile strings, as a visitor types or links them. The last: bare text that
GitHub-flavoured Markdown turns into links by itself."""

TOKENS = (
    "![PWNIMG](http://127.0.0.1:9/pwn.png)x", "**:red-background[PWNRED]**",
    "<img/src=x/onerror=alert(1)>", '<a/href="http://127.0.0.1:9/">lnk</a>',
    "x:material/home:x", "x:red[R]", "$x^2$", "<script>alert(1)</script>", "&lt;&amp;x",
    "[link](javascript:alert(1))x", "\u202eevil\x07bell", "<b>z</b>", "www.pwn.example",
    "pwn@pwn.example",
)
"""The same markup as single tokens, which the tokenizer keeps whole (no spaces, no
stripped punctuation at the ends), so that a token's name carries all of it."""

URL_SENTENCE = f"{TOKENS[0]} {TOKENS[1]} " + " ".join(BATTERY.values())
TYPED_SENTENCES = [
    f"{TOKENS[2]} {TOKENS[3]} {BATTERY['image']} {BATTERY['bold colour']}",
    f"{TOKENS[4]} {TOKENS[5]} {BATTERY['html']}",
    f"{TOKENS[6]} {TOKENS[7]} {BATTERY['icon colour']} {BATTERY['latex']} {BATTERY['script']}",
    f"{TOKENS[8]} {TOKENS[9]} {BATTERY['entities']} {BATTERY['heading']} {BATTERY['js link']}",
    f"{TOKENS[10]} {TOKENS[11]} {BATTERY['bidi control']}",
    f"{TOKENS[12]} {TOKENS[13]} {BATTERY['bare links']}",
]
"""Typed into the box (a text box holds no line break). The explained cell
(1, 0) names each sentence's first two tokens."""

BAD_VALUES = [("d_in", "<b>x</b>"), ("preset", "<img src=x onerror=alert(1)>"),
              *zip(("d_k", "d_v", "seed", "vocab_size", "weight_init", "normalization",
                    "scale", "causal", "n_heads", "head", "query", "cell"), BATTERY.values())]
"""Link parameters with values the app refuses and echoes in its message."""
MODEL_BAD_VALUES = [("model", f"{BATTERY['html']} {BATTERY['bare links']}"),
                    ("layer", BATTERY["bold colour"])]
"""The Real model page's own parameters (it has no presets, so ``preset`` is not its)."""
UNKNOWN_NAMES = ["<b>x</b>", *BATTERY.values()]
"""Link parameters of no known name, which the app names in its message."""
CSV_IMPORTS = [("image", "entities"), ("bold colour", "script"), ("html",),
               ("icon colour", "js link"), ("bare links",),
               ("heading", "newline", "bidi control", "latex")]
"""The CSV files imported: each one's bad cell and its file name join these strings.
A message shows 60 characters of a value; only "html" is longer."""
FOLDERS = ["/<b>z</b> <img src=x onerror=alert(1)> &lt;&amp;",
           "/**:red-background[PWNRED]** $x^2$ # heading",
           "/:material/home: :red[R] www.pwn.example pwn@pwn.example"]
"""Folders typed on the Real model page (none exists); the message names each. No
slash after the first, which the path would lose."""

ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
"""Invisible characters, dropped before comparing what a visitor sees."""
STRIP_ZERO_WIDTH_JS = ".replace(/[\\u200b-\\u200d\\u2060\\ufeff]/g, '')"

PAGE_NAMES = {url_path(script): label for label, (script, _) in PAGES.items()}
"""URL path -> page label."""
MODEL_PAGE = "Real_model"
LIGHT = {"Backward_pass": [("train_steps", "1")]}
"""Settings that keep a page's own work small while its text is attacked (the
Backward pass page trains for 30 steps by default, at every typed sentence)."""
WITHOUT_EMBEDDINGS = {HOME_PAGE, EXPERIMENTS_PAGE, CHECK_PAGE, MODERN_PAGE, FRONTIER_PAGE}
"""Pages with no embeddings chart. (The Check page, which has no "Your matrices"
tables either, shows the sentence only in its box while this server runs no
visitors' code; the Modern and Frontier attention pages have no such tables either.)"""


@pytest.fixture(scope="module")
def hostile_server(offline_server):
    return offline_server


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A tiny random GPT-2 in a folder, and the same model loaded here."""
    from explorer.models import load_model
    from tests.support.tiny_models import save_tiny_gpt2
    folder = save_tiny_gpt2(tmp_path_factory.mktemp("models") / "tiny-gpt2")
    return folder, load_model(str(folder))


# ---------------------------------------------------------------------------
# Watching the page
# ---------------------------------------------------------------------------
class Watch:
    """Dialogs, requests to the hostile address, finished script runs (counted
    from the websocket, see `tests.support.soak.finished_run`) and the problems found."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.problems: dict[str, str] = {}  # what was found -> where first
        self.finished = 0
        page.on("dialog", self._dialog)
        page.on("request", lambda r: self.requests.append(r.url)
                if "127.0.0.1:9" in r.url or r.url.startswith("javascript:") else None)
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _frame(self, payload) -> None:
        self.finished += finished_run(payload)

    def wait_runs(self, count: int, timeout_s: float = RUN_TIMEOUT_MS / 1000) -> None:
        """Wait until ``count`` script runs have finished. (Playwright delivers the
        frames while the page waits, so the count is read between short waits.)"""
        deadline = time.monotonic() + timeout_s
        while self.finished < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"run {count} never finished ({self.finished} did): "
                                     f"{_state(self.page)}")
            self.page.wait_for_timeout(50)

    def rerun(self, action) -> None:
        """Do ``action`` (an edit) and wait until the run it starts has finished."""
        before = self.finished
        try:
            action()
        except PlaywrightError as error:
            raise AssertionError(f"the edit failed ({str(error).splitlines()[0]}): "
                                 f"{_state(self.page)}") from error
        self.wait_runs(before + 1)

    def problem(self, where: str, text: str) -> None:
        self.problems.setdefault(text, where)

    def report(self) -> str:
        return "\n".join(f"{where}: {text}" for text, where in self.problems.items())

    def wait_for(self, where: str, js: str, arg, timeout: float = RUN_TIMEOUT_MS) -> bool:
        """Wait until ``js(arg)`` is true in the page; a problem if it never is."""
        try:
            self.page.wait_for_function(js, arg=arg, timeout=timeout)
            return True
        except PlaywrightError:
            self.problem(where, f"never true: {js.strip().splitlines()[0][:100]} with {arg!r}"
                         [:600])
            return False

    def check_inert(self, where: str) -> None:
        """Record every element made from visitor markup, dialog and request so far."""
        for found in self.page.evaluate(INERT_JS, sorted(INNER_TEXTS)):
            self.problem(where, found)
        for message in self.dialogs:
            self.problem(where, f"a script ran: dialog {message!r}")
        for url in self.requests:
            self.problem(where, f"request to {url}")
        self.dialogs.clear()
        self.requests.clear()


def _state(page: Page) -> str:
    """What the page is doing, for a message: script state, connection."""
    try:
        return page.evaluate("""() => JSON.stringify({
            state: document.querySelector("[data-testid='stApp']")
                   ?.getAttribute('data-test-script-state'),
            status: document.querySelector("[data-testid='stStatusWidget']")?.innerText})""")
    except PlaywrightError as error:
        return str(error).splitlines()[0]


INNER_TEXTS = {"z", "x", "PWNRED", ":red-background[PWNRED]", "R", "lnk", "link", "heading",
               "x^2", "alert(1)", "home"}
"""What the battery's markup would leave as an element's whole text if it were read."""

INERT_JS = """
(inner) => {
  const found = [];
  const inners = new Set(inner);
  const say = (what, e) => found.push(what + ': ' + e.outerHTML.slice(0, 160));
  const LINKS = ['href', 'xlink:href', 'src', 'srcset', 'action', 'formaction', 'poster',
                 'data', 'background', 'ping'];
  for (const e of document.querySelectorAll('*')) {
    // Links and resources: none to a script URL, the hostile address or another origin.
    for (const a of e.attributes) {
      const name = a.name.toLowerCase();
      if (name === 'style' && /url\\((?!\\s*["']?#)|127\\.0\\.0\\.1:9/i.test(a.value))
        say('style with a URL', e);
      if (!LINKS.includes(name)) continue;
      const value = a.value.trim();
      const scheme = value.replace(/[\\s\\u0000-\\u001f]/g, '').toLowerCase();
      if (/^(javascript|vbscript):/.test(scheme))
        say(name + ' to a script URL', e);
      else if (scheme.startsWith('data:')) {  // Plotly draws big heatmaps as PNG data
        if (e.closest('a, iframe, object, embed, form')) say(name + ' to a data URL', e);
      } else if (!value.startsWith('#') && /127\\.0\\.0\\.1:9\\b|pwn/i.test(value))
        say(name + ' to the hostile address', e);
      else if (name !== 'srcset') {
        try {
          const url = new URL(value, location.href);
          if (/^https?:$/.test(url.protocol) && url.origin !== location.origin)
            say(name + ' to another origin', e);
        } catch (error) { /* not a URL */ }
      }
    }
  }
  // Elements that the markup would create.
  for (const e of document.querySelectorAll('img, iframe, object, embed, video, audio'))
    say('an element no visitor text may create', e);
  for (const e of document.querySelectorAll('script'))
    if (/alert\\(/.test(e.textContent)) say('a script of the visitor', e);
  const FORMATTING = 'b, strong, em, i, a, del, s, sup, sub, h1, h2, h3, h4, h5, h6, tspan, ' +
    'annotation, span.stMarkdownColoredText, span.stMarkdownColoredBackground, ' +
    'span.stMarkdownBadge';
  for (const e of document.querySelectorAll(FORMATTING))
    if (inners.has(e.textContent.replace(/[\\u200b-\\u200d\\u2060\\ufeff]/g, '').trim()))
      say('markup of the visitor read as formatting', e);
  for (const e of document.querySelectorAll(
      '.stMarkdownColoredText, .stMarkdownColoredBackground, .stMarkdownBadge'))
    if (/PWN/.test(e.textContent)) say('a colour of the visitor', e);
  for (const e of document.querySelectorAll(
      "[data-testid='stMarkdownContainer'] [data-testid='stIconMaterial']"))
    say('an icon of the visitor', e);
  for (const e of document.querySelectorAll("[data-testid='stMarkdownContainer'] .katex"))
    if (/x\\^2/.test(e.textContent)) say('a formula of the visitor', e);
  return found;
}
"""
"""Everything in the page that visitor markup made (see the module doc)."""

ERRORS_HOLD_JS = """
(wanted) => {
  const texts = [...document.querySelectorAll("[data-testid='stAlertContentError']")]
    .map(e => e.innerText.replace(/[\\u200b-\\u200d\\u2060\\ufeff]/g, ''));
  return wanted.every(parts => texts.some(t => parts.every(p => t.includes(p))));
}
"""
"""Every wanted message is shown: for each list of parts, one error message holds
them all (as seen: invisible characters dropped)."""


def missing_in_errors(page: Page, wanted: list[list[str]]) -> list[list[str]]:
    texts = [t.translate(ZERO_WIDTH)
             for t in page.get_by_test_id("stAlertContentError").all_inner_texts()]
    return [w for w in wanted if not any(all(p in t for p in w) for t in texts)]


def check_errors(watch: Watch, where: str, wanted: list[list[str]]) -> None:
    """Each of ``wanted`` (parts of one message) shows literally in an error message."""
    if not watch.wait_for(where, ERRORS_HOLD_JS, wanted):
        watch.problem(where, f"not shown literally: {missing_in_errors(watch.page, wanted)}")


def open_page(watch: Watch, server, path: str, params: list[tuple[str, str]]) -> None:
    """Open ``path`` with the link ``params`` and wait for its first finished run."""
    watch.page.goto(f"{server.url}/{'' if path == 'Home' else path}?"
                    + urllib.parse.urlencode(params), wait_until="commit")
    watch.wait_runs(1)


def open_folder(watch: Watch, folder: str) -> None:
    """On the Real model page: choose "a local folder…" (once) and type ``folder``."""
    page, sidebar = watch.page, watch.page.get_by_test_id("stSidebar")
    box = sidebar.get_by_role("textbox", name="Folder")
    if not box.count():
        watch.rerun(lambda: choose_option(
            page, sidebar.get_by_test_id("stSelectbox").filter(has_text="Model"), "a local folder…"))
    watch.rerun(lambda: (box.fill(folder), box.press("Enter")))


# ---------------------------------------------------------------------------
# What must show literally
# ---------------------------------------------------------------------------
CHART_ROWS_JS = """
([key, want]) => {
  const gd = document.querySelector('.st-key-' + key + ' .explorer-chart');
  return !!(gd && gd.data && gd.querySelector('.main-svg') &&
            JSON.stringify(gd.data[0].y) === JSON.stringify(want));
}
"""


def check_chart_rows(watch: Watch, where: str, key: str, labels: list[str]) -> None:
    """A chart's rows: its Plotly data hold the escaped labels and its tick
    labels show them literally."""
    if not watch.wait_for(where, CHART_ROWS_JS, [key, [literal.plotly(s) for s in labels]]):
        return
    ticks = watch.page.locator(f".st-key-{key} .explorer-chart .ytick text").all_text_contents()
    strange = [t for t in ticks if t not in labels]
    if not ticks or strange:
        watch.problem(where, f"{key}'s tick labels are not the literal tokens: {strange or ticks}")


def expected_trace(path: str, sentence: str, model=None) -> Trace:
    """The trace ``path`` draws for ``sentence`` with every other setting at its default
    (the Real model page: layer 0 of ``model``)."""
    if path == MODEL_PAGE:
        from explorer.models import compute_model_trace
        return compute_model_trace(model, sentence, layer=0)
    settings = Settings(sentence=sentence, seed=int(ENTRIES["seed"].default))
    return compute_trace(settings.config(PAGE_NAMES.get(path, "")))


def explained_name(path: str, trace: Trace) -> str:
    """The name the explanation of cell (1, 0) of the scores gives that cell: on the
    Backward pass page, the cell of its gradient dL/dω (the default loss, head 0)."""
    if PAGE_NAMES.get(path) == BACKWARD_PAGE:
        from explorer.lessons.backward.gradients import backward
        from explorer.lessons.backward.loss import compute_loss
        from explorer.lessons.backward.terms import explain_gradient
        return explain_gradient(backward(trace, compute_loss(trace)), "attn_scores", 1, 0).cell
    return explain_cell(trace, "attn_scores", 1, 0).cell


def check_tokens(watch: Watch, where: str, path: str, trace: Trace,
                 explained: bool = False) -> None:
    """Wherever ``path`` shows the tokens of ``trace``, they show literally
    (``explained``: cell (1, 0) of the scores is explained, named by its tokens)."""
    page, tokens = watch.page, trace.tokens
    labels = token_labels(tokens)
    if PAGE_NAMES.get(path) not in WITHOUT_EMBEDDINGS:
        check_chart_rows(watch, where, "chart-embeddings", labels)
    if explained:
        name = explained_name(path, trace)
        watch.wait_for(where, f"""(name) => [...document.querySelectorAll('strong')].some(
                           e => e.textContent{STRIP_ZERO_WIDTH_JS} === name)""", name)
    if PAGE_NAMES.get(path) == SIMPLIFIED_PAGE:  # the query token, written out
        watch.wait_for(where, f"""(label) => [...document.querySelectorAll('h2')].some(
                           e => e.textContent{STRIP_ZERO_WIDTH_JS}.includes('“' + label + '”'))""",
                       labels[1])
    if PAGE_NAMES.get(path) == HOME_PAGE:  # the tokens table's cells in view
        watch.wait_for(where, """(tokens) => {
                           const cells = [...document.querySelectorAll(
                             "[data-testid='stDataFrame'] td[id^='glide-cell-1-']")];
                           return cells.length > 0 && cells.every(
                             e => e.textContent === tokens[Number(e.id.split('-').pop())]); }""",
                       tokens)
    if PAGE_NAMES.get(path) == EXPERIMENTS_PAGE:  # the permutation: its order and a chart
        button = page.get_by_role("radio", name="Permutation", exact=True)
        if button.get_attribute("aria-checked") != "true":
            button.click()
        watch.wait_for(where, f"""(tokens) => [...document.querySelectorAll('p')].some(e => {{
                           const text = e.textContent{STRIP_ZERO_WIDTH_JS};
                           if (!text.startsWith('Order: ')) return false;
                           const words = text.slice(7).split('Largest')[0].trim().split(' ');
                           return JSON.stringify(words.sort()) ===
                                  JSON.stringify([...tokens].sort()); }})""", tokens)
        check_chart_rows(watch, where, "exp-perm-original", labels)


def csv_file(bad_cell: str, shape: tuple[int, int] = (6, 3)) -> bytes:
    """A ``shape`` table of numbers whose cell (1, 1) is ``bad_cell``."""
    rows = [["0.5"] * shape[1] for _ in range(shape[0])]
    rows[1][1] = bad_cell
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


def upload_csv(watch: Watch, expander, where: str, name: str, data: bytes) -> None:
    """Give the expander's uploader the file ``name`` and wait for its run. The
    browser's upload itself can fail on a loaded machine (the chip shows
    Streamlit's error icon and no run reads the file): then it is given once
    more, and a second failure is a problem."""
    upload = expander.locator("input[type='file']").first
    for _ in range(2):
        watch.rerun(lambda: upload.set_input_files(files=[
            {"name": name, "mimeType": "text/csv", "buffer": data}]))
        spinner = expander.get_by_test_id("stFileChipIconSpinner")
        spinner.first.wait_for(state="detached", timeout=RUN_TIMEOUT_MS)
        failed = expander.get_by_test_id("stFileChipIconError")
        if not failed.count():
            return
    watch.problem(where, "the upload failed twice: "
                  f"{expander.get_by_test_id('stFileChip').first.inner_text()!r}")


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", list(PAGE_NAMES))
def test_link_values_csv_files_and_folders_are_inert(hostile_server, page: Page, path: str):
    watch = Watch(page)
    bad = (MODEL_BAD_VALUES + [(k, v) for k, v in BAD_VALUES if k != "preset"]
           if path == MODEL_PAGE else BAD_VALUES)
    params = ([] if path == MODEL_PAGE else [("embedding", "given")]) + bad + [
        (name, "1") for name in UNKNOWN_NAMES] + LIGHT.get(path, [])
    open_page(watch, hostile_server, path, params)
    check_errors(watch, "link values", [[key, shown(value)] for key, value in bad]
                 + [[shown(name)] for name in UNKNOWN_NAMES])
    watch.check_inert("link values")

    if path == MODEL_PAGE:
        for folder in FOLDERS:
            where = f"folder {folder!r}"
            open_folder(watch, folder)
            check_errors(watch, where, [[folder[1:]]])
            watch.check_inert(where)
        assert not watch.problems, watch.report()
        return
    if PAGE_NAMES[path] in (CHECK_PAGE, MODERN_PAGE, FRONTIER_PAGE):  # no "Your matrices"
        assert not watch.problems, watch.report()
        return

    expander = page.get_by_test_id("stExpander").filter(has_text="Your matrices")
    for labels in CSV_IMPORTS:
        text = " ".join(BATTERY[label] for label in labels)
        where, name = f"CSV file ({', '.join(labels)})", f"{text}.csv"
        upload_csv(watch, expander, where, name, csv_file(text))
        check_errors(watch, where, [["cell B2 (row 2, column 2)", shown(text.strip())]])
        if where in watch.problems.values():  # for the report: what the uploader shows
            chips = expander.get_by_test_id("stFileChips").first.inner_text()
            watch.problem(where, f"the uploader shows {chips!r} ({_state(page)})")
        titles = [c.get_attribute("title") for c in expander.get_by_test_id("stFileChipName").all()]
        if titles != [name]:
            watch.problem(where, f"the file {name!r} is shown as {titles!r}")
        watch.check_inert(where)
    assert not watch.problems, watch.report()


@pytest.mark.parametrize("path", list(PAGE_NAMES))
def test_sentences_and_the_explained_cell_are_inert(hostile_server, page: Page, path: str,
                                                    request):
    watch = Watch(page)
    model = None
    if path == MODEL_PAGE:  # a tiny model's byte-level tokens: a shorter sentence by link
        folder, model = request.getfixturevalue("tiny_gpt2")
        first = TYPED_SENTENCES[0]
        open_page(watch, hostile_server, path, [("sentence", first)])
        open_folder(watch, str(folder))
    else:
        first = URL_SENTENCE
        open_page(watch, hostile_server, path, [("sentence", first), *LIGHT.get(path, [])])
    trace = expected_trace(path, first, model)
    check_tokens(watch, "sentence by link", path, trace)
    watch.check_inert("sentence by link")
    explained = page.locator(".st-key-chart-attn_scores").count() > 0
    if explained:  # cell (row 1, column 0); Playwright clicks once the plot is stable
        area = page.locator(".st-key-chart-attn_scores .explorer-chart .nsewdrag").first
        area.scroll_into_view_if_needed()
        size, n = area.bounding_box(), trace.n_tokens
        watch.rerun(lambda: area.click(position={"x": size["width"] * 0.5 / n,
                                                 "y": size["height"] * 1.5 / n}))
        check_tokens(watch, "explained cell", path, trace, explained)
        watch.check_inert("explained cell")
    box = page.get_by_test_id("stSidebar").get_by_role("textbox", name="Sentence")
    for sentence in TYPED_SENTENCES:
        if sentence == first:
            continue
        where = f"typed sentence {sentence!r}"
        watch.rerun(lambda: (box.fill(sentence), box.press("Enter")))
        check_tokens(watch, where, path, expected_trace(path, sentence, model), explained)
        watch.check_inert(where)
    assert not watch.problems, watch.report()
