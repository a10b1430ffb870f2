"""Attention as today's open LLMs compute it (Llama, Qwen, Gemma, Mistral), one
function per step: rotary position embeddings (RoPE), grouped-query attention,
the sliding window, the KV cache read one token at a time, and
FlashAttention's tiled online softmax.

Pure torch, float32, no UI. Shapes follow the multi-head convention
``(n_heads, n_tokens, head_dim)`` (nanoGPT's ``(nh, T, hs)`` without the batch).
Masks are boolean with True = "this query may attend to this key", as
``torch.nn.functional.scaled_dot_product_attention``'s ``attn_mask`` reads them.
Every size outside its limits raises the project's one `ConfigError`, saying
what is allowed.

References, one per part:

- RoPE: Su et al., "RoFormer" (2021), eq. 34 (pairs of neighbouring dimensions,
  the *interleaved* pairing), and ``transformers``' Llama
  (``rotate_half`` / ``apply_rotary_pos_emb``: dimension i is paired with
  i + head_dim/2, the *rotate-half* pairing).
- Grouped-query / multi-query attention: Ainslie et al., "GQA" (2023);
  Shazeer, "Fast Transformer Decoding" (2019).
- Sliding window: Jiang et al., "Mistral 7B" (2023). Two conventions count
  the window: ``transformers``' ``masking_utils.sliding_window_overlay`` (key j
  is seen by query i when i − w < j ≤ i: w keys, the query included) and
  Mistral's reference code (``torch.triu(mask, diagonal=-sliding_window)``:
  i − w ≤ j ≤ i, the query and w earlier tokens); transformers has shipped both
  (its issues #29623, #39408).
- KV cache: the keys and values of earlier tokens are kept and only the new
  token's query, key and value are computed (Pope et al., "Efficiently Scaling
  Transformer Inference", 2022).
- Online softmax: Dao, "FlashAttention-2" (2023), Algorithm 1 (forward pass);
  with the causal mask the kernel skips the tiles above the diagonal (§3.1.1,
  "causal masking": about half the tiles for long sequences).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from explorer.core.config import MAX_ATTENTION_CELLS, ConfigError

# ---------------------------------------------------------------------------
# Limits and choices (one place)
# ---------------------------------------------------------------------------
DEFAULT_ROPE_BASE = 10_000.0
"""θ's base in RoFormer and Llama 1/2 (Llama 3 uses 500,000)."""
MIN_ROPE_BASE, MAX_ROPE_BASE = 2.0, 1e7
ROTATE_HALF, INTERLEAVED = "rotate_half", "interleaved"
ROPE_PAIRINGS = (ROTATE_HALF, INTERLEAVED)
PAIRING_HELP = {
    ROTATE_HALF: "rotate-half, as Llama in transformers: dimension i turns with i + head_dim/2",
    INTERLEAVED: "interleaved, as the RoFormer paper (eq. 34): dimension 2i turns with 2i + 1",
}
MAX_ROPE_OFFSET = 1_000_000
BYTES_PER_VALUE = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class KVSizes:
    """A model's sizes that decide its KV cache: layers, query heads, K/V heads, head_dim."""

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int


REAL_MODELS = (
    KVSizes("Llama 2 7B (multi-head)", 32, 32, 32, 128),
    KVSizes("Llama 3 8B (grouped-query)", 32, 32, 8, 128),
    KVSizes("Mistral 7B (grouped-query, window 4,096)", 32, 32, 8, 128),
)
"""Sizes from each model's published config.json (num_hidden_layers,
num_attention_heads, num_key_value_heads, hidden_size / num_attention_heads)."""


