"""Attention modules written in the styles other code uses, for `tests/checker/test_corpus.py`.

Each class is written here, in the style of the code its docstring names (where
that style is seen), not copied from it; half are right and half carry a bug a
learner or a porter makes. All take the book's constructor arguments (d_in,
d_out, context_length, dropout, num_heads, qkv_bias), under the names the
check passes (``block_size`` and ``n_head`` are read as the book's), so that
``python -m explorer check tests/checker/corpus.py:CLASS`` builds each one as the
API's tests do. Which entry is right, and where a broken one goes wrong, is in
`tests/checker/corpus_cases.py`. This file imports only torch: the command line
loads it as a learner's file.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------
# nanoGPT (karpathy/nanoGPT, model.py: CausalSelfAttention)
# ---------------------------------------------------------------------------
class NanoCausalSelfAttention(nn.Module):
    """nanoGPT's style: one c_attn for q, k, v, the lower-triangular ``bias``
    buffer (1, 1, T, T), ``n_head``, scale before mask, c_proj."""

    def __init__(self, d_in, d_out, block_size, dropout, n_head, qkv_bias=False):
        super().__init__()
        self.c_attn = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.c_proj = nn.Linear(d_out, d_out)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd = n_head, d_out
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def attend(self, att, T):
        return att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = self.attend(att, T)
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_embd)
        return self.resid_dropout(self.c_proj(y))


class NanoMaskNotSliced(NanoCausalSelfAttention):
    """Bug: the whole (block_size, block_size) buffer, not cut to the T tokens."""

    def attend(self, att, T):
        return att.masked_fill(self.bias == 0, float("-inf"))


class NanoMaskFilledWithZero(NanoCausalSelfAttention):
    """Bug: the future filled with 0, not −∞."""

    def attend(self, att, T):
        return att.masked_fill(self.bias[:, :, :T, :T] == 0, 0.0)


class NanoFlashAttention(nn.Module):
    """nanoGPT's flash path: scaled_dot_product_attention(..., is_causal=True), no buffer."""

    def __init__(self, d_in, d_out, block_size, dropout, n_head, qkv_bias=False):
        super().__init__()
        self.c_attn = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.c_proj = nn.Linear(d_out, d_out)
        self.n_head, self.n_embd, self.dropout = n_head, d_out, dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_embd)
        return self.c_proj(y)


