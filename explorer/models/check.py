"""Does our hand-computed layer equal the model's own? `against_model`.

The reference numbers come from one normal forward pass of the model: its
``output_attentions`` for the layer, and the attention module's output caught
by a forward hook. Nothing of ours goes into them. For the Llama family
(`explorer.models.forward.decoder_layer_call`: float32 copies of the layer's
modules when the weights ship in bfloat16), `against_model` does the same, and
`against_model_steps` checks every step of `explorer.models.llama.compute_decoder_trace`
against the module that computes it in the model.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import torch

from explorer.models.errors import ModelError, ModelMismatch
from explorer.models.forward import LayerCall, attention_outputs, decoder_layer_call
from explorer.models.layer_trace import ModelConfig
from explorer.models.llama import DecoderConfig
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


def _config_of(trace: Trace, model: LoadedModel, kind: type, check: str, maker: str) -> Any:
    """The trace's config, a ``kind`` from ``model``; else `ModelError` saying
    that ``check`` needs a trace from ``maker`` of this model."""
    c = trace.config
    if not isinstance(c, kind):
        raise ModelError("check", f"{check} needs a trace from {maker} "
                                  f"(this one has a {type(c).__name__})")
    if (c.architecture, c.n_layers, c.n_heads, c.d_model) != (
            model.architecture, model.n_layers, model.n_heads, model.d_model):
        raise ModelError("check", f"the trace comes from {c.model!r}, not from {model.name!r}")
    return c


def against_model(trace: Trace, model: LoadedModel) -> ModelCheck:
    """Compare a trace from `compute_model_trace` with ``model``'s own forward pass.

    Runs the model once on the trace's token ids with ``output_attentions=True``
    and a forward hook on the layer's output projection, then reports the
    largest |difference| of the attention weights (all heads) and of the output.
    Raises `ModelError` when the trace is not a real-model trace of this model.
    """
    c = _config_of(trace, model, ModelConfig, "against_model", "compute_model_trace")
    weights, output = attention_outputs(model, list(c.input_ids), c.layer)
    ours = trace["attn_weights"]
    ours = ours if ours.dim() == 3 else ours[None]  # a single head has no head axis
    reference = (f"{type(model.module).__name__} {model.name!r} layer {c.layer} "
                 f"(output_attentions and the output of {model.anatomy.output_name})")
    if model.family == "decoder" and model.dtype != "float32":
        reference = (f"{type(model.module).__name__} {model.name!r} layer {c.layer} (its "
                     f"attention module in float32, the {model.dtype} weights upcast: "
                     f"attention weights and the output of {model.anatomy.output_name})")
    return ModelCheck(
        reference=reference,
        weights_diff=_largest_difference(ours, weights),
        output_diff=_largest_difference(trace["output"], output),
        output_scale=float(output.abs().max()))


def assert_matches_model(trace: Trace, model: LoadedModel) -> ModelCheck:
    """`against_model`, raising `ModelMismatch` unless `ModelCheck.ok` (the
    weights within `TOLERANCE`, the output within `ModelCheck.output_tolerance`)."""
    check = against_model(trace, model)
    check.raise_if_failed()
    return check


# ---------------------------------------------------------------------------
# The Llama family, step by step
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StepsCheck:
    """Every step of a decoder trace against the model's module that computes it.

    ``diffs``: step name -> max |ours − model's| (`STEP_REFERENCES` says what
    each is compared with); ``scales``: step name -> the model's largest
    |value|, since a step is judged like `ModelCheck`'s output: within
    ``tolerance + relative_tolerance · scale``. ``reference``: the model's
    layer and how its numbers were obtained.
    """

    reference: str
    diffs: dict[str, float]
    scales: dict[str, float]
    tolerance: float = TOLERANCE
    relative_tolerance: float = RELATIVE_TOLERANCE

    def allowed(self, step: str) -> float:
        """The allowance of ``step``: tolerance + relative_tolerance · its scale."""
        return self.tolerance + self.relative_tolerance * self.scales[step]

    def passed(self, step: str) -> bool:
        """Whether ``step`` is within its allowance (False for NaN)."""
        return self.diffs[step] <= self.allowed(step)

    @property
    def failed(self) -> list[str]:
        """The steps outside their allowance, in pipeline order."""
        return [step for step in self.diffs if not self.passed(step)]

    @property
    def ok(self) -> bool:
        """Whether every step agrees."""
        return not self.failed

    def lines(self) -> list[str]:
        """One line per step, e.g. ``"✓ queries_rope: vs apply_rotary_pos_emb of
        the model's Q, max |difference| 0.0e+00 (allowed 1.0e-04)"``."""
        return [f"{'✓' if self.passed(step) else '✗'} {step}: vs {STEP_REFERENCES[step]}, "
                f"max |difference| {self.diffs[step]:.1e} (allowed {self.allowed(step):.1e})"
                for step in self.diffs]

    def raise_if_failed(self) -> None:
        """Raise `ModelMismatch` unless `ok`, naming the steps that differ."""
        if not self.ok:
            raise ModelMismatch(f"Our computation of {', '.join(self.failed)} does not match "
                                f"{self.reference}: a bug in the explorer, please report it.")