def _need(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ConfigError(name, message)


# ---------------------------------------------------------------------------
# 1. RoPE
# ---------------------------------------------------------------------------
def check_rope(head_dim: int, base: float = DEFAULT_ROPE_BASE, pairing: str = ROTATE_HALF,
               offset: int = 0) -> None:
    """Raise `ConfigError` unless RoPE can rotate ``head_dim``-wide heads:
    head_dim even (dimensions turn in pairs), base in
    [`MIN_ROPE_BASE`, `MAX_ROPE_BASE`], a known pairing, offset in [0, `MAX_ROPE_OFFSET`]."""
    _need(head_dim >= 2 and head_dim % 2 == 0, "head_dim",
          f"RoPE turns dimensions in pairs, so head_dim must be even (got {head_dim})")
    _need(MIN_ROPE_BASE <= base <= MAX_ROPE_BASE, "rope_base",
          f"rope_base must be between {MIN_ROPE_BASE:g} and {MAX_ROPE_BASE:g} (got {base:g})")
    _need(pairing in ROPE_PAIRINGS, "rope_pairing",
          f"rope_pairing must be one of {', '.join(ROPE_PAIRINGS)} (got {pairing!r})")
    _need(0 <= offset <= MAX_ROPE_OFFSET, "rope_offset",
          f"rope_offset must be between 0 and {MAX_ROPE_OFFSET:,} (got {offset})")


def rope_frequencies(head_dim: int, base: float = DEFAULT_ROPE_BASE) -> Tensor:
    """θ_i = base^(−2i/head_dim) for i = 0 … head_dim/2 − 1 (RoFormer eq. 15),
    in radians per position: shape (head_dim/2,). Computed as transformers'
    Llama does (``1 / base ** (arange(0, head_dim, 2) / head_dim)``)."""
    check_rope(head_dim, base)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim
    return 1.0 / (base ** exponents)  # (head_dim/2,)


def rope_angles(n_tokens: int, head_dim: int, base: float = DEFAULT_ROPE_BASE,
                offset: int = 0) -> Tensor:
    """The angle m·θ_i each pair turns by at position m = offset … offset + n_tokens − 1:
    shape (n_tokens, head_dim/2), radians."""
    check_rope(head_dim, base, offset=offset)
    positions = torch.arange(offset, offset + n_tokens, dtype=torch.float32)
    return positions[:, None] * rope_frequencies(head_dim, base)[None, :]  # outer product


def rope_tables(n_tokens: int, head_dim: int, base: float = DEFAULT_ROPE_BASE,
                offset: int = 0, pairing: str = ROTATE_HALF) -> tuple[Tensor, Tensor]:
    """cos and sin of every angle, each (n_tokens, head_dim), laid out for
    ``pairing``: rotate-half repeats the head_dim/2 angles after themselves
    (``cat(freqs, freqs)``, transformers' ``LlamaRotaryEmbedding``), interleaved
    repeats each angle twice in place (RoFormer eq. 34)."""
    check_rope(head_dim, base, pairing, offset)
    angles = rope_angles(n_tokens, head_dim, base, offset)  # (n, head_dim/2)
    if pairing == ROTATE_HALF:
        angles = torch.cat((angles, angles), dim=-1)
    else:
        angles = angles.repeat_interleave(2, dim=-1)
    return angles.cos(), angles.sin()  # (n, head_dim) each


def rope_pairs(head_dim: int, pairing: str = ROTATE_HALF) -> list[tuple[int, int]]:
    """Which dimensions turn together, pair i turning by θ_i: rotate-half pairs
    (i, i + head_dim/2), interleaved pairs (2i, 2i + 1)."""
    check_rope(head_dim, pairing=pairing)
    half = head_dim // 2
    if pairing == ROTATE_HALF:
        return [(i, i + half) for i in range(half)]
    return [(2 * i, 2 * i + 1) for i in range(half)]


def rotate_pairs(x: Tensor, pairing: str = ROTATE_HALF) -> Tensor:
    """The 90° turn of every pair, (a, b) → (−b, a): for rotate-half
    ``cat(−x2, x1)`` of the two halves (transformers' ``rotate_half``), for
    interleaved (x0, x1, x2, x3 …) → (−x1, x0, −x3, x2 …). Shape kept (…, head_dim)."""
    if pairing == ROTATE_HALF:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, pairing: str = ROTATE_HALF) -> Tensor:
    """Rotate queries or keys: x·cos + rotate_pairs(x)·sin, each pair (a, b) at
    position m turned by m·θ_i into (a cos − b sin, b cos + a sin) (RoFormer
    eq. 34). x: (…, n_tokens, head_dim); cos, sin: (n_tokens, head_dim) from
    `rope_tables` with the same pairing."""
    return x * cos + rotate_pairs(x, pairing) * sin


# ---------------------------------------------------------------------------
# 2. Grouped-query and multi-query attention
# ---------------------------------------------------------------------------
def check_groups(n_heads: int, n_kv_heads: int) -> None:
    """Raise `ConfigError` unless ``n_kv_heads`` divides ``n_heads`` (both ≥ 1)."""
    _need(n_heads >= 1, "n_heads", f"n_heads must be at least 1 (got {n_heads})")
    allowed = [k for k in range(1, n_heads + 1) if n_heads % k == 0]
    _need(n_kv_heads in allowed, "n_kv_heads",
          f"n_kv_heads must divide n_heads = {n_heads}: one of "
          f"{', '.join(map(str, allowed))} (got {n_kv_heads})")


