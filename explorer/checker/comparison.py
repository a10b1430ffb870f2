"""Comparing the learner's tensors with the reference's: to float32's tolerance,
cell by cell, and in every layout a step's tensor may take (a batch axis or
none, the heads first, second or side by side). Used by `explorer.checker.check`."""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import Tensor

from explorer.core import attention as att
from explorer.core.agreement import max_abs_diff

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
"""Two numbers agree when |ours − yours| <= atol + rtol·|yours| (float32 rounding
in another order of operations stays far below)."""
CONCATENATED = ("queries", "keys", "values")
"""Steps also recognised with the heads side by side, (b, n, d_out), as X·W gives them."""


def agreeing(ours: Tensor, yours: Tensor) -> Tensor:
    """Cell by cell, whether |ours − yours| <= atol + rtol·|yours| (`TOLERANCE`);
    the same infinity, or NaN in both, agree too. (``torch.isclose`` with
    ``equal_nan`` says the same, several times slower.)"""
    scale = torch.nan_to_num(yours.abs(), posinf=0.0)  # no tolerance makes ∞ agree with 1
    agree = (ours - yours).abs() <= TOLERANCE["atol"] + TOLERANCE["rtol"] * scale
    if bool(agree.all()):
        return agree
    return agree | (ours == yours) | (ours.isnan() & yours.isnan())


def close(ours: Tensor, yours: Tensor) -> bool:
    """Same shape, and every number equal to the tolerance (`agreeing`). Most
    tensors that differ do so in their first rows, which are compared first."""
    if ours.shape != yours.shape:
        return False
    if ours.dim() >= 2 and ours.shape[-2] > 2 and not bool(
            agreeing(ours[..., :2, :], yours[..., :2, :]).all()):
        return False
    return bool(agreeing(ours, yours).all())


def share_agreeing(ours: Tensor, yours: Tensor) -> float:
    """The share of cells in which ``yours`` equals ``ours`` to the tolerance."""
    return float(agreeing(ours, yours).float().mean())


def with_batch_axis(t: Tensor, batch: int, n_heads: int) -> list[Tensor]:
    """``t`` as a tensor whose axis 0 is the batch: as it is, with a batch axis
    of 1 added, (n, b, d) with its axis 1 moved to the front (as
    nn.MultiheadAttention works), or (b·num_heads, …) cut into (b, num_heads, …)."""
    if t.dim() < 2:
        return []
    out = []
    if t.shape[0] == batch:
        out.append(t)
    if batch == 1:
        out.append(t[None])
    if t.dim() == 3 and t.shape[1] == batch:
        out.append(t.transpose(0, 1))
    if n_heads > 1 and batch > 1 and t.shape[0] == batch * n_heads:
        out.append(t.unflatten(0, (batch, n_heads)))
    return out


class YourTensors:
    """The learner's tensors, by shape, in every layout a step may take, in
    the order their forward made them.

    Each tensor gets a batch axis (`with_batch_axis`); one of 4 dims is also
    kept with axes 1 and 2 swapped, so that (b, n, num_heads, head_dim), before
    the book's ``.transpose(1, 2)``, counts as (b, num_heads, n, head_dim).
    """

    def __init__(self, tensors: list[Tensor], batch: int, n_heads: int):
        self.by_shape: dict[tuple[int, ...], list[tuple[int, Tensor]]] = defaultdict(list)
        for order, tensor in enumerate(tensors):
            for view in with_batch_axis(tensor, batch, n_heads):
                if view.dim() in (3, 4):
                    self.by_shape[tuple(view.shape)].append((order, view))
                if view.dim() == 4:
                    swapped = view.transpose(1, 2)
                    self.by_shape[tuple(swapped.shape)].append((order, swapped))

    def candidates(self, step: str, shape: tuple[int, ...]
                   ) -> tuple[list[tuple[int, Tensor]], list[tuple[int, Tensor]]]:
        """Tensors laid out like a step of ``shape``, and single heads of it,
        each with its place in the order the forward made them.

        shape: (b, n_heads, n, w) of a per-head step, or (b, n, w). Returns
        (whole, parts): ``whole`` in that shape, ``parts`` (b, n, w) each one head
        (``MultiHeadAttentionWrapper`` computes one head at a time).
        """
        shape = tuple(shape)
        whole = list(self.by_shape.get(shape, []))
        if len(shape) != 4:
            return whole, []
        b, h, n, w = shape
        if step in CONCATENATED or h == 1:  # X·W with the heads side by side: (b, n, h·w)
            whole += [(order, att.split_heads(t, h)) for order, t in self.by_shape.get((b, n, h * w), [])]
        return sorted(whole, key=lambda item: item[0]), (
            list(self.by_shape.get((b, n, w), [])) if h > 1 else [])

    def find(self, step: str, target: Tensor, same=close) -> Tensor | None:
        """A tensor of the learner's that is ``same`` as ``target`` (laid out as
        ``target``), or one assembled head by head; None if there is none."""
        whole, parts = self.candidates(step, target.shape)
        for _, tensor in whole:
            if same(target, tensor):
                return tensor
        if not parts:
            return None
        heads = [next((t for _, t in parts if same(target[:, h], t)), None)
                 for h in range(target.shape[1])]
        return None if any(t is None for t in heads) else torch.stack(heads, dim=1)

    def options(self, step: str, target: Tensor) -> list[Tensor]:
        """Every tensor of the learner's laid out as ``target``, in the order
        made; single heads are put together (last) with, for each head, the one
        nearest ``target``."""
        whole, parts = self.candidates(step, target.shape)
        options = [t for _, t in whole]
        if parts:
            options.append(torch.stack([min((t for _, t in parts),
                                            key=lambda t: max_abs_diff(target[:, h], t))
                                        for h in range(target.shape[1])], dim=1))
        return options


def nearest(target: Tensor, options: list[Tensor]) -> Tensor | None:
    """The option whose largest difference from ``target`` is the least."""
    return min(options, key=lambda t: max_abs_diff(target, t), default=None)
