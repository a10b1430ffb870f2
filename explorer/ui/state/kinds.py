"""Kinds: an entry's type, how a link writes and reads its value, and its bounds.

Each `Kind` parses a link's text (raising `explorer.core.config.ConfigError` with a
message that says what is allowed) and writes a value back as text; the
bounds come from `explorer.core.config`. Pure Python and numpy: no streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from explorer.core import config as cfg
from explorer.core import literal
from explorer.core.config import ConfigError, parse_field, shown
from explorer.core.steps import STEPS


class Kind:
    """How an entry's value is read from a link (`parse`, raising `ConfigError`
    with a message that says what is allowed) and written into one (`text`)."""

    def parse(self, name: str, raw: str) -> Any:
        raise NotImplementedError

    def text(self, value: Any) -> str:
        return str(value)


def _whole(name: str, raw: str, low: int, high: int | None = None) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(name, f"{name} must be a whole number (got {shown(raw)})") from None
    if value < low or (high is not None and value > high):
        allowed = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(name, f"{name} must be {allowed} (got {value})")
    return value


@dataclass(frozen=True)
class Number(Kind):
    """A whole number in ``[low, high]``; ``field`` names the config field whose
    bounds and messages it uses (then ``low`` and ``high`` come from there).
    Every number is bounded on both sides: one declared without ``field`` or
    ``high`` is a mistake, raised as ``ValueError`` when it is declared."""

    field: str | None = None
    low: int = 0
    high: int | None = None
    step: int = 1

    def __post_init__(self) -> None:
        if self.field is None and self.high is None:
            raise ValueError("a Number needs an upper bound: give high or field")

    @property
    def bounds(self) -> tuple[int, int | None]:
        return cfg.int_bounds(self.field) if self.field else (self.low, self.high)

    def parse(self, name: str, raw: str) -> int:
        if self.field:
            return parse_field(self.field, raw)
        return _whole(name, raw, self.low, self.high)


@dataclass(frozen=True)
class Text(Kind):
    """Text as typed. ``field``: a config field whose rules a link's text and
    the widget's must meet (the seed is a whole number, the sentence at most
    20,000 characters: a longer paste arrives whole and gets the field's
    message); ``optional``: the empty text is allowed too (no dropout seed)."""

    field: str | None = None
    optional: bool = False
    placeholder: str | None = None

    def parse(self, name: str, raw: str) -> str:
        if self.field and not (self.optional and not raw.strip()):
            parse_field(self.field, raw)
        return raw


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``options`` (texts), the values a link may give. ``labels``
    names them for people; ``aliases`` are older spellings a link may still
    use; ``also`` says what else the widget offers that no link gives (a
    local folder)."""

    options: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    also: str = ""

    def label(self, option: str) -> str:
        return self.labels.get(option, option)

    def parse(self, name: str, raw: str) -> str:
        value = self.aliases.get(raw, raw)
        if value not in self.options:
            allowed = ", ".join(o for o in self.options if o) or "none"
            also = f"; {self.also}" if self.also else ""
            raise ConfigError(name, f"{name} must be one of {allowed}{also} (got {shown(raw)})")
        return value


@dataclass(frozen=True)
class Flag(Kind):
    """On or off; ``true`` or ``false`` in a link."""

    def parse(self, name: str, raw: str) -> bool:
        word = str(raw).strip().lower()
        if word not in ("true", "false"):
            raise ConfigError(name, f"{name} must be true or false (got {shown(raw)})")
        return word == "true"

    def text(self, value: Any) -> str:
        return "true" if value else "false"


