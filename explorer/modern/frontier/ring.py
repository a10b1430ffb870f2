"""The sliding window decoded with three KV caches: Mistral's ring buffer,
transformers' sliding-window layer and the trim-and-concatenate cache.

Each decodes one token at a time and must give the same attn_weights and
context as one full pass with the window's mask
(`explorer.modern.attention.sliding_window_mask`, convention `WINDOW_KEYS`:
the query's own key is one of the ``window`` keys it sees).

- Ring buffer: Mistral's rolling buffer cache (mistral-src's
  ``RotatingBufferCache`` in ``cache.py``, kept by early mistral-inference
  releases; today's ``BufferCache`` no longer rolls): ``window`` slots, the
  key of position p written to slot p mod window, and ``unrotate`` putting
  the slots back in position order (Mistral calls it where the order
  matters, when a prompt's new keys are joined to the cached ones; a single
  decoded query over keys already rotated by RoPE reads the slots in any
  order, under a key mask). The cache writes before
  it reads, so the ``window`` slots hold the query's own key and
  ``window`` − 1 earlier ones: `WINDOW_KEYS`. (Mistral's reference mask,
  ``torch.triu(mask, diagonal=-sliding_window)``, counts the query plus
  ``window`` earlier tokens, `WINDOW_EARLIER`: one key more than its own
  cache holds; transformers issues #29623, #39408.)
- transformers' ``cache_utils.DynamicSlidingWindowLayer``: the new key is
  concatenated to the cache, attention reads them all, then only the last
  ``window`` − 1 are kept.
- Trim-and-concatenate: concatenate the new key, keep the last ``window``,
  attend. rasbt/LLMs-from-scratch's ``ch04/03_kv-cache/
  gpt_with_kv_cache_optimized.py`` keeps the same keys in a ``window_size``
  buffer shifted left when full.

Keys are rotated by RoPE at their true positions before they are cached (as
Mistral and transformers do), so softmax over the slots does not care about
their order; what the order decides is which position each weight belongs to.
Reading the ring in slot (write) order and taking it for position order, the
bug `slot_order_weights` reproduces, puts the weights in the wrong columns
once the buffer wraps.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from explorer.core import recipes
from explorer.core.agreement import (
    Agreement,
    largest_abs,
    max_abs_diff,
    of_all,
    relative_tolerance,
)
from explorer.modern import attention as modern
from explorer.modern.frontier import FrontierConfig, Part, Step

KEY = "ring"
EMPTY = -1
"""The position an empty slot holds in `slot_positions`."""
CONVENTION = modern.WINDOW_KEYS
"""The window's count every cache here keeps: ``window`` keys, the query's own among them."""
SOURCE = ("Jiang et al., \"Mistral 7B\" (2023), §2 \"Rolling Buffer Cache\"; Mistral's "
          "RotatingBufferCache and unrotate (mistral-src's cache.py, early mistral-inference); "
          "transformers' cache_utils.DynamicSlidingWindowLayer; rasbt/LLMs-from-scratch "
          "ch04/03_kv-cache/gpt_with_kv_cache_optimized.py (a window buffer shifted left when "
          "full: trim and concatenate).")


def draw_projections(d_in: int, config: FrontierConfig,
                     generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """W_q, W_k, W_v, each (d_in, n_heads · head_dim), drawn from N(0, 1/d_in)
    with ``generator`` (in that order)."""
    width = config.n_heads * config.head_dim
    return tuple(torch.randn(d_in, width, generator=generator) / math.sqrt(d_in)
                 for _ in range(3))


def rotated_heads(x: Tensor, config: FrontierConfig,
                  generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor, tuple]:
    """queries and keys rotated by RoPE (rotate-half, base 10,000) at positions
    0 … n − 1, and values: each (n_heads, n_tokens, head_dim); and the
    projections (W_q, W_k, W_v). Raises `ConfigError` for an odd head_dim."""
    n, d_in = x.shape
    weights = draw_projections(d_in, config, generator)
    q, k, v = (modern.split_heads(x @ w, config.n_heads) for w in weights)  # (h, n, d)
    cos, sin = modern.rope_tables(n, config.head_dim)
    return modern.apply_rope(q, cos, sin), modern.apply_rope(k, cos, sin), v, weights


def full_pass(queries: Tensor, keys: Tensor, values: Tensor, window: int) -> modern.Attention:
    """All queries at once with the window's mask (`WINDOW_KEYS`): the reference
    every cache must reproduce. (h, n, d) each -> weights (h, n, n), context (h, n, d)."""
    mask = modern.sliding_window_mask(queries.shape[1], window, CONVENTION)
    return modern.grouped_query_attention(queries, keys, values, mask)


def _attend(query: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """One query per head over the keys it read: query (h, d), keys and values
    (h, m, d) -> weights (h, m), context (h, d)."""
    scores = (keys @ query[:, :, None])[..., 0] / math.sqrt(query.shape[-1])  # (h, m)
    weights = torch.softmax(scores, dim=-1)
    return weights, (weights[:, None, :] @ values)[:, 0]


def unrotate(position: int, window: int) -> Tensor:
    """The ring's slot indices in position order after position ``position``
    was written (Mistral's ``unrotate(cache, seqlen)`` with seqlen = position
    + 1): the oldest slot first.
    Returns (min(position + 1, window),) long."""
    filled = min(position + 1, window)
    if filled < window:
        return torch.arange(filled)
    start = (position + 1) % window  # the slot written longest ago
    return torch.cat((torch.arange(start, window), torch.arange(0, start)))


def ring_decode(queries: Tensor, keys: Tensor, values: Tensor, window: int,
                position_order: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Decode with a ring buffer of ``window`` slots (Mistral's rolling buffer).

    At step t the key and value of position t go to slot t mod window, then
    the query reads the filled slots, in position order (`unrotate`), or, with
    ``position_order=False``, in slot order: the bug of a reader that takes the
    slot order for the position order. Either way the weights of step t are
    laid into row t at positions t − m + 1 … t in the order read (m slots).

    queries, keys, values (h, n, d), already rotated. Returns slot_positions
    (n, window) long (`EMPTY` for an empty slot), read_positions (n, window)
    (the positions in the order read, `EMPTY` past the filled ones), weights
    (h, n, n) and context (h, n, d)."""
    h, n, d = queries.shape
    cache_k, cache_v = torch.zeros(h, window, d), torch.zeros(h, window, values.shape[-1])
    held = torch.full((window,), EMPTY, dtype=torch.long)
    slot_positions = torch.full((n, window), EMPTY, dtype=torch.long)
    read_positions = torch.full((n, window), EMPTY, dtype=torch.long)
    weights = torch.zeros(h, n, n)
    context = torch.zeros(h, n, values.shape[-1])
    for t in range(n):
        slot = t % window
        cache_k[:, slot], cache_v[:, slot], held[slot] = keys[:, t], values[:, t], t
        slot_positions[t] = held
        order = unrotate(t, window)
        if not position_order:
            order = torch.arange(len(order))  # slot order: wrong once the ring wraps
        read_positions[t, :len(order)] = held[order]
        row, context[:, t] = _attend(queries[:, t], cache_k[:, order], cache_v[:, order])
        weights[:, t, t - len(order) + 1:t + 1] = row  # assumes the order read is position order
    return slot_positions, read_positions, weights, context


