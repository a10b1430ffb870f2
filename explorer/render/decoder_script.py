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


def _header(c: DecoderConfig, location: str, head: int, text: str, link: str | None,
            new_tokens: int, seed: int) -> list[str]:
    """The docstring, imports and settings: the model, the tokens, the layer and head."""
    arch = EVERY_ARCHITECTURE[c.architecture]
    ids = list(c.input_ids)
    id_lines = [", ".join(map(str, ids[i:i + _IDS_PER_LINE]))
                for i in range(0, len(ids), _IDS_PER_LINE)] or [""]
    return [
        f'"""One layer of a {arch.label} model by hand: layer {c.layer}\'s attention, query '
        f"head {head},",
        "checked against the model's own numbers. Written by the self-attention explorer's",
        "Real model page.",
        "",
        f"    python {SCRIPT_FILE}     (needs torch and transformers)",
        "",
        "Then it generates token by token with the model's KV cache, each new token's row of",
        "attention checked against one full pass, and tabulates where every head's weight goes.",
        "",
        "Exit status 0 when every check matches, 1 when one differs.",
        '"""',
        f"# The page: {literal.comment(link or 'the Real model page', 2000)}",
        *(["import copy"] if c.dtype != "float32" else []),
        "import sys",
        "",
        "import torch",
        f"from transformers import AutoTokenizer, DynamicCache, {arch.model_class}",
        "",
        "# The settings of the page",
        f"MODEL = {location!r}",
        f"TEXT = {text!r}  # the sentence; the model reads its ids:",
        f"TOKEN_IDS = [{id_lines[0]}" + ("]" if len(id_lines) == 1 else ","),
        *[f"             {line}" + ("]" if i == len(id_lines) - 2 else ",")
          for i, line in enumerate(id_lines[1:])],
        f"LAYER, HEAD = {c.layer}, {head}",
        f"WINDOW = {c.window!r}  # the sliding window's keys on this layer (None: causal only)",
        f"TOLERANCE, RELATIVE_TOLERANCE = {TOLERANCE!r}, {RELATIVE_TOLERANCE!r}"
        "  # the explorer's (explorer.models.check)",
        f"NEW_TOKENS, SEED = {new_tokens!r}, {seed!r}  # generated greedily; SEED breaks ties",
        f"ROW_TOLERANCE = {ROW_TOLERANCE.get(c.dtype, TOLERANCE)!r}"
        f"  # a generated row against the full pass, {c.dtype} (explorer.models.generation)",
        "",
        "torch.set_grad_enabled(False)",
        "torch.set_printoptions(precision=4, sci_mode=False, linewidth=100)",
        'sys.stdout.reconfigure(errors="backslashreplace")  # any text prints on any console',
        "",
        "",
        "def show(name, tensor, note=\"\"):",
        '    """A step: its name, shape and numbers (torch shows the corners of a large one)."""',
        '    print(f"\\n--- {name} {tuple(tensor.shape)} {note}---")',
        "    print(tensor)",
        "",
        "",
        "failed = []  # the checks that differ",
        "",
        "",
        "def check(what, diff, allowed):",
        '    """One line of the check: ✓ when the largest difference is within what is allowed."""',
        "    ok = diff <= allowed  # False for nan",
        "    if not ok:",
        "        failed.append(what)",
        f'    print("{CHECK_LINE}"',
        '          .format(mark="✓" if ok else "✗", what=what, diff=diff, allowed=allowed))',
        "",
        "",
    ]


def _rope_call(c: DecoderConfig, x: str) -> str:
    """The model's own RoPE tables for ``x`` (1, n, d): Gemma 3 keeps one per
    layer type, so its ``rotary_emb`` is told the layer's."""
    kind = f', "{c.layer_type}"' if c.architecture == "gemma3_text" else ""
    return f"model.model.rotary_emb({x}, positions{kind})"


