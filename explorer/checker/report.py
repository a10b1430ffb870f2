"""A check's report, as plain data: each step's verdict (`StepResult`), the
first difference (`Difference`), the whole report (`CheckReport`) or why the
check could not run (`CheckFailure`). It round-trips through JSON
(`CheckReport.to_json`, `result_from_json`), as `explorer.checker.sandbox`
needs; `explorer.checker.check` makes it. Pure torch; `CheckReport._repr_html_`
imports `explorer.render.check_view` (plotly) only when a notebook shows it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from explorer.checker.verdicts import MATCH, NOT_SEEN, SYMBOLS, UNSURE
from explorer.core.literal import format_value
from explorer.core.trace import json_safe

SIZES_BLIND = "at these sizes"
"""How the reason of a "? Cannot tell" that the sizes cause begins (`explorer.checker.check`'s sizes that hide a mistake)."""
NO_DIAGNOSIS = ("none of the classic mistakes explains it; compare the two matrices of the "
                "first difference")


@dataclass
class StepResult:
    """One compared step: ``status`` is `MATCH`, `DIFFERS` or `NOT_SEEN` (the
    learner's code never computes it on its own, e.g. the scaled scores when it
    masks before scaling); ``max_difference``: the largest |ours − yours| over
    the matching tensor, or for a difference over the closest tensor of the same
    shape (None when there is none)."""

    step: str
    status: str
    max_difference: float | None = None

    @property
    def symbol(self) -> str:
        """✓, ✗ or —."""
        return SYMBOLS[self.status]


@dataclass
class Difference:
    """Where the learner's numbers first differ from the reference's.

    ``step``; ``batch`` (the batch item), ``head`` (None for a step without
    heads, or with a single one); ``row``, ``col``: the first differing cell of that (batch, head)
    slice, with ``ours`` and ``theirs`` its two values (None when no tensor of
    the learner's has the step's shape). ``ours_matrix`` / ``theirs_matrix``: the
    slice, (n_tokens, n_tokens) or (n_tokens, d); ``cells``: every differing
    [row, col] of it (up to `MAX_OUTLINED`); ``row_labels`` and ``col_labels``
    name its rows (tokens) and columns (tokens or dims); ``note``: a sentence
    when something else is wrong (a shape).
    """

    step: str
    batch: int
    head: int | None
    row: int | None
    col: int | None
    ours: float | None
    theirs: float | None
    ours_matrix: list[list[float]]
    theirs_matrix: list[list[float]] | None
    cells: list[list[int]]
    row_labels: list[str]
    col_labels: list[str]
    note: str = ""
    since: str | None = None

    @property
    def place(self) -> str:
        """``attn_scores``, or ``between keys and attn_scores`` when the steps
        from ``since`` on were never computed on their own: the difference
        starts somewhere between the two."""
        return self.step if self.since is None else f"between {self.since} and {self.step}"

    def __str__(self) -> str:
        return self._cell() + ("" if self.since is None else
                               f" ({self.since} is not seen on its own: the difference may "
                               f"start there)")

    def _cell(self) -> str:
        where = [self.step]
        if self.batch:
            where.append(f"batch item {self.batch}")
        if self.head is not None:
            where.append(f"head {self.head}")
        if self.row is None:
            return ", ".join(where) + (f": {self.note}" if self.note else "")
        where += [f"row {self.row} ({self.row_labels[self.row]})",
                  f"column {self.col} ({self.col_labels[self.col]})"]
        return (", ".join(where) + f": ours {format_value(self.ours)}, "
                                   f"yours {format_value(self.theirs)}")


@dataclass(repr=False)
class CheckReport:
    """What `check_module` found.

    ``ok``: the module's output equals the reference's (every step it computes
    then matches too). ``steps``: one `StepResult` per compared step, in
    pipeline order. ``first_difference``: a `Difference`, or None when ok.
    ``diagnosis``: the classic mistake that explains the difference, in words
    (None when none does); ``mistake``: its slug (`explorer.checker.mistakes.MISTAKES`,
    or ``"dropout_active"``). ``module``: the class name; ``settings``: what was
    read and run, one line each; ``notes``: anything else to know (dropout
    mode, batch axis); ``uncertain``: why the check cannot stand behind a
    difference (a head count guessed, parameters it could not place), "" when it
    can; ``raised``: the verdict when the code raises where it should not
    (a mask not sliced to the sentence); ``warnings``: the steps these sizes cannot see
    (`hidden_steps`: head_dim = 1 hides the scaling ...); ``tokens``: the row labels; ``n_values``,
    ``max_difference``, ``worst_step``: how many numbers matched, and the
    largest difference among them, in which step.
    """

    module: str
    ok: bool
    steps: list[StepResult]
    first_difference: Difference | None
    diagnosis: str | None
    mistake: str | None
    tokens: list[str]
    settings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    n_values: int = 0
    max_difference: float = 0.0
    worst_step: str = ""
    uncertain: str = ""
    raised: str = ""

    def step(self, name: str) -> StepResult:
        """The result of step ``name``; KeyError naming the steps compared."""
        for result in self.steps:
            if result.step == name:
                return result
        raise KeyError(f"no step {name!r} was compared; these were: "
                       f"{[r.step for r in self.steps]}")

    def summary(self) -> str:
        """One line: ``✓ Matches …: N numbers, largest difference …`` or ``✗ …``."""
        if self.ok:
            matched = sum(r.status == MATCH for r in self.steps)
            return (f"✓ Matches the reference computed from your weights: {matched} steps, "
                    f"{self.n_values} numbers, largest difference {self.max_difference:.1e} "
                    f"(in {self.worst_step}).")
        if self.uncertain.startswith(SIZES_BLIND):
            return f"? Cannot tell {self.uncertain}."
        if self.uncertain:
            return f"? Cannot tell whether it matches: {self.uncertain}."
        if self.raised:
            return f"✗ {self.raised}."
        if self.first_difference is None:  # every step matched, on one sentence only
            return ("✗ Raises on the book's batch of two; on one sentence every step matches "
                    "the reference computed from your weights.")
        return ("✗ Differs from the reference computed from your weights "
                f"{'at ' if self.first_difference.since is None else ''}"
                f"{self.first_difference.place}.")

    @property
    def first_step(self) -> str | None:
        """The step of the first difference (None when ok)."""
        return None if self.first_difference is None else self.first_difference.step

    def rows(self) -> list[dict[str, str]]:
        """The table of steps as rows of text: ``step``, ``result`` (✓ ✗ —) and
        ``largest difference`` (or why there is none)."""
        def text(r: StepResult) -> str:
            if r.status == NOT_SEEN:
                return "not seen: your code never computes it on its own"
            if r.status == UNSURE:
                return "differs, under a reading the check is not sure of"
            if r.max_difference is None:
                return "no tensor of this shape"
            return f"{r.max_difference:.2e}"
        return [{"step": r.step, "result": r.symbol, "largest difference": text(r)}
                for r in self.steps]

    def text(self) -> str:
        """The whole report as plain text: settings, the table, the verdict,
        the first difference and the diagnosis (what the command line prints)."""
        lines = [f"{self.module}: {line}" if i == 0 else f"  {line}"
                 for i, line in enumerate(self.settings)] or [self.module]
        rows = self.rows()  # (none when the code raised before any step was compared)
        width = max((len(r["step"]) for r in rows), default=4)
        lines += ["", f"  {'step':<{width}}  yours  largest difference"] if rows else []
        lines += [f"  {r['step']:<{width}}  {r['result']:<5}  {r['largest difference']}"
                  for r in rows]
        lines += ["", self.summary()]
        lines += [f"{label}: {text}" for label, text in self.findings()]
        return "\n".join(lines)

    def findings(self) -> list[tuple[str, str]]:
        """What follows the summary, as (label, text): ``"First difference"``,
        ``"Diagnosis"`` (when it differs; with a "?" verdict, where the numbers
        leave the uncertain reading, and no diagnosis), each ``"Warning"`` and
        each ``"Note"``."""
        out = []
        if self.first_difference is not None:
            out.append(("Where your numbers leave that reading" if self.uncertain else
                        "First difference", str(self.first_difference)))
        if self.diagnosis or not (self.ok or self.uncertain):
            out.append(("Diagnosis", self.diagnosis or NO_DIAGNOSIS))
        return (out + [("Warning", text) for text in self.warnings]
                + [("Note", note) for note in self.notes])

    __str__ = text

    def __repr__(self) -> str:
        return (f"CheckReport(module={self.module!r}, ok={self.ok}, "
                f"first_difference={self.first_step!r}, mistake={self.mistake!r})")

    def to_dict(self) -> dict[str, Any]:
        """The report as plain lists, numbers and text (non-finite numbers as
        ``"-Infinity"``, ``"Infinity"``, ``"NaN"``: strict JSON)."""
        return json_safe(dataclasses.asdict(self))

    def to_json(self) -> str:
        """`to_dict` as strict JSON (RFC 8259); `result_from_json` reads it back."""
        return json.dumps({"kind": "report", "report": self.to_dict()}, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckReport:
        """The inverse of `to_dict`."""
        data = dict(data)
        data["steps"] = [StepResult(r["step"], r["status"], _number(r["max_difference"]))
                         for r in data["steps"]]
        diff = data["first_difference"]
        if diff is not None:
            diff = dict(diff)
            for name in ("ours", "theirs"):
                diff[name] = _number(diff[name])
            for name in ("ours_matrix", "theirs_matrix"):
                diff[name] = _numbers(diff[name])
            data["first_difference"] = Difference(**diff)
        data["max_difference"] = _number(data["max_difference"])
        return cls(**data)

    def _repr_html_(self) -> str:
        """The report in a notebook: the table, and the first difference's two
        matrices side by side, drawn by the app's chart code (`explorer.render.check_view`)."""
        from explorer.render.check_view import report_html  # plotly: only when a notebook asks

        return report_html(self)


@dataclass
class CheckFailure:
    """The check could not run (`explorer.checker.sandbox.check_source`'s other outcome).

    ``kind``: ``"syntax"`` (the code does not compile), ``"source"`` (an error
    running it, no such class), ``"__init__"``, ``"forward"``, ``"module"`` (weights not found),
    ``"inputs"``, ``"sentence"``, ``"timeout"``, ``"memory"``, ``"crash"``;
    ``message``: one paragraph for the learner; ``details``: the last lines of
    their traceback, or the syntax error with its caret ("" when none).
    """

    kind: str
    message: str
    details: str = ""

    ok = False

    def text(self) -> str:
        """The message and the details, as the command line prints them."""
        return self.message + (f"\n{self.details}" if self.details else "")

    __str__ = text

    def to_json(self) -> str:
        """The failure as JSON; `result_from_json` reads it back."""
        return json.dumps({"kind": "failure", "failure": dataclasses.asdict(self)})


def result_from_json(text: str) -> CheckReport | CheckFailure:
    """A `CheckReport` or `CheckFailure` from its ``to_json`` text."""
    data = json.loads(text)
    if data["kind"] == "report":
        return CheckReport.from_dict(data["report"])
    return CheckFailure(**data["failure"])


def _number(value: Any) -> float | None:
    """A float back from `json_safe`'s text (``"-Infinity"``), None as None."""
    return None if value is None else float(value)


def _numbers(rows: list | None) -> list | None:
    return None if rows is None else [[float(v) for v in row] for row in rows]
