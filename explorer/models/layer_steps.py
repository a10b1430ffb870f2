"""A Llama-family layer's steps, declared once: the table every reader of a
decoder trace follows.

One `LayerStep` per step of `explorer.models.llama.compute_decoder_trace`, in
pipeline order, plus the chart that is not a step of the trace (``head_output``,
a query head's share of the output, `explorer.models.llama.head_slice`). Each
says what transformers computes it with, its shape, how one query head's slice
cuts it, how it is drawn, its chart's title, and what
`explorer.models.check.against_model_steps` compares it with. From it:

- `explorer.models.llama`: `DECODER_STEPS` (name -> transformers' line) and the
  head slice's cuts;
- `explorer.models.explain`: the charts a cell can be explained on and how each
  is laid out (a row, a column, a matrix), whose head a cell belongs to;
- `explorer.models.check`: the reference of each step compared;
- `explorer.render.decoder`: each chart's axes, colours and title.

Shapes use n = n_tokens, d = d_model, h = n_heads, k = n_kv_heads, e = head_dim.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.core.steps import (
    DIM_COLS,
    DIMS,
    KEY_COLS,
    MASK,
    QUERY_ROWS,
    SIGNED,
    TOKEN_ROWS,
    WEIGHTS,
    Axis,
    Step,
    plain_step,
)

HEAD = "head"
"""Cut by query head: ``t[head]`` of an (h, …) step."""
KV_HEAD = "kv head"
"""Cut by the query head's K/V head: ``t[kv_head]`` of a (k, …) step."""
HEAD_COLUMNS = "head columns"
"""The query head's e columns: ``t[..., head·e:(head + 1)·e]``."""
KV_COLUMNS = "kv columns"
"""Its K/V head's e columns."""
HEAD_ROWS = "head rows"
"""The query head's e rows (o_proj's weight)."""
LAYER = "layer"
"""Not cut: every query head shares it (the layer's)."""

MATRIX, ROW, COLUMN = "matrix", "row", "column"
"""How a step is laid out as a 2-D chart: as it is; a vector as one row (its
columns: dimensions); a vector as one column (its rows: tokens)."""

DIM_ROWS = Axis("input dim (d_model)", DIMS)
HEAD_DIM_ROWS = Axis("head dim (e)", DIMS)
NO_AXIS = Axis("", DIMS)
PAIRS = Axis("pair i (dimensions i, i + e/2)", DIMS)


@dataclass(frozen=True)
class LayerStep:
    """One step of a Llama-family layer.

    ``name``: its key in the trace (and the JSON, the link's chart); ``code``:
    the line of transformers' ``LlamaAttention`` / ``eager_attention_forward``
    (or its Qwen3, Gemma 3 variant) that computes it; ``shape``: in n, d, h, k,
    e; ``cut``: how a query head's slice cuts it (`HEAD` … `LAYER`);
    ``layout``: `MATRIX`, `ROW` or `COLUMN`; ``rows``, ``cols``, ``colour``,
    ``cell_text``: how it is drawn (`explorer.core.steps.plain_step`);
    ``title``: the chart's title, with ``{head}``, ``{kv_head}``, ``{theta}``,
    ``{scaling}`` and ``{mask}`` filled by `explorer.render.decoder.title_of`;
    ``reference``: what `explorer.models.check.against_model_steps` compares
    it with ("" when it is not compared); ``in_trace``: False for a chart
    computed from the trace (``head_output``); ``charted``: False for the
    token ids, which have no chart."""

    name: str
    code: str
    shape: str
    cut: str
    title: str
    rows: Axis = TOKEN_ROWS
    cols: Axis = DIM_COLS
    layout: str = MATRIX
    colour: str = SIGNED
    cell_text: tuple[str, str] | None = None
    reference: str = ""
    in_trace: bool = True
    charted: bool = True

    @property
    def kind(self) -> Step:
        """How its chart is drawn: axes, colour scale and a mask's cell text."""
        return plain_step(self.name, self.rows, self.cols, self.colour, self.cell_text)


def _weight(name: str, code: str, shape: str, cut: str, title: str,
            rows: Axis = DIM_ROWS) -> LayerStep:
    return LayerStep(name, code, shape, cut, title, rows=rows)


def _bias(name: str, code: str, shape: str, cut: str, title: str) -> LayerStep:
    return LayerStep(name, code, shape, cut, title, rows=NO_AXIS, layout=ROW)


