# The template of modern_attention.py, the Modern attention page's "Reproduce in PyTorch"
# script (`explorer.render.modern.export.modern_script`): one block ("#@ script") whose
# __NAME__ slots (`explorer.render.script_templates`) take the page's settings and X.

#@ script
"""Modern attention: RoPE, grouped-query attention, sliding window, KV cache and
FlashAttention's online softmax, as the self-attention explorer computes them.
"""
# The page: __PAGE__
import argparse
import math

import torch

parser = argparse.ArgumentParser(description="Recompute the Modern attention page.")
parser.add_argument("--save", help="save every step to this file (torch.save)")
args = parser.parse_args()

SEED = __SEED__
N_HEADS, N_KV_HEADS, HEAD_DIM = __N_HEADS__, __N_KV_HEADS__, __HEAD_DIM__
ROPE_BASE, ROPE_OFFSET, PAIRING = __ROPE_BASE__, __ROPE_OFFSET__, __PAIRING__
WINDOW, PREFILL, BLOCK_Q, BLOCK_K = __WINDOW__, __PREFILL__, __BLOCK_Q__, __BLOCK_K__
STEP_NAMES = __STEP_NAMES__

embeddings = __EMBEDDINGS__

def split_heads(x, n_heads):  # (n, n_heads * head_dim) -> (n_heads, n, head_dim)
    n, width = x.shape
    return x.view(n, n_heads, width // n_heads).transpose(0, 1)


# Q, K, V: W drawn with torch.randn from a local generator, scaled by 1/sqrt(d_in)
g = torch.Generator().manual_seed(SEED)
d_in = embeddings.shape[1]
W_query = torch.randn(d_in, N_HEADS * HEAD_DIM, generator=g) / math.sqrt(d_in)
W_key = torch.randn(d_in, N_KV_HEADS * HEAD_DIM, generator=g) / math.sqrt(d_in)
W_value = torch.randn(d_in, N_KV_HEADS * HEAD_DIM, generator=g) / math.sqrt(d_in)
queries = split_heads(embeddings @ W_query, N_HEADS)    # (n_heads, n, head_dim)
keys = split_heads(embeddings @ W_key, N_KV_HEADS)      # (n_kv_heads, n, head_dim)
values = split_heads(embeddings @ W_value, N_KV_HEADS)  # (n_kv_heads, n, head_dim)
n = embeddings.shape[0]

# 1. RoPE: theta_i = base^(-2i/head_dim); pair i turns by m * theta_i at position m
theta = 1.0 / (ROPE_BASE ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
angles = torch.arange(ROPE_OFFSET, ROPE_OFFSET + n, dtype=torch.float32)[:, None] * theta
if PAIRING == "rotate_half":  # Llama in transformers: dimension i turns with i + head_dim/2
    angles = torch.cat((angles, angles), dim=-1)
else:                          # RoFormer eq. 34: dimension 2i turns with 2i + 1
    angles = angles.repeat_interleave(2, dim=-1)
cos, sin = angles.cos(), angles.sin()  # (n, head_dim)


def rotate_pairs(x):  # every pair (a, b) -> (-b, a)
    if PAIRING == "rotate_half":
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


queries_rope = queries * cos + rotate_pairs(queries) * sin
keys_rope = keys * cos + rotate_pairs(keys) * sin


# 2. Grouped-query attention: each K/V head serves N_HEADS // N_KV_HEADS query heads
def repeat_kv(x):
    return x.repeat_interleave(N_HEADS // x.shape[0], dim=0)


def attention(q, k, v, mask=None):  # mask: True = may attend
    scores = q @ repeat_kv(k).transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return scores, weights, weights @ repeat_kv(v)


scores_no_rope = queries @ repeat_kv(keys).transpose(-1, -2) / math.sqrt(HEAD_DIM)
scores_rope = queries_rope @ repeat_kv(keys_rope).transpose(-1, -2) / math.sqrt(HEAD_DIM)
causal = torch.ones(n, n, dtype=torch.bool).tril()
_, causal_weights, causal_context = attention(queries_rope, keys_rope, values, causal)

# 3. Sliding window: query i sees key j when i - WINDOW < j <= i (itself and WINDOW - 1 before),
#    as transformers counts it; Mistral's reference code counts itself plus WINDOW earlier
#    tokens: (j <= i) & (j >= i - WINDOW)
i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
window_mask = (j <= i) & (j > i - WINDOW)
_, window_weights, window_context = attention(queries_rope, keys_rope, values, window_mask)

# 4. KV cache: prefill PREFILL tokens at once, then one token at a time
cache_k, cache_v = keys_rope[:, :PREFILL], values[:, :PREFILL]
_, _, prefill_context = attention(queries_rope[:, :PREFILL], cache_k, cache_v,
                                  causal[:PREFILL, :PREFILL])
_, prefill_weights, _ = attention(queries_rope[:, :PREFILL], cache_k, cache_v,
                                  causal[:PREFILL, :PREFILL])
rows = [prefill_context]
decoded_weights = torch.zeros(N_HEADS, n, n)  # row t: the weights over the t + 1 cached keys
decoded_weights[:, :PREFILL, :PREFILL] = prefill_weights
group = N_HEADS // N_KV_HEADS
for t in range(PREFILL, n):
    cache_k = torch.cat((cache_k, keys_rope[:, t:t + 1]), dim=1)  # append the new key
    cache_v = torch.cat((cache_v, values[:, t:t + 1]), dim=1)     # and value
    q = queries_rope[:, t].reshape(N_KV_HEADS, group, -1)         # one query per head
    w = torch.softmax(q @ cache_k.transpose(-1, -2) / math.sqrt(HEAD_DIM), dim=-1)
    decoded_weights[:, t, :t + 1] = w.reshape(N_HEADS, -1)
    rows.append((w @ cache_v).reshape(N_HEADS, 1, -1))
decoded_context = torch.cat(rows, dim=1)

# 5. FlashAttention-2's online softmax (Algorithm 1), causal: a tile whose keys all come
#    after its queries (above the diagonal) is skipped, as the causal kernel skips it
q_all, k_all, v_all = queries_rope, repeat_kv(keys_rope), repeat_kv(values)
flash_context = torch.empty_like(causal_context)
for start in range(0, n, BLOCK_Q):
    rows_ = slice(start, min(start + BLOCK_Q, n))
    q = q_all[:, rows_]
    m = torch.full(q.shape[:2], float("-inf"))
    l = torch.zeros(q.shape[:2])
    O = torch.zeros(*q.shape[:2], v_all.shape[-1])
    for kstart in range(0, n, BLOCK_K):
        cols = slice(kstart, min(kstart + BLOCK_K, n))
        if not causal[rows_, cols].any():
            continue
        S = (q @ k_all[:, cols].transpose(-1, -2) / math.sqrt(HEAD_DIM)).masked_fill(
            ~causal[rows_, cols], float("-inf"))
        m_new = torch.maximum(m, S.amax(dim=-1))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        P = torch.exp(S - safe[..., None])
        c = torch.where(torch.isinf(m_new), torch.ones_like(m_new), torch.exp(m - safe))
        l = c * l + P.sum(dim=-1)
        O = c[..., None] * O + P @ v_all[:, cols]
        m = m_new
    flash_context[:, rows_] = O / l[..., None]

# The checks, against PyTorch's own attention
F = torch.nn.functional
sdpa = F.scaled_dot_product_attention(queries_rope, keys_rope, values, is_causal=True,
                                      enable_gqa=True)
sdpa_window = F.scaled_dot_product_attention(queries_rope, keys_rope, values,
                                             attn_mask=window_mask, enable_gqa=True)
# as the page's checks: the contexts against SDPA; the KV cache's decoded attention weights,
# row by row, against the rows of full causal attention
for name, mine, reference in (("grouped-query", causal_context, sdpa),
                              ("sliding window", window_context, sdpa_window),
                              ("KV cache, decoded attention weights", decoded_weights,
                               causal_weights),
                              ("online softmax", flash_context, sdpa)):
    print(f"{name}: max |difference| = {(mine - reference).abs().max().item():.1e}")

steps = {name: globals()[name] for name in STEP_NAMES}
for name, value in steps.items():
    print(f"--- {name} {tuple(value.shape)} ---")
    print(value)
if args.save:
    torch.save(steps, args.save)
    print(f"saved {len(steps)} steps to {args.save}")