def _model_code(c: DecoderConfig) -> list[str]:
    """Load the model and run it once: its layer input and its own attention."""
    arch = EVERY_ARCHITECTURE[c.architecture]
    lines = [
        "# ---------------------------------------------------------------------------",
        "# 1. The model, run once on the tokens: the layer's input and its own numbers",
        "# ---------------------------------------------------------------------------",
        f'model = {arch.model_class}.from_pretrained(MODEL, attn_implementation="eager", '
        f"dtype=torch.{c.dtype})",
        "model.eval()",
        "config = model.config",
        "layer = model.model.layers[LAYER]  # input_layernorm, self_attn, ...",
        "caught = {}",
        "",
        "",
        "def catch_layer_input(module, args, kwargs):",
        '    hidden_states = args[0] if args else kwargs["hidden_states"]',
        '    caught["layer_input"] = hidden_states[0].float()  # (n, d_model): the residual stream',
        "",
        "",
        *(["def catch_output(module, args, output):",
           '    caught["o_proj"] = output[0].float()  # (n, d_model): the attention\'s output',
           "", "",
           "handles = [layer.register_forward_pre_hook(catch_layer_input, with_kwargs=True),",
           "           layer.self_attn.o_proj.register_forward_hook(catch_output)]"]
          if c.dtype == "float32" else
          ["def catch_attention_mask(module, args, kwargs):",
           '    caught["mask"] = kwargs.get("attention_mask")  # what the model adds to its scores',
           "", "",
           "handles = [layer.register_forward_pre_hook(catch_layer_input, with_kwargs=True),",
           "           layer.self_attn.register_forward_pre_hook(catch_attention_mask, "
           "with_kwargs=True)]"]),
        "run = model.model(input_ids=torch.tensor([TOKEN_IDS]), output_attentions=True, "
        "use_cache=False)",
        "for handle in handles:",
        "    handle.remove()",
        "positions = torch.arange(len(TOKEN_IDS))[None]  # (1, n)",
    ]
    if c.dtype == "float32":
        return lines + [
            "model_weights = run.attentions[LAYER][0]  # (n_heads, n, n): output_attentions",
            'model_output = caught["o_proj"]',
        ]
    return lines + [
        f"# The weights ship in {c.dtype}: as the page does, the layer is computed in float32.",
        "# The reference is a float32 copy of the layer's own modules (the same weights, upcast",
        "# exactly), run on the layer input, mask and positions of the model's own pass.",
        "layer = copy.deepcopy(layer).float()",
        'hidden = caught["layer_input"][None]  # (1, n, d_model)',
        f"cos, sin = {_rope_call(c, 'hidden')}",
        'mask = caught["mask"]',
        "if mask is not None and mask.dtype != torch.bool:",
        "    mask = mask.float()",
        "attention_output, weights = layer.self_attn(hidden_states=layer.input_layernorm(hidden),",
        "                                            position_embeddings=(cos, sin), "
        "attention_mask=mask)",
        "model_weights = weights[0]  # (n_heads, n, n)",
        "model_output = attention_output[0]  # (n, d_model): o_proj's output",
    ]