def kv_head_of(n_heads: int, n_kv_heads: int) -> list[int]:
    """The K/V head each query head reads: query head h uses K/V head
    h // (n_heads / n_kv_heads) (neighbouring query heads share one), as
    transformers' ``repeat_kv`` and SDPA's ``enable_gqa`` lay them out."""
    check_groups(n_heads, n_kv_heads)
    group = n_heads // n_kv_heads
    return [h // group for h in range(n_heads)]


def repeat_kv(x: Tensor, n_heads: int) -> Tensor:
    """Keys or values of n_kv_heads heads repeated to ``n_heads`` heads, each
    K/V head copied to its group of n_heads / n_kv_heads query heads:
    (n_kv_heads, n_tokens, head_dim) → (n_heads, n_tokens, head_dim)."""
    check_groups(n_heads, x.shape[0])
    return x.repeat_interleave(n_heads // x.shape[0], dim=0)


def kv_cache_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int,
                             bytes_per_value: int = 2) -> int:
    """Bytes the KV cache grows by per token: a key and a value of head_dim
    numbers per K/V head per layer (2 · n_layers · n_kv_heads · head_dim ·
    bytes_per_value; 2 bytes in bfloat16)."""
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_value


def attention_scores(queries: Tensor, keys: Tensor) -> Tensor:
    """Scaled scores Q·Kᵀ / √head_dim per head: (h, n_q, d) @ (h, d, n_k) → (h, n_q, n_k)."""
    return queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """softmax over the keys with the masked-out scores (mask False) set to −∞ first."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


@dataclass
class Attention:
    """One attention's steps: scores (h, n_q, n_k) scaled, masked ``attn_weights``
    (h, n_q, n_k) and ``context`` (h, n_q, head_dim_v)."""

    attn_scores: Tensor
    attn_weights: Tensor
    context: Tensor


def grouped_query_attention(queries: Tensor, keys: Tensor, values: Tensor,
                            mask: Tensor | None = None) -> Attention:
    """Attention of n_heads query heads over n_kv_heads K/V heads (GQA; one K/V
    head is multi-query attention, n_kv_heads = n_heads multi-head attention).

    queries (n_heads, n, head_dim); keys (n_kv_heads, n, head_dim); values
    (n_kv_heads, n, head_dim_v); mask (n, n) bool, True = may attend.
    Raises `ConfigError` unless n_kv_heads divides n_heads. Same numbers as
    ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)``."""
    n_heads = queries.shape[0]
    keys, values = repeat_kv(keys, n_heads), repeat_kv(values, n_heads)  # (n_heads, n, d)
    scores = attention_scores(queries, keys)
    weights = masked_softmax(scores, mask)
    return Attention(scores, weights, weights @ values)


# ---------------------------------------------------------------------------
# 3. Masks: causal and sliding window
# ---------------------------------------------------------------------------
def causal_allowed(n_tokens: int) -> Tensor:
    """(n, n) bool, True where key j ≤ query i (the token itself and earlier ones):
    the keys a query may attend. The book's `explorer.core.attention.causal_mask`
    is its negation (True where a key is in the future, masked)."""
    return torch.ones(n_tokens, n_tokens, dtype=torch.bool).tril()


def check_window(window: int) -> None:
    """Raise `ConfigError` unless the window holds at least the token itself."""
    _need(window >= 1, "window", f"window must be at least 1: the token itself (got {window})")


WINDOW_KEYS, WINDOW_EARLIER = "w keys", "w earlier"
"""The two ways of counting a sliding window of w: ``WINDOW_KEYS``, w keys with
the query among them (transformers' ``sliding_window_overlay``; the page's
rule), and ``WINDOW_EARLIER``, the query plus w earlier tokens (Mistral's
reference code, ``torch.triu(mask, diagonal=-sliding_window)``)."""
WINDOW_CONVENTIONS = (WINDOW_KEYS, WINDOW_EARLIER)


def sliding_window_mask(n_tokens: int, window: int, convention: str = WINDOW_KEYS) -> Tensor:
    """(n, n) bool, True where query i sees key j.

    ``WINDOW_KEYS`` (transformers' ``sliding_window_overlay``): i − window < j ≤ i,
    the query and the window − 1 tokens before it, ``window`` keys in all;
    window = 1 is the token alone, window ≥ n_tokens the causal mask.
    ``WINDOW_EARLIER`` (Mistral's reference code): i − window ≤ j ≤ i, the
    query and ``window`` earlier tokens, window + 1 keys. Raises `ConfigError`
    for a window below 1 or an unknown convention."""
    check_window(window)
    _need(convention in WINDOW_CONVENTIONS, "window",
          f"the window's convention must be one of {', '.join(WINDOW_CONVENTIONS)} "
          f"(got {convention!r})")
    i = torch.arange(n_tokens)[:, None]
    j = torch.arange(n_tokens)[None, :]
    earliest = i - window + 1 if convention == WINDOW_KEYS else i - window
    return (j <= i) & (j >= earliest)


# ---------------------------------------------------------------------------
# 4. KV cache, one token at a time
# ---------------------------------------------------------------------------
@dataclass
class KVCache:
    """The keys and values seen so far, per K/V head: (n_kv_heads, n_cached, head_dim),
    grown by `append` one step at a time (prefill appends several tokens)."""

    keys: Tensor
    values: Tensor

    @classmethod
    def empty(cls, n_kv_heads: int, head_dim: int, head_dim_v: int) -> "KVCache":
        return cls(torch.zeros(n_kv_heads, 0, head_dim), torch.zeros(n_kv_heads, 0, head_dim_v))

    def append(self, keys: Tensor, values: Tensor) -> None:
        """Add the new tokens' keys and values (n_kv_heads, n_new, head_dim)."""
        self.keys = torch.cat((self.keys, keys), dim=1)
        self.values = torch.cat((self.values, values), dim=1)

    def read(self) -> tuple[Tensor, Tensor]:
        """Every cached key and value, in token order."""
        return self.keys, self.values

    def __len__(self) -> int:
        return self.keys.shape[1]


@dataclass
class DecodeStep:
    """One decoded token: its ``position``, the number of cached keys it read
    (``cache_len``: position + 1, itself included), its one row of scores and weights per
    head (n_heads, cache_len) and its context row (n_heads, head_dim_v)."""

    position: int
    cache_len: int
    attn_scores: Tensor
    attn_weights: Tensor
    context: Tensor


@dataclass
class Decoding:
    """`decode`'s result: the ``prefill`` attention over the first tokens (causal),
    every decoded token's `DecodeStep`, and the cache length after each step."""

    prefill: Attention
    steps: list[DecodeStep]
    cache_lengths: list[int] = field(default_factory=list)


def check_prefill(n_tokens: int, prefill: int) -> None:
    """Raise `ConfigError` unless 0 ≤ prefill ≤ n_tokens."""
    _need(0 <= prefill <= n_tokens, "prefill",
          f"prefill must be between 0 and the {n_tokens} tokens (got {prefill})")


def decode(queries: Tensor, keys: Tensor, values: Tensor, prefill: int,
           cache: KVCache | None = None) -> Decoding:
    """Causal attention computed as generation does: the first ``prefill``
    tokens at once (their keys and values go into the cache), then one token at
    a time: its key and value are appended, and its single query reads the whole
    cache, giving one row of scores and weights.

    queries (n_heads, n, head_dim) (already rotated by RoPE if used); keys
    (n_kv_heads, n, head_dim); values (n_kv_heads, n, head_dim_v). Each decoded
    row equals row ``position`` of full causal attention, to float32 rounding
    (`explorer.modern.verify.DECODE_TOLERANCE`: not always bit for bit)."""
    n_heads, n_tokens, _ = queries.shape
    check_prefill(n_tokens, prefill)
    check_groups(n_heads, keys.shape[0])
    if cache is None:
        cache = KVCache.empty(keys.shape[0], keys.shape[-1], values.shape[-1])
    cache.append(keys[:, :prefill], values[:, :prefill])
    first = grouped_query_attention(queries[:, :prefill], keys[:, :prefill], values[:, :prefill],
                                    causal_allowed(prefill))
    n_kv, group = keys.shape[0], n_heads // keys.shape[0]
    steps, lengths = [], [len(cache)]
    for t in range(prefill, n_tokens):
        cache.append(keys[:, t:t + 1], values[:, t:t + 1])  # the new token's key and value
        cached_keys, cached_values = cache.read()           # (n_kv, t + 1, d)
        # the one new query of each head, grouped by the K/V head it reads: (n_kv, group, d)
        query = queries[:, t].reshape(n_kv, group, -1)
        scores = query @ cached_keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])
        weights = torch.softmax(scores, dim=-1)              # (n_kv, group, t + 1)
        context = weights @ cached_values                    # (n_kv, group, d_v)
        steps.append(DecodeStep(t, cached_keys.shape[1], scores.reshape(n_heads, -1),
                                weights.reshape(n_heads, -1), context.reshape(n_heads, -1)))
        lengths.append(len(cache))
    return Decoding(first, steps, lengths)


