"""The server's settings: every ``EXPLORER_*`` environment variable, read here once,
at import, by one rule each.

- A switch is on when its value is ``1``, ``true``, ``yes`` or ``on`` (any case,
  spaces around ignored); unset, empty or anything else leaves it off.
- A number must parse as a positive number; anything else stops the server at
  start with a message naming the variable.

| variable | kind | default | read by |
|---|---|---|---|
| ``EXPLORER_MEMORY_BUDGET_MB`` | number (MiB) | 1024 | `explorer.server.budget` |
| ``EXPLORER_MODEL_FOLDERS`` | switch | off | `explorer.server.budget` (the Real model page's folders) |
| ``EXPLORER_RUN_CODE`` | switch | off | `explorer.checker.sandbox` (the Check page runs pasted code) |
"""

from __future__ import annotations

import os

ON = ("1", "true", "yes", "on")
"""The values that turn a switch on (any case)."""


def switch(name: str) -> bool:
    """Whether the environment turns switch ``name`` on (a value in `ON`)."""
    return os.environ.get(name, "").strip().lower() in ON


def number(name: str, default: float) -> float:
    """The positive number in variable ``name``, or ``default`` when it is unset
    or empty. Raises ValueError naming the variable for anything else."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be a positive number (got {raw[:40]!r})")
    return value


MEMORY_BUDGET_MB = number("EXPLORER_MEMORY_BUDGET_MB", 1024)
"""The whole server's resident-memory budget in MiB (`explorer.server.budget`)."""
MODEL_FOLDERS = switch("EXPLORER_MODEL_FOLDERS")
"""Whether the Real model page offers to open a local folder holding a GPT-2 or
BERT checkpoint; off by default, so that a public server reads no path its
visitors type."""
RUN_CODE = switch("EXPLORER_RUN_CODE")
"""Whether the "Check your code" page runs visitors' code (`explorer.checker.sandbox`),
in bubblewrap's box (`explorer.checker.box`; the page stays off, saying why, where the
box cannot be made). The box shares the server's kernel: on a public server, run the
app itself in a container or VM as well."""