STEP_REFERENCES = {
    "embeddings": "input_layernorm's output",
    "queries": "q_proj's output, cut into heads",
    "keys": "k_proj's output, cut into heads",
    "values": "v_proj's output, cut into heads",
    "queries_normed": "q_norm's output",
    "keys_normed": "k_norm's output",
    "rope_cos": "the cos the layer was given (the model's rotary_emb)",
    "rope_sin": "the sin the layer was given (the model's rotary_emb)",
    "queries_rope": "apply_rotary_pos_emb of the model's Q with its cos and sin",
    "keys_rope": "apply_rotary_pos_emb of the model's K with its cos and sin",
    "causal_mask": "where the mask the layer was given adds 0",
    "attn_weights": "output_attentions",
    "context": "o_proj's input",
    "output": "o_proj's output",
}
"""What each step of a decoder trace is compared with, in pipeline order."""


def _model_rope(model: LoadedModel, call: LayerCall, queries: torch.Tensor, keys: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own ``apply_rotary_pos_emb`` (from its modeling module) of
    queries (h, n, e) and keys (k, n, e) with the cos and sin the layer was given."""
    home = sys.modules[type(model.anatomy.attention(
        model.anatomy.blocks(model.module)[0])).__module__]
    with torch.no_grad():
        q, _ = home.apply_rotary_pos_emb(queries[None], queries[None], call.cos[None],
                                         call.sin[None])
        _, k = home.apply_rotary_pos_emb(keys[None], keys[None], call.cos[None], call.sin[None])
    return q[0], k[0]


def _heads(flat: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A projection's output (n, heads·e) cut into heads: (heads, n, e)."""
    n = flat.shape[0]
    return flat.reshape(n, n_heads, -1).transpose(0, 1)


def against_model_steps(trace: Trace, model: LoadedModel) -> StepsCheck:
    """Compare every step of a trace from `explorer.models.llama.compute_decoder_trace`
    with what ``model``'s own modules computed on the same tokens (one forward
    pass, `explorer.models.forward.decoder_layer_call`); see `STEP_REFERENCES`.

    Raises `ModelError` when the trace is not a decoder trace of this model.
    """
    c = _config_of(trace, model, DecoderConfig, "against_model_steps", "compute_decoder_trace")
    call = decoder_layer_call(model, list(c.input_ids), c.layer)
    q, k = _heads(call.q_proj, c.n_heads), _heads(call.k_proj, c.n_kv_heads)
    theirs = {"embeddings": call.x, "queries": q, "keys": k,
              "values": _heads(call.v_proj, c.n_kv_heads)}
    if c.qk_norm:
        theirs.update(queries_normed=call.q_norm, keys_normed=call.k_norm)
        q, k = call.q_norm, call.k_norm
    q_rope, k_rope = _model_rope(model, call, q, k)
    theirs.update(rope_cos=call.cos, rope_sin=call.sin, queries_rope=q_rope, keys_rope=k_rope,
                  causal_mask=(call.mask == 0).to(torch.float32),
                  attn_weights=call.attn_weights, context=call.context, output=call.output)
    ours = {name: trace[name].to(torch.float32) for name in theirs}
    return StepsCheck(
        reference=call.reference,
        diffs={name: _largest_difference(ours[name], theirs[name]) for name in theirs},
        scales={name: float(t.abs().max()) if t.numel() else 0.0 for name, t in theirs.items()})
