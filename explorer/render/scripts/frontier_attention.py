# The template of frontier_attention.py, the Frontier attention page's script
# (`explorer.render.frontier_script.frontier_script`): one block ("#@ script") whose
# __NAME__ slots (`explorer.render.script_templates`) take the page's sizes, seed, X and
# the page's own numbers of each part's output step.

#@ script
"""Frontier attention: multi-head latent attention, DeepSeek sparse attention,
learned sinks, the ring-buffer cache, gated attention and Gated DeltaNet,
recomputed as the self-attention explorer computes them and checked against
transformers' own modules.

Needs torch and transformers only. Prints one line per check and exits 0 only
when every check agrees, 1 otherwise.
"""
# The page: __PAGE__
import inspect
import math
import sys

import torch

torch.set_grad_enabled(False)
SEED = __SEED__
N_HEADS, HEAD_DIM, ROPE_DIM = __N_HEADS__, __HEAD_DIM__, __ROPE_DIM__
KV_LORA_RANK, Q_LORA_RANK = __KV_LORA_RANK__, __Q_LORA_RANK__
TOP_K, INDEX_HEADS, INDEX_DIM = __TOP_K__, __INDEX_HEADS__, __INDEX_DIM__
WINDOW, CHUNK = __WINDOW__, __CHUNK__
TOLERANCE = 1e-4  # float32 rounding, times max(1, the reference's largest |value|)

X = __EMBEDDINGS__
PAGE = __PAGE_NUMBERS__
SPARSE_ERROR = __SPARSE_ERROR__  # why the page could not compute sparse attention, if it could not
n, d_in = X.shape
causal = torch.ones(n, n, dtype=torch.bool).tril()  # True = may attend
results = []


def check(what, reference, ours, theirs, exact=False):
    """One printed line: what, against what, the max difference and the tolerance
    (0 when ``exact``: the same set, bit for bit)."""
    ours, theirs = torch.as_tensor(ours, dtype=torch.float32), torch.as_tensor(theirs)
    diff = (ours - theirs).abs().max().item() if ours.shape == theirs.shape else math.inf
    tolerance = 0.0 if exact else TOLERANCE * max(1.0, theirs.abs().max().item())
    ok = diff <= tolerance
    results.append(ok)
    print(f"{'✓' if ok else '✗'} {what} vs {reference}: max |difference| = {diff:.1e} "
          f"(tolerance {tolerance:.1e})")


def split_heads(x, h):  # (n, h * d) -> (h, n, d)
    return x.view(x.shape[0], h, -1).transpose(0, 1)