@dataclass(frozen=True)
class Steps(Kind):
    """One of a few numbers (a slider's stops)."""

    options: tuple[float, ...]

    def parse(self, name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = None
        found = [o for o in self.options if value is not None and o == value]
        if not found:
            allowed = ", ".join(f"{o:g}" for o in self.options)
            raise ConfigError(name, f"{name} must be one of {allowed} (got {shown(raw)})")
        return found[0]

    def text(self, value: Any) -> str:
        return f"{value:g}"


@dataclass(frozen=True)
class Fraction(Kind):
    """A number in ``[0, high]`` in steps of ``step``, checked as the config
    field ``field`` (the dropout slider offers less than the backend allows)."""

    field: str
    high: float
    step: float

    def parse(self, name: str, raw: str) -> float:
        value = parse_field(self.field, raw)
        if value > self.high:
            raise ConfigError(name, f"{name} must be at most {self.high:g} here (got {shown(raw)})")
        return value

    def text(self, value: Any) -> str:
        return f"{value:g}"


@dataclass(frozen=True)
class Index(Kind):
    """A 0-based position (a token, a head, a layer), whose upper bound comes
    from the page's trace or model (`Entry.allowed`, checked by `resolve`)."""

    def parse(self, name: str, raw: str) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ConfigError(name, f"{name} must be a whole number, 0-based "
                                    f"(got {shown(raw)})") from None
        if value < 0:
            raise ConfigError(name, f"{name} must be at least 0 (got {value})")
        return value


@dataclass(frozen=True)
class CellRef(Kind):
    """The explained cell: ``(step, row, col, head)``, written ``step:row,col``
    (its head is the link's ``head``); bounded by `resolve`."""

    def parse(self, name: str, raw: str) -> tuple[str, int, int, int]:
        step, _, where = raw.partition(":")
        row, _, col = where.partition(",")
        if step not in STEPS:
            raise ConfigError(name, f"{name} must name a step such as attn_scores:1,0 "
                                    f"(got {shown(raw)})")
        return step, Index().parse(name, row), Index().parse(name, col), 0

    def text(self, value: Any) -> str:
        return f"{value[0]}:{value[1]},{value[2]}"


@dataclass(frozen=True)
class Pair(Kind):
    """Two 0-based positions, a cell's row and column, written ``row,col``
    (its bounds are checked by the page that draws the cell)."""

    def parse(self, name: str, raw: str) -> tuple[int, int]:
        row, comma, col = str(raw).partition(",")
        if not comma:
            raise ConfigError(name, f"{name} must be a row and a column such as 3,1 "
                                    f"(got {shown(raw)})")
        return Index().parse(name, row), Index().parse(name, col)

    def text(self, value: Any) -> str:
        return f"{value[0]},{value[1]}"


@dataclass(frozen=True)
class ChartCell(Kind):
    """A clicked cell of one of ``charts``, ``(chart, row, col)`` as the chart
    numbers it, written ``chart:row,col`` (bounded by the page that draws it)."""

    charts: tuple[str, ...] = ()

    def parse(self, name: str, raw: str) -> tuple[str, int, int]:
        chart, colon, where = str(raw).partition(":")
        if not colon or chart not in self.charts:
            raise ConfigError(name, f"{name} must name a chart and a cell such as "
                                    f"{self.charts[0]}:1,0; the charts are "
                                    f"{', '.join(self.charts)} (got {shown(raw)})")
        return (chart, *Pair().parse(name, where))

    def text(self, value: Any) -> str:
        return f"{value[0]}:{value[1]},{value[2]}"


@dataclass(frozen=True)
class MatrixKind(Kind):
    """A hand-entered matrix, held as a float array (NaN: an empty cell);
    written ``0.43,0.15;0.55,0.87``: rows split by ``;``, cells by ``,``,
    each number the shortest text that reads back as the same float32."""

    def parse(self, name: str, raw: str) -> np.ndarray:
        rows = []
        for i, row in enumerate(raw.split(";")):
            cells = []
            for j, cell in enumerate(row.split(",")):
                try:
                    cells.append(float(cell))
                except ValueError:
                    raise ConfigError(name, f"{name}: row {i}, column {j} of the link is not a "
                                            f"number (got {shown(cell)})") from None
            rows.append(cells)
        if len({len(r) for r in rows}) > 1:
            raise ConfigError(name, f"{name}: the link's rows have different lengths")
        return np.array(rows, dtype=np.float64)

    def text(self, value: Any) -> str:
        rows = np.asarray(value, dtype=np.float32)
        return ";".join(",".join(literal.float32_text(v) for v in row) for row in rows)