def decoded_weights(decoding: Decoding, n_tokens: int, head: int | None = None) -> Tensor:
    """The (n_heads, n, n) weights assembled from the prefill block and the
    decoded rows (zeros where a row read no key), to compare with full causal
    attention; with ``head``, that head's (n, n) alone."""
    pick = (lambda t: t) if head is None else (lambda t: t[head])
    prefill = pick(decoding.prefill.attn_weights)  # ([h,] k, k)
    out = torch.zeros(*prefill.shape[:-2], n_tokens, n_tokens)
    k = prefill.shape[-1]
    out[..., :k, :k] = prefill
    for step in decoding.steps:
        out[..., step.position, :step.cache_len] = pick(step.attn_weights)
    return out


# ---------------------------------------------------------------------------
# 5. FlashAttention's online softmax
# ---------------------------------------------------------------------------
MAX_TILE_STEPS = 256
"""The most (query tile, key tile) steps the online softmax walks: each is a
Python step (at 512 tokens, tiles of 32 × 32: about 1 s on a loaded core)."""


def tile_steps(n_tokens: int, block_q: int, block_k: int) -> int:
    """How many steps the online softmax walks: (query tiles) × (key tiles), each
    tile ``block_q`` queries × ``block_k`` keys, the last one of a row or column
    possibly shorter."""
    return -(-n_tokens // block_q) * -(-n_tokens // block_k)


SKIPPED_TILE = ("with the causal mask a tile whose keys all come after its queries would only "
                "add zeros, so causal FlashAttention skips it (FlashAttention-2, §3.1.1)")
"""Why causal kernels skip the tiles above the diagonal (`masked_tile`), in
the words the Modern and the Backward pass pages both use."""


def masked_tile(rows: range, cols: range) -> bool:
    """Whether every key of the tile (``cols``) comes after every query of it
    (``rows``): the causal mask hides all of it, and causal FlashAttention
    skips it (`SKIPPED_TILE`)."""
    return cols.start > rows.stop - 1


def causal_tiles(n_tokens: int, block_q: int, block_k: int) -> list[tuple[int, int]]:
    """The (query tile, key tile) steps causal FlashAttention walks, in order
    (the key tiles of a query tile in turn): those with at least one key at or
    before the tile's last query. The tiles above the diagonal, whose every key
    comes after every query (`masked_tile`), are skipped (FlashAttention-2,
    §3.1.1): of T × T equal tiles T(T + 1)/2 are walked, about half for long
    sentences."""
    return [(qi, kj) for qi, start in enumerate(range(0, n_tokens, block_q))
            for kj, kstart in enumerate(range(0, n_tokens, block_k))
            if not masked_tile(range(start, min(start + block_q, n_tokens)),
                               range(kstart, min(kstart + block_k, n_tokens)))]


def check_tiles(n_tokens: int, block_q: int, block_k: int) -> None:
    """Raise `ConfigError` unless 1 ≤ block_q, block_k ≤ n_tokens and the tiles
    take at most `MAX_TILE_STEPS` steps."""
    for name, size in (("block_q", block_q), ("block_k", block_k)):
        _need(1 <= size <= n_tokens, name,
              f"{name} must be between 1 and the {n_tokens} tokens (got {size})")
    count = tile_steps(n_tokens, block_q, block_k)
    _need(count <= MAX_TILE_STEPS, "block_k",
          f"the tiles take {count:,} steps for {n_tokens} tokens; at most {MAX_TILE_STEPS:,} are "
          f"walked: make block_q × block_k at least {-(-n_tokens ** 2 // MAX_TILE_STEPS)}")


def correction_factor(m_old: Tensor, m_new: Tensor) -> Tensor:
    """exp(m_old − m_new): how much the running sum and output computed with the
    old row maximum shrink when the maximum grows (FlashAttention-2, Alg. 1,
    line 9). A row that has seen no key yet (m_old = −∞) gets 0; one whose
    maximum is still −∞ (every key masked so far) keeps 1."""
    safe_new = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    return torch.where(torch.isinf(m_new), torch.ones_like(m_new), torch.exp(m_old - safe_new))


@dataclass
class TileStep:
    """One (query tile, key tile) step of the online softmax: the rows and
    columns read, the running max before (``m_old``) and after (``m_new``),
    the ``correction`` exp(m_old − m_new), the running sum ``l`` and the
    unnormalised output ``O`` after the tile (rows of the query tile), all per head:
    m_*, correction, l: (n_heads, rows); O: (n_heads, rows, head_dim_v)."""

    q_tile: int
    k_tile: int
    rows: range
    cols: range
    m_old: Tensor
    m_new: Tensor
    correction: Tensor
    l: Tensor
    O: Tensor | None


@dataclass
class OnlineSoftmax:
    """`online_softmax_attention`'s result: ``context`` (n_heads, n, head_dim_v),
    every `TileStep` in order, and the bytes of the largest tile of scores held
    (``tile_bytes``) beside those of the n × n scores never allocated."""

    context: Tensor
    steps: list[TileStep]
    tile_bytes: int
    full_scores_bytes: int


def online_softmax_attention(queries: Tensor, keys: Tensor, values: Tensor, block_q: int,
                             block_k: int, mask: Tensor | None = None,
                             record: Callable[[int, int], bool] = lambda qi, kj: True,
                             record_output: Callable[[int, int], bool] = lambda qi, kj: True,
                             skip_masked_tiles: bool = False) -> OnlineSoftmax:
    """Attention without the n × n matrix, FlashAttention-2's Algorithm 1.

    For each tile of ``block_q`` queries: m = −∞, ℓ = 0, O = 0; for each tile
    of ``block_k`` keys: S = Q_i K_jᵀ / √d (masked to −∞ where ``mask`` is
    False), m_new = max(m, rowmax S), P = exp(S − m_new), c = exp(m − m_new),
    ℓ = c·ℓ + rowsum P, O = c·O + P V_j; finally O / ℓ.

    queries, keys (n_heads, n, head_dim) (K/V heads already repeated); values
    (n_heads, n, head_dim_v); mask (n, n) bool, True = may attend. Raises
    `ConfigError` for a tile outside 1 … n_tokens. ``record(q_tile, k_tile)``
    says which steps to keep in `OnlineSoftmax.steps`, ``record_output`` which
    of them keep their O (the page keeps one query tile's: bounded bytes).
    ``skip_masked_tiles``: skip a tile whose every score is masked, as causal
    FlashAttention skips the tiles above the diagonal (with the causal mask the
    steps walked are then `causal_tiles`'); it changes no number, since such a
    tile leaves m, ℓ and O as they were."""
    n_heads, n_tokens, head_dim = queries.shape
    check_tiles(n_tokens, block_q, block_k)
    context = torch.empty(n_heads, n_tokens, values.shape[-1])
    steps = []
    for qi, start in enumerate(range(0, n_tokens, block_q)):
        rows = range(start, min(start + block_q, n_tokens))
        q = queries[:, rows.start:rows.stop]  # (h, bq, d)
        m = torch.full((n_heads, len(rows)), float("-inf"))
        l = torch.zeros(n_heads, len(rows))
        O = torch.zeros(n_heads, len(rows), values.shape[-1])
        for kj, kstart in enumerate(range(0, n_tokens, block_k)):
            cols = range(kstart, min(kstart + block_k, n_tokens))
            if skip_masked_tiles and mask is not None and \
                    not mask[rows.start:rows.stop, cols.start:cols.stop].any():
                continue  # every key after every query (above the diagonal): skipped
            S = attention_scores(q, keys[:, cols.start:cols.stop])  # (h, bq, bk): one tile
            if mask is not None:
                S = S.masked_fill(~mask[rows.start:rows.stop, cols.start:cols.stop],
                                  float("-inf"))
            m_new = torch.maximum(m, S.amax(dim=-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            P = torch.exp(S - safe[..., None])  # (h, bq, bk)
            c = correction_factor(m, m_new)
            l = c * l + P.sum(dim=-1)
            O = c[..., None] * O + P @ values[:, cols.start:cols.stop]
            if record(qi, kj):
                steps.append(TileStep(qi, kj, rows, cols, m, m_new, c, l,
                                      O if record_output(qi, kj) else None))
            m = m_new
        context[:, rows.start:rows.stop] = O / l[..., None]
    return OnlineSoftmax(context, steps, tile_bytes=4 * n_heads * block_q * block_k,
                         full_scores_bytes=4 * n_heads * n_tokens * n_tokens)


# ---------------------------------------------------------------------------
# The whole page's pipeline
# ---------------------------------------------------------------------------
MAX_MODERN_HEADS = 16
MAX_HEAD_DIM = 128


@dataclass(frozen=True)
class ModernConfig:
    """The sizes of the Modern attention page: ``n_heads`` query heads of
    ``head_dim``, ``n_kv_heads`` K/V heads, RoPE's ``rope_base``,
    ``rope_pairing`` and ``rope_offset``, the sliding ``window``, the KV
    cache's ``prefill`` and FlashAttention's tiles ``block_q`` × ``block_k``.
    `check` raises `ConfigError` for sizes that do not fit ``n_tokens``."""

    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 8
    rope_base: float = DEFAULT_ROPE_BASE
    rope_pairing: str = ROTATE_HALF
    rope_offset: int = 0
    window: int = 3
    prefill: int = 2
    block_q: int = 2
    block_k: int = 2

    def check(self, n_tokens: int) -> None:
        """Raise `ConfigError`, saying what is allowed, for any size that does not fit."""
        _need(1 <= self.n_heads <= MAX_MODERN_HEADS, "n_heads",
              f"n_heads must be between 1 and {MAX_MODERN_HEADS} here (got {self.n_heads})")
        check_groups(self.n_heads, self.n_kv_heads)
        _need(self.n_heads * n_tokens ** 2 <= MAX_ATTENTION_CELLS, "n_heads",
              f"n_heads × n_tokens² must be at most {MAX_ATTENTION_CELLS:,} (16 heads at 512 "
              f"tokens; got {self.n_heads} × {n_tokens}²)")
        _need(self.head_dim <= MAX_HEAD_DIM, "head_dim",
              f"head_dim must be at most {MAX_HEAD_DIM} here (got {self.head_dim})")
        check_rope(self.head_dim, self.rope_base, self.rope_pairing, self.rope_offset)
        check_window(self.window)
        check_prefill(n_tokens, self.prefill)
        check_tiles(n_tokens, self.block_q, self.block_k)


@dataclass
class ModernTrace:
    """Every step of the page for X (n, d_in): the projections, RoPE, GQA, the
    window, the decoding and the online softmax. Shapes: W_query (d_in,
    n_heads·head_dim); W_key, W_value (d_in, n_kv_heads·head_dim); queries
    (n_heads, n, head_dim); keys, values (n_kv_heads, n, head_dim); cos, sin
    (n, head_dim); the scores (n_heads, n, n) without RoPE and with it at
    ``rope_offset``; ``offset_change``, their largest difference from the scores
    at offset 0 (float32 rounding: q_m·k_n depends on m − n only); the
    attentions' weights (n_heads, n, n) (their scores are ``scores_rope``, one
    tensor shared); ``window_mask`` (n, n) the page's window (`WINDOW_KEYS`)
    and ``window_mask_earlier`` Mistral's count of the same w (`WINDOW_EARLIER`),
    shown beside it; ``flash`` walks the tiles causal FlashAttention walks
    (`causal_tiles`)."""

    config: ModernConfig
    embeddings: Tensor
    W_query: Tensor
    W_key: Tensor
    W_value: Tensor
    queries: Tensor
    keys: Tensor
    values: Tensor
    cos: Tensor
    sin: Tensor
    queries_rope: Tensor
    keys_rope: Tensor
    scores_no_rope: Tensor
    scores_rope: Tensor
    offset_change: float
    causal: Attention
    windowed: Attention
    window_mask: Tensor
    window_mask_earlier: Tensor
    decoding: Decoding
    flash: OnlineSoftmax

    @property
    def n_tokens(self) -> int:
        return self.embeddings.shape[0]

    @property
    def walked_tiles(self) -> list[tuple[int, int]]:
        """The (query tile, key tile) steps the online softmax walks (`causal_tiles`)."""
        return causal_tiles(self.n_tokens, self.config.block_q, self.config.block_k)

    @property
    def n_tile_steps(self) -> int:
        """How many tiles the online softmax walks (the causal ones, `causal_tiles`)."""
        return len(self.walked_tiles)

    def tile_of(self, step: int) -> tuple[int, int]:
        """The (query tile, key tile) of the online softmax's ``step``-th step."""
        return self.walked_tiles[step]

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor held (the caches count them), a shared one once."""
        tensors = [v for v in vars(self).values() if isinstance(v, Tensor)]
        for part in (self.causal, self.windowed, self.decoding.prefill):
            tensors += [part.attn_scores, part.attn_weights, part.context]
        for step in self.decoding.steps:
            tensors += [step.attn_scores, step.attn_weights, step.context]
        for step in self.flash.steps:
            tensors += [step.m_old, step.m_new, step.correction, step.l]
            tensors += [step.O] if step.O is not None else []
        tensors.append(self.flash.context)
        unique = {t.data_ptr(): t.numel() * t.element_size() for t in tensors if t.numel()}
        return sum(unique.values())


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(n, n_heads·head_dim) → (n_heads, n, head_dim), head h = columns h·head_dim …"""
    n, width = x.shape
    return x.view(n, n_heads, width // n_heads).transpose(0, 1)


def modern_weights(d_in: int, config: ModernConfig, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """W_query (d_in, n_heads·head_dim), W_key and W_value (d_in,
    n_kv_heads·head_dim), drawn with ``torch.randn`` from a local generator
    seeded with ``seed``, scaled by 1/√d_in (so that scores stay readable)."""
    g = torch.Generator().manual_seed(seed)
    q_width, kv_width = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    return tuple(torch.randn(d_in, width, generator=g) / math.sqrt(d_in)
                 for width in (q_width, kv_width, kv_width))


def modern_attention(embeddings: Tensor, config: ModernConfig, seed: int,
                     tile: tuple[int, int] | None = None) -> ModernTrace:
    """Run every step of the page on X = ``embeddings`` (n, d_in).

    Q = X·W_query, K = X·W_key, V = X·W_value split into heads; RoPE on Q and
    K; causal grouped-query attention; the same with the sliding window; the
    decoding with a KV cache after ``prefill`` tokens; the online softmax of the
    causal attention, walking the tiles causal FlashAttention walks
    (`causal_tiles`). ``tile`` (q_tile, k_tile): the tile step whose O is kept
    (with every step of its query tile); None keeps every step. Raises
    `ConfigError` for sizes that do not fit (`ModernConfig.check`) and for a
    ``tile`` the walk skips."""
    c = config
    n = embeddings.shape[0]
    c.check(n)
    if tile is not None:
        _need(tuple(tile) in causal_tiles(n, c.block_q, c.block_k), "block_k",
              f"query tile {tile[0]}, key tile {tile[1]} is not walked: its keys all come "
              "after its queries (causal FlashAttention skips it)")
    W_query, W_key, W_value = modern_weights(embeddings.shape[1], c, seed)
    queries = split_heads(embeddings @ W_query, c.n_heads)     # (h, n, d)
    keys = split_heads(embeddings @ W_key, c.n_kv_heads)       # (kv, n, d)
    values = split_heads(embeddings @ W_value, c.n_kv_heads)   # (kv, n, d)
    cos, sin = rope_tables(n, c.head_dim, c.rope_base, c.rope_offset, c.rope_pairing)
    q_rope, k_rope = apply_rope(queries, cos, sin, c.rope_pairing), apply_rope(keys, cos, sin,
                                                                                c.rope_pairing)
    cos0, sin0 = rope_tables(n, c.head_dim, c.rope_base, 0, c.rope_pairing)
    at_zero = attention_scores(apply_rope(queries, cos0, sin0, c.rope_pairing),
                               repeat_kv(apply_rope(keys, cos0, sin0, c.rope_pairing), c.n_heads))
    causal = causal_allowed(n)
    window = sliding_window_mask(n, c.window)
    window_earlier = sliding_window_mask(n, c.window, WINDOW_EARLIER)
    record = (lambda qi, kj: True) if tile is None else (lambda qi, kj: qi == tile[0])
    keep_o = (lambda qi, kj: True) if tile is None else (lambda qi, kj: (qi, kj) == tuple(tile))
    flash = online_softmax_attention(q_rope, repeat_kv(k_rope, c.n_heads),
                                     repeat_kv(values, c.n_heads), c.block_q, c.block_k, causal,
                                     record, keep_o, skip_masked_tiles=True)
    full, windowed = (grouped_query_attention(q_rope, k_rope, values, mask)
                      for mask in (causal, window))
    windowed.attn_scores = full.attn_scores  # equal (the mask comes after): held once
    return ModernTrace(
        c, embeddings, W_query, W_key, W_value, queries, keys, values, cos, sin, q_rope, k_rope,
        scores_no_rope=attention_scores(queries, repeat_kv(keys, c.n_heads)),
        scores_rope=full.attn_scores,
        offset_change=float((full.attn_scores - at_zero).abs().max()) if n else 0.0,
        causal=full, windowed=windowed, window_mask=window, window_mask_earlier=window_earlier,
        decoding=decode(q_rope, k_rope, values, c.prefill), flash=flash)