def _by_hand_code(c: DecoderConfig) -> list[str]:
    """The layer's attention by hand: RMSNorm, each head's Q, K, V, QK-norm,
    RoPE, scores, mask, softmax, context; the heads side by side and o_proj."""
    gemma = c.norm_offset != 0.0
    weight = "(1.0 + weight.float())" if gemma else "weight.float()"
    shown_weight = "(1 + weight)" if gemma else "weight"
    scaling = ("config.query_pre_attn_scalar ** -0.5  # Gemma 3's own scale" if gemma
               else "head_dim ** -0.5  # 1 / sqrt(head_dim)")
    lines = [
        "# ---------------------------------------------------------------------------",
        "# 2. The layer's attention by hand, in float32 (shapes: n tokens, e = head_dim)",
        "# ---------------------------------------------------------------------------",
        "attn = layer.self_attn",
        "n_heads = config.num_attention_heads  # query heads",
        "n_kv_heads = config.num_key_value_heads  # K/V heads, each read by n_heads // n_kv_heads",
        "head_dim = attn.head_dim  # one head's width",
        "eps = config.rms_norm_eps",
        'layer_input = caught["layer_input"]  # (n, d_model)',
        "n_tokens, d_model = layer_input.shape",
        'print(f"{MODEL}, layer {LAYER}: n_heads = {n_heads}, n_kv_heads = {n_kv_heads}, "',
        '      f"head_dim = {head_dim}, d_model = {d_model}")',
        'print(f"TEXT = {TEXT!r}: {n_tokens} tokens, ids {TOKEN_IDS}")',
        'show("layer_input", layer_input)',
        "",
        "",
        "def rms_norm(x, weight):",
        f'    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * {shown_weight}',
        ("    (Gemma3RMSNorm: its weight is stored around 0)." if gemma
         else "    (LlamaRMSNorm).") + '"""',
        f"    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * {weight}",
        "",
        "",
        "x = rms_norm(layer_input, layer.input_layernorm.weight)  # (n, d_model)",
        'show("x = input_layernorm(layer_input)", x)',
        "# RoPE's tables from the model's own rotary_emb: its theta and its scaling",
        f"cos, sin = {_rope_call(c, 'x[None]')}  # each (1, n, head_dim)",
        "cos, sin = cos[0], sin[0]  # (n, head_dim): angle m * theta_i in columns i and i + e/2",
        'show("cos", cos)',
        'show("sin", sin)',
        "query_pos = torch.arange(n_tokens)[:, None]  # i",
        "key_pos = torch.arange(n_tokens)[None, :]  # j",
        "may_attend = key_pos <= query_pos  # causal: query i sees keys 0 ... i",
        "if WINDOW is not None:  # a sliding window, the last WINDOW keys: i - WINDOW < j <= i",
        "    may_attend &= key_pos > query_pos - WINDOW",
        'show("may_attend", may_attend, "(True: query i sees key j) ")',
        f"scaling = {scaling}",
        "",
        "",
        "def rotate_half(t):",
        '    """Each row\'s halves (t1, t2) -> (-t2, t1): RoPE turns pair (i, i + head_dim/2)."""',
        "    half = t.shape[-1] // 2",
        "    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)",
        "",
        "",
        "def head_rows(linear, head):",
        '    """A head\'s slice of q_proj, k_proj or v_proj: its head_dim rows of the weight',
        '    (head_dim, d_model), and of the bias (0 when the layer has none)."""',
        "    rows = slice(head * head_dim, (head + 1) * head_dim)",
        "    bias = linear.bias[rows].float() if linear.bias is not None else 0.0",
        "    return linear.weight[rows].float(), bias",
        "",
        "",
        "def attention_head(head):",
        '    """Query head `head` of the layer, every step kept: a dict of tensors."""',
        "    # repeat_kv: with g = n_heads // n_kv_heads, query heads 0 ... g-1 read K/V head 0,",
        "    # the next g read K/V head 1, ...",
        "    kv_head = head // (n_heads // n_kv_heads)",
        "    W_query, b_query = head_rows(attn.q_proj, head)  # (head_dim, d_model)",
        "    W_key, b_key = head_rows(attn.k_proj, kv_head)  # its K/V head's rows",
        "    W_value, b_value = head_rows(attn.v_proj, kv_head)",
        "    queries = x @ W_query.T + b_query  # (n, d_model) @ (d_model, e) -> (n, e)",
        "    keys = x @ W_key.T + b_key",
        "    values = x @ W_value.T + b_value",
        '    steps = {"kv_head": kv_head, "W_query": W_query, "W_key": W_key, "W_value": W_value,',
        '             "queries": queries, "keys": keys, "values": values}',
    ]
    if c.qk_norm:
        lines += [
            "    # QK-norm: each query and key row RMS-normalised over its head_dim numbers",
            '    queries = steps["queries_normed"] = rms_norm(queries, attn.q_norm.weight)',
            '    keys = steps["keys_normed"] = rms_norm(keys, attn.k_norm.weight)',
        ]
    return lines + [
        "    # RoPE: the pair (i, i + head_dim/2) of the row at position m turned by m * theta_i",
        '    queries = steps["queries_rope"] = queries * cos + rotate_half(queries) * sin',
        '    keys = steps["keys_rope"] = keys * cos + rotate_half(keys) * sin',
        '    attn_scores = steps["attn_scores"] = queries @ keys.T  # (n, e) @ (e, n) -> (n, n)',
        '    scaled = steps["scaled_scores"] = attn_scores * scaling',
        '    masked = steps["masked_scores"] = scaled.masked_fill(~may_attend, float("-inf"))',
        '    attn_weights = steps["attn_weights"] = torch.softmax(masked, dim=-1)  # rows sum to 1',
        '    steps["context"] = attn_weights @ values  # (n, n) @ (n, head_dim) -> (n, head_dim)',
        "    return steps",
        "",
        "",
        "heads = [attention_head(head) for head in range(n_heads)]",
        'context = torch.cat([h["context"] for h in heads], dim=-1)  # (n, n_heads * head_dim)',
        "out_proj = attn.o_proj",
        "# (n, n_heads * head_dim) @ (n_heads * head_dim, d_model) -> (n, d_model)",
        "output = context @ out_proj.weight.float().T",
        "if out_proj.bias is not None:",
        "    output = output + out_proj.bias.float()",
        "",
        "mine = heads[HEAD]  # the page's query head, step by step",
        'sharing = [h for h in range(n_heads) if heads[h]["kv_head"] == mine["kv_head"]]',
        'print(f"\\nQuery head {HEAD} reads K/V head {mine[\'kv_head\']}, which query heads "',
        '      f"{sharing} read ({n_heads} query heads on {n_kv_heads} K/V heads)")',
        "for name, tensor in mine.items():",
        '    if name != "kv_head":',
        "        show(name, tensor)",
        'show("context, every head side by side", context)',
        'show("output = context @ o_proj", output)',
        'last_row = ", ".join(f"{w:.6f}" for w in mine["attn_weights"][-1].tolist())',
        f'print("\\n{WEIGHTS_LINE}".format(head=HEAD, values=last_row))',
    ]


