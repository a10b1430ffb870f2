"""A Llama-family layer taken home: a PyTorch script that recomputes it by hand (issue 39).

`decoder_script(config, location, head)` writes a script that needs torch and
transformers only. Run as ``python decoder_layer.py``, it:

1. loads the model the Real model page shows (by Hub name, or the folder the
   page loaded), ``attn_implementation="eager"``, in the dtype its weights
   ship in, and runs it once on the page's token ids (embedded, so the tokens
   are exactly the page's), catching the layer's input (a forward pre-hook),
   ``output_attentions`` and ``o_proj``'s output (a forward hook): the model's
   own numbers. Weights in another dtype than float32 (bfloat16) are upcast
   for the layer, as the page does (`explorer.models.forward.decoder_layer_call`):
   the reference is then a float32 copy of the layer's own modules run on the
   model's layer input, mask and RoPE;
2. recomputes the layer's attention by hand, with n tokens, d = d_model,
   h = n_heads, k = n_kv_heads, e = head_dim:
   ``x = input_layernorm(layer_input)`` (n, d), RMSNorm;
   each query head's rows of ``q_proj`` and its K/V head's rows of
   ``k_proj``, ``v_proj`` (e, d), query head h reading K/V head h // (h/k)
   (``repeat_kv``); ``queries``, ``keys``, ``values`` (n, e); QK-norm where
   the model has it (Qwen3, Gemma 3); RoPE with the cos and sin (n, e) of the
   model's own ``rotary_emb`` (its θ and scaling); ``attn_scores`` (n, n)
   times the scale (1/√e; Gemma 3: query_pre_attn_scalar^(−1/2)); the causal
   mask, or the sliding window where the layer has one; ``attn_weights``
   (softmax); ``context`` (n, e); the heads side by side (n, h·e) times
   ``o_proj``: the layer's attention output (n, d). It prints the shapes and
   a corner of each step of the page's query head;
3. compares every head's weights with ``output_attentions`` and the output
   with ``o_proj``'s, within `explorer.models.check`'s tolerances (written in
   by value), and prints one ✓ or ✗ line each (`CHECK_LINE`);
4. generates up to ``new_tokens`` tokens greedily, as the page does
   (`explorer.models.generation.generate`: ties broken by a generator seeded
   with ``seed``, stopping at the end-of-sequence token or the model's last
   position; not at the page's time limit), with the model's own KV cache
   (a ``DynamicCache``; ``past_key_values``, ``use_cache=True``,
   ``output_attentions=True``): the prompt once, then one token a pass. For
   each new token it prints its id and text (`GENERATED_LINE`), its one row of
   weights in the layer and head over the cache (`ROW_LINE`; a sliding
   window's cache keeps only its last keys, the row is 0 before them), and the
   cache's bytes, every layer, beside the bytes without grouped-query sharing,
   × n_heads / n_kv_heads (`CACHE_LINE`). Then one full forward pass over the
   whole sequence without a cache, and every generated row of every head
   against that pass's row, within `explorer.models.generation.ROW_TOLERANCE`
   of the weights' dtype (by value): a ✓ or ✗ line, as
   `explorer.models.against_full_pass` checks the page's rows;
5. tabulates where every layer × head's weight goes on the prompt, from the
   pass of part 1: the mean over query rows i ≥ 1 of A[i, 0] (the first token,
   the attention sink), A[i, i − 1] (the previous token) and A[i, i] (itself),
   as `explorer.models.heads.head_overview` measures them (`SHARES_HEADER`,
   `SHARES_ROW`); and exits with status 0 when every check matches, 1 when one
   differs.

Sources: ``transformers``' ``modeling_llama.py`` (``LlamaRMSNorm``,
``rotate_half``, ``apply_rotary_pos_emb``, ``repeat_kv``,
``eager_attention_forward``), ``modeling_qwen3.py`` and ``modeling_gemma3.py``
(QK-norm, Gemma's RMSNorm and scale); the same steps as
`explorer.models.llama.compute_decoder_trace`; ``cache_utils.py``
(``DynamicCache``) for the generation.

Visitor text (the sentence, a folder's path) enters the script only as a
``repr()`` literal, and the page's link only as a one-line comment
(`explorer.core.literal.comment`), so none of it can run.
"""