def merge_heads(x):  # (h, n, d) -> (n, h * d)
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def rope(x, base=10_000.0, interleaved=False, freq_dim=None):  # x (..., n, dim), positions 0 ...
    dim = x.shape[-1]
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / (freq_dim or dim)
    theta = 1.0 / (base ** exponents)
    angles = torch.arange(x.shape[-2], dtype=torch.float32)[:, None] * theta[None, :]
    if interleaved:  # DeepSeek: pairs (2i, 2i + 1)
        angles = angles.repeat_interleave(2, dim=-1)
        turned = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    else:            # rotate-half: dimension i with i + dim / 2
        angles = torch.cat((angles, angles), dim=-1)
        turned = torch.cat((-x[..., dim // 2:], x[..., :dim // 2]), dim=-1)
    return x * angles.cos() + turned * angles.sin()


def attend(q, k, v, mask, scale=None):  # (h, n, d) each, mask (n, n) -> weights, context
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    weights = torch.softmax((q @ k.transpose(-1, -2) * scale).masked_fill(~mask, -math.inf), -1)
    return weights, weights @ v


def mask_of(allowed):  # bool (n, n) -> additive mask (1, 1, n, n)
    return torch.zeros(allowed.shape).masked_fill(~allowed, -math.inf)[None, None]


# 1. Multi-head latent attention (DeepSeek-V2 §2.1, eqs. 9-19), expanded and absorbed
g = torch.Generator().manual_seed(SEED)
h, d, r, c = N_HEADS, HEAD_DIM, ROPE_DIM, KV_LORA_RANK


def draw(*shape):
    return torch.randn(*shape, generator=g) / math.sqrt(shape[-2])


W_DQ, W_UQ = draw(d_in, Q_LORA_RANK), draw(Q_LORA_RANK, h * (d + r))
W_DKV, W_KR = draw(d_in, c), draw(d_in, r)
W_UK, W_UV, W_O = draw(h, c, d), draw(h, c, d), draw(h * d, d_in)


def rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


q = split_heads(rms(X @ W_DQ) @ W_UQ, h)                      # (h, n, d + r)
q_nope, q_rope = q[..., :d], rope(q[..., d:], interleaved=True)
c_kv, k_rope = rms(X @ W_DKV), rope(X @ W_KR, interleaved=True)  # the cache: (n, c), (n, r)
scale = (d + r) ** -0.5
scores = (q_nope @ (c_kv @ W_UK).transpose(-1, -2) + q_rope @ k_rope.T) * scale
mla_weights = torch.softmax(scores.masked_fill(~causal, -math.inf), -1)
mla_output = merge_heads(mla_weights @ (c_kv @ W_UV)) @ W_O   # (n, d_in)
q_absorbed = q_nope @ W_UK.transpose(-1, -2)                  # W_UK folded into the queries
absorbed = (q_absorbed @ c_kv.T + q_rope @ k_rope.T) * scale
latent = torch.softmax(absorbed.masked_fill(~causal, -math.inf), -1) @ c_kv
absorbed_output = merge_heads(latent @ W_UV) @ W_O            # W_UV applied after
check("MLA absorbed output", "the expanded output", absorbed_output, mla_output)
check("MLA output", "the page's numbers", mla_output, PAGE["mla"])

from transformers import DeepseekV3Config  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (  # noqa: E402
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
)

hf = DeepseekV3Config(hidden_size=d_in, num_attention_heads=h, num_key_value_heads=h,
                      q_lora_rank=Q_LORA_RANK, kv_lora_rank=c, qk_nope_head_dim=d,
                      qk_rope_head_dim=r, v_head_dim=d,
                      rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                      rope_interleave=True, attention_bias=False, num_hidden_layers=1,
                      vocab_size=16, intermediate_size=8, moe_intermediate_size=8,
                      n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1,
                      max_position_embeddings=max(16, n), attn_implementation="eager")
with torch.random.fork_rng(devices=[]):
    module, rotary = DeepseekV3Attention(hf, layer_idx=0).eval(), DeepseekV3RotaryEmbedding(hf)
module.q_a_proj.weight.copy_(W_DQ.T)
module.q_b_proj.weight.copy_(W_UQ.T)
module.kv_a_proj_with_mqa.weight.copy_(torch.cat((W_DKV, W_KR), dim=1).T)
module.kv_b_proj.weight.copy_(torch.cat((W_UK, W_UV), -1).permute(0, 2, 1).reshape(h * 2 * d, c))
module.o_proj.weight.copy_(W_O.T)
theirs, their_weights = module(X[None], rotary(X[None], torch.arange(n)[None]), mask_of(causal))
check("MLA attn_weights", "transformers' DeepseekV3Attention", mla_weights, their_weights[0])
check("MLA output", "transformers' DeepseekV3Attention", mla_output, theirs[0])

# 2. DeepSeek sparse attention (V3.2 eqs. 1-2): a lightning indexer picks each query's top-k
#    keys; MLA's attention (the same weights: drawn first again) runs over those keys only
g = torch.Generator().manual_seed(SEED)
redrawn = [draw(*w.shape) for w in (W_DQ, W_UQ, W_DKV, W_KR, W_UK, W_UV, W_O)]
if not all(torch.equal(a, b) for a, b in zip(redrawn, (W_DQ, W_UQ, W_DKV, W_KR, W_UK, W_UV, W_O))):
    raise RuntimeError("the sparse part's MLA weights differ from the MLA part's")
W_Iq = draw(Q_LORA_RANK, INDEX_HEADS * INDEX_DIM)
W_Ik, W_w = draw(d_in, INDEX_DIM), draw(d_in, INDEX_HEADS)


def rope_front(x):  # x (heads, n, dim): RoPE (rotate-half) on the first ROPE_DIM dimensions
    return torch.cat((rope(x[..., :r]), x[..., r:]), dim=-1)


if PAGE["sparse"] is None:
    print(f"- DeepSeek sparse attention: not computed for these sizes: {SPARSE_ERROR}")
else:
    q_index = rope_front((rms(X @ W_DQ) @ W_Iq).view(n, INDEX_HEADS, INDEX_DIM).transpose(0, 1))
    q_index = q_index.transpose(0, 1)                                   # (n, H, d_I)
    k_index = rope_front(torch.nn.functional.layer_norm(X @ W_Ik, (INDEX_DIM,), eps=1e-6)[None])[0]
    head_weights = (X @ W_w) * INDEX_HEADS ** -0.5                      # (n, H)
    per_head = torch.relu((q_index @ k_index.T[None]) * INDEX_DIM ** -0.5)  # (n, H, n)
    index = (head_weights[:, None, :] @ per_head).squeeze(1)           # I_ts: (n, n)
    chosen = index.masked_fill(~causal, -math.inf).topk(min(TOP_K, n), dim=-1).indices
    selected = torch.zeros_like(causal).scatter(-1, chosen, True) & causal
    sparse_weights = torch.softmax(scores.masked_fill(~selected, -math.inf), -1)
    sparse_output = merge_heads(sparse_weights @ (c_kv @ W_UV)) @ W_O
    check("sparse output", "the page's numbers", sparse_output, PAGE["sparse"])

    from transformers import DeepseekV32Config
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
        DeepseekV32Attention,
        DeepseekV32RotaryEmbedding,
    )

    hf = DeepseekV32Config(hidden_size=d_in, num_attention_heads=h, num_key_value_heads=h,
                           q_lora_rank=Q_LORA_RANK, kv_lora_rank=c, qk_nope_head_dim=d,
                           qk_rope_head_dim=r, v_head_dim=d, index_topk=TOP_K,
                           index_n_heads=INDEX_HEADS, index_head_dim=INDEX_DIM,
                           rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                           num_hidden_layers=1, vocab_size=16, intermediate_size=8,
                           moe_intermediate_size=8, n_routed_experts=2, num_experts_per_tok=1,
                           n_group=1, topk_group=1, max_position_embeddings=max(16, n),
                           attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):
        module = DeepseekV32Attention(hf, layer_idx=0).eval()
        rotary = DeepseekV32RotaryEmbedding(hf)
    module.q_a_proj.weight.copy_(W_DQ.T)
    module.q_b_proj.weight.copy_(W_UQ.T)
    module.kv_a_proj_with_mqa.weight.copy_(torch.cat((W_DKV, W_KR), dim=1).T)
    module.kv_b_proj.weight.copy_(
        torch.cat((W_UK, W_UV), -1).permute(0, 2, 1).reshape(h * 2 * d, c))
    module.o_proj.weight.copy_(W_O.T)
    module.indexer.wq_b.weight.copy_(W_Iq.T)
    module.indexer.wk.weight.copy_(W_Ik.T)
    module.indexer.weights_proj.weight.copy_(W_w.T)
    module.indexer.k_norm.weight.fill_(1.0)
    module.indexer.k_norm.bias.zero_()
    caught = {}
    hook = module.indexer.register_forward_hook(lambda _m, _a, result: caught.update(top=result))
    theirs, their_weights = module(X[None], rotary(X[None], torch.arange(n)[None]),
                                   mask_of(causal))
    hook.remove()
    their_selected = torch.zeros_like(causal).scatter(-1, caught["top"][0].long(), True) & causal
    check("sparse top-k keys", "transformers' DeepseekV32Indexer", selected.float(),
          their_selected.float(), exact=True)
    check("sparse attn_weights", "transformers' DeepseekV32Attention", sparse_weights,
          their_weights[0])
    check("sparse output", "transformers' DeepseekV32Attention", sparse_output, theirs[0])

# 3. Learned attention sinks (gpt-oss): a logit per head in the softmax's denominator
g = torch.Generator().manual_seed(SEED)
width = h * d


def draw_rows(*shape):
    return torch.randn(*shape, generator=g) / math.sqrt(shape[0])


Wq, Wk, Wv, Wo = draw_rows(d_in, width), draw_rows(d_in, width), draw_rows(d_in, width), \
    draw_rows(width, d_in)
sinks = torch.randn(h, generator=g)
q, k, v = rope(split_heads(X @ Wq, h)), rope(split_heads(X @ Wk, h)), split_heads(X @ Wv, h)
logits = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~causal, -math.inf)
logits = torch.cat((logits, sinks[:, None, None].expand(h, n, 1)), dim=-1)  # (h, n, n + 1)
sink_weights = torch.softmax(logits, -1)[..., :-1]                          # the sink dropped
sink_output = merge_heads(sink_weights @ v) @ Wo
check("sinks output", "the page's numbers", sink_output, PAGE["sinks"])

from transformers import GptOssConfig  # noqa: E402
from transformers.models.gpt_oss.modeling_gpt_oss import (  # noqa: E402
    GptOssAttention,
    GptOssRotaryEmbedding,
)

hf = GptOssConfig(hidden_size=d_in, num_attention_heads=h, num_key_value_heads=h, head_dim=d,
                  num_hidden_layers=1, layer_types=["full_attention"], attention_bias=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                  vocab_size=16, intermediate_size=8, num_local_experts=2,
                  num_experts_per_tok=1, max_position_embeddings=max(16, n),
                  attn_implementation="eager")
with torch.random.fork_rng(devices=[]):
    module, rotary = GptOssAttention(hf, layer_idx=0).eval(), GptOssRotaryEmbedding(hf)
for name, w in (("q_proj", Wq), ("k_proj", Wk), ("v_proj", Wv), ("o_proj", Wo)):
    getattr(module, name).weight.copy_(w.T)
module.sinks.copy_(sinks)
theirs, their_weights = module(X[None], rotary(X[None], torch.arange(n)[None]), mask_of(causal))
check("sinks attn_weights", "transformers' GptOssAttention", sink_weights, their_weights[0])
check("sinks output", "transformers' GptOssAttention", sink_output, theirs[0])

# 4. The sliding window decoded with a ring buffer (Mistral): position p in slot p mod WINDOW
g = torch.Generator().manual_seed(SEED)
Wq, Wk, Wv = (torch.randn(d_in, width, generator=g) / math.sqrt(d_in) for _ in range(3))
q, k, v = rope(split_heads(X @ Wq, h)), rope(split_heads(X @ Wk, h)), split_heads(X @ Wv, h)
i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
window = (j <= i) & (j > i - WINDOW)  # WINDOW keys, the query's own included
_, full_context = attend(q, k, v, window)
cache_k, cache_v = torch.zeros(h, WINDOW, d), torch.zeros(h, WINDOW, d)
ring_context = torch.zeros(h, n, d)
for t in range(n):
    cache_k[:, t % WINDOW], cache_v[:, t % WINDOW] = k[:, t], v[:, t]
    filled = min(t + 1, WINDOW)  # unrotate: the oldest slot first
    order = (torch.arange(filled) if filled < WINDOW else
             torch.cat((torch.arange((t + 1) % WINDOW, WINDOW), torch.arange((t + 1) % WINDOW))))
    w = torch.softmax((cache_k[:, order] @ q[:, t, :, None])[..., 0] / math.sqrt(d), -1)
    ring_context[:, t] = (w[:, None] @ cache_v[:, order])[:, 0]
check("ring-buffer context", "the full pass with the window's mask", ring_context, full_context)
check("ring-buffer context", "the page's numbers", ring_context, PAGE["ring"])

from transformers import DynamicCache, MistralConfig  # noqa: E402
from transformers.models.mistral.modeling_mistral import (  # noqa: E402
    MistralAttention,
    MistralRotaryEmbedding,
)

hf = MistralConfig(hidden_size=d_in, num_attention_heads=h, num_key_value_heads=h, head_dim=d,
                   sliding_window=WINDOW, num_hidden_layers=1, max_position_embeddings=n,
                   rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                   attn_implementation="eager")
with torch.random.fork_rng(devices=[]):
    module, rotary = MistralAttention(hf, layer_idx=0).eval(), MistralRotaryEmbedding(hf)
for proj, w in ((module.q_proj, Wq), (module.k_proj, Wk), (module.v_proj, Wv)):
    proj.weight.copy_(w.T)
cache, seen = DynamicCache(config=hf), []
hook = module.o_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0][0, 0]))
for t in range(n):
    step_mask = None
    if WINDOW == 1:  # transformers keeps every key for a window of 1: mask all but the last
        step_mask = torch.full((1, 1, 1, t + 1), -math.inf)
        step_mask[..., -1] = 0.0
    module(X[None, t:t + 1], rotary(X[None, t:t + 1], torch.tensor([[t]])), step_mask,
           past_key_values=cache)