def _check_code(c: DecoderConfig) -> list[str]:
    """Every head's weights and the output against the model's."""
    reference = ("output_attentions" if c.dtype == "float32"
                 else "the layer's own modules in float32")
    output_reference = ("the model's o_proj output" if c.dtype == "float32"
                        else "their o_proj output")
    return [
        "",
        "# ---------------------------------------------------------------------------",
        "# 3. The check: the hand-computed layer against the model's own numbers",
        "# ---------------------------------------------------------------------------",
        'our_weights = torch.stack([h["attn_weights"] for h in heads])  # (n_heads, n, n)',
        "weights_diff = (our_weights - model_weights.float()).abs().max().item()",
        "output_diff = (output - model_output).abs().max().item()",
        "output_allowed = TOLERANCE + RELATIVE_TOLERANCE * model_output.abs().max().item()",
        f'check(f"attention weights, all {{n_heads}} heads, vs {reference}", weights_diff, '
        "TOLERANCE)",
        f'check("the output vs {output_reference}", output_diff, output_allowed)',
    ]


def _f_string(line: str, **expressions: str) -> str:
    """``line``, a `str.format` pattern of this module, as an f-string of the
    script: each field named in ``expressions`` becomes that expression, the
    others the script's variable of the field's name; format specs are kept."""
    for name, expression in expressions.items():
        line = re.sub(r"\{" + name + r"(?=[:}])", "{" + expression, line)
    return 'f"' + line + '"'


