"""How far a computation is from its reference: the one result type of every check.

The multi-head page's line beside PyTorch, a worked example against the numbers
its notebook prints, each part of the Modern page against transformers or SDPA,
a real model's layer against the model, a hand-derived gradient against
autograd: each says how far it is as an `Agreement`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

TOLERANCE = 1e-4
"""float32 rounding between two routes to the same numbers, for numbers of size
up to 1; above that, the same fraction of their size (`relative_tolerance`)."""


@dataclass(frozen=True)
class Agreement:
    """How far ``name`` (what was computed) is from ``reference``.

    ``compared``: which numbers were compared (``"rotated Q and K"``);
    ``max_abs_diff``: the largest |ours − reference's| over them, as
    `max_abs_diff` measures it (``inf`` when the shapes differ or where only one
    side is NaN or infinite; a NaN here never agrees);
    ``tolerance``: the largest difference that still agrees (float32 rounding,
    half a unit of a printed number's last place ...); ``exact``: the numbers
    are equal bit for bit (``torch.equal``); ``where``: where the largest
    difference lies; ``n_values``: how many numbers were compared; ``note``: a
    caveat; ``parts``: the agreements this one sums up (`of_all`), each with
    its own tolerance; ``scale``: the reference's largest |value| (0 when not
    measured), which a relative tolerance is a fraction of.
    """

    name: str
    compared: str
    reference: str
    max_abs_diff: float
    tolerance: float
    exact: bool = False
    where: str = ""
    n_values: int = 0
    note: str = ""
    parts: tuple[Agreement, ...] = ()
    scale: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether it agrees: every part does, or (without parts) the numbers are
        equal bit for bit or differ by at most ``tolerance`` (NaN never agrees)."""
        if self.parts:
            return all(part.ok for part in self.parts)
        return self.exact or self.max_abs_diff <= self.tolerance

    @property
    def failed(self) -> list[str]:
        """The names of the parts that do not agree, in their order (``[]`` when
        every part agrees; without parts, ``[name]`` when this one does not)."""
        if not self.parts:
            return [] if self.ok else [self.name]
        return [part.name for part in self.parts if not part.ok]

    def part(self, name: str) -> Agreement:
        """The part called ``name``. Raises KeyError when there is none."""
        for part in self.parts:
            if part.name == name:
                return part
        raise KeyError(name)

    def to_dict(self) -> dict:
        """Every field, its parts as dicts too, and ``ok``: for a JSON export
        (non-finite differences stay floats; see `explorer.core.trace.json_safe`)."""
        return {"name": self.name, "compared": self.compared, "reference": self.reference,
                "max_abs_diff": self.max_abs_diff, "tolerance": self.tolerance,
                "exact": self.exact, "where": self.where, "n_values": self.n_values,
                "note": self.note, "scale": self.scale, "ok": self.ok,
                "parts": [part.to_dict() for part in self.parts]}

    @property
    def symbol(self) -> str:
        """✓ when it agrees, else ✗."""
        return "✓" if self.ok else "✗"

    def line(self, code: str = "") -> str:
        """``"✓ RoPE: verified against <reference>, same <compared>, max |difference|
        = 1.2e-07 (agreement: below 1e-04, float32 rounding)."``: the line a page
        and its report show; ``code`` marks the reference (a backtick in Markdown)."""
        exact = " (bit for bit)" if self.exact else ""
        return (f"{self.symbol} {self.name}: verified against {code}{self.reference}{code}, "
                f"same {self.compared}{exact}, max |difference| = {self.max_abs_diff:.1e} "
                f"(agreement: below {tolerance_text(self.tolerance)}, float32 rounding).")


def max_abs_diff(ours: Tensor, reference: Tensor) -> float:
    """The largest |ours − reference| over every number, in float64: what every
    check's `Agreement.max_abs_diff` holds.

    ours, reference: tensors of one shape, any shape and float dtype -> a float.
    Where both hold the same non-finite value (NaN and NaN, −∞ and −∞) the
    difference is 0: the computation reproduces its reference there; where only
    one side is NaN or infinite it is ``inf``. ``inf`` when the shapes differ (a
    row of another length never agrees; no broadcasting), 0 for two empty
    tensors. Raises nothing.
    """
    if ours.shape != reference.shape:
        return math.inf
    if not ours.numel():
        return 0.0
    ours, reference = ours.to(torch.float64), reference.to(torch.float64)
    same = (ours == reference) | (torch.isnan(ours) & torch.isnan(reference))
    diff = torch.where(same, torch.zeros_like(ours), (ours - reference).abs())  # NaN: one side
    return float(torch.nan_to_num(diff, nan=math.inf, posinf=math.inf).max())


def tolerance_text(tolerance: float) -> str:
    """``1e-04`` for a round tolerance, ``1.1e-04`` for one with a relative
    part added (`1e-4 + 1e-5 × 7`), so that what is shown is what is used."""
    round_ = f"{tolerance:.0e}"
    return round_ if float(round_) == tolerance else f"{tolerance:.1e}"


def largest_abs(*tensors: Tensor) -> float:
    """The largest finite |value| over ``tensors`` (any shapes): the ``scale`` of
    an `Agreement`; 0 when there is none (empty, or every value NaN or ±∞)."""
    finite = [t[torch.isfinite(t)] for t in tensors]
    return max((float(t.abs().max()) for t in finite if t.numel()), default=0.0)


def relative_tolerance(scale: float, tolerance: float = TOLERANCE) -> float:
    """The largest difference that is still float32 rounding for numbers whose
    largest |value| is ``scale``: ``tolerance × max(1, scale)``.

    Rounding grows with the size of the numbers: a sum of 1,024 products of
    values near 100 is off by about 1e-3 between two orders of adding (1e-5 of
    its size), which an absolute 1e-4 would call a difference. Raises nothing;
    a NaN ``scale`` counts as at most 1.
    """
    return tolerance * max(1.0, scale)


def relative_tolerance_text(scale: float, tolerance: float = TOLERANCE) -> str:
    """How `relative_tolerance` came out, for a page: ``"1e-04 × 79.9 = 8.0e-03
    (float32 rounding, relative to the reference's largest |value|, 79.9)"``,
    or ``"1e-04 (float32 rounding)"`` when ``scale`` is at most 1."""
    allowed = relative_tolerance(scale, tolerance)
    if allowed == tolerance:
        return f"{tolerance_text(tolerance)} (float32 rounding)"
    return (f"{tolerance_text(tolerance)} × {scale:.3g} = {allowed:.1e} (float32 rounding, "
            f"relative to the reference's largest |value|, {scale:.3g})")


def _worst_first(agreement: Agreement) -> float:
    """A sort key: NaN counts as the largest difference of all."""
    return math.inf if math.isnan(agreement.max_abs_diff) else agreement.max_abs_diff


def of_all(name: str, compared: str, reference: str, parts: Sequence[Agreement],
           note: str = "") -> Agreement:
    """One agreement for ``parts``: it agrees when every part does; its largest
    difference, tolerance and ``where`` are the worst part's (a NaN counts as
    worst); its ``n_values`` their sum. Raises ValueError for no parts."""
    if not parts:
        raise ValueError("of_all needs at least one part")
    worst = max(parts, key=_worst_first)
    return Agreement(name, compared, reference, worst.max_abs_diff, worst.tolerance,
                     exact=all(p.exact for p in parts), where=worst.where or worst.name,
                     n_values=sum(p.n_values for p in parts), note=note, parts=tuple(parts),
                     scale=max(p.scale for p in parts))
