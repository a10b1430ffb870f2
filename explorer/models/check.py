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

import sys
from typing import TypeVar

import torch

from explorer.core.agreement import Agreement, max_abs_diff, of_all
from explorer.core.trace import Trace
from explorer.models.errors import ModelError, ModelMismatch
from explorer.models.forward import LayerCall, attention_outputs, decoder_layer_call
from explorer.models.layer_steps import LAYER_STEPS
from explorer.models.layer_trace import ModelConfig
from explorer.models.llama import DecoderConfig
from explorer.models.loading import LoadedModel

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


WEIGHTS, OUTPUT = "attention weights", "output"
"""The names of `against_model`'s two parts."""


def allowance(scale: float) -> float:
    """The largest difference allowed for numbers whose largest |value| is
    ``scale``: ``TOLERANCE + RELATIVE_TOLERANCE · scale``."""
    return TOLERANCE + RELATIVE_TOLERANCE * scale


def _part(name: str, reference: str, ours: torch.Tensor, theirs: torch.Tensor,
          relative: bool = True) -> Agreement:
    """``ours`` against ``theirs`` (the model's) as one part: within `allowance`
    of the model's largest |value| (``relative``), else within `TOLERANCE`."""
    scale = float(theirs.abs().max()) if theirs.numel() else 0.0
    return Agreement(name, f"{theirs.numel()} numbers", reference,
                     max_abs_diff(ours, theirs),
                     allowance(scale) if relative else TOLERANCE,
                     n_values=theirs.numel(), scale=scale)


def summary(check: Agreement) -> str:
    """`against_model`'s agreement in one line for the page, e.g. ``"matches
    GPT2Model 'gpt2' layer 5 (…): attention weights differ by at most 3.0e-06,
    the output by at most 4.3e-04 (tolerance 1e-04; for the output, whose largest
    |value| is 700, 1e-04 + 1e-05 × 700 = 7.1e-03)"``."""
    weights, output = check.part(WEIGHTS), check.part(OUTPUT)
    verdict = "matches" if check.ok else "DOES NOT match"
    return (f"{verdict} {check.reference}: attention weights differ by at most "
            f"{weights.max_abs_diff:.1e}, the output by at most {output.max_abs_diff:.1e} "
            f"(tolerance {TOLERANCE:.0e}; for the output, whose largest |value| is "
            f"{output.scale:.3g}, {TOLERANCE:.0e} + {RELATIVE_TOLERANCE:.0e} × "
            f"{output.scale:.3g} = {output.tolerance:.1e})")


def require(check: Agreement, advice: str) -> Agreement:
    """``check`` when it agrees; else raise `ModelMismatch` (a `ModelError`)
    naming the parts that differ and their lines, with ``advice`` (what to
    report)."""
    if not check.ok:
        lines = "; ".join(check.part(name).line() for name in check.failed) if check.parts \
            else check.line()
        raise ModelMismatch(f"Our computation does not match {check.reference}: {lines} "
                            f"This is a bug in the explorer: please report it with {advice}.")
    return check


Config = TypeVar("Config", ModelConfig, DecoderConfig)


def _config_of(trace: Trace, model: LoadedModel, kind: type[Config], check: str, maker: str
               ) -> Config:
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


def against_model(trace: Trace, model: LoadedModel) -> Agreement:
    """Compare a trace from `compute_model_trace` with ``model``'s own forward pass.

    Runs the model once on the trace's token ids with ``output_attentions=True``
    and a forward hook on the layer's output projection. Two parts: `WEIGHTS`,
    the attention weights of every head, (n_heads, n, n), against
    ``output_attentions``, within `TOLERANCE` (all are in [0, 1]); `OUTPUT`,
    the attention output (n, d_model) against the hooked module (GPT-2
    ``attn.c_proj``, BERT ``attention.output.dense``, a decoder's ``o_proj``),
    within `allowance` of its largest |value| (its ``scale``). NaN never agrees.
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
    return of_all(f"Layer {c.layer}", "attention weights and output", reference,
                  [_part(WEIGHTS, "output_attentions", ours, weights, relative=False),
                   _part(OUTPUT, model.anatomy.output_name, trace["output"], output)])


def assert_matches_model(trace: Trace, model: LoadedModel) -> Agreement:
    """`against_model`, raising `ModelMismatch` unless it agrees (the weights
    within `TOLERANCE`, the output within `allowance` of its scale)."""
    return require(against_model(trace, model), "the model, layer and text")


# ---------------------------------------------------------------------------
# The Llama family, step by step
# ---------------------------------------------------------------------------
STEP_REFERENCES = {step.name: step.reference for step in LAYER_STEPS if step.reference}
"""What each step of a decoder trace is compared with, in pipeline order
(`explorer.models.layer_steps`)."""


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


def against_model_steps(trace: Trace, model: LoadedModel) -> Agreement:
    """Compare every step of a trace from `explorer.models.llama.compute_decoder_trace`
    with what ``model``'s own modules computed on the same tokens (one forward
    pass, `explorer.models.forward.decoder_layer_call`): a part per step, in
    pipeline order, named by the step and compared with `STEP_REFERENCES`'s
    module, within `allowance` of the model's largest |value| of that step;
    ``failed`` names the steps that differ.

    Raises `ModelError` when the trace is not a decoder trace of this model.
    """
    c = _config_of(trace, model, DecoderConfig, "against_model_steps", "compute_decoder_trace")
    call = decoder_layer_call(model, list(c.input_ids), c.layer)
    q, k = _heads(call.q_proj, c.n_heads), _heads(call.k_proj, c.n_kv_heads)
    theirs = {"embeddings": call.x, "queries": q, "keys": k,
              "values": _heads(call.v_proj, c.n_kv_heads)}
    if c.qk_norm:
        if call.q_norm is None or call.k_norm is None:
            raise ModelMismatch(f"{call.reference} has no q_norm or k_norm, but its config "
                                "says QK-norm")
        theirs.update(queries_normed=call.q_norm, keys_normed=call.k_norm)
        q, k = call.q_norm, call.k_norm
    q_rope, k_rope = _model_rope(model, call, q, k)
    theirs.update(rope_cos=call.cos, rope_sin=call.sin, queries_rope=q_rope, keys_rope=k_rope,
                  causal_mask=(call.mask != 0).to(torch.float32),
                  attn_weights=call.attn_weights, context=call.context, output=call.output)
    ours = {name: trace[name].to(torch.float32) for name in theirs}
    return of_all(f"Layer {c.layer}, step by step", "every step", call.reference,
                  [_part(name, STEP_REFERENCES[name], ours[name], theirs[name])
                   for name in theirs])
