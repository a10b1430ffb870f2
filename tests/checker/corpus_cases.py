"""The corpus of `tests/checker/corpus.py`: for each class, the style it follows, where
that style is seen, whether it is right, and for a broken one the step where it goes
wrong and the mistake that names it; and, written by hand for each style, how its
weights map onto the book's ``MultiHeadAttention`` (Listing 3.5, `explorer.checker.listings`),
which `tests/checker/test_corpus.py` uses to establish each entry's truth without the
checker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from explorer.checker.listings import DEFAULT_SIZES

FILE = Path(__file__).with_name("corpus.py")
SOURCE = FILE.read_text(encoding="utf-8")


def _namespace() -> dict:
    namespace: dict = {"__name__": "corpus"}
    exec(compile(SOURCE, str(FILE), "exec"), namespace)
    return namespace


CLASSES = _namespace()
"""corpus.py's classes, by name (built from its text, as the command line loads it)."""


# ---------------------------------------------------------------------------
# Each style's weights in nn.Linear's layout: (W (out, in), b or None) for q, k, v, out
# ---------------------------------------------------------------------------
Layers = dict[str, tuple[Tensor, Tensor | None]]


def linear(layer: nn.Linear) -> tuple[Tensor, Tensor | None]:
    return layer.weight.detach(), None if layer.bias is None else layer.bias.detach()


def rows3(weight: Tensor, bias: Tensor | None) -> list[tuple[Tensor, Tensor | None]]:
    """A fused (3·d, d_in) weight cut into q, k, v rows."""
    ws = weight.detach().chunk(3)
    bs = [None] * 3 if bias is None else bias.detach().chunk(3)
    return list(zip(ws, bs))


def qkv_out(q, k, v, out=None) -> Layers:
    return {"q": q, "k": k, "v": v, "out": out}


def nano(m) -> Layers:
    return qkv_out(*rows3(m.c_attn.weight, m.c_attn.bias), linear(m.c_proj))


def separate(q, k, v, out=None):
    return lambda m: qkv_out(linear(getattr(m, q)), linear(getattr(m, k)), linear(getattr(m, v)),
                             None if out is None else linear(getattr(m, out)))


def lecture(m) -> Layers:
    parts = {name: torch.cat([getattr(h, name).weight.detach() for h in m.heads])
             for name in ("query", "key", "value")}
    return qkv_out((parts["query"], None), (parts["key"], None), (parts["value"], None),
                   linear(m.proj))


def d2l_inner(m) -> Layers:
    return separate("W_q", "W_k", "W_v", "W_o")(m)


def vit(m) -> Layers:
    return qkv_out(*rows3(m.to_qkv.weight, None), linear(m.to_out[0]))


def gpt2(m) -> Layers:
    w = m.c_attn.weight.detach().T  # Conv1D (nx, nf) -> (nf, nx)
    return qkv_out(*rows3(w, m.c_attn.bias), (m.c_proj.weight.detach().T, m.c_proj.bias.detach()))


def annotated(m) -> Layers:
    return qkv_out(*(linear(layer) for layer in m.linears))


def einsum(m) -> Layers:
    return qkv_out((m.W_query.detach().T, None), (m.W_key.detach().T, None),
                   (m.W_value.detach().T, None), linear(m.out_proj))


def torch_mha(m) -> Layers:
    return qkv_out(*rows3(m.mha.in_proj_weight, m.mha.in_proj_bias), linear(m.mha.out_proj))


def timm(m) -> Layers:
    return qkv_out(*rows3(m.qkv.weight, m.qkv.bias), linear(m.proj))


def interleaved(m) -> Layers:
    """Columns laid out (heads, head_dim, 3): q is every third row."""
    h, hd = m.num_heads, m.head_dim
    w = m.qkv.weight.detach().reshape(h, hd, 3, -1)
    b = None if m.qkv.bias is None else m.qkv.bias.detach().reshape(h, hd, 3)
    parts = [(w[:, :, i].reshape(h * hd, -1), None if b is None else b[:, :, i].reshape(-1))
             for i in range(3)]
    return qkv_out(*parts, linear(m.proj))


def rows2(weight: Tensor, bias: Tensor | None) -> list[tuple[Tensor, Tensor | None]]:
    """A fused (2·d, d_in) weight cut into k, v rows."""
    ws = weight.detach().chunk(2)
    bs = [None] * 2 if bias is None else bias.detach().chunk(2)
    return list(zip(ws, bs))


def lucid(m) -> Layers:
    """to_q; to_kv's rows cut in two, k then v (``.chunk(2, dim=-1)``); to_out[0]."""
    k, v = rows2(m.to_kv.weight, m.to_kv.bias)
    return qkv_out(linear(m.to_q), k, v, linear(m.to_out[0]))


