# The template of attention.py, the forward pages' "Reproduce in PyTorch" script
# (`explorer.render.export.pytorch_script`): named blocks ("#@ name" lines) with
# __NAME__ slots (`explorer.render.script_templates`). pytorch_script picks the blocks the
# settings need, in this order, numbers the steps ("# 1. ...") and fills the slots.
#
# The header's first two lines are fixed text: Python reads an encoding declaration
# from them, so no visitor text may appear there.

#@ header
# Scaled dot-product attention, step by step, in plain PyTorch.
# Written by the self-attention explorer, following chapter 3 of
# "Build a Large Language Model (From Scratch)" (Sebastian Raschka).
#
#   python attention.py                  prints every matrix
#   python attention.py --save steps.pt  also saves them: torch.load('steps.pt')
#                                        is a dict, step name -> tensor, the app's
#                                        numbers to float32 rounding (not always
#                                        bit for bit: a few 1e-6 apart at most)
#
# Settings:
__SETTINGS__

#@ setup
import argparse
import unicodedata

import torch

parser = argparse.ArgumentParser(description="Attention, step by step.")
parser.add_argument("--save", metavar="FILE",
                    help="also save every step (a dict: step name -> tensor)")
args = parser.parse_args()

torch.set_grad_enabled(False)  # we only look at the numbers: no training, no gradients
steps = {}  # step name -> tensor, named as in the explorer


def show(name, tensor):
    """Print one step under a heading, and keep it for --save."""
    steps[name] = tensor
    print(f"\n__HEADING__")
    print(tensor)

#@ settings
# The settings
sentence = __SENTENCE__
d_in = __D_IN__  # width of each token's embedding
d_k = __D_K__  # width of the queries and keys
d_v = __D_V__  # width of the values and the context vectors

#@ num_heads
num_heads = __N_HEADS__  # d_k and d_v are split evenly between them

#@ seed
torch.manual_seed(__SEED__)  # all random numbers below come from this seed, drawn in order