hook.remove()
theirs = torch.stack(seen).reshape(n, h, d).transpose(0, 1)
check("ring-buffer context", "transformers' MistralAttention + DynamicCache", ring_context,
      theirs)

# 5. Gated attention (Qwen3-Next): each head's context times sigma(x W_g), before o_proj
g = torch.Generator().manual_seed(SEED)
gw = {"q_proj": draw_rows(d_in, h * 2 * d), "k_proj": draw_rows(d_in, width),
      "v_proj": draw_rows(d_in, width), "o_proj": draw_rows(width, d_in),
      "q_norm": 0.1 * torch.randn(d, generator=g), "k_norm": 0.1 * torch.randn(d, generator=g)}


def partial_rope(x):  # RoPE on the first quarter of head_dim only (rotate-half), as
    dim = int(d * 0.25)  # Qwen3NextRotaryEmbedding: inv_freq = base^(-arange(0, dim, 2) / dim)
    rotary_dim = 2 * len(range(0, dim, 2))
    if not rotary_dim:
        return x
    return torch.cat((rope(x[..., :rotary_dim], freq_dim=dim), x[..., rotary_dim:]), -1)


q, gate_scores = (X @ gw["q_proj"]).view(n, h, 2 * d).chunk(2, dim=-1)  # (n, h, d) each
q, gate_scores = q.transpose(0, 1), gate_scores.transpose(0, 1)
k, v = split_heads(X @ gw["k_proj"], h), split_heads(X @ gw["v_proj"], h)
q = partial_rope(rms(q) * (1 + gw["q_norm"]))
k = partial_rope(rms(k) * (1 + gw["k_norm"]))
gated_weights, context = attend(q, k, v, causal)
gated_output = merge_heads(context * torch.sigmoid(gate_scores)) @ gw["o_proj"]
check("gated output", "the page's numbers", gated_output, PAGE["gated"])

