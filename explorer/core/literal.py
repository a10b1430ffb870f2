"""Visitor text shown as text: the one place that escapes it, per output.

Anything a visitor controls (the sentence, its tokens, CSV cells, file names,
URL values echoed in messages) reaches three renderers that would otherwise
read it as markup:

- Streamlit Markdown (``st.markdown``, headings, captions, ``st.error``...):
  Markdown, ``:red[...]`` directives, ``:material/...:`` icons, ``$math$``;
- Plotly text (titles, tick labels, hover, cell text): pseudo-HTML such as
  ``<b>``, ``<a href>``, ``<br>`` and entities;
- HTML (the standalone report);
- a generated script's ``#`` comments (the page's link, labels): `comment`.

Each function returns text that renders as exactly the characters given (for
HTML, lone surrogates, which no page can hold, as their escapes: `encodable`).
Every caller goes through this module, never its own escaping. Numbers that
must read back exactly (links, CSV, generated code) are written by
`float32_text`.
"""

from __future__ import annotations

import html as _html
import math
import re

import numpy as np

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'^%@/])")
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
_AUTOLINK_STARTS = re.compile(r"(?i)(?<=www)(?=\.)|(?=[@:])")
"""Where GitHub-flavoured Markdown starts a link by itself: ``www.``, ``http:``
and ``x@y``. Streamlit links these after reading the escapes, so backslashes
cannot stop them; an invisible word joiner (U+2060) there does."""
WORD_JOINER = "\u2060"
_SURROGATES = re.compile("[\ud800-\udfff]")
"""Surrogate code points: text holding one alone cannot be written as UTF-8."""


def markdown(text: str) -> str:
    """``text`` for Streamlit Markdown, shown literally on one line.

    Every ASCII punctuation mark that Markdown, a Streamlit directive, an
    emoji or icon short code or LaTeX could read gets a backslash (CommonMark
    turns ``\\x`` back into ``x``), and line breaks become spaces, so a
    visitor's text can start no heading, list or code block. An invisible
    word joiner before ``@`` and ``:`` and after ``www`` keeps bare addresses
    from becoming links.
    """
    text = _AUTOLINK_STARTS.sub(WORD_JOINER, _LINE_BREAKS.sub(" ", str(text)))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def plotly(text: str) -> str:
    """``text`` for Plotly, which renders a subset of HTML in every label:
    ``<b>``, ``<a href=...>`` and ``&amp;`` must show as those characters."""
    return _html.escape(str(text), quote=False)


def encodable(text: str) -> str:
    """``text`` with each surrogate code point (U+D800 to U+DFFF, which a
    visitor can send but no UTF-8 file can hold) written as its Python escape,
    ``\\ud800``, as the generated script's comments write it; other text unchanged."""
    return _SURROGATES.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"),
                           str(text))


def comment(text: str, limit: int | None = None) -> str:
    """``text`` made safe for a one-line ``#`` comment of a generated script:
    every character that is not printable (newlines, form feeds, U+2028, lone
    surrogates ...) is written as its backslash escape, so the comment cannot
    end early. ``limit`` cuts it to that many characters, marked with ``...``."""
    safe = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in str(text))
    if limit is not None and len(safe) > limit:
        safe = safe[:limit] + "..."
    return safe


def html(text: str) -> str:
    """``text`` for an HTML page, element content or a quoted attribute, and
    encodable as UTF-8 (see `encodable`: a lone surrogate shows as ``\\ud800``)."""
    return _html.escape(encodable(text), quote=True)


def float32_text(value: float) -> str:
    """The shortest text that reads back as the same float32: ``0.1``,
    ``-1.1925``, ``1e-07``, ``-inf``, ``nan`` (numpy's shortest round-trip
    digits). Finite values are valid Python literals too."""
    return str(np.float32(value))


def format_value(value: float, decimals: int = 4) -> str:
    """A number as the explorer writes it everywhere (cells, tables, the written
    explanations, the check's report): ``decimals`` decimals (an exponent from
    10⁶ on), the minus sign U+2212, −∞, +∞ and NaN spelled out, and no
    "−0.0000": a value that rounds to zero is written without a sign."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "−∞" if value < 0 else "+∞"
    text = f"{value:.{decimals}e}" if abs(value) >= 1e6 else f"{value:.{decimals}f}"
    if text.startswith("-") and not any(c in "123456789" for c in text.split("e")[0]):
        text = text[1:]  # -0.0000
    return text.replace("-", "−")