#@ tokens
# Tokens and ids: split on whitespace and strip every punctuation mark (Unicode
# categories P*) from both ends of each word
def strip_punctuation(word):
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("__PUNCTUATION__"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("__PUNCTUATION__"):
        end -= 1
    return word[start:end]


words = [strip_punctuation(word) for word in sentence.split()]
tokens = [word for word in words if word]

#@ num_tokens
num_tokens = len(tokens)  # __N__

#@ token_ids
print("tokens:", tokens)
# The vocabulary is the sorted unique tokens; a token's id is its index in it
vocab = sorted(set(tokens))
word_to_idx = {word: idx for idx, word in enumerate(vocab)}
sentence_int = torch.tensor([word_to_idx[token] for token in tokens])  # __N_SHAPE__
show("token_ids", sentence_int)

#@ embeddings_table
# Embeddings X: look each id up in a random table, as the teaching notebook
#    "__NOTEBOOK_002__" does
vocab_size = __VOCAB_SIZE__
embed = torch.nn.Embedding(vocab_size, d_in)
embedded_sentence = embed(sentence_int)  # __N_SHAPE__ ids -> __X_SHAPE__
show("embeddings", embedded_sentence)

#@ embeddings_uniform
# Embeddings X: uniform random numbers in [0, 1), as the teaching notebook
#    "__NOTEBOOK_001__" does
inputs = torch.rand(num_tokens, d_in)  # __X_SHAPE__
show("embeddings", inputs)

#@ embeddings_given
# Embeddings X: your own numbers, one row per token
inputs = __EMBEDDINGS__
show("embeddings", inputs)

#@ weights_given
# The weight matrices W_query, W_key, W_value: your own numbers
W_query = __W_QUERY__
W_key = __W_KEY__
W_value = __W_VALUE__

#@ weights_randn
# The weight matrices W_query, W_key, W_value: random normal numbers, as the teaching notebook
#    "__NOTEBOOK_002__" does.
#    Training would learn them; the book wraps them in torch.nn.Parameter.
W_query = torch.randn(d_in, d_k)  # __WK_SHAPE__
W_key = torch.randn(d_in, d_k)  # __WK_SHAPE__
W_value = torch.randn(d_in, d_v)  # __WV_SHAPE__

#@ weights_rand
# The weight matrices W_query, W_key, W_value: uniform random numbers in [0, 1), as the book's SelfAttention_v1 does.
#    Training would learn them; the book wraps them in torch.nn.Parameter.
W_query = torch.rand(d_in, d_k)  # __WK_SHAPE__
W_key = torch.rand(d_in, d_k)  # __WK_SHAPE__
W_value = torch.rand(d_in, d_v)  # __WV_SHAPE__

#@ weights_linear
# The weight matrices W_query, W_key, W_value: the initial weights of nn.Linear(d_in, d_out, bias=False), as in the
#    book's SelfAttention_v2. nn.Linear keeps its weight as (d_out, d_in) and
#    computes x @ weight.T, so W = weight.T gives queries = x @ W_query.
W_query = torch.nn.Linear(d_in, d_k, bias=False).weight.detach().T  # __WK_SHAPE__
W_key = torch.nn.Linear(d_in, d_k, bias=False).weight.detach().T  # __WK_SHAPE__
W_value = torch.nn.Linear(d_in, d_v, bias=False).weight.detach().T  # __WV_SHAPE__

#@ weights_identity
# The weight matrices W_query, W_key, W_value: the identity, so Q = K = V = X: simplified attention,
#    with no trainable weights, as in the book's section 3.3 and the teaching
#    notebooks "__NOTEBOOK_000__" and "__NOTEBOOK_003__".
W_query = torch.eye(d_in)  # __WK_SHAPE__
W_key = torch.eye(d_in)  # __WK_SHAPE__
W_value = torch.eye(d_in)  # __WV_SHAPE__

#@ out_proj_layer
# The output projection is a layer too, so it is drawn here, right after
# W_value, as the book's MultiHeadAttention creates it in __init__
out_proj = torch.nn.Linear(d_v, d_v)

#@ weights_show
show("W_query", W_query)
show("W_key", W_key)
show("W_value", W_value)

#@ qkv
# Queries, keys and values: every token's embedding times each weight matrix
queries = __X__ @ W_query  # __X_SHAPE__ @ __WK_SHAPE__ -> __QK_SHAPE__
keys = __X__ @ W_key  # __X_SHAPE__ @ __WK_SHAPE__ -> __QK_SHAPE__
values = __X__ @ W_value  # __X_SHAPE__ @ __WV_SHAPE__ -> __V_SHAPE__

#@ head_dim
# Split the columns into heads, as the book's MultiHeadAttention does
# (without its batch axis): head h gets its own slice of the columns
head_dim = d_k // num_heads  # __HEAD_DIM__

#@ head_dim_v
head_dim_v = d_v // num_heads  # __HEAD_DIM_V__

#@ split_heads
queries = queries.view(num_tokens, num_heads, head_dim).transpose(0, 1)  # __QK_SHAPE__ -> __QK_SPLIT__ -> __QK_HEADS__
keys = keys.view(num_tokens, num_heads, head_dim).transpose(0, 1)  # __QK_SHAPE__ -> __QK_SPLIT__ -> __QK_HEADS__
values = values.view(num_tokens, num_heads, __V_DIM__).transpose(0, 1)  # __V_SHAPE__ -> __V_SPLIT__ -> __V_HEADS__

#@ qkv_show
show("queries", queries)
show("keys", keys)
show("values", values)

#@ scores
# Attention scores omega = Q K^T: row i holds query i's dot product with every key
attn_scores = queries @ keys.T  # __QK_SHAPE__ @ __KT_SHAPE__ -> __NN_SHAPE__
show("attn_scores", attn_scores)

#@ scores_heads
# Attention scores omega = Q K^T: row i holds query i's dot product with every key
attn_scores = queries @ keys.transpose(1, 2)  # __QK_HEADS__ @ __KT_HEADS__ -> __NN_HEADS__
show("attn_scores", attn_scores)

#@ scale
# Scale by sqrt(__D__) = sqrt(__HEAD_DIM__), so that softmax does not saturate as __D__ grows
scaled_scores = attn_scores / keys.shape[-1] ** 0.5
show("scaled_scores", scaled_scores)

#@ no_scale
# Scaling is off: the scores are used as they are
scaled_scores = attn_scores
show("scaled_scores", scaled_scores)

#@ causal_mask
# Causal mask: query i may only look at keys j <= i, so the future (j > i)
#    gets -inf, which softmax turns into a weight of exactly 0
causal_mask = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()  # __NN_SHAPE__
show("causal_mask", causal_mask)
masked_scores = scaled_scores.masked_fill(causal_mask, -torch.inf)
show("masked_scores", masked_scores)

#@ softmax
# Attention weights: softmax over each row, so every row sums to 1
attn_weights = torch.softmax(__S__, dim=-1)
show("attn_weights", attn_weights)

#@ naive_softmax
# Attention weights: the naive softmax exp(x) / sum(exp(x)) of the teaching
#    notebook "__NOTEBOOK_001__".
#    Without subtracting the row max, exp overflows to inf (and inf/inf = nan)
#    once a score passes about 88.7
attn_weights = torch.exp(__S__) / torch.exp(__S__).sum(dim=-1, keepdim=True)
show("attn_weights", attn_weights)

#@ sum
# Attention weights: each row divided by its sum, as the book's section 3.3.1
#    and the teaching notebook "__NOTEBOOK_001__" do first
attn_weights = __S__ / __S__.sum(dim=-1, keepdim=True)
show("attn_weights", attn_weights)

#@ sum_causal
# Attention weights: each row divided by its sum, as the book's section 3.3.1
#    and the teaching notebook "__NOTEBOOK_001__" do first
#    (masked scores count as 0)
unmasked = masked_scores.masked_fill(causal_mask, 0.0)
attn_weights = unmasked / unmasked.sum(dim=-1, keepdim=True)
show("attn_weights", attn_weights)

#@ dropout
# Dropout (book section 3.5.2): while training, each weight is zeroed with
# probability p = __P__ and the others are scaled by 1 / (1 - p)
dropout = torch.nn.Dropout(__P__)
# Which weights are kept? The same draw on a matrix of ones shows it (1 = kept)
torch.manual_seed(__MASK_SEED__)  # the dropout seed
dropout_mask = (dropout(torch.ones_like(attn_weights)) > 0).float()
show("dropout_mask", dropout_mask)
torch.manual_seed(__MASK_SEED__)  # the same seed again, so the same weights drop
dropped_weights = dropout(attn_weights)
show("dropped_weights", dropped_weights)

#@ context
# Context vectors: row i is the weighted sum of the values, with query i's weights
context_vec = __A__ @ values  # __NN_SHAPE__ @ __V_SHAPE__ -> __V_SHAPE__
show("context", context_vec)

#@ context_heads
# Context vectors: row i is the weighted sum of the values, with query i's weights
context_vec = (__A__ @ values).transpose(0, 1)  # __NN_HEADS__ @ __V_HEADS__ -> __V_HEADS__ -> __V_SPLIT__
# The heads side by side, as in the book's MultiHeadAttention
context_vec = context_vec.contiguous().view(num_tokens, d_v)  # __V_SHAPE__
show("context", context_vec)

#@ out_proj
# Output projection: the layer out_proj (drawn in step 3) mixes the heads
W_out = out_proj.weight.detach().T  # __VV_SHAPE__, transposed like W_query
b_out = out_proj.bias.detach()  # __VB_SHAPE__
show("W_out", W_out)
show("b_out", b_out)
output = out_proj(context_vec)  # context_vec @ W_out + b_out, __V_SHAPE__
show("output", output)

#@ save
# Save every step, if asked: torch.load(FILE) gives the dict step name -> tensor
if args.save:
    torch.save(steps, args.save)
    print(f"\nsaved {len(steps)} steps to {args.save}")
