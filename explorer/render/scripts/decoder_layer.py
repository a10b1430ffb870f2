# The template of decoder_layer.py, the Real model page's script
# (`explorer.render.decoder_script.decoder_script`): named blocks ("#@ name" lines) with
# __NAME__ slots (`explorer.render.script_templates`). decoder_script writes the blocks
# the model needs, in this order, and the blank lines between them.
#
# The model's class is imported last, after AutoTokenizer and DynamicCache, whatever its
# name: the imports are not sorted by name here.
# ruff: noqa: I001

#@ header
"""One layer of a __LABEL__ model by hand: layer __LAYER__'s attention, query head __HEAD__,
checked against the model's own numbers. Written by the self-attention explorer's
Real model page.

    python __SCRIPT_FILE__     (needs torch and transformers)

Then it generates token by token with the model's KV cache, each new token's row of
attention checked against one full pass, and tabulates where every head's weight goes.

Exit status 0 when every check matches, 1 when one differs.
"""
# The page: __PAGE__

#@ import_copy
import copy

#@ settings
import sys

import torch
from transformers import AutoTokenizer, DynamicCache, __MODEL_CLASS__

# The settings of the page
MODEL = __MODEL__
TEXT = __TEXT__  # the sentence; the model reads its ids:
TOKEN_IDS = __TOKEN_IDS__
LAYER, HEAD = __LAYER__, __HEAD__
WINDOW = __WINDOW__  # the sliding window's keys on this layer (None: causal only)
TOLERANCE, RELATIVE_TOLERANCE = __TOLERANCE__, __RELATIVE_TOLERANCE__  # the explorer's (explorer.models.check)
NEW_TOKENS, SEED = __NEW_TOKENS__, __SEED__  # generated greedily; SEED breaks ties
ROW_TOLERANCE = __ROW_TOLERANCE__  # a generated row against the full pass, __DTYPE__ (explorer.models.generation)

torch.set_grad_enabled(False)
torch.set_printoptions(precision=4, sci_mode=False, linewidth=100)
sys.stdout.reconfigure(errors="backslashreplace")  # any text prints on any console


def show(name, tensor, note=""):
    """A step: its name, shape and numbers (torch shows the corners of a large one)."""
    print(f"\n--- {name} {tuple(tensor.shape)} {note}---")
    print(tensor)


failed = []  # the checks that differ


def check(what, diff, allowed):
    """One line of the check: ✓ when the largest difference is within what is allowed."""
    ok = diff <= allowed  # False for nan
    if not ok:
        failed.append(what)
    print("__CHECK_LINE__"
          .format(mark="✓" if ok else "✗", what=what, diff=diff, allowed=allowed))

#@ model
# ---------------------------------------------------------------------------
# 1. The model, run once on the tokens: the layer's input and its own numbers
# ---------------------------------------------------------------------------
model = __MODEL_CLASS__.from_pretrained(MODEL, attn_implementation="eager", dtype=torch.__DTYPE__)
model.eval()
config = model.config
layer = model.model.layers[LAYER]  # input_layernorm, self_attn, ...
caught = {}


def catch_layer_input(module, args, kwargs):
    hidden_states = args[0] if args else kwargs["hidden_states"]
    caught["layer_input"] = hidden_states[0].float()  # (n, d_model): the residual stream

#@ hooks_float32
def catch_output(module, args, output):
    caught["o_proj"] = output[0].float()  # (n, d_model): the attention's output


handles = [layer.register_forward_pre_hook(catch_layer_input, with_kwargs=True),
           layer.self_attn.o_proj.register_forward_hook(catch_output)]

#@ hooks_upcast
def catch_attention_mask(module, args, kwargs):
    caught["mask"] = kwargs.get("attention_mask")  # what the model adds to its scores


handles = [layer.register_forward_pre_hook(catch_layer_input, with_kwargs=True),
           layer.self_attn.register_forward_pre_hook(catch_attention_mask, with_kwargs=True)]

#@ model_run
run = model.model(input_ids=torch.tensor([TOKEN_IDS]), output_attentions=True, use_cache=False)
for handle in handles:
    handle.remove()