from transformers import Qwen3NextConfig  # noqa: E402
from transformers.models.qwen3_next.modeling_qwen3_next import (  # noqa: E402
    Qwen3NextAttention,
    Qwen3NextRotaryEmbedding,
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

hf = Qwen3NextConfig(hidden_size=d_in, num_attention_heads=h, num_key_value_heads=h,
                     head_dim=d, num_hidden_layers=1, layer_types=["full_attention"],
                     max_position_embeddings=max(n, 1), rms_norm_eps=1e-6, attention_bias=False,
                     rope_parameters={"rope_type": "default", "rope_theta": 10_000.0,
                                      "partial_rotary_factor": 0.25},
                     attn_implementation="eager")
with torch.random.fork_rng(devices=[]):
    module, rotary = Qwen3NextAttention(hf, layer_idx=0).eval(), Qwen3NextRotaryEmbedding(hf)
for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
    getattr(module, name).weight.copy_(gw[name].T)
module.q_norm.weight.copy_(gw["q_norm"])
module.k_norm.weight.copy_(gw["k_norm"])
theirs, their_weights = module(X[None], rotary(X[None], torch.arange(n)[None]), mask_of(causal))
check("gated attn_weights", "transformers' Qwen3NextAttention", gated_weights, their_weights[0])
check("gated output", "transformers' Qwen3NextAttention", gated_output, theirs[0])

# 6. Gated DeltaNet: S <- alpha_t S; S <- S + k_t (beta_t (v_t - S^T k_t))^T; o_t = S^T q_t
g = torch.Generator().manual_seed(SEED)
W = {name: torch.randn(d_in, cols, generator=g) / math.sqrt(d_in)
     for name, cols in (("q", width), ("k", width), ("v", width), ("a", h), ("b", h))}
A_log = torch.log(0.05 + 0.95 * torch.rand(h, generator=g))


def l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


q_raw, k_raw, v = (split_heads(X @ W[name], h) for name in "qkv")
q, k = l2norm(q_raw) / math.sqrt(d), l2norm(k_raw)
decay = (-A_log.exp() * torch.nn.functional.softplus(X @ W["a"] + 1.0)).T  # log alpha: (h, n)
beta = torch.sigmoid(X @ W["b"]).T                                          # (h, n)
state, outputs = torch.zeros(h, d, d), torch.zeros(h, n, d)
for t in range(n):
    state = state * decay[:, t].exp()[:, None, None]
    delta = (v[:, t] - (state * k[:, t, :, None]).sum(-2)) * beta[:, t, None]
    state = state + k[:, t, :, None] * delta[:, None, :]
    outputs[:, t] = (state * q[:, t, :, None]).sum(-2)
check("DeltaNet outputs", "the page's numbers", outputs, PAGE["deltanet"])
lay = (lambda t: t.transpose(0, 1)[None])  # (h, n, ...) -> (1, n, h, ...)
args = (lay(q_raw), lay(k_raw), lay(v), lay(decay), lay(beta))
their_out, their_state = inspect.unwrap(torch_recurrent_gated_delta_rule)(
    *args, output_final_state=True, use_qk_l2norm_in_kernel=True)
check("DeltaNet outputs", "transformers' torch_recurrent_gated_delta_rule", outputs,
      their_out[0].transpose(0, 1))
check("DeltaNet final state", "transformers' torch_recurrent_gated_delta_rule", state,
      their_state[0])
their_out, their_state = inspect.unwrap(torch_chunk_gated_delta_rule)(
    *args, chunk_size=CHUNK, output_final_state=True, use_qk_l2norm_in_kernel=True)
check("DeltaNet outputs", "transformers' torch_chunk_gated_delta_rule", outputs,
      their_out[0].transpose(0, 1))

print(f"{sum(results)} of {len(results)} checks agree")
sys.exit(0 if all(results) else 1)