def arena(m) -> Layers:
    """Per-head W_Q (n_heads, d_model, d_head) -> nn.Linear's (n_heads · d_head, d_model),
    head h in rows h·d_head ...; W_O (n_heads, d_head, d_model) -> (d_model, n_heads · d_head)."""
    def per_head(w, b):
        return w.detach().permute(0, 2, 1).reshape(-1, w.shape[1]), b.detach().reshape(-1)
    return qkv_out(per_head(m.W_Q, m.b_Q), per_head(m.W_K, m.b_K), per_head(m.W_V, m.b_V),
                   (m.W_O.detach().reshape(-1, m.W_O.shape[-1]).T, m.b_O.detach()))


# ---------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One corpus entry: ``name`` (its class in corpus.py), ``style`` and ``seen``
    (where that style is seen), ``right``; for a broken one ``step`` (the first
    difference's step, None when it raises), ``since`` (a step not seen on its
    own before it, when the report names a range) and ``mistake`` (the slug);
    ``causal``: whether the intended attention is causal; ``layers``: its
    weights in the book's terms; ``sizes``: other constructor sizes than the
    check's defaults; ``qkv``: forward takes queries, keys and values apart;
    ``cannot_tell``: a broken entry whose bug gives the book's own numbers at its
    ``sizes`` (and not at the defaults), so the right answer is "? Cannot tell at
    these sizes"."""

    name: str
    style: str
    seen: str
    right: bool
    causal: bool
    layers: Callable[[nn.Module], Layers]
    step: str | None = None
    mistake: str | None = None
    since: str | None = None
    sizes: dict = field(default_factory=dict)
    qkv: bool = False
    cannot_tell: bool = False

    @property
    def cls(self) -> type:
        return CLASSES[self.name]

    def build_sizes(self) -> dict:
        return {**DEFAULT_SIZES, **self.sizes}


NANO = ("nanoGPT CausalSelfAttention", "github.com/karpathy/nanoGPT model.py")
MIN = ("minGPT CausalSelfAttention (key/query/value)", "github.com/karpathy/minGPT mingpt/model.py")
LECTURE = ("ng-video-lecture Head + MultiHeadAttention", "github.com/karpathy/ng-video-lecture gpt.py")
D2L = ("d2l MultiHeadAttention, masked_softmax(valid_lens)",
       "d2l.ai chapter_attention-mechanisms-and-transformers/multihead-attention")
VIT = ("vit-pytorch Attention (to_qkv, to_out Sequential)",
       "github.com/lucidrains/vit-pytorch vit_pytorch/vit.py")
GPT2 = ("Hugging Face GPT2Attention with Conv1D",
        "github.com/huggingface/transformers models/gpt2/modeling_gpt2.py, pytorch_utils.py")
ANNOTATED = ("annotated transformer MultiHeadedAttention (self.linears)",
             "github.com/harvardnlp/annotated-transformer the_annotated_transformer.py")
EINSUM = ("einsum attention, mask built in forward", "attention-from-scratch tutorials")
LLAMA = ("Meta llama Attention (wq, wk, wv, wo), additive mask",
         "github.com/meta-llama/llama llama/model.py")
SDPA = ("F.scaled_dot_product_attention with q_proj/k_proj/v_proj/o_proj",
        "PyTorch SDPA tutorial; Hugging Face sdpa attention classes")
TORCH_MHA = ("torch.nn.MultiheadAttention wrapped, mask built in forward",
             "pytorch.org docs nn.MultiheadAttention; the book's MHAPyTorchClass")
BERT = ("Hugging Face BertSelfAttention", "github.com/huggingface/transformers "
        "models/bert/modeling_bert.py")
TIMM = ("timm Attention (qkv reshape, q * scale)",
        "github.com/huggingface/pytorch-image-models timm/models/vision_transformer.py")
BLOEM = ("Peter Bloem's SelfAttention (tokeys, unifyheads)",
         "peterbloem.nl/blog/transformers; github.com/pbloem/former")
LUCID = ("lucidrains Attention (to_q, fused to_kv, to_out)",
         "github.com/lucidrains perceiver-pytorch, x-transformers")
LUCID_CHUNKED = ("lucidrains memory-efficient attention (buckets, running max)",
                 "github.com/lucidrains/memory-efficient-attention-pytorch")
ARENA = ("ARENA Attention, per-head W_Q (n_heads, d_model, d_head), W_O",
         "ARENA 3.0 chapter 1.1, transformer from scratch")
BOOK_ORDER = ("the book's order (mask, then scale), written elsewhere",
              "LLMs-from-scratch ch03 and its forks")

