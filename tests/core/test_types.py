"""The type checker's verdict on the compute core and the figures (pyproject.toml's
[tool.mypy]): a reader of a trace uses only what `explorer.core.config.TraceConfig`
declares, and every step function reads both the book's config and a real model's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def test_core_and_render_type_check():
    result = _mypy()  # the files of pyproject.toml's [tool.mypy]
    assert result.returncode == 0, result.stdout[-4000:]


def test_reading_what_the_protocol_does_not_declare_is_an_error(tmp_path):
    """The check can fail: a reader of ``trace.config`` that asks for the book's
    ``mask_seed`` (a real model's layer has none) is refused."""
    reader = tmp_path / "reader.py"
    reader.write_text(textwrap.dedent("""
        from explorer.core.trace import Trace

        def seed_of(trace: Trace) -> int:
            return trace.config.mask_seed
        """))
    result = _mypy("--follow-imports=silent", "--ignore-missing-imports", str(reader))
    assert result.returncode == 1
    assert '"TraceConfig" has no attribute "mask_seed"' in result.stdout