def transformers_style_decode(queries: Tensor, keys: Tensor, values: Tensor,
                              window: int) -> tuple[Tensor, Tensor]:
    """transformers' ``DynamicSlidingWindowLayer.update``: concatenate the new
    key and value, attend over all of them, keep the last window − 1 (none
    for a window of 1, where transformers' own slice keeps them all).
    (h, n, d) each -> weights (h, n, n), context (h, n, d)."""
    h, n, _ = queries.shape
    cache_k, cache_v = keys[:, :0], values[:, :0]
    weights, context = torch.zeros(h, n, n), torch.zeros(h, n, values.shape[-1])
    for t in range(n):
        full_k = torch.cat((cache_k, keys[:, t:t + 1]), dim=1)
        full_v = torch.cat((cache_v, values[:, t:t + 1]), dim=1)
        row, context[:, t] = _attend(queries[:, t], full_k, full_v)
        weights[:, t, t - full_k.shape[1] + 1:t + 1] = row
        first_kept = max(full_k.shape[1] - (window - 1), 0)  # the last window − 1 stay
        cache_k, cache_v = full_k[:, first_kept:], full_v[:, first_kept:]
    return weights, context


def trim_concat_decode(queries: Tensor, keys: Tensor, values: Tensor,
                       window: int) -> tuple[Tensor, Tensor]:
    """The trim-and-concatenate cache: concatenate the new key and value, keep
    the last ``window``, attend over them. (h, n, d) each -> weights (h, n, n),
    context (h, n, d)."""
    h, n, _ = queries.shape
    cache_k, cache_v = keys[:, :0], values[:, :0]
    weights, context = torch.zeros(h, n, n), torch.zeros(h, n, values.shape[-1])
    for t in range(n):
        cache_k = torch.cat((cache_k, keys[:, t:t + 1]), dim=1)[:, -window:]
        cache_v = torch.cat((cache_v, values[:, t:t + 1]), dim=1)[:, -window:]
        row, context[:, t] = _attend(queries[:, t], cache_k, cache_v)
        weights[:, t, t - cache_k.shape[1] + 1:t + 1] = row
    return weights, context