class SdpaForgotIsCausal(nn.Module):
    """Hugging Face-like names (q_proj, k_proj, v_proj, o_proj) around SDPA; bug: a
    causal class that never passes is_causal=True (seen in many ports of nanoGPT)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.q_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.k_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.v_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.o_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (p(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


class CausalSdpaSelfAttention(SdpaForgotIsCausal):
    """The same, right: is_causal=True."""

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (p(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


# ---------------------------------------------------------------------------
# minGPT (karpathy/minGPT, mingpt/model.py; its first version had key/query/value)
# ---------------------------------------------------------------------------
class MinCausalSelfAttention(nn.Module):
    """minGPT's first style: key, query, value and proj layers, a ``mask`` buffer
    (1, 1, T, T) of ones below the diagonal, ``n_head``."""

    def __init__(self, d_in, d_out, block_size, dropout, n_head, qkv_bias=False):
        super().__init__()
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.attn_drop = nn.Dropout(dropout)
        self.proj = nn.Linear(d_out, d_out)
        self.n_head = n_head
        self.register_buffer("mask", self.triangle(block_size).view(1, 1, block_size, block_size))

    def triangle(self, size):
        return torch.tril(torch.ones(size, size))

    def weigh(self, att):
        return F.softmax(att, dim=-1)

    def forward(self, x):
        B, T, C = x.size()
        k = self.key(x).view(B, T, self.n_head, -1).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, -1).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_drop(self.weigh(att))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, -1)
        return self.proj(y)


class MinSoftmaxOverQueries(MinCausalSelfAttention):
    """Bug: softmax over dim=-2."""

    def weigh(self, att):
        return F.softmax(att, dim=-2)


class MinDiagonalMasked(MinCausalSelfAttention):
    """Bug: tril(..., diagonal=-1): no token may attend to itself."""

    def triangle(self, size):
        return torch.tril(torch.ones(size, size), diagonal=-1)


# ---------------------------------------------------------------------------
# karpathy/ng-video-lecture (gpt.py): a Head module per head, then MultiHeadAttention
# ---------------------------------------------------------------------------
class Head(nn.Module):
    """One head of self-attention: key, query, value and a ``tril`` buffer."""

    def __init__(self, d_in, head_size, block_size, dropout):
        super().__init__()
        self.key = nn.Linear(d_in, head_size, bias=False)
        self.query = nn.Linear(d_in, head_size, bias=False)
        self.value = nn.Linear(d_in, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def scale(self, x, k):
        return k.shape[-1] ** -0.5

    def forward(self, x):
        B, T, C = x.shape
        k, q = self.key(x), self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) * self.scale(x, k)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = self.dropout(F.softmax(wei, dim=-1))
        return wei @ self.value(x)


class HeadScaledByEmbedding(Head):
    """The lecture's first draft: C ** -0.5, C the embedding width, not the head's."""

    def scale(self, x, k):
        return x.shape[-1] ** -0.5


class LectureMultiHeadAttention(nn.Module):
    """Heads in parallel, concatenated, then proj."""

    head = Head

    def __init__(self, d_in, d_out, block_size, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList([self.head(d_in, d_out // num_heads, block_size, dropout)
                                    for _ in range(num_heads)])
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))


class LectureScaledByEmbedding(LectureMultiHeadAttention):
    """Bug: every head scales by √d_in."""

    head = HeadScaledByEmbedding


# ---------------------------------------------------------------------------
# d2l.ai (chapter "Multi-Head Attention"): transpose_qkv, masked_softmax with valid_lens
# ---------------------------------------------------------------------------
def sequence_mask(X, valid_len, value=0.0):
    """Fill the entries past each row's valid length with ``value``."""
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens, value=-1e6):
    """Softmax over the last axis, the entries past valid_lens masked."""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    valid_lens = valid_lens.reshape(-1) if valid_lens.dim() > 1 else \
        torch.repeat_interleave(valid_lens, shape[1])
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=value)
    return F.softmax(X.reshape(shape), dim=-1)


class D2LMultiHeadAttention(nn.Module):
    """d2l's MultiHeadAttention: W_q, W_k, W_v, W_o; heads folded into the batch."""

    mask_value = -1e6

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = nn.Dropout(dropout)
        self.W_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_o = nn.Linear(d_out, d_out, bias=qkv_bias)

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)

    def forward(self, queries, keys, values, valid_lens=None):
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        weights = self.dropout(masked_softmax(scores, valid_lens, self.mask_value))
        return self.W_o(self.transpose_output(torch.bmm(weights, values)))


class D2LNoPermuteBack(D2LMultiHeadAttention):
    """Bug: transpose_output without its permute."""

    def transpose_output(self, X):
        return X.reshape(-1, self.num_heads, X.shape[1], X.shape[2]).reshape(
            -1, X.shape[1], self.num_heads * X.shape[2])


class D2LDecoderSelfAttention(nn.Module):
    """d2l's decoder block in training: valid lengths 1, 2, ..., T make it causal."""

    attention_class = D2LMultiHeadAttention

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.attention = self.attention_class(d_in, d_out, context_length, dropout, num_heads,
                                              qkv_bias)

    def forward(self, X):
        batch_size, num_steps, _ = X.shape
        dec_valid_lens = torch.arange(1, num_steps + 1).repeat(batch_size, 1)
        return self.attention(X, X, X, dec_valid_lens)


class D2LZeroFill(D2LMultiHeadAttention):
    """Bug: sequence_mask's default value, 0, instead of −1e6."""

    mask_value = 0.0


class D2LDecoderZeroFill(D2LDecoderSelfAttention):
    attention_class = D2LZeroFill


