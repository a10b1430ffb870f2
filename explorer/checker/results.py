"""A check's result as it crosses a process boundary: bounded and validated.

A boxed check (`explorer.checker.sandbox.check_source`) sends its
`explorer.checker.report.CheckReport` or `explorer.checker.report.CheckFailure`
back as JSON. That text comes from a process that ran a stranger's code, so
nothing in it is trusted:

- it is read to at most `MAX_RESULT_BYTES` (more is refused, never kept);
- every text in it is cut to `MAX_TEXT_CHARS` (`cut`), so a 30 MB error
  message arrives, and is cached, as a few kilobytes;
- it must have the shape of the dataclasses exactly (`parse`): the keys they
  declare and no other, numbers as numbers (or the strict-JSON texts
  ``"Infinity"``, ``"-Infinity"``, ``"NaN"`` that `explorer.core.trace.json_safe`
  writes), a failure's ``kind`` one of `FAILURES`, a step's status one of
  `explorer.checker.verdicts.SYMBOLS`.

Showing it is still the page's business: every text goes through
`explorer.core.literal` or ``st.text``, never as Markdown.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from typing import Any

from explorer.checker.report import CheckFailure, CheckReport
from explorer.checker.verdicts import SYMBOLS

MAX_RESULT_BYTES = 8 * 2**20
"""The largest result a check may send back (its JSON, in bytes)."""
MAX_TEXT_CHARS = 4000
"""The longest text kept from a result (a message, a traceback, a label)."""
MAX_ITEMS = 100_000
"""The longest list kept from a result (steps, rows, cells)."""

FAILURES = {"syntax": "a syntax error", "source": "an error running the file",
            "__init__": "an error building the class", "forward": "an error in forward",
            "module": "its weights were not found", "inputs": "the inputs do not fit",
            "sentence": "the sentence does not fit", "timeout": "it ran out of time",
            "memory": "it ran out of memory", "processes": "it started too many processes",
            "output": "it printed or wrote too much", "exit": "it ended the process",
            "crash": "the check crashed"}
"""Every `explorer.checker.report.CheckFailure.kind` a check can end with, and the
headline the page gives it (no other kind is accepted from a child)."""

_NON_FINITE = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text``, or its first and last parts with what was cut said between
    them when it is longer than ``limit`` characters."""
    text = str(text)
    if len(text) <= limit:
        return text
    half = (limit - 60) // 2
    return f"{text[:half]}\n… ({len(text) - 2 * half:,} characters cut) …\n{text[-half:]}"


def failure(kind: str, message: str, details: str = "") -> CheckFailure:
    """A `CheckFailure` with its texts cut (`cut`); ``kind`` must be in `FAILURES`
    (ValueError otherwise)."""
    if kind not in FAILURES:
        raise ValueError(f"no such failure kind: {kind!r}")
    return CheckFailure(kind, cut(message), cut(details))


def bounded(outcome: CheckReport | CheckFailure) -> CheckReport | CheckFailure:
    """``outcome`` with every text cut to `MAX_TEXT_CHARS` (what a child sends)."""
    return parse(json.dumps(_cut_all(json.loads(outcome.to_json()))).encode())


def _cut_all(value: Any) -> Any:
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, list):
        return [_cut_all(item) for item in value]
    if isinstance(value, dict):
        return {key: _cut_all(item) for key, item in value.items()}
    return value


def parse(data: bytes) -> CheckReport | CheckFailure:
    """The `CheckReport` or `CheckFailure` in ``data`` (``to_json``'s UTF-8 text).

    Raises ValueError saying what is wrong: more than `MAX_RESULT_BYTES`, not
    JSON, a key missing or unknown, a value of the wrong type, a failure kind
    not in `FAILURES`, a step status not in `explorer.checker.verdicts.SYMBOLS`.
    Texts longer than `MAX_TEXT_CHARS` are cut."""
    if len(data) > MAX_RESULT_BYTES:
        raise ValueError(f"the result holds {len(data):,} bytes, more than the "
                         f"{MAX_RESULT_BYTES:,} allowed")
    try:
        top = json.loads(data.decode("utf-8"), parse_constant=_refuse)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"the result is not JSON ({str(error)[:200]})") from None
    if not isinstance(top, dict) or top.get("kind") not in ("report", "failure"):
        raise ValueError("the result is neither a report nor a failure")
    _keys(top, {"kind", top["kind"]}, "the result")
    if top["kind"] == "report":
        report = _conform(top["report"], CheckReport, "report")
        for step in report.steps:
            if step.status not in SYMBOLS:
                raise ValueError(f"report.steps: no such status {step.status[:40]!r}")
        return report
    found = _conform(top["failure"], CheckFailure, "failure")
    if found.kind not in FAILURES:
        raise ValueError(f"failure.kind: no such kind {found.kind[:40]!r}")
    return found


def _refuse(name: str) -> None:
    raise ValueError(f"the result holds {name}, which strict JSON does not")


def _keys(data: Any, wanted: set[str], where: str, optional: set[str] = frozenset()) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} is not an object")
    missing, unknown = wanted - optional - data.keys(), data.keys() - wanted
    if missing or unknown:
        raise ValueError(f"{where}: keys missing {sorted(missing)}, unknown "
                         f"{sorted(str(k)[:40] for k in unknown)[:5]}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _conform(value: Any, hint: Any, where: str) -> Any:
    """``value`` as type ``hint`` (str, bool, int, float, None, a union, a list,
    a dict or one of the result's dataclasses); ValueError naming ``where``
    otherwise (a type it does not know refuses every value)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in typing.get_args(hint):
            try:
                return _conform(value, option, where)
            except ValueError as error:
                errors.append(str(error))
        raise ValueError(errors[-1])
    if origin is list:
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise ValueError(f"{where} is not a list of at most {MAX_ITEMS:,} items")
        (item,) = typing.get_args(hint)
        return [_conform(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        key, item = typing.get_args(hint)
        if not isinstance(value, dict) or len(value) > MAX_ITEMS:
            raise ValueError(f"{where} is not an object of at most {MAX_ITEMS:,} keys")
        return {_conform(k, key, f"{where} key"): _conform(v, item, f"{where}[{str(k)[:40]!r}]")
                for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        fields = {f.name: f for f in dataclasses.fields(hint) if f.init}
        optional = {name for name, f in fields.items()
                    if f.default is not dataclasses.MISSING
                    or f.default_factory is not dataclasses.MISSING}
        _keys(value, set(fields), where, optional)
        hints = _hints(hint)
        return hint(**{name: _conform(v, hints[name], f"{where}.{name}")
                       for name, v in value.items()})
    if hint is type(None) or hint is None:
        if value is None:
            return None
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if value in _NON_FINITE:
            return _NON_FINITE[value]
    elif hint is str:
        if isinstance(value, str):
            return cut(value)
    elif hint is Any:
        return _conform(value, str, where)
    raise ValueError(f"{where} must be {getattr(hint, '__name__', hint)} "
                     f"(got {type(value).__name__})")

