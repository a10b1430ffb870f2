"""Charts as data: a Plotly figure whose matrices travel as float32 bytes.

A `Chart` is what every page, the standalone report and the benchmark draw:
a Plotly figure as a dict, whose heatmap traces name a matrix block
(``{"matrix": {"block": i, ...}}``) instead of holding ``z``, plus the
blocks. `encode` packs it for the chart modules (``explorer/render/chart/``), which draw it in the
browser (attaching the matrices, choosing the cell text from the real cell
size, reporting clicks); `decode` reads a payload back (tests do).

Payload: uint32 header length (little-endian), the header as UTF-8 JSON, zero
padding to a multiple of 4, then the float32 bytes of every block the
receiver does not hold yet (each block is named by `matrix_hash`).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import sys
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CHART_DIR = Path(__file__).with_name("chart")
"""The browser side, as ES modules (``chart.js`` the entry): draws a payload with Plotly.js."""
CHART_JS = Path(__file__).resolve().parents[2] / "static" / "explorer-chart.js"
"""The modules of `CHART_DIR` as one module (`chart_script`), committed: what the
app serves (Streamlit's static serving), the report inlines and the benchmark's
floor page loads. ``python -m explorer.render.payload`` writes it again."""

_IMPORT = re.compile(r'^(import|export) (\{[^}]*\})\s*from "\./([\w-]+\.js)";\n', re.M)
_DECLARED = re.compile(r"^(?:export )?(?:default )?(?:async )?(?:function\*?|const|let|class) "
                       r"(\w+)", re.M)


def chart_script(entry: str = "chart.js") -> str:
    """The modules of `CHART_DIR` reachable from ``entry`` as one ES module, each
    module once and after those it imports: their ``import``s dropped (every
    module's top-level names share one scope, so each is declared once) and
    ``export`` kept only in the entry (its re-exports become plain exports).
    Raises ``ValueError`` when two modules declare the same top-level name."""
    order: list[str] = []
    sources: dict[str, str] = {}

    def visit(name: str) -> None:
        if name in sources:
            return
        sources[name] = (CHART_DIR / name).read_text(encoding="utf-8")
        for match in _IMPORT.finditer(sources[name]):
            visit(match[3])
        order.append(name)

    visit(entry)
    parts: list[str] = []
    declared: dict[str, str] = {}
    for name in order:
        text = sources[name]
        for declaration in _DECLARED.findall(text):
            if declaration in declared:
                raise ValueError(f"{declaration} is declared by both {declared[declaration]} "
                                 f"and {name}: the modules share one scope in the bundle")
            declared[declaration] = name
        if name == entry:
            text = _IMPORT.sub(lambda m: f"export {m[2]};\n" if m[1] == "export" else "", text)
        else:
            text = re.sub(r"^export (?=async |function|const|let|class)", "",
                          _IMPORT.sub("", text), flags=re.M)
        parts.append(f"// ---- {name} ----\n{text}")
    return ("// The explorer's chart modules (explorer/render/chart/) as one: built by "
            "`python -m explorer.render.payload`; do not edit.\n" + "\n".join(parts))


@dataclass
class Chart:
    """A figure ready to send: ``figure`` is a Plotly figure as a dict, whose
    heatmap traces name their matrix as ``{"matrix": {"block": i, ...}}``
    instead of holding ``z``; ``matrices[i]`` are those matrices (2-D float32).
    ``filename`` names image downloads; ``size`` (optional) tells the browser
    how tall to make the chart for its width, and its ``narrower`` list the
    layouts to take below given widths (`explorer.render.figures.heads_grid_chart`);
    ``clickable`` sends clicks back;
    ``columns`` is how many charts share the page's row.

    What lets the browser follow the learner without the server (``explorer/render/chart/``):
    ``marks`` says what the chart outlines for the page's view, a step chart's
    step, head, whether its rows are tokens (the query row is outlined), and
    the first column it shows of its step (`explorer.render.figures.heatmap_chart`);
    ``view`` is the page's view when it was built, ``{"query", "cell",
    "head"}``; ``heads`` holds every head's variant of a per-head chart (its
    matrix block, title, colour range, frame colour ...), so that the page
    switches heads by itself; ``lines`` offers the weights as lines under the
    heatmap (`explorer.render.figures.lines_spec`), drawn in the browser."""

    figure: dict[str, Any]
    matrices: list[np.ndarray] = field(default_factory=list)
    filename: str = "chart"
    size: dict[str, int] | None = None
    clickable: bool = False
    columns: int = 1
    marks: dict[str, Any] | None = None
    view: dict[str, Any] | None = None
    heads: list[dict[str, Any]] | None = None
    lines: dict[str, Any] | None = None
    _hashes: list[str] | None = field(default=None, init=False, repr=False, compare=False)

    def hashes(self) -> list[str]:
        """The `matrix_hash` of each matrix, computed once (a change to
        ``matrices`` sets ``_hashes`` back to None)."""
        if self._hashes is None:
            self._hashes = [matrix_hash(m) for m in self.matrices]
        return self._hashes

    def header(self, plotly_url: str | None = None) -> dict[str, Any]:
        out = {"figure": self.figure, "filename": self.filename, "size": self.size,
               "clickable": self.clickable, "columns": self.columns, "plotly": plotly_url}
        for name in ("marks", "view", "heads", "lines"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


def matrix_hash(values: np.ndarray) -> str:
    """The content hash that names a matrix between server and page."""
    return hashlib.blake2b(np.ascontiguousarray(values, dtype="<f4").tobytes(),
                           digest_size=12).hexdigest()


def encode(chart: Chart, known: Set[str] = frozenset(), plotly_url: str | None = None) -> bytes:
    """The payload the chart modules decode (``explorer/render/chart/decode.js``), leaving out the blocks whose hash is
    in ``known`` (the page holds them)."""
    blocks, data = [], []
    for values, digest in zip(chart.matrices, chart.hashes()):
        values = np.ascontiguousarray(values, dtype="<f4")
        blocks.append({"rows": values.shape[0], "cols": values.shape[1], "hash": digest,
                       "cached": digest in known})
        if digest not in known:
            data.append(values.tobytes())
    header = json.dumps({**chart.header(plotly_url), "blocks": blocks}, allow_nan=False,
                        separators=(",", ":")).encode()
    padding = b"\0" * ((4 - len(header) % 4) % 4)
    return struct.pack("<I", len(header)) + header + padding + b"".join(data)


def decode(payload: bytes, known: dict[str, np.ndarray] | None = None
           ) -> tuple[dict[str, Any], list[np.ndarray | None]]:
    """The header and matrices of a payload. A block left out (sent earlier)
    comes from ``known`` (by hash), else None; full blocks are added to it."""
    (length,) = struct.unpack_from("<I", payload)
    header = json.loads(payload[4:4 + length])
    offset = 4 + length + (4 - length % 4) % 4
    matrices: list[np.ndarray | None] = []
    for block in header["blocks"]:
        if block["cached"]:
            matrices.append((known or {}).get(block["hash"]))
            continue
        n = block["rows"] * block["cols"]
        values = np.frombuffer(payload, dtype="<f4", count=n, offset=offset)
        values = values.reshape(block["rows"], block["cols"])
        matrices.append(values)
        offset += 4 * n
        if known is not None:
            known[block["hash"]] = values
    return header, matrices


if __name__ == "__main__":  # python -m explorer.render.payload: write static/explorer-chart.js again
    CHART_JS.write_text(chart_script(), encoding="utf-8")
    sys.stdout.write(f"wrote {CHART_JS}\n")