# ---------------------------------------------------------------------------
# lucidrains/vit-pytorch (vit_pytorch/vit.py: Attention)
# ---------------------------------------------------------------------------
class ViTAttention(nn.Module):
    """to_qkv, chunked; ``heads``; ``scale`` = dim_head ** -0.5; to_out = Sequential(Linear, Dropout)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads, dim_head = num_heads, d_out // num_heads
        self.scale = dim_head ** -0.5
        self.attend = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)
        self.to_qkv = nn.Linear(d_in, d_out * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(d_out, d_in), nn.Dropout(dropout))

    def split(self, t):  # 'b n (h d) -> b h n d'
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)

    def finish(self, out):
        return self.to_out(out)

    def forward(self, x):
        q, k, v = map(self.split, self.to_qkv(x).chunk(3, dim=-1))
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = self.dropout(self.attend(dots))
        out = torch.matmul(attn, v)
        b, h, n, d = out.shape
        return self.finish(out.permute(0, 2, 1, 3).reshape(b, n, h * d))  # 'b h n d -> b n (h d)'


class ViTOutNeverApplied(ViTAttention):
    """Bug: to_out defined, never applied."""

    def finish(self, out):
        return out


# ---------------------------------------------------------------------------
# Hugging Face transformers (models/gpt2/modeling_gpt2.py, pytorch_utils.Conv1D)
# ---------------------------------------------------------------------------
class Conv1D(nn.Module):
    """GPT-2's linear layer: weight (nx, nf), x @ W + b."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    """c_attn and c_proj as Conv1D, a boolean ``bias`` buffer, torch.where with the
    dtype's minimum, the scores divided by a 0-d tensor."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads, self.head_dim, self.embed_dim = num_heads, d_out // num_heads, d_out
        self.register_buffer("bias", torch.tril(torch.ones((context_length, context_length),
                                                           dtype=torch.bool))
                             .view(1, 1, context_length, context_length), persistent=False)
        self.c_attn = Conv1D(3 * d_out, d_in)
        self.c_proj = Conv1D(d_out, d_out)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)  # (batch, head, seq, head_dim)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5,
                                                 dtype=attn_weights.dtype)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min,
                                dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = self.attn_dropout(F.softmax(attn_weights, dim=-1))
        return torch.matmul(attn_weights, value), attn_weights

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        query, key, value = map(self._split_heads, (query, key, value))
        attn_output, attn_weights = self._attn(query, key, value)
        attn_output = self.resid_dropout(self.c_proj(self._merge_heads(attn_output)))
        return attn_output, attn_weights


class GPT2NotScaled(GPT2Attention):
    """GPT-2 with ``scale_attn_weights = False`` (a config flag): the scores are never
    divided by √head_dim. At GPT-2's own initial weights (std 0.02) the scores are so
    small that this changes nothing above a tolerance unless X is scaled."""

    scale_attn_weights = False

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5,
                                                     dtype=attn_weights.dtype)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min,
                                dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = self.attn_dropout(F.softmax(attn_weights, dim=-1))
        return torch.matmul(attn_weights, value), attn_weights