CASES = [
    Case("NanoCausalSelfAttention", *NANO, True, True, nano),
    Case("NanoMaskNotSliced", *NANO, False, True, nano, None, "mask_not_sliced"),
    Case("NanoMaskFilledWithZero", *NANO, False, True, nano, "masked_scores",
         "mask_filled_with_zero"),
    Case("NanoFlashAttention", *NANO, True, True, nano),
    Case("CausalSdpaSelfAttention", *SDPA, True, True, separate("q_proj", "k_proj", "v_proj", "o_proj")),
    Case("SdpaForgotIsCausal", *SDPA, False, True, separate("q_proj", "k_proj", "v_proj", "o_proj"),
         "context", "mask_not_applied", since="attn_scores"),
    Case("MinCausalSelfAttention", *MIN, True, True, separate("query", "key", "value", "proj")),
    Case("MinSoftmaxOverQueries", *MIN, False, True, separate("query", "key", "value", "proj"),
         "attn_weights", "softmax_over_queries"),
    Case("MinDiagonalMasked", *MIN, False, True, separate("query", "key", "value", "proj"),
         "masked_scores", "diagonal_masked"),
    Case("LectureMultiHeadAttention", *LECTURE, True, True, lecture),
    Case("LectureScaledByEmbedding", *LECTURE, False, True, lecture, "scaled_scores",
         "scaled_by_d_in"),
    Case("D2LMultiHeadAttention", *D2L, True, False, d2l_inner, qkv=True),
    Case("D2LNoPermuteBack", *D2L, False, False, d2l_inner, "context", "no_transpose_back",
         qkv=True),
    Case("D2LDecoderSelfAttention", *D2L, True, True, lambda m: d2l_inner(m.attention)),
    Case("D2LDecoderZeroFill", *D2L, False, True, lambda m: d2l_inner(m.attention),
         "masked_scores", "mask_filled_with_zero"),
    Case("ViTAttention", *VIT, True, False, vit),
    Case("ViTOutNeverApplied", *VIT, False, False, vit, "output", "out_proj_not_applied"),
    Case("GPT2Attention", *GPT2, True, True, gpt2),
    Case("GPT2NotScaled", *GPT2, False, True, gpt2, "attn_weights", "no_scaling",
         since="masked_scores"),
    Case("GPT2EagerDropoutP", *GPT2, True, True, gpt2),
    Case("GPT2SplitWithView", *GPT2, False, True, gpt2, "attn_scores", "split_with_view"),
    Case("AnnotatedMultiHeadedAttention", *ANNOTATED, True, False, annotated, qkv=True),
    Case("AnnotatedScaledByDk", *ANNOTATED, False, False, annotated, "scaled_scores",
         "scaled_by_d_k", qkv=True),
    Case("EinsumSelfAttention", *EINSUM, True, True, einsum),
    Case("EinsumMaskReversed", *EINSUM, False, True, einsum, "masked_scores", "mask_reversed"),
    Case("LlamaAttention", *LLAMA, True, True, separate("wq", "wk", "wv", "wo")),
    Case("LlamaScaledByHeads", *LLAMA, False, True, separate("wq", "wk", "wv", "wo"),
         "scaled_scores", "scaled_by_num_heads"),
    Case("LlamaScaledByHeadsAtTwo", *LLAMA, False, True, separate("wq", "wk", "wv", "wo"),
         sizes={"d_out": 4, "num_heads": 2}, cannot_tell=True),
    Case("TorchMHACausal", *TORCH_MHA, True, True, torch_mha, sizes={"d_in": 10}),
    Case("BertSelfAttention", *BERT, True, False, separate("query", "key", "value")),
    Case("BertSoftmaxOverHeads", *BERT, False, False, separate("query", "key", "value"),
         "attn_weights", "softmax_over_heads"),
    Case("BertKeysFromQuery", *BERT, False, False, separate("query", "key", "value"),
         "keys", "projection_mixed_up"),
    Case("TimmAttention", *TIMM, True, False, timm),
    Case("InterleavedQKVSoftmaxFirst", *TIMM, False, False, interleaved, "scaled_scores",
         "softmax_before_scaling"),
    Case("BloemSelfAttention", *BLOEM, True, False, separate("toqueries", "tokeys", "tovalues",
                                                              "unifyheads")),
    Case("BloemSoftmaxOverQueries", *BLOEM, False, False,
         separate("toqueries", "tokeys", "tovalues", "unifyheads"), "attn_weights",
         "softmax_over_queries"),
    Case("MaskAddedAttention", *BOOK_ORDER, False, True,
         separate("W_query", "W_key", "W_value", "out_proj"), "masked_scores", "mask_added"),
    Case("LucidCrossAttention", *LUCID, True, False, lucid),
    Case("LucidSoftmaxOverQueries", *LUCID, False, False, lucid, "attn_weights",
         "softmax_over_queries"),
    Case("LucidChunkedAttention", *LUCID_CHUNKED, True, False, lucid),
    Case("ArenaAttention", *ARENA, True, True, arena),
    Case("ArenaScaledByDModel", *ARENA, False, True, arena, "scaled_scores", "scaled_by_d_in"),
]
"""Every entry, right and broken."""
BY_NAME = {case.name: case for case in CASES}