LAYER_STEPS: tuple[LayerStep, ...] = (
    LayerStep("token_ids", "the tokens' ids", "(n,)", LAYER, "token ids", charted=False),
    LayerStep("layer_input",
              "the residual stream entering the layer: LlamaDecoderLayer's hidden_states",
              "(n, d)", LAYER, "layer input (residual stream)"),
    LayerStep("input_norm", "input_layernorm's weight", "(d,)", LAYER,
              "input_layernorm weight", rows=NO_AXIS, layout=ROW),
    LayerStep("rms", "√(mean(x²) + eps) of each row, as LlamaRMSNorm computes it", "(n,)",
              LAYER, "rms of each token", cols=NO_AXIS, layout=COLUMN),
    LayerStep("embeddings", "X = RMSNorm(layer_input): input_layernorm(hidden_states)",
              "(n, d)", LAYER, "X = RMSNorm(layer input)",
              reference="input_layernorm's output"),
    _weight("W_query", "q_proj.weight.T", "(d, h·e)", HEAD_COLUMNS,
            "W_query, {head}'s columns"),
    _bias("b_query", "q_proj.bias (Qwen2)", "(h·e,)", HEAD_COLUMNS, "b_query, {head}"),
    _weight("W_key", "k_proj.weight.T", "(d, k·e)", KV_COLUMNS, "W_key, {kv_head}'s columns"),
    _bias("b_key", "k_proj.bias (Qwen2)", "(k·e,)", KV_COLUMNS, "b_key, {kv_head}"),
    _weight("W_value", "v_proj.weight.T", "(d, k·e)", KV_COLUMNS,
            "W_value, {kv_head}'s columns"),
    _bias("b_value", "v_proj.bias (Qwen2)", "(k·e,)", KV_COLUMNS, "b_value, {kv_head}"),
    LayerStep("queries", "q_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
              "(h, n, e)", HEAD, "Q of {head}", reference="q_proj's output, cut into heads"),
    LayerStep("keys", "k_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
              "(k, n, e)", KV_HEAD, "K of {kv_head}",
              reference="k_proj's output, cut into heads"),
    LayerStep("values", "v_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
              "(k, n, e)", KV_HEAD, "V of {kv_head}",
              reference="v_proj's output, cut into heads"),
    LayerStep("q_norm", "q_norm.weight (Qwen3, Gemma 3)", "(e,)", LAYER, "q_norm weight",
              rows=NO_AXIS, layout=ROW),
    LayerStep("k_norm", "k_norm.weight (Qwen3, Gemma 3)", "(e,)", LAYER, "k_norm weight",
              rows=NO_AXIS, layout=ROW),
    LayerStep("queries_normed", "self.q_norm(query_states): QK-norm (Qwen3, Gemma 3)",
              "(h, n, e)", HEAD, "Q of {head} after QK-norm", reference="q_norm's output"),
    LayerStep("keys_normed", "self.k_norm(key_states): QK-norm (Qwen3, Gemma 3)",
              "(k, n, e)", KV_HEAD, "K of {kv_head} after QK-norm",
              reference="k_norm's output"),
    LayerStep("rope_frequencies",
              "rotary_emb.inv_freq: θ^(−2i/e), scaled (ROPE_INIT_FUNCTIONS)", "(e/2,)",
              LAYER, "RoPE θ_i per pair ({theta})", rows=NO_AXIS, cols=PAIRS, layout=ROW),
    LayerStep("rope_cos", "cos of LlamaRotaryEmbedding.forward: cat(freqs, freqs).cos()",
              "(n, e)", LAYER, "cos(m·θ_i) ({theta})",
              reference="the cos the layer was given (the model's rotary_emb)"),
    LayerStep("rope_sin", "sin of LlamaRotaryEmbedding.forward: cat(freqs, freqs).sin()",
              "(n, e)", LAYER, "sin(m·θ_i) ({theta})",
              reference="the sin the layer was given (the model's rotary_emb)"),
    LayerStep("queries_rope", "apply_rotary_pos_emb: q · cos + rotate_half(q) · sin",
              "(h, n, e)", HEAD, "Q of {head} after RoPE",
              reference="apply_rotary_pos_emb of the model's Q with its cos and sin"),
    LayerStep("keys_rope", "apply_rotary_pos_emb: k · cos + rotate_half(k) · sin",
              "(k, n, e)", KV_HEAD, "K of {kv_head} after RoPE",
              reference="apply_rotary_pos_emb of the model's K with its cos and sin"),
    LayerStep("attn_scores", "torch.matmul(query, repeat_kv(key).transpose(2, 3))",
              "(h, n, n)", HEAD, "scores Q·Kᵀ of {head}", rows=QUERY_ROWS, cols=KEY_COLS),
    LayerStep("scaled_scores",
              "… * self.scaling (head_dim^−½; Gemma 3: query_pre_attn_scalar^−½)",
              "(h, n, n)", HEAD, "scaled scores of {head} (× {scaling})", rows=QUERY_ROWS,
              cols=KEY_COLS),
    LayerStep("causal_mask",
              "create_causal_mask / create_sliding_window_causal_mask, negated "
              "(True = hidden, as in the book)", "(n, n)", LAYER, "{mask}", rows=QUERY_ROWS,
              cols=KEY_COLS, colour=MASK, cell_text=("seen", "hidden"),
              reference="where the mask the layer was given adds more than 0 (True = hidden)"),
    LayerStep("masked_scores",
              "attn_weights + attention_mask (the model adds the dtype's minimum)",
              "(h, n, n)", HEAD, "masked scores of {head}", rows=QUERY_ROWS, cols=KEY_COLS),
    LayerStep("attn_weights", "softmax(…, dim=-1, dtype=torch.float32): output_attentions",
              "(h, n, n)", HEAD, "attention weights of {head}", rows=QUERY_ROWS,
              cols=KEY_COLS, colour=WEIGHTS, reference="output_attentions"),
    LayerStep("context",
              "torch.matmul(attn_weights, repeat_kv(value)), heads side by side: o_proj's input",
              "(n, h·e)", HEAD_COLUMNS, "context of {head} (A·V)", reference="o_proj's input"),
    _weight("W_out", "o_proj.weight.T", "(h·e, d)", HEAD_ROWS, "W_out (o_proj), {head}'s rows",
            rows=HEAD_DIM_ROWS),
    LayerStep("head_output", "context · W_out of the head: its share of o_proj's output",
              "(n, d)", HEAD, "{head}'s share of the output", in_trace=False),
    _bias("b_out", "o_proj.bias (attention_bias)", "(d,)", LAYER, "b_out (o_proj bias)"),
    LayerStep("output", "o_proj(attn_output): the attention's output, before the residual",
              "(n, d)", LAYER, "the layer's attention output (o_proj)",
              reference="o_proj's output"),
)
"""Every step, in pipeline order (``head_output``, computed from ``context`` and
``W_out``, where the page shows it)."""

BY_NAME = {step.name: step for step in LAYER_STEPS}
"""Each `LayerStep` by name."""