class GPT2EagerDropoutP(GPT2Attention):
    """Hugging Face's newer eager attention: no nn.Dropout on the weights but
    ``F.dropout(attn_weights, p=self.dropout_p, training=self.training)``."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        del self.attn_dropout, self.resid_dropout
        self.dropout_p = dropout

    def _attn(self, query, key, value):
        scaling = value.size(-1) ** -0.5
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
        n = query.size(-2)
        causal_mask = self.bias[:, :, :n, :n]
        attn_weights = attn_weights.masked_fill(~causal_mask, torch.finfo(attn_weights.dtype).min)
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_weights = F.dropout(attn_weights, p=self.dropout_p, training=self.training)
        return torch.matmul(attn_weights, value), attn_weights

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        query, key, value = map(self._split_heads, (query, key, value))
        attn_output, attn_weights = self._attn(query, key, value)
        return self.c_proj(self._merge_heads(attn_output)), attn_weights


class GPT2SplitWithView(GPT2Attention):
    """Bug: the heads split by .view(batch, head, seq, head_dim), no permute."""

    def _split_heads(self, tensor):
        b, n, _ = tensor.shape
        return tensor.reshape(b, self.num_heads, n, self.head_dim)


# ---------------------------------------------------------------------------
# The annotated transformer (harvardnlp/annotated-transformer: MultiHeadedAttention)
# ---------------------------------------------------------------------------
def attention(query, key, value, mask=None, dropout=None, root=True):
    """Scaled dot-product attention as a function."""
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / (math.sqrt(d_k) if root else d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class AnnotatedMultiHeadedAttention(nn.Module):
    """``self.linears``: q, k, v and the output, in a list (clones(nn.Linear, 4) with
    d_in ≠ d_out); ``self.h``; forward(query, key, value, mask=None)."""

    root = True

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_k, self.h = d_out // num_heads, num_heads
        self.linears = nn.ModuleList([nn.Linear(d_in, d_out) for _ in range(3)]
                                     + [nn.Linear(d_out, d_out)])
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value))]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout,
                                 root=self.root)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class AnnotatedScaledByDk(AnnotatedMultiHeadedAttention):
    """Bug: the scores divided by d_k, not its square root."""

    root = False


# ---------------------------------------------------------------------------
# Tutorials' einsum style (e.g. "attention from scratch" notebooks), a mask built in forward
# ---------------------------------------------------------------------------
class EinsumSelfAttention(nn.Module):
    """Parameters (d_in, d_out) used through torch.einsum; the mask made in forward."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.W_query = nn.Parameter(torch.randn(d_in, d_out) / d_in ** 0.5)
        self.W_key = nn.Parameter(torch.randn(d_in, d_out) / d_in ** 0.5)
        self.W_value = nn.Parameter(torch.randn(d_in, d_out) / d_in ** 0.5)
        self.out_proj = nn.Linear(d_out, d_out)

    def mask(self, n):
        return torch.tril(torch.ones(n, n))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (torch.einsum("bnd,de->bne", x, w).reshape(b, n, self.num_heads, -1)
                   for w in (self.W_query, self.W_key, self.W_value))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(self.mask(n) == 0, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, n, -1)
        return self.out_proj(context)


class EinsumMaskReversed(EinsumSelfAttention):
    """Bug: triu where tril was meant: every token sees the future, not the past."""

    def mask(self, n):
        return torch.triu(torch.ones(n, n))


# ---------------------------------------------------------------------------
# Meta's llama (llama/model.py: Attention, without rotary embeddings)
# ---------------------------------------------------------------------------
class LlamaAttention(nn.Module):
    """wq, wk, wv, wo without bias; ``n_local_heads``; an additive mask of −∞ built in forward."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.n_local_heads, self.head_dim = num_heads, d_out // num_heads
        self.wq = nn.Linear(d_in, d_out, bias=False)
        self.wk = nn.Linear(d_in, d_out, bias=False)
        self.wv = nn.Linear(d_in, d_out, bias=False)
        self.wo = nn.Linear(d_out, d_out, bias=False)

    def denominator(self, keys):
        return math.sqrt(self.head_dim)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_local_heads, self.head_dim).transpose(1, 2)
        keys = self.wk(x).view(bsz, seqlen, self.n_local_heads, self.head_dim).transpose(1, 2)
        values = self.wv(x).view(bsz, seqlen, self.n_local_heads, self.head_dim).transpose(1, 2)
        mask = torch.full((seqlen, seqlen), float("-inf"))
        mask = torch.triu(mask, diagonal=1)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / self.denominator(keys)
        scores = F.softmax((scores + mask).float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class LlamaScaledByHeads(LlamaAttention):
    """Bug: √keys.shape[1], which is the number of heads once they are transposed."""

    def denominator(self, keys):
        return math.sqrt(keys.shape[1])


class LlamaScaledByHeadsAtTwo(LlamaScaledByHeads):
    """The same bug, built with d_out 4 and 2 heads: head_dim 2 = num_heads, so √num_heads
    is √head_dim and no input can show it."""


# ---------------------------------------------------------------------------
# torch.nn.MultiheadAttention wrapped (PyTorch's docs; the book's MHAPyTorchClass)
# ---------------------------------------------------------------------------
class TorchMHACausal(nn.Module):
    """nn.MultiheadAttention(batch_first=True) with a boolean triu mask built in forward
    (d_in must equal d_out)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_out, num_heads, dropout=dropout, bias=qkv_bias,
                                         batch_first=True)

    def forward(self, x):
        n = x.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        out, _ = self.mha(x, x, x, attn_mask=mask, need_weights=False)
        return out