from __future__ import annotations

import re

from explorer.core import literal
from explorer.models.anatomy import EVERY_ARCHITECTURE
from explorer.models.catalogue import DEFAULT_NEW_TOKENS
from explorer.models.check import RELATIVE_TOLERANCE, TOLERANCE
from explorer.models.generation import ROW_TOLERANCE, checked_new_tokens
from explorer.models.llama import DecoderConfig
from explorer.render.script_templates import template

SCRIPT_FILE = "decoder_layer.py"
WEIGHTS_LINE = "attn_weights of the last query, head {head}: {values}"
"""How the script prints the page's head's weights on every key for the last
token, six decimals each, comma-separated (a test reads them back)."""
CHECK_LINE = "{mark} {what}: max |difference| {diff:.1e} (tolerance {allowed:.1e})"
"""One line of the script's check; ``mark`` is ✓ or ✗."""
GENERATED_LINE = "new token {index}: id {token_id} {text}, at position {position}"
"""How the script prints each generated token: its number (1, 2, ...), id,
text (``repr()``, or ``None`` without a tokenizer) and position."""
ROW_LINE = "    attn_weights of head {head} on positions 0 to {position}: {values}"
"""Its one row of weights in the page's layer and head, six decimals each (0
for a key a sliding window has dropped from the cache)."""
CACHE_LINE = "    KV cache: {tokens} tokens in layer {layer}; {nbytes} bytes in all, {mha_bytes} without GQA"
"""The cache after the token: its length in the page's layer, its bytes (every
layer), and the bytes without grouped-query attention's sharing, if every query
head kept its own keys and values."""
SHARES_HEADER = "layer  head  first (sink)  previous    itself"
"""The head habits' table header; a row per layer × head follows (`SHARES_ROW`)."""
SHARES_ROW = "{layer:5d}  {head:4d}  {first:12.6f}  {previous:8.6f}  {itself:8.6f}"
"""One head's mean shares of weight on the first token, the previous one and itself."""
_IDS_PER_LINE = 16


def _slot_values(c: DecoderConfig, location: str, head: int, text: str, link: str | None,
                 new_tokens: int, seed: int) -> dict[str, object]:
    """Every slot of the template ``decoder_layer.py``: the model, the tokens, the
    layer and head, the tolerances, the lines the script prints (as f-strings of its
    variables, `_f_string`), and what differs by model (Gemma's RMSNorm and scale,
    its RoPE per layer type; the reference of weights not in float32)."""
    arch = EVERY_ARCHITECTURE[c.architecture]
    ids = list(c.input_ids)
    id_lines = [", ".join(map(str, ids[i:i + _IDS_PER_LINE]))
                for i in range(0, len(ids), _IDS_PER_LINE)] or [""]
    gemma = c.norm_offset != 0.0
    float32 = c.dtype == "float32"
    kind = f', "{c.layer_type}"' if c.architecture == "gemma3_text" else ""
    return {
        "label": arch.label, "layer": c.layer, "head": head, "script_file": SCRIPT_FILE,
        "page": literal.comment(link or "the Real model page", 2000),
        "model_class": arch.model_class, "model": repr(location), "text": repr(text),
        "token_ids": "[" + ",\n             ".join(id_lines) + "]", "window": repr(c.window),
        "tolerance": repr(TOLERANCE), "relative_tolerance": repr(RELATIVE_TOLERANCE),
        "new_tokens": repr(new_tokens), "seed": repr(seed),
        "row_tolerance": repr(ROW_TOLERANCE.get(c.dtype, TOLERANCE)), "dtype": c.dtype,
        "check_line": CHECK_LINE, "weights_line": WEIGHTS_LINE,
        # the model's own RoPE tables: Gemma 3 keeps one per layer type
        "positions": f"positions{kind}",
        "norm_weight": "(1.0 + weight.float())" if gemma else "weight.float()",
        "shown_weight": "(1 + weight)" if gemma else "weight",
        "rms_norm": "Gemma3RMSNorm: its weight is stored around 0" if gemma else "LlamaRMSNorm",
        "scaling": ("config.query_pre_attn_scalar ** -0.5  # Gemma 3's own scale" if gemma
                    else "head_dim ** -0.5  # 1 / sqrt(head_dim)"),
        "reference": "output_attentions" if float32 else "the layer's own modules in float32",
        "output_reference": ("the model's o_proj output" if float32
                             else "their o_proj output"),
        "generated_line": _f_string(GENERATED_LINE),
        "row_line": _f_string(ROW_LINE, head="HEAD"),
        "cache_line": _f_string(CACHE_LINE, tokens="cached", layer="LAYER"),
        "shares_header": SHARES_HEADER,
        "shares_row": _f_string(SHARES_ROW, layer="layer_index", first="first[head]",
                                previous="previous[head]", itself="itself[head]")}


