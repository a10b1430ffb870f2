"""Attention modules as learners write them: chapter 3's listings, and broken ones.

The first five classes are the book's code ("Build a Large Language Model (From
Scratch)", chapter 3, Listings 3.1-3.5), as printed. `Tweakable` is
Listing 3.5's ``MultiHeadAttention`` with each step a method, so that each
broken variant below changes one step the way learners get it wrong, in the
book's own order of operations (mask, then scale inside the softmax).

Nothing here draws from the global RNG at import; the tests build the modules
inside ``torch.random.fork_rng()``, after the book's ``torch.manual_seed(123)``.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from explorer.checker.listings import MULTI_HEAD_ATTENTION


# ---------------------------------------------------------------------------
# The book's listings
# ---------------------------------------------------------------------------
class SelfAttention_v1(nn.Module):  # Listing 3.1
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        attn_scores = queries @ keys.T  # omega
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        return context_vec


class SelfAttention_v2(nn.Module):  # Listing 3.2
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        return context_vec


class CausalAttention(nn.Module):  # Listing 3.3
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec


class MultiHeadAttentionWrapper(nn.Module):  # Listing 3.4
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
             for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


def _listing(source: str, name: str) -> type:
    """A class of `explorer.checker.listings`, the text the app's check page starts from."""
    namespace: dict = {"__name__": __name__}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


MultiHeadAttention = _listing(MULTI_HEAD_ATTENTION, "MultiHeadAttention")  # Listing 3.5


class RenamedAttention(nn.Module):
    """Right arithmetic, names of its own: the check cannot tell which layer is W_query.
    (BERT's and ng-video-lecture's query/key/value are read.)"""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.ask = nn.Linear(d_in, d_out, bias=False)
        self.match = nn.Linear(d_in, d_out, bias=False)
        self.give = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        scores = self.ask(x) @ self.match(x).T
        return torch.softmax(scores / self.match.out_features**0.5, dim=-1) @ self.give(x)


# ---------------------------------------------------------------------------
# One step at a time: the broken variants
# ---------------------------------------------------------------------------
class Tweakable(MultiHeadAttention):
    """Listing 3.5 with each step a method (same numbers as `MultiHeadAttention`).
    Works on (b, n, d_in); a subclass overrides the step it gets wrong."""

    def project(self, layer, x):
        return layer(x)

    def split(self, t, b, num_tokens):
        return t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

    def mask_scores(self, attn_scores, num_tokens):
        return attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)

    def scale(self, attn_scores, keys):
        return attn_scores / keys.shape[-1]**0.5

    def normalise(self, scaled, num_tokens):
        return torch.softmax(scaled, dim=-1)

    def combine(self, context_vec, b, num_tokens):
        return context_vec.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)

    def project_out(self, context_vec):
        return self.out_proj(context_vec)

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys, queries, values = (self.split(self.project(layer, x), b, num_tokens)
                                 for layer in (self.W_key, self.W_query, self.W_value))
        attn_scores = self.mask_scores(queries @ keys.transpose(2, 3), num_tokens)
        attn_weights = self.dropout(self.normalise(self.scale(attn_scores, keys), num_tokens))
        return self.project_out(self.combine(attn_weights @ values, b, num_tokens))


class NoScaling(Tweakable):
    def scale(self, attn_scores, keys):
        return attn_scores


class ScaledByDk(Tweakable):
    def scale(self, attn_scores, keys):
        return attn_scores / keys.shape[-1]


class ScaledByDin(Tweakable):
    def scale(self, attn_scores, keys):
        return attn_scores / self.W_key.in_features**0.5


class ScaledByDout(Tweakable):
    def scale(self, attn_scores, keys):
        return attn_scores / self.d_out**0.5


class SoftmaxOverQueries(Tweakable):
    def normalise(self, scaled, num_tokens):
        return torch.softmax(scaled, dim=2)  # (b, num_heads, n, n): the query axis


class SoftmaxOverHeads(Tweakable):
    def normalise(self, scaled, num_tokens):
        return torch.softmax(scaled, dim=1)


class SoftmaxOverBatch(Tweakable):
    def normalise(self, scaled, num_tokens):
        return torch.softmax(scaled, dim=0)


