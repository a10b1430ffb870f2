"""MkDocs hook: a name in a docstring's backticks becomes a link to its API entry.

The docstrings name the package's objects as reST does, `explorer.core.trace.compute_trace`
or just `compute_trace`, which Markdown renders as code. On the API pages this
hook wraps each such code span in an optional cross-reference for mkdocs-autorefs
(the same element mkdocstrings writes for a signature's types): a full path, or a
name that ends exactly one public object's path in the package (read by griffe, as
mkdocstrings reads it). Optional: a name with no page of its own (a UI module, a
local variable) stays plain code, with no warning.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from functools import cache

import griffe

CODE = re.compile(r"<code>([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)</code>")
"""An inline code span that holds a (dotted) Python name and nothing else."""
PACKAGE = "explorer"


@cache
def _paths() -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """Every public object's full path, and each dotted suffix -> the paths it ends."""
    root = griffe.load(PACKAGE, search_paths=["."], resolve_aliases=False)
    paths: set[str] = set()

    def visit(obj) -> None:
        paths.add(obj.path)
        for name, member in obj.members.items():
            if name.startswith("_") or member.is_alias:
                continue
            visit(member)

    visit(root)
    ends: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        parts = path.split(".")
        for i in range(1, len(parts)):
            ends[".".join(parts[i:])].append(path)
    return frozenset(paths), {suffix: tuple(found) for suffix, found in ends.items()}


def identifier(name: str) -> str | None:
    """The full path ``name`` stands for, or None (unknown, or ambiguous)."""
    paths, ends = _paths()
    if name in paths:
        return name
    found = ends.get(name, ())
    return found[0] if len(found) == 1 else None


def link_names(content: str) -> str:
    """``content`` (a page's HTML) with every code span naming one object wrapped
    in an optional autorefs cross-reference."""
    def wrap(match: re.Match) -> str:
        target = identifier(match[1])
        if target is None:
            return match[0]
        return f'<autoref identifier="{html.escape(target)}" optional>{match[0]}</autoref>'
    return CODE.sub(wrap, content)


def on_page_content(html_content: str, page, **kwargs) -> str:
    """MkDocs event: on the API reference's pages, link the docstrings' names."""
    if not page.file.src_path.startswith("api/"):
        return html_content
    return link_names(html_content)