def _f_string(line: str, **expressions: str) -> str:
    """``line``, a `str.format` pattern of this module, as an f-string of the
    script: each field named in ``expressions`` becomes that expression, the
    others the script's variable of the field's name; format specs are kept."""
    for name, expression in expressions.items():
        line = re.sub(r"\{" + name + r"(?=[:}])", "{" + expression, line)
    return 'f"' + line + '"'


def decoder_script(config: DecoderConfig, location: str, head: int = 0, *,
                   text: str | None = None, link: str | None = None,
                   new_tokens: int = DEFAULT_NEW_TOKENS, seed: int = 0) -> str:
    """The standalone script of layer ``config.layer`` of a Llama-family model,
    query head ``head`` shown step by step, then ``new_tokens`` generated with
    the KV cache (greedy, ties broken by ``seed``) and every head's habits
    (see the module docstring).

    ``config``: the page's trace's `explorer.models.llama.DecoderConfig` (its
    token ids, layer, window, QK-norm, dtype ...); ``location``: the model's
    Hub name or folder (`explorer.models.LoadedModel.location`), which the
    script loads; ``text``: the sentence the ids were read from (default the
    config's), written in as a ``repr()`` literal; ``link``: the page's link,
    a one-line comment; ``new_tokens``: the page's "Tokens to generate", a
    whole number from 1 to `explorer.models.catalogue.MAX_NEW_TOKENS`
    (else `explorer.models.ModelError`, from
    `explorer.models.generation.checked_new_tokens`). Returns the source as a string.

    The text is the template ``explorer/render/scripts/decoder_layer.py``
    (`explorer.render.script_templates`), filled by `_slot_values`.
    """
    checked_new_tokens(new_tokens, "new_tokens")
    text = config.text or "" if text is None else text
    values = _slot_values(config, location, head, text, link, new_tokens, seed)
    upcast = "float32" if config.dtype == "float32" else "upcast"
    blocks = template("decoder_layer")

    def fill(*names: str) -> str:
        return "\n".join(blocks[name].fill(**values) for name in names)

    header = ["header", *["import_copy"] * (config.dtype != "float32"), "settings"]
    by_hand = ["by_hand", *["qk_norm"] * config.qk_norm, "by_hand_rest"]
    return (fill(*header) + "\n\n\n" + fill("model") + "\n\n\n"
            + fill(f"hooks_{upcast}", "model_run", f"reference_{upcast}") + "\n\n"
            + "\n\n".join(fill(*part) for part in (by_hand, ["check"], ["generation"],
                                                      ["shares"])) + "\n")