positions = torch.arange(len(TOKEN_IDS))[None]  # (1, n)

#@ reference_float32
model_weights = run.attentions[LAYER][0]  # (n_heads, n, n): output_attentions
model_output = caught["o_proj"]

#@ reference_upcast
# The weights ship in __DTYPE__: as the page does, the layer is computed in float32.
# The reference is a float32 copy of the layer's own modules (the same weights, upcast
# exactly), run on the layer input, mask and positions of the model's own pass.
layer = copy.deepcopy(layer).float()
hidden = caught["layer_input"][None]  # (1, n, d_model)
cos, sin = model.model.rotary_emb(hidden, __POSITIONS__)
mask = caught["mask"]
if mask is not None and mask.dtype != torch.bool:
    mask = mask.float()
attention_output, weights = layer.self_attn(hidden_states=layer.input_layernorm(hidden),
                                            position_embeddings=(cos, sin), attention_mask=mask)
model_weights = weights[0]  # (n_heads, n, n)
model_output = attention_output[0]  # (n, d_model): o_proj's output

#@ by_hand
# ---------------------------------------------------------------------------
# 2. The layer's attention by hand, in float32 (shapes: n tokens, e = head_dim)
# ---------------------------------------------------------------------------
attn = layer.self_attn
n_heads = config.num_attention_heads  # query heads
n_kv_heads = config.num_key_value_heads  # K/V heads, each read by n_heads // n_kv_heads
head_dim = attn.head_dim  # one head's width
eps = config.rms_norm_eps
layer_input = caught["layer_input"]  # (n, d_model)
n_tokens, d_model = layer_input.shape
print(f"{MODEL}, layer {LAYER}: n_heads = {n_heads}, n_kv_heads = {n_kv_heads}, "
      f"head_dim = {head_dim}, d_model = {d_model}")
print(f"TEXT = {TEXT!r}: {n_tokens} tokens, ids {TOKEN_IDS}")
show("layer_input", layer_input)


def rms_norm(x, weight):
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * __SHOWN_WEIGHT__
    (__RMS_NORM__)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * __NORM_WEIGHT__


x = rms_norm(layer_input, layer.input_layernorm.weight)  # (n, d_model)
show("x = input_layernorm(layer_input)", x)
# RoPE's tables from the model's own rotary_emb: its theta and its scaling
cos, sin = model.model.rotary_emb(x[None], __POSITIONS__)  # each (1, n, head_dim)
cos, sin = cos[0], sin[0]  # (n, head_dim): angle m * theta_i in columns i and i + e/2
show("cos", cos)
show("sin", sin)
query_pos = torch.arange(n_tokens)[:, None]  # i
key_pos = torch.arange(n_tokens)[None, :]  # j
may_attend = key_pos <= query_pos  # causal: query i sees keys 0 ... i
if WINDOW is not None:  # a sliding window, the last WINDOW keys: i - WINDOW < j <= i
    may_attend &= key_pos > query_pos - WINDOW
show("may_attend", may_attend, "(True: query i sees key j) ")
scaling = __SCALING__


def rotate_half(t):
    """Each row's halves (t1, t2) -> (-t2, t1): RoPE turns pair (i, i + head_dim/2)."""
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def head_rows(linear, head):
    """A head's slice of q_proj, k_proj or v_proj: its head_dim rows of the weight
    (head_dim, d_model), and of the bias (0 when the layer has none)."""
    rows = slice(head * head_dim, (head + 1) * head_dim)
    bias = linear.bias[rows].float() if linear.bias is not None else 0.0
    return linear.weight[rows].float(), bias


def attention_head(head):
    """Query head `head` of the layer, every step kept: a dict of tensors."""
    # repeat_kv: with g = n_heads // n_kv_heads, query heads 0 ... g-1 read K/V head 0,
    # the next g read K/V head 1, ...
    kv_head = head // (n_heads // n_kv_heads)
    W_query, b_query = head_rows(attn.q_proj, head)  # (head_dim, d_model)
    W_key, b_key = head_rows(attn.k_proj, kv_head)  # its K/V head's rows
    W_value, b_value = head_rows(attn.v_proj, kv_head)
    queries = x @ W_query.T + b_query  # (n, d_model) @ (d_model, e) -> (n, e)
    keys = x @ W_key.T + b_key
    values = x @ W_value.T + b_value
    steps = {"kv_head": kv_head, "W_query": W_query, "W_key": W_key, "W_value": W_value,
             "queries": queries, "keys": keys, "values": values}
