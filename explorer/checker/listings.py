"""The book's own code, as text: what the "Check your code" page starts from.

`MULTI_HEAD_ATTENTION` is Listing 3.5 of "Build a Large Language Model (From
Scratch)", chapter 3, as printed (with its imports): the class a learner most
often writes and checks. Change one line (``dim=-1`` to ``dim=0``, drop
``/ keys.shape[-1]**0.5`` ...) and `explorer.checker.check.check_module` names the
mistake. The tests build their ``MultiHeadAttention`` from this same text.
"""

MULTI_HEAD_ATTENTION = '''\
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)
        return context_vec
'''
"""Listing 3.5, ``MultiHeadAttention``, as text."""
MULTI_HEAD_ATTENTION_CLASS = "MultiHeadAttention"

DEFAULT_SIZES = {"d_in": 3, "d_out": 10, "num_heads": 2}
"""The sizes the check builds a class with unless told otherwise (the command
line, the page): d_in 3 (the book's hand-picked vectors), d_out 10 and 2 heads,
so that d_in, d_out, head_dim (5) and num_heads all differ and no mistake of
scaling (√d_in, √d_out, d_k, √num_heads for √head_dim) gives the right numbers."""
CONTEXT_MARGIN = 3
"""context_length is the sentence's number of tokens plus this, unless told: a
mask that is not cut to the sentence then shows (it raises)."""