# ---------------------------------------------------------------------------
# Hugging Face BERT (models/bert/modeling_bert.py: BertSelfAttention)
# ---------------------------------------------------------------------------
class BertSelfAttention(nn.Module):
    """query, key, value; ``num_attention_heads`` (a name the check does not read: the
    head axis it sees); transpose_for_scores; no output projection."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_attention_heads = num_heads
        self.attention_head_size = d_out // num_heads
        self.all_head_size = d_out
        self.query = nn.Linear(d_in, d_out)
        self.key = nn.Linear(d_in, d_out)
        self.value = nn.Linear(d_in, d_out)
        self.dropout = nn.Dropout(dropout)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def keys_of(self, hidden_states):
        return self.key(hidden_states)

    def normalise(self, scores):
        return nn.functional.softmax(scores, dim=-1)

    def forward(self, hidden_states):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.keys_of(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = self.dropout(self.normalise(attention_scores))
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class BertSoftmaxOverHeads(BertSelfAttention):
    """Bug: softmax over dim=1, the heads of (batch, heads, seq, seq)."""

    def normalise(self, scores):
        return nn.functional.softmax(scores, dim=1)


class BertKeysFromQuery(BertSelfAttention):
    """Bug: the keys computed with the query layer."""

    def keys_of(self, hidden_states):
        return self.query(hidden_states)


# ---------------------------------------------------------------------------
# timm (pytorch-image-models, timm/models/vision_transformer.py: Attention)
# ---------------------------------------------------------------------------
class TimmAttention(nn.Module):
    """One qkv layer reshaped to (B, N, 3, heads, head_dim); q scaled before the product."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(d_in, d_out * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(dropout)
        self.proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = self.attn_drop((q @ k.transpose(-2, -1)).softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, -1)
        return self.proj(x)


class InterleavedQKVSoftmaxFirst(TimmAttention):
    """Another fused layout, columns (heads, head_dim, 3) ('b n (h d three)'); bug: softmax
    taken before the scaling."""

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, self.num_heads, self.head_dim, 3).permute(4, 0, 2, 1, 3)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1) * self.scale
        x = (attn @ v).transpose(1, 2).reshape(B, N, -1)
        return self.proj(x)


# ---------------------------------------------------------------------------
# Peter Bloem's "Transformers from scratch" (pbloem/former: SelfAttention)
# ---------------------------------------------------------------------------
class BloemSelfAttention(nn.Module):
    """tokeys, toqueries, tovalues, unifyheads; queries and keys each scaled by
    head_dim ** (1/4); heads folded into the batch for torch.bmm."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads, self.mask = num_heads, False
        self.tokeys = nn.Linear(d_in, d_out, bias=False)
        self.toqueries = nn.Linear(d_in, d_out, bias=False)
        self.tovalues = nn.Linear(d_in, d_out, bias=False)
        self.unifyheads = nn.Linear(d_out, d_out)

    def normalise(self, dot):
        return F.softmax(dot, dim=2)

    def forward(self, x):
        b, t, e = x.size()
        h = self.heads
        keys = self.tokeys(x).view(b, t, h, -1)
        queries = self.toqueries(x).view(b, t, h, -1)
        values = self.tovalues(x).view(b, t, h, -1)
        s = keys.shape[-1]
        keys = keys.transpose(1, 2).contiguous().view(b * h, t, s)
        queries = queries.transpose(1, 2).contiguous().view(b * h, t, s)
        values = values.transpose(1, 2).contiguous().view(b * h, t, s)
        queries = queries / (s ** (1 / 4))
        keys = keys / (s ** (1 / 4))
        dot = self.normalise(torch.bmm(queries, keys.transpose(1, 2)))
        out = torch.bmm(dot, values).view(b, h, t, s)
        out = out.transpose(1, 2).contiguous().view(b, t, s * h)
        return self.unifyheads(out)


class BloemSoftmaxOverQueries(BloemSelfAttention):
    """Bug: softmax over dim=1 of (b·h, t, t), the queries."""

    def normalise(self, dot):
        return F.softmax(dot, dim=1)


# ---------------------------------------------------------------------------
# The book's order of operations, written by someone else (mask, then scale)
# ---------------------------------------------------------------------------
class MaskAddedAttention(nn.Module):
    """Book-style CausalAttention with heads (mask before scale); bug: the 0/1 mask added
    to the scores instead of filling them with −∞."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (w(x).view(b, n, self.num_heads, -1).transpose(1, 2)
                   for w in (self.W_query, self.W_key, self.W_value))
        attn_scores = q @ k.transpose(2, 3)
        attn_scores = attn_scores + self.mask[:n, :n]
        attn_weights = torch.softmax(attn_scores / k.shape[-1] ** 0.5, dim=-1)
        context = (attn_weights @ v).transpose(1, 2).contiguous().view(b, n, -1)
        return self.out_proj(context)