#@ qk_norm
    # QK-norm: each query and key row RMS-normalised over its head_dim numbers
    queries = steps["queries_normed"] = rms_norm(queries, attn.q_norm.weight)
    keys = steps["keys_normed"] = rms_norm(keys, attn.k_norm.weight)
#@ by_hand_rest
    # RoPE: the pair (i, i + head_dim/2) of the row at position m turned by m * theta_i
    queries = steps["queries_rope"] = queries * cos + rotate_half(queries) * sin
    keys = steps["keys_rope"] = keys * cos + rotate_half(keys) * sin
    attn_scores = steps["attn_scores"] = queries @ keys.T  # (n, e) @ (e, n) -> (n, n)
    scaled = steps["scaled_scores"] = attn_scores * scaling
    masked = steps["masked_scores"] = scaled.masked_fill(~may_attend, float("-inf"))
    attn_weights = steps["attn_weights"] = torch.softmax(masked, dim=-1)  # rows sum to 1
    steps["context"] = attn_weights @ values  # (n, n) @ (n, head_dim) -> (n, head_dim)
    return steps


heads = [attention_head(head) for head in range(n_heads)]
context = torch.cat([h["context"] for h in heads], dim=-1)  # (n, n_heads * head_dim)
out_proj = attn.o_proj
# (n, n_heads * head_dim) @ (n_heads * head_dim, d_model) -> (n, d_model)
output = context @ out_proj.weight.float().T
if out_proj.bias is not None:
    output = output + out_proj.bias.float()

mine = heads[HEAD]  # the page's query head, step by step
sharing = [h for h in range(n_heads) if heads[h]["kv_head"] == mine["kv_head"]]
print(f"\nQuery head {HEAD} reads K/V head {mine['kv_head']}, which query heads "
      f"{sharing} read ({n_heads} query heads on {n_kv_heads} K/V heads)")
for name, tensor in mine.items():
    if name != "kv_head":
        show(name, tensor)
show("context, every head side by side", context)
show("output = context @ o_proj", output)
last_row = ", ".join(f"{w:.6f}" for w in mine["attn_weights"][-1].tolist())
print("\n__WEIGHTS_LINE__".format(head=HEAD, values=last_row))

#@ check
# ---------------------------------------------------------------------------
# 3. The check: the hand-computed layer against the model's own numbers
# ---------------------------------------------------------------------------
our_weights = torch.stack([h["attn_weights"] for h in heads])  # (n_heads, n, n)
weights_diff = (our_weights - model_weights.float()).abs().max().item()
output_diff = (output - model_output).abs().max().item()
output_allowed = TOLERANCE + RELATIVE_TOLERANCE * model_output.abs().max().item()
check(f"attention weights, all {n_heads} heads, vs __REFERENCE__", weights_diff, TOLERANCE)
check("the output vs __OUTPUT_REFERENCE__", output_diff, output_allowed)

#@ generation
# ---------------------------------------------------------------------------
# 4. Generation, token by token, with the model's own KV cache
# ---------------------------------------------------------------------------
# The prompt goes through once (prefill) and fills the cache with every layer's keys
# and values; then each new token goes through alone: its one query per head reads
# every key in the cache, and the earlier keys and values are never computed again.
try:  # the new tokens' text; a folder without a tokenizer shows ids only
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
except Exception:  # noqa: BLE001 - any failure means: no tokenizer here
    tokenizer = None
eos = config.eos_token_id  # generation stops after the end-of-sequence token
eos = set(eos) if isinstance(eos, (list, tuple)) else {eos}
generator = torch.Generator().manual_seed(SEED)


