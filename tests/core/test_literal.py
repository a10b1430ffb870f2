"""Visitor text stays text: `explorer.core.literal` for Markdown, Plotly and HTML."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.core import literal

HOSTILE = [
    "a ![PWNIMG](http://127.0.0.1:9/pwn.png)", "**:red-background[PWNRED]**",
    ":material/home: :smile:", "<b>z</b> <img src=x onerror=alert(1)>", "$x^2$ $$y$$",
    "# heading\n- item\n    code", "[link](javascript:alert(1))", "a\\", "&amp; &lt;",
    "`code` ~~strike~~ _em_", "line\u2028break\rcarriage", "\u202eevil",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_escapes_every_markup_character_and_line_break(text):
    escaped = literal.markdown(text)
    assert "\n" not in escaped and "\r" not in escaped and "\u2028" not in escaped
    # Every punctuation mark Markdown or a directive could read is preceded by a backslash.
    for match in re.finditer(r"[\[\]()*_:$<>#`!~&\\-]", escaped):
        before = escaped[: match.start()]
        backslashes = len(before) - len(before.rstrip("\\"))
        assert backslashes % 2 == 1 or match.group() == "\\", (text, escaped)


@given(st.text())
def test_markdown_removes_only_backslashes_and_line_breaks_when_read_back(text):
    # CommonMark reads "\x" as "x": undoing the escapes gives the text, line breaks as spaces.
    unescaped = re.sub(r"\\(.)", r"\1", literal.markdown(text)).replace(literal.WORD_JOINER, "")
    assert unescaped == re.sub(r"[\r\n\v\f\x85\u2028\u2029]+", " ", text).replace(
        literal.WORD_JOINER, "")


@pytest.mark.parametrize("address", ["www.pwn.example", "WWW.pwn.example", "pwn@pwn.example",
                                     "http://127.0.0.1:9/", "HTTPS://x.example", "mailto:x"])
def test_bare_addresses_get_a_word_joiner_where_markdown_would_start_a_link(address):
    # Streamlit's Markdown links www., scheme: and x@y after reading escapes; a word
    # joiner before "." (after www), ":" and "@" stops it (checked in Chromium in
    # tests/browser/test_hostile.py).
    read = re.sub(r"\\(.)", r"\1", literal.markdown(f"see {address} now"))
    assert not re.search(r"(?i)www\.|[a-z0-9]@|[a-z]:", read), read
    assert read.replace(literal.WORD_JOINER, "") == f"see {address} now"


def test_plotly_and_html_escape_tags_and_entities():
    assert literal.plotly("<b>x</b> & <a href='y'>") == "&lt;b&gt;x&lt;/b&gt; &amp; &lt;a href='y'&gt;"
    assert literal.html('"><script>') == "&quot;&gt;&lt;script&gt;"


def test_a_comment_cannot_end_early_and_is_cut_where_asked():
    text = "a\nimport os\r\x0c\u2028b\ud800"
    assert literal.comment(text) == "a\\nimport os\\r\\x0c\\u2028b\\ud800"
    assert "\n" not in literal.comment(text) and literal.comment(text).isprintable()
    assert literal.comment("x" * 10, 4) == "xxxx..." and literal.comment("xyz", 4) == "xyz"