# ---------------------------------------------------------------------------
# lucidrains' cross-attention style (perceiver-pytorch, x-transformers, memory-efficient-
# attention-pytorch): to_q, one fused to_kv of width 2 · inner_dim, to_out
# ---------------------------------------------------------------------------
class LucidCrossAttention(nn.Module):
    """to_q, to_kv (chunked into k and v), ``heads``, ``scale`` = dim_head ** -0.5,
    heads folded into the batch ('b n (h d) -> (b h) n d'), to_out = Sequential(Linear,
    Dropout); ``context`` defaults to x (self-attention)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads, dim_head = num_heads, d_out // num_heads
        self.scale = dim_head ** -0.5
        self.to_q = nn.Linear(d_in, d_out, bias=False)
        self.to_kv = nn.Linear(d_in, d_out * 2, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Sequential(nn.Linear(d_out, d_in), nn.Dropout(dropout))

    def fold(self, t):  # 'b n (h d) -> (b h) n d'
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3).reshape(b * self.heads, n, -1)

    def weigh(self, sim):
        return sim.softmax(dim=-1)

    def forward(self, x, context=None):
        context = x if context is None else context
        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        q, k, v = map(self.fold, (q, k, v))
        sim = torch.einsum("b i d, b j d -> b i j", q, k) * self.scale
        attn = self.dropout(self.weigh(sim))
        out = torch.einsum("b i j, b j d -> b i d", attn, v)
        bh, n, d = out.shape  # '(b h) n d -> b n (h d)'
        out = out.reshape(bh // self.heads, self.heads, n, d).permute(0, 2, 1, 3).reshape(
            bh // self.heads, n, self.heads * d)
        return self.to_out(out)


class LucidSoftmaxOverQueries(LucidCrossAttention):
    """Bug: softmax over the queries' axis (dim=-2)."""

    def weigh(self, sim):
        return sim.softmax(dim=-2)


