"""Does our hand-computed layer equal the model's own? `against_model`.

The reference numbers come from one normal forward pass of the model: its
``output_attentions`` for the layer, and the attention module's output caught
by a forward hook. Nothing of ours goes into them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from explorer.models.errors import ModelError, ModelMismatch
from explorer.models.forward import attention_outputs
from explorer.models.layer_trace import ModelConfig
from explorer.models.loading import LoadedModel
from explorer.core.trace import Trace

TOLERANCE = 1e-4
"""Largest |ours − model's| still counted as agreement (float32 rounding), for
the attention weights (all in [0, 1]) and, plus `RELATIVE_TOLERANCE`, the output."""
RELATIVE_TOLERANCE = 1e-5
"""The output may also differ by this fraction of its own scale, its largest
|value|, as ``torch.testing.assert_close`` adds ``rtol · |x|`` to ``atol``. Of
its scale, not of each element: a float32 dot product over d_model terms errs
in proportion to the size of its terms, so an element near 0 carries the
rounding of large products (a GPT-2-small-sized layer whose output reaches 300
differs by 5e-4, 2e-6 of that, at elements far below 300)."""


@dataclass(frozen=True)
class ModelCheck:
    """The largest differences between a trace and the model it came from.

    ``weights_diff``: max |ours − model's| over the layer's attention weights,
    all heads, (n_heads, n, n), against ``output_attentions``. ``output_diff``:
    the same for the attention output (n, d_model), against the hooked module
    (GPT-2 ``attn.c_proj``, BERT ``attention.output.dense``). ``output_scale``:
    the largest |model output|, to judge ``output_diff`` by (`output_tolerance`).
    ``reference``: what was compared with, for display. NaN counts as a failure.
    """

    reference: str
    weights_diff: float
    output_diff: float
    output_scale: float
    tolerance: float = TOLERANCE
    relative_tolerance: float = RELATIVE_TOLERANCE

    @property
    def output_tolerance(self) -> float:
        """The output's allowance: ``tolerance + relative_tolerance · output_scale``."""
        return self.tolerance + self.relative_tolerance * self.output_scale

    @property
    def max_abs_diff(self) -> float:
        """The larger of the two differences (NaN if either is NaN)."""
        if math.isnan(self.weights_diff) or math.isnan(self.output_diff):
            return math.nan
        return max(self.weights_diff, self.output_diff)

    @property
    def ok(self) -> bool:
        """Whether weights_diff <= tolerance and output_diff <= `output_tolerance`
        (False for NaN)."""
        return (self.weights_diff <= self.tolerance
                and self.output_diff <= self.output_tolerance)

    def summary(self) -> str:
        """One line for the page, e.g. ``"matches GPT2Model 'gpt2' layer 5 (…):
        attention weights differ by at most 3.0e-06, the output by at most 4.3e-04
        (tolerance 1e-04; for the output, whose largest |value| is 700,
        1e-04 + 1e-05 × 700 = 7.1e-03)"``."""
        verdict = "matches" if self.ok else "DOES NOT match"
        return (f"{verdict} {self.reference}: attention weights differ by at most "
                f"{self.weights_diff:.1e}, the output by at most {self.output_diff:.1e} "
                f"(tolerance {self.tolerance:.0e}; for the output, whose largest |value| is "
                f"{self.output_scale:.3g}, {self.tolerance:.0e} + "
                f"{self.relative_tolerance:.0e} × {self.output_scale:.3g} = "
                f"{self.output_tolerance:.1e})")

    def raise_if_failed(self) -> None:
        """Raise `ModelMismatch` (a `ModelError`) unless `ok`."""
        if not self.ok:
            raise ModelMismatch(f"Our computation {self.summary()}. This is a bug in the "
                                "explorer: please report it with the model, layer and text.")


def _largest_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    if ours.shape != theirs.shape:
        return math.inf
    return float((ours.to(torch.float64) - theirs.to(torch.float64)).abs().max())


def against_model(trace: Trace, model: LoadedModel) -> ModelCheck:
    """Compare a trace from `compute_model_trace` with ``model``'s own forward pass.

    Runs the model once on the trace's token ids with ``output_attentions=True``
    and a forward hook on the layer's output projection, then reports the
    largest |difference| of the attention weights (all heads) and of the output.
    Raises `ModelError` when the trace is not a real-model trace of this model.
    """
    c = trace.config
    if not isinstance(c, ModelConfig):
        raise ModelError("check", "against_model needs a trace from compute_model_trace "
                                  f"(this one has a {type(c).__name__})")
    if (c.architecture, c.n_layers, c.n_heads, c.d_model) != (
            model.architecture, model.n_layers, model.n_heads, model.d_model):
        raise ModelError("check", f"the trace comes from {c.model!r}, not from {model.name!r}")
    weights, output = attention_outputs(model, list(c.input_ids), c.layer)
    ours = trace["attn_weights"]
    ours = ours if ours.dim() == 3 else ours[None]  # a single head has no head axis
    return ModelCheck(
        reference=f"{type(model.module).__name__} {model.name!r} layer {c.layer} "
                  f"(output_attentions and the output of {model.anatomy.output_name})",
        weights_diff=_largest_difference(ours, weights),
        output_diff=_largest_difference(trace["output"], output),
        output_scale=float(output.abs().max()))


def assert_matches_model(trace: Trace, model: LoadedModel) -> ModelCheck:
    """`against_model`, raising `ModelMismatch` unless `ModelCheck.ok` (the
    weights within `TOLERANCE`, the output within `ModelCheck.output_tolerance`)."""
    check = against_model(trace, model)
    check.raise_if_failed()
    return check