class MaskAfterSoftmax(Tweakable):
    """The book's §3.5.1 second route without its renormalisation."""

    def mask_scores(self, attn_scores, num_tokens):
        return attn_scores

    def normalise(self, scaled, num_tokens):
        future = self.mask.bool()[:num_tokens, :num_tokens]
        return torch.softmax(scaled, dim=-1).masked_fill(future, 0.0)


class MaskFilledWithZero(Tweakable):
    def mask_scores(self, attn_scores, num_tokens):
        return attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], 0.0)


class DiagonalMasked(Tweakable):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=0))


class MaskNotApplied(Tweakable):
    def mask_scores(self, attn_scores, num_tokens):
        return attn_scores


class SplitWithView(Tweakable):
    def split(self, t, b, num_tokens):
        return t.view(b, self.num_heads, num_tokens, self.head_dim)


class WeightsTransposed(Tweakable):
    def project(self, layer, x):
        return x @ layer.weight  # nn.Linear computes x @ weight.T


class DropoutAlwaysOn(Tweakable):
    def normalise(self, scaled, num_tokens):
        return torch.nn.functional.dropout(torch.softmax(scaled, dim=-1), 0.5)  # training=True


class OutProjNotApplied(Tweakable):
    def project_out(self, context_vec):
        return context_vec


class PositionBias(Tweakable):
    """Not a classic mistake: adds 0.1 × the key's position to every score."""

    def scale(self, attn_scores, keys):
        position = torch.arange(attn_scores.shape[-1], dtype=attn_scores.dtype)
        return (attn_scores + 0.1 * position) / keys.shape[-1]**0.5


class SameKeysForEveryItem(Tweakable):
    """Right for a batch of one; batch item 1 gets item 0's keys."""

    def project(self, layer, x):
        if layer is self.W_key:
            x = x[:1].expand_as(x)  # every sentence gets the keys of the first
        return layer(x)


class SelfAttention_v1_dim0(SelfAttention_v1):
    """Listing 3.1 with softmax over dim=0, the learners' favourite."""

    def forward(self, x):
        keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
        attn_weights = torch.softmax(queries @ keys.T / keys.shape[-1]**0.5, dim=0)
        return attn_weights @ values


# ---------------------------------------------------------------------------
# Other ways to write the same attention (issue 28): what the module computes
# ---------------------------------------------------------------------------
class MHAEinsum(nn.Module):
    """The bonus notebook's einsum implementation (mha-implementations.ipynb):
    raw parameters, and biases kept apart and added after the einsum."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Parameter(torch.randn(d_in, d_out))
        self.W_key = nn.Parameter(torch.randn(d_in, d_out))
        self.W_value = nn.Parameter(torch.randn(d_in, d_out))
        if qkv_bias:
            self.bias_q = nn.Parameter(torch.randn(d_out))
            self.bias_k = nn.Parameter(torch.randn(d_out))
            self.bias_v = nn.Parameter(torch.randn(d_out))
        else:
            self.register_parameter("bias_q", None)
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        Q = torch.einsum("bnd,di->bni", x, self.W_query)
        K = torch.einsum("bnd,di->bni", x, self.W_key)
        V = torch.einsum("bnd,di->bni", x, self.W_value)
        if self.bias_q is not None:
            Q += self.bias_q
            K += self.bias_k
            V += self.bias_v
        Q = Q.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        K = K.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        V = V.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        scores = torch.einsum("bhnd,bhmd->bhnm", Q, K) / (self.head_dim ** 0.5)
        mask = self.mask[:n, :n].unsqueeze(0).unsqueeze(1).expand(b, self.num_heads, n, n)
        scores = scores.masked_fill(mask.bool(), -torch.inf)
        attn_weights = self.dropout(torch.softmax(scores, dim=-1))
        context_vec = torch.einsum("bhnm,bhmd->bhnd", attn_weights, V)
        context_vec = context_vec.transpose(1, 2).reshape(b, n, self.d_out)
        return self.out_proj(context_vec)


class MultiHeadAttentionCombinedQKV(nn.Module):
    """The notebook's combined-QKV variant: one fused nn.Linear(d_in, 3 * d_out),
    as GPT-2's c_attn, and the output projection called ``proj``."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.num_heads, self.head_dim, self.d_out = num_heads, d_out // num_heads, d_out
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                diagonal=1))

    def split(self, qkv, b, num_tokens):
        qkv = qkv.view(b, num_tokens, 3, self.num_heads, self.head_dim)
        return qkv.permute(2, 0, 3, 1, 4)

    def forward(self, x):
        b, num_tokens, _ = x.shape
        queries, keys, values = self.split(self.qkv(x), b, num_tokens)
        attn_scores = queries @ keys.transpose(-2, -1)
        attn_scores = attn_scores.masked_fill(
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1))
        context_vec = (attn_weights @ values).transpose(1, 2)
        return self.proj(context_vec.contiguous().view(b, num_tokens, self.d_out))