def transformers_cache_context(x: Tensor, projections: tuple[Tensor, Tensor, Tensor],
                               config: FrontierConfig) -> Tensor:
    """The context transformers itself computes, decoding token by token: a
    ``MistralAttention`` (eager) on a tiny ``MistralConfig`` with
    ``sliding_window = window``, its q/k/v projections set to ours, a
    ``DynamicCache`` (sliding-window layers) and ``MistralRotaryEmbedding`` at
    each token's position; each step's context is read at o_proj's input.
    A window of 1 keeps every key in transformers' cache (its slice
    ``[-window + 1:]`` is ``[0:]``), so each step also passes the window's
    mask over the keys it returns. x (n, d_in) -> (n_heads, n, head_dim)."""
    from transformers import DynamicCache, MistralConfig
    from transformers.models.mistral.modeling_mistral import (
        MistralAttention,
        MistralRotaryEmbedding,
    )
    n, d_in = x.shape
    c = config
    tiny = MistralConfig(hidden_size=d_in, num_attention_heads=c.n_heads,
                         num_key_value_heads=c.n_heads, head_dim=c.head_dim,
                         sliding_window=c.window, num_hidden_layers=1, max_position_embeddings=n,
                         rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
                         attn_implementation="eager")
    with recipes.global_rng():  # its init draws; our weights are copied in
        attn = MistralAttention(tiny, layer_idx=0).eval()
    rotary = MistralRotaryEmbedding(tiny)
    cache = DynamicCache(config=tiny)
    seen: list[Tensor] = []
    with torch.no_grad():
        for proj, w in zip((attn.q_proj, attn.k_proj, attn.v_proj), projections, strict=True):
            proj.weight.copy_(w.T)
        hook = attn.o_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0][0, 0]))
        try:
            for t in range(n):
                step = x[None, t:t + 1]  # (1, 1, d_in)
                position_embeddings = rotary(step, torch.tensor([[t]]))
                mask = None
                if c.window == 1:  # transformers kept every key: mask all but the last
                    mask = torch.full((1, 1, 1, t + 1), float("-inf"))
                    mask[..., -1] = 0.0
                attn(step, position_embeddings, mask, past_key_values=cache)
        finally:
            hook.remove()
    return torch.stack(seen).reshape(n, c.n_heads, c.head_dim).transpose(0, 1)


def _agreement(name: str, compared: str, reference: str, ours: Tensor,
               theirs: Tensor) -> Agreement:
    """ours against theirs, float32 rounding relative to theirs' largest |value|."""
    scale = largest_abs(theirs)
    return Agreement(name, compared, reference, max_abs_diff(ours, theirs),
                     relative_tolerance(scale), exact=torch.equal(ours, theirs),
                     n_values=theirs.numel(), scale=scale)


FULL_PASS = "the full pass with the window's mask (sliding_window_mask, 'w keys')"


def check_cache(name: str, weights: Tensor, context: Tensor, full: modern.Attention) -> Agreement:
    """A cache's decoded weights (laid out in position order) and context
    against the full masked pass."""
    return of_all(name, "attn_weights in position order and context", FULL_PASS, [
        _agreement(f"{name}: attn_weights", "attn_weights in position order", FULL_PASS,
                   weights, full.attn_weights),
        _agreement(f"{name}: context", "context", FULL_PASS, context, full.context)])