def _generation_code() -> list[str]:
    """Greedy generation with the model's own KV cache, each new token's row of
    the layer's weights; every row against one full pass without a cache."""
    return [
        "",
        "# ---------------------------------------------------------------------------",
        "# 4. Generation, token by token, with the model's own KV cache",
        "# ---------------------------------------------------------------------------",
        "# The prompt goes through once (prefill) and fills the cache with every layer's keys",
        "# and values; then each new token goes through alone: its one query per head reads",
        "# every key in the cache, and the earlier keys and values are never computed again.",
        "try:  # the new tokens' text; a folder without a tokenizer shows ids only",
        "    tokenizer = AutoTokenizer.from_pretrained(MODEL)",
        "except Exception:  # noqa: BLE001 - any failure means: no tokenizer here",
        "    tokenizer = None",
        "eos = config.eos_token_id  # generation stops after the end-of-sequence token",
        "eos = set(eos) if isinstance(eos, (list, tuple)) else {eos}",
        "generator = torch.Generator().manual_seed(SEED)",
        "",
        "",
        "def greedy_token(logits):",
        '    """The most likely next token; between equally likely ones, one drawn by the',
        '    seeded generator (as the page does: the same every time)."""',
        "    best = torch.nonzero(logits == logits.max()).flatten()",
        "    if len(best) == 1:",
        "        return int(best[0])",
        "    return int(best[torch.randint(len(best), (1,), generator=generator)])",
        "",
        "",
        "def bytes_of(cache):",
        '    """The bytes of the keys and values the cache holds, every layer."""',
        "    return sum(t.numel() * t.element_size() for cached in cache.layers",
        "               for t in (cached.keys, cached.values) if isinstance(t, torch.Tensor))",
        "",
        "",
        "cache = DynamicCache(config=config)  # a sliding-window layer keeps only its window",
        "",
        "",
        "def step(ids):",
        '    """One pass over the new `ids` with the cache: the next token\'s logits (vocab,)',
        '    and layer LAYER\'s weights (n_heads, len(ids), cached tokens), in float32."""',
        "    out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True,",
        "                output_attentions=True, logits_to_keep=1)",
        "    return out.logits[0, -1].float(), out.attentions[LAYER][0].float()",
        "",
        "",
        "ids = list(TOKEN_IDS)",
        "room = config.max_position_embeddings - len(ids)  # the model's last position",
        'print(f"\\nGenerating up to {min(NEW_TOKENS, room)} tokens greedily after the "',
        '      f"{len(ids)} of the prompt; layer {LAYER}, head {HEAD}:")',
        "logits, _ = step(ids)  # the prefill: the whole prompt at once",
        "rows = []  # (position, attn_weights (n_heads, position + 1)) of each new token",
        "for index in range(1, min(NEW_TOKENS, room) + 1):",
        "    token_id = greedy_token(logits)",
        "    position = len(ids)",
        "    ids.append(token_id)",
        "    logits, weights = step([token_id])  # weights (n_heads, 1, t): one query, t keys",
        "    cached = weights.shape[-1]  # the keys in the layer's cache, this token's own included",
        "    # a sliding window's cache holds only the last keys: put the row at their positions",
        "    row = torch.zeros(n_heads, position + 1)",
        "    row[:, position + 1 - cached:] = weights[:, 0]",
        "    rows.append((position, row))",
        "    text = repr(tokenizer.decode([token_id])) if tokenizer is not None else None",
        "    nbytes = bytes_of(cache)",
        "    mha_bytes = nbytes * n_heads // n_kv_heads  # each query head its own keys, values",
        f"    print({_f_string(GENERATED_LINE)})",
        '    values = ", ".join(f"{w:.6f}" for w in row[HEAD].tolist())',
        f"    print({_f_string(ROW_LINE, head='HEAD')})",
        f"    print({_f_string(CACHE_LINE, tokens='cached', layer='LAYER')})",
        "    if token_id in eos:",
        "        break",
        "",
        "# The same sequence in one full forward pass, without a cache: row `position` of its",
        "# weights must be the row the new token read from the cache.",
        "full = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)",
        "full_weights = full.attentions[LAYER][0].float()  # (n_heads, N, N), N = len(ids)",
        "rows_diff = max(((row - full_weights[:, position, :position + 1]).abs().max().item()",
        "                 for position, row in rows), default=0.0)",
        "# Both sides are the model's own numbers, in its dtype (upcast to print): a bfloat16",
        "# model's rows differ by its rounding (the page's float32 rows, by float32's).",
        'check(f"{len(rows)} generated rows, all {n_heads} heads, the model\'s own rows from its "',
        '      f"cache vs one full pass without a cache, both {str(model.dtype)[6:]}",',
        '      rows_diff, ROW_TOLERANCE)',
    ]


def _shares_code() -> list[str]:
    """Every layer × head's mean share of weight on the first token, the
    previous one and itself (`explorer.models.heads.head_overview`'s)."""
    return [
        "",
        "# ---------------------------------------------------------------------------",
        "# 5. Where the weight goes, across the model: every layer and head",
        "# ---------------------------------------------------------------------------",
        "# From the pass of part 1 (output_attentions, the prompt): for each head, the mean",
        "# over query rows i >= 1 of A[i, 0] (the first token: an attention sink), A[i, i-1]",
        "# (the previous token) and A[i, i] (itself). Query 0 is left out: it can only",
        "# attend to itself. With one token the means are nan.",
        "query_rows = torch.arange(1, n_tokens)  # i = 1 ... n-1",
        'print(f"\\nWhere the weight goes in each head, mean over query rows 1 to {n_tokens - 1}:")',
        f'print("{SHARES_HEADER}")',
        "for layer_index, layer_weights in enumerate(run.attentions):",
        "    attn_weights = layer_weights[0].float()  # (n_heads, n, n)",
        "    first = attn_weights[:, query_rows, 0].mean(dim=-1)  # (n_heads,)",
        "    previous = attn_weights[:, query_rows, query_rows - 1].mean(dim=-1)",
        "    itself = attn_weights[:, query_rows, query_rows].mean(dim=-1)",
        "    for head in range(n_heads):",
        "        print(" + _f_string(SHARES_ROW, layer="layer_index", first="first[head]",
                                    previous="previous[head]", itself="itself[head]") + ")",
        "",
        "sys.exit(1 if failed else 0)",
    ]


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
    """
    checked_new_tokens(new_tokens, "new_tokens")
    text = config.text or "" if text is None else text
    parts = [_header(config, location, head, text, link, new_tokens, seed),
             _model_code(config), [""], _by_hand_code(config), _check_code(config),
             _generation_code(), _shares_code()]
    return "\n".join(line for lines in parts for line in lines) + "\n"