def greedy_token(logits):
    """The most likely next token; between equally likely ones, one drawn by the
    seeded generator (as the page does: the same every time)."""
    best = torch.nonzero(logits == logits.max()).flatten()
    if len(best) == 1:
        return int(best[0])
    return int(best[torch.randint(len(best), (1,), generator=generator)])


def bytes_of(cache):
    """The bytes of the keys and values the cache holds, every layer."""
    return sum(t.numel() * t.element_size() for cached in cache.layers
               for t in (cached.keys, cached.values) if isinstance(t, torch.Tensor))


cache = DynamicCache(config=config)  # a sliding-window layer keeps only its window


def step(ids):
    """One pass over the new `ids` with the cache: the next token's logits (vocab,)
    and layer LAYER's weights (n_heads, len(ids), cached tokens), in float32."""
    out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True,
                output_attentions=True, logits_to_keep=1)
    return out.logits[0, -1].float(), out.attentions[LAYER][0].float()


ids = list(TOKEN_IDS)
room = config.max_position_embeddings - len(ids)  # the model's last position
print(f"\nGenerating up to {min(NEW_TOKENS, room)} tokens greedily after the "
      f"{len(ids)} of the prompt; layer {LAYER}, head {HEAD}:")
logits, _ = step(ids)  # the prefill: the whole prompt at once
rows = []  # (position, attn_weights (n_heads, position + 1)) of each new token
for index in range(1, min(NEW_TOKENS, room) + 1):
    token_id = greedy_token(logits)
    position = len(ids)
    ids.append(token_id)
    logits, weights = step([token_id])  # weights (n_heads, 1, t): one query, t keys
    cached = weights.shape[-1]  # the keys in the layer's cache, this token's own included
    # a sliding window's cache holds only the last keys: put the row at their positions
    row = torch.zeros(n_heads, position + 1)
    row[:, position + 1 - cached:] = weights[:, 0]
    rows.append((position, row))
    text = repr(tokenizer.decode([token_id])) if tokenizer is not None else None
    nbytes = bytes_of(cache)
    mha_bytes = nbytes * n_heads // n_kv_heads  # each query head its own keys, values
    print(__GENERATED_LINE__)
    values = ", ".join(f"{w:.6f}" for w in row[HEAD].tolist())
    print(__ROW_LINE__)
    print(__CACHE_LINE__)
    if token_id in eos:
        break

# The same sequence in one full forward pass, without a cache: row `position` of its
# weights must be the row the new token read from the cache.
full = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
full_weights = full.attentions[LAYER][0].float()  # (n_heads, N, N), N = len(ids)
rows_diff = max(((row - full_weights[:, position, :position + 1]).abs().max().item()
                 for position, row in rows), default=0.0)
# Both sides are the model's own numbers, in its dtype (upcast to print): a bfloat16
# model's rows differ by its rounding (the page's float32 rows, by float32's).
check(f"{len(rows)} generated rows, all {n_heads} heads, the model's own rows from its "
      f"cache vs one full pass without a cache, both {str(model.dtype)[6:]}",
      rows_diff, ROW_TOLERANCE)

#@ shares
# ---------------------------------------------------------------------------
# 5. Where the weight goes, across the model: every layer and head
# ---------------------------------------------------------------------------
# From the pass of part 1 (output_attentions, the prompt): for each head, the mean
# over query rows i >= 1 of A[i, 0] (the first token: an attention sink), A[i, i-1]
# (the previous token) and A[i, i] (itself). Query 0 is left out: it can only
# attend to itself. With one token the means are nan.
query_rows = torch.arange(1, n_tokens)  # i = 1 ... n-1
print(f"\nWhere the weight goes in each head, mean over query rows 1 to {n_tokens - 1}:")
print("__SHARES_HEADER__")
for layer_index, layer_weights in enumerate(run.attentions):
    attn_weights = layer_weights[0].float()  # (n_heads, n, n)
    first = attn_weights[:, query_rows, 0].mean(dim=-1)  # (n_heads,)
    previous = attn_weights[:, query_rows, query_rows - 1].mean(dim=-1)
    itself = attn_weights[:, query_rows, query_rows].mean(dim=-1)
    for head in range(n_heads):
        print(__SHARES_ROW__)

sys.exit(1 if failed else 0)