class LucidChunkedAttention(LucidCrossAttention):
    """The memory-efficient path: queries and keys cut into buckets, each bucket's
    exponentiated scores kept with its running maximum, renormalised to the global one,
    summed, divided by the sum of weights (+ eps), written here for (b, h, n, d)."""

    q_bucket_size, k_bucket_size, eps = 2, 3, 1e-8

    def split(self, t):  # 'b n (h d) -> b h n d'
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)

    def chunked(self, q, k, v):
        q = q * q.shape[-1] ** -0.5
        out = []
        for q_chunk in q.split(self.q_bucket_size, dim=-2):
            sums, values, maxes = [], [], []
            for k_chunk, v_chunk in zip(k.split(self.k_bucket_size, dim=-2),
                                        v.split(self.k_bucket_size, dim=-2)):
                weight = torch.einsum("b h i d, b h j d -> b h i j", q_chunk, k_chunk)
                weight_max = weight.amax(dim=-1, keepdim=True).detach()
                exp_weight = (weight - weight_max).exp()
                sums.append(exp_weight.sum(dim=-1))
                values.append(torch.einsum("b h i j, b h j d -> b h i d", exp_weight, v_chunk))
                maxes.append(weight_max.squeeze(-1))
            maxes, values, sums = (torch.stack(t, dim=-1) for t in (maxes, values, sums))
            renorm = (maxes - maxes.amax(dim=-1, keepdim=True)).exp().detach()
            all_values = (values * renorm.unsqueeze(-2)).sum(dim=-1)
            all_weights = (sums * renorm).sum(dim=-1)
            out.append(all_values / (all_weights.unsqueeze(-1) + self.eps))
        return torch.cat(out, dim=-2)

    def forward(self, x, context=None):
        context = x if context is None else context
        q = self.split(self.to_q(x))
        k, v = map(self.split, self.to_kv(context).chunk(2, dim=-1))
        out = self.chunked(q, k, v)
        b, h, n, d = out.shape
        return self.to_out(out.permute(0, 2, 1, 3).reshape(b, n, h * d))


# ---------------------------------------------------------------------------
# ARENA's transformer-from-scratch exercises: per-head weights W_Q (n_heads, d_model,
# d_head), W_O (n_heads, d_head, d_model), einsum, an IGNORE buffer for the future
# ---------------------------------------------------------------------------
class ArenaAttention(nn.Module):
    """W_Q, W_K, W_V (n_heads, d_model, d_head), b_Q, b_K, b_V (n_heads, d_head), W_O
    (n_heads, d_head, d_model), b_O (d_model,); scores ÷ √d_head, the future filled with
    the IGNORE buffer (−1e5) by a triu(diagonal=1) mask made in forward."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.n_heads, self.d_head = num_heads, d_out // num_heads
        shape = (num_heads, d_in, self.d_head)
        self.W_Q = nn.Parameter(torch.randn(shape) * 0.02)
        self.W_K = nn.Parameter(torch.randn(shape) * 0.02)
        self.W_V = nn.Parameter(torch.randn(shape) * 0.02)
        self.W_O = nn.Parameter(torch.randn((num_heads, self.d_head, d_in)) * 0.02)
        self.b_Q = nn.Parameter(torch.zeros((num_heads, self.d_head)))
        self.b_K = nn.Parameter(torch.zeros((num_heads, self.d_head)))
        self.b_V = nn.Parameter(torch.zeros((num_heads, self.d_head)))
        self.b_O = nn.Parameter(torch.zeros(d_in))
        self.register_buffer("IGNORE", torch.tensor(-1e5, dtype=torch.float32))

    def apply_causal_mask(self, attn_scores):
        n = attn_scores.shape[-1]
        mask = torch.triu(torch.ones(n, n, device=attn_scores.device), diagonal=1).bool()
        return attn_scores.masked_fill(mask, self.IGNORE)

    def scale(self, attn_scores):
        return attn_scores / self.d_head ** 0.5

    def forward(self, normalized_resid_pre):
        x = normalized_resid_pre  # (batch, posn, d_model)
        q = torch.einsum("bpm,nmh->bpnh", x, self.W_Q) + self.b_Q
        k = torch.einsum("bpm,nmh->bpnh", x, self.W_K) + self.b_K
        v = torch.einsum("bpm,nmh->bpnh", x, self.W_V) + self.b_V
        attn_scores = torch.einsum("bqnh,bknh->bnqk", q, k)
        attn_scores = self.apply_causal_mask(self.scale(attn_scores))
        attn_pattern = attn_scores.softmax(-1)
        z = torch.einsum("bknh,bnqk->bqnh", v, attn_pattern)
        return torch.einsum("bqnh,nhm->bqm", z, self.W_O) + self.b_O


class ArenaScaledByDModel(ArenaAttention):
    """Bug: scores ÷ √d_model, not √d_head."""

    def scale(self, attn_scores):
        return attn_scores / self.W_Q.shape[1] ** 0.5