class MHAPyTorchClass(nn.Module):
    """The notebook's class that wraps torch.nn.MultiheadAttention, with its own
    ``proj`` after it (d_in must equal d_out)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.multihead_attn = nn.MultiheadAttention(embed_dim=d_out, num_heads=num_heads,
                                                    dropout=dropout, bias=qkv_bias,
                                                    batch_first=True)
        self.proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                diagonal=1).bool())

    def forward(self, x):
        num_tokens = x.shape[1]
        attn_output, _ = self.multihead_attn(x, x, x, attn_mask=self.mask[:num_tokens, :num_tokens])
        return self.proj(attn_output)


class CausalAttentionKeysT(CausalAttention):
    """Listing 3.3 with SelfAttention_v2's ``keys.T``: right for one sentence,
    wrong on the book's batch (it reverses all three axes)."""

    def forward(self, x):
        num_tokens = x.shape[-2]
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        attn_scores = queries @ keys.T
        attn_scores = attn_scores.masked_fill(
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1))
        return attn_weights @ values


class NoTransposeBack(Tweakable):
    """The heads combined with ``.view`` straight after ``attn_weights @ values``."""

    def combine(self, context_vec, b, num_tokens):
        return context_vec.contiguous().view(b, num_tokens, self.d_out)


class DropoutOnScores(Tweakable):
    """Dropout applied to the masked scores, before softmax, not to the weights."""

    def normalise(self, scaled, num_tokens):
        return torch.softmax(self.dropout(scaled), dim=-1)

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys, queries, values = (self.split(self.project(layer, x), b, num_tokens)
                                 for layer in (self.W_key, self.W_query, self.W_value))
        attn_scores = self.mask_scores(queries @ keys.transpose(2, 3), num_tokens)
        attn_weights = self.normalise(self.scale(attn_scores, keys), num_tokens)
        return self.project_out(self.combine(attn_weights @ values, b, num_tokens))


CAUSAL_ATTENTION_BLOCK_SIZE = '''\
import torch
import torch.nn as nn


class CausalAttention(nn.Module):  # the book repository's first ch03 code: block_size
    def __init__(self, d_in, d_out, block_size, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size), diagonal=1))

    def forward(self, x):
        b, n_tokens, d_in = x.shape
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:n_tokens, :n_tokens], -torch.inf)
        attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1))
        return attn_weights @ values
'''
"""Listing 3.3 as the book repository first had it, with ``block_size``."""


class FusedPerHead(MultiHeadAttentionCombinedQKV):
    """A fused layer read head by head (GPT-NeoX's layout): each head's query,
    key and value rows side by side."""

    def split(self, qkv, b, num_tokens):
        qkv = qkv.view(b, num_tokens, self.num_heads, 3 * self.head_dim)
        return qkv.transpose(1, 2).split(self.head_dim, dim=-1)


class SelfAttentionLinearLayout(nn.Module):
    """Listing 3.1 with nn.Linear's layout: W of shape (d_out, d_in), x @ W.T."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_out, d_in))
        self.W_key = nn.Parameter(torch.rand(d_out, d_in))
        self.W_value = nn.Parameter(torch.rand(d_out, d_in))

    def forward(self, x):
        keys, queries, values = x @ self.W_key.T, x @ self.W_query.T, x @ self.W_value.T
        attn_weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1]**0.5, -1)
        return attn_weights @ values


class FusedWithSDPA(MultiHeadAttentionCombinedQKV):
    """The notebook's fused layer with F.scaled_dot_product_attention(is_causal=True):
    causal without a mask buffer, the attention in one call."""

    def forward(self, x):
        b, num_tokens, _ = x.shape
        queries, keys, values = self.split(self.qkv(x), b, num_tokens)
        context_vec = nn.functional.scaled_dot_product_attention(queries, keys, values,
                                                                 is_causal=True)
        return self.proj(context_vec.transpose(1, 2).contiguous().view(b, num_tokens,
                                                                        self.d_out))