def slot_order_weights(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Agreement:
    """The broken variant's check: the ring read in slot (write) order, its
    weights laid out as if that were position order, against the full pass.
    Fails whenever the ring has wrapped with its oldest key not in slot 0
    (n_tokens > window ≥ 2)."""
    q, k, v, _ = rotated_heads(x, config, generator)
    _, _, weights, context = ring_decode(q, k, v, config.window, position_order=False)
    return check_cache("ring buffer read in slot order", weights, context,
                       full_pass(q, k, v, config.window))


def ring(x: Tensor, config: FrontierConfig, generator: torch.Generator) -> Part:
    """The sliding-window part: X (n_tokens, d_in) decoded token by token with
    the ring buffer, transformers' cache and the trim-and-concatenate cache.

    Steps: ``window_mask`` (n, n) 1/0; ``slot_positions`` (n, window): the
    position each slot holds after step t (`EMPTY` = −1 for empty);
    ``read_positions`` (n, window): the positions in the order `unrotate`
    reads them; ``attn_weights`` (n_heads, n, n), each decode step's row in
    position order; ``context`` (n_heads, n, head_dim). Checks: each cache
    against the full masked pass, and transformers' own ``DynamicCache`` on a
    tiny ``MistralConfig``. Raises `ConfigError` for a window below 1 or an
    odd head_dim."""
    modern.check_window(config.window)
    w = config.window
    q, k, v, projections = rotated_heads(x, config, generator)
    full = full_pass(q, k, v, w)
    slots, read, weights, context = ring_decode(q, k, v, w)
    _, _, wrong_weights, _ = ring_decode(q, k, v, w, position_order=False)
    tw, tc = transformers_style_decode(q, k, v, w)
    bw, bc = trim_concat_decode(q, k, v, w)
    hf = transformers_cache_context(x, projections, config)
    reference = "transformers' MistralAttention with a DynamicCache (sliding_window = window)"
    checks = (
        check_cache("ring buffer (Mistral)", weights, context, full),
        check_cache("transformers' sliding-window cache", tw, tc, full),
        check_cache("trim-and-concatenate cache", bw, bc, full),
        _agreement("transformers' DynamicCache, decoded", "context, token by token",
                   reference, context, hf),
    )
    n = x.shape[0]
    steps = (
        Step("window_mask", "The window's mask", r"M_{ij} = [\,i - w < j \le i\,]",
             modern.sliding_window_mask(n, w, CONVENTION).to(torch.float32), "tokens", "keys",
             f"1 where query i sees key j: {w} keys, the query's own among them "
             "(transformers' count; Mistral's reference mask counts one more).", signed=False),
        Step("slot_positions", "Which position each slot holds", r"\text{slot} = p \bmod w",
             slots.to(torch.float32), "tokens", "slots",
             "After token t is written: the position held by each of the ring's slots "
             f"(−1 = empty). Position p goes to slot p mod {w}, over the oldest.", signed=True),
        Step("read_positions", "The slots read back in position order (unrotate)",
             r"\text{unrotate}: \text{oldest slot first}", read.to(torch.float32), "tokens",
             "slots", "The positions in the order the query reads them: the oldest slot "
             "first. Reading in slot order instead puts weights in the wrong columns.",
             signed=True),
        Step("attn_weights", "attn_weights of each decode step, in position order",
             r"\mathrm{softmax}\big(q_t K_{\text{ring}}^\top / \sqrt{d}\big)", weights,
             "tokens", "keys", "Row t: the weights token t's query gave the keys in its "
             "ring, placed at their positions; 0 outside the window.", signed=False),
        Step("context", "context of each decode step", r"\text{context}_t = a_t V_{\text{ring}}",
             context, "tokens", "dims", "Token t's output for this head, decoded from the "
             "ring buffer alone: the same as the full masked pass."),
    )
    summary = (
        f"A sliding window of {w} keys needs only {w} cache slots: Mistral writes position p "
        f"to slot p mod {w}, over the oldest key, and reads the slots back oldest first. "
        "transformers keeps the last window − 1 keys and concatenates the new one; the "
        "trim-and-concatenate cache keeps the last window. All three give the full pass "
        f"with the window's mask. Convention: the {w} keys include the query's own "
        "(the cache is written before it is read); Mistral's reference mask counts the "
        "query plus w earlier tokens, one key more than its own cache holds.")
    facts = {
        "window (keys, the query's own included)": str(w),
        "ring slots": str(w),
        "window convention": f"'{CONVENTION}': the query plus {w - 1} earlier tokens "
                             f"(Mistral's reference mask: the query plus {w} earlier)",
        "ring read in slot order: max |difference| of weights":
            f"{max_abs_diff(wrong_weights, full.attn_weights):.2e}",
    }
    return Part(KEY, "The sliding window with a ring-buffer cache", summary, SOURCE, steps,
                checks, facts)
