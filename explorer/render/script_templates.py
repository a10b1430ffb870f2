"""The downloadable scripts' text, as template files that are Python themselves.

Each template in ``explorer/render/scripts/`` (``attention.py``,
``modern_attention.py``, ...; a folder of files, not a package) is a valid
Python file, so that ``ruff check`` and ``python -m py_compile`` check it
(tests/render/test_script_templates.py). It holds named blocks of lines; a
line ``#@ name`` (at the start of a line) opens the block ``name``, which runs
to the next such line. The text before the first block describes the template
and is never written out. Blocks hold slots, ``__NAME__`` (upper case between
double underscores, so a Python name where a value or a piece of code goes,
and distinct from Python's own ``__init__``, ``__name__``): the code that
writes a script (`explorer.render.export.pytorch_script`, ...) chooses the
blocks for its settings and fills their slots (`ScriptTemplate.fill`).

- `template(name)`: the template file ``name`` as its blocks.
- `ScriptTemplate`: one block, `string.Template` with ``__NAME__`` slots.

A value is put in as it is and never read again for slots, so visitor text
that looks like a slot stays text; the code that writes a script makes it safe
to put there (a ``repr()`` literal or a one-line comment,
`explorer.core.literal`).
"""

from __future__ import annotations

import re
import string
from functools import cache
from pathlib import Path

FOLDER = Path(__file__).parent / "scripts"
"""Where the templates are: beside this module, so any checkout or image finds them
(``.dockerignore`` lets ``explorer/`` in whole)."""

BLOCK = re.compile(r"^#@ (?P<name>[a-z0-9_]+)\n", re.MULTILINE)
"""A line opening a block."""

SLOT = re.compile(r"__(?P<name>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)__")
"""A slot, ``__NAME__``."""


class ScriptTemplate(string.Template):
    """One block of a script template: `string.Template` with ``__NAME__`` slots.

    ``fill(**values)`` puts each value in its slot (``shape_x="(6, 2)"`` fills
    ``__SHAPE_X__``) and raises ``KeyError`` naming a slot left without a value;
    values for slots the block does not have are ignored."""

    flags = re.RegexFlag(0)  # case matters: __init__ is Python's, __INIT__ a slot
    # a string: Template compiles it with its flags (typeshed types it compiled)
    pattern = rf"""
        (?P<escaped>(?!))            # no escape: nothing else looks like a slot
        | {SLOT.pattern.replace("(?P<name>", "(?P<named>")}
        | (?P<braced>(?!))
        | (?P<invalid>(?!))"""  # type: ignore[assignment]

    def fill(self, **values: object) -> str:
        return self.substitute({name.upper(): value for name, value in values.items()})


@cache
def template(name: str) -> dict[str, ScriptTemplate]:
    """The template file ``name`` (e.g. ``"attention"``) as ``{block name: block}``,
    in the file's order; each block's text without its leading and trailing
    blank lines. Raises ``ValueError`` for a block name used twice."""
    text = (FOLDER / f"{name}.py").read_text(encoding="utf-8")
    parts = BLOCK.split(text)[1:]  # the text before the first block describes the file
    blocks: dict[str, ScriptTemplate] = {}
    for block, body in zip(parts[::2], parts[1::2]):
        if block in blocks:
            raise ValueError(f"the template {name}.py has two blocks named {block!r}")
        blocks[block] = ScriptTemplate(body.strip("\n"))
    return blocks


def slots(name: str) -> set[str]:
    """Every slot name of the template file ``name`` (``"SHAPE_X"``, ...)."""
    return {slot for block in template(name).values()
            for slot in SLOT.findall(block.template)}
