"""Generation token by token, and each new token's one row of attention over
the KV cache: `generate`.

The model generates greedily with its own KV cache (transformers'
``DynamicCache``): the prompt in one pass (prefill), then one token a pass. A
forward pre-hook on the opened layer catches each new token's input there; from
it the explorer computes, in float32, the token's query, key and value
(`explorer.models.llama.token_steps`), appends the key and value to its own
cache of that layer (`explorer.modern.attention.KVCache`) and reads the whole
cache with the one new query: one row of scores and weights per head. That is
what a KV cache is for (Pope et al., "Efficiently Scaling Transformer
Inference", 2022): the earlier tokens' keys and values are never computed again.

`against_full_pass` checks every row against the same row of one full forward
pass over the whole sequence, without a cache.

Bounded: at most `MAX_NEW_TOKENS` tokens, `GENERATION_SECONDS` seconds, and the
model's positions; the model's lock is held for one pass at a time, so other
sessions' passes go between the steps.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from explorer.core.agreement import Agreement, max_abs_diff, of_all
from explorer.core.config import shown
from explorer.core.trace import json_safe
from explorer.models import anatomy
from explorer.models.catalogue import DEFAULT_NEW_TOKENS, GENERATION_SECONDS, MAX_NEW_TOKENS
from explorer.models.check import TOLERANCE
from explorer.models.errors import ModelError
from explorer.models.forward import _hooked, decoder_layer_call
from explorer.models.llama import (
    DecoderConfig,
    attention_mask,
    decoder_config,
    scores_of,
    token_steps,
)
from explorer.models.loading import LoadedModel
from explorer.models.tokens import model_input, readable_tokens
from explorer.modern import attention as modern

ROW_TOLERANCE = {"float32": TOLERANCE, "bfloat16": 2e-2, "float16": 5e-3}
"""The bound a generated row keeps from the full pass's row, by the weights'
dtype. float32: the check's `explorer.models.check.TOLERANCE` (the tiny test
models: at most 1.1e-6). In bfloat16 or float16 the layer's input is itself
computed in that dtype, by a cached pass (one token) and by a full pass (all
tokens) whose products may round differently: bfloat16 keeps 8 bits of
mantissa (a relative 2^-8 = 3.9e-3 a rounding), float16 11 (4.9e-4); the
bounds allow a few such roundings. Measured on the tiny test models in
bfloat16: at most 3.6e-7 (their passes round alike); not yet on a released model."""


@dataclass(frozen=True)
class GeneratedToken:
    """One generated token and its row of attention in the opened layer.

    ``position``: its place in the sequence (the prompt's tokens are 0 … n − 1);
    ``token_id``, ``token`` (readable); ``scaled_scores`` (n_heads, position + 1):
    its query's scores with every cached key, scaled; ``mask`` (position + 1,)
    bool: the keys it may see (all, or the sliding window); ``attn_weights``
    (n_heads, position + 1): the softmax of the scores left by the mask;
    ``cache_tokens``: the keys the explorer's own cache of this layer held when
    the row was read (position + 1, itself included: it keeps every key, and
    the mask applies the window); ``cache_kept``: the tokens the model's own
    cache of this layer keeps after this token, read from it (a full-attention
    layer position + 1; transformers' sliding-window layer its last window − 1,
    to which the next token adds itself); ``cache_bytes``: the bytes of the model's
    own KV cache, every layer, after this token (in the model's dtype; a sliding
    layer keeps only its window); ``mha_cache_bytes``: the same cache if every
    query head had its own K/V head (× n_heads / n_kv_heads); ``seconds``:
    since the generation began.
    """

    position: int
    token_id: int
    token: str
    scaled_scores: Tensor
    mask: Tensor
    attn_weights: Tensor
    cache_tokens: int
    cache_kept: int
    cache_bytes: int
    mha_cache_bytes: int
    seconds: float


@dataclass(frozen=True)
class Generation:
    """`generate`'s result: ``config`` (the opened layer's `DecoderConfig`, its
    ``input_ids`` the prompt's), ``prompt_ids`` and ``prompt_tokens``, the
    ``generated`` tokens in order, ``stopped`` (``"tokens"``: all asked for;
    ``"eos"``: the model's end-of-sequence token; ``"time"``: the time limit;
    ``"positions"``: the model's last position), ``seed`` (breaks ties between
    equally likely tokens), ``prompt_cache_bytes`` (the model's KV cache
    after the prompt, every layer) and ``prompt_cache_kept`` (the tokens the
    opened layer's cache keeps after the prompt, read from it)."""

    config: DecoderConfig
    prompt_ids: tuple[int, ...]
    prompt_tokens: tuple[str, ...]
    generated: tuple[GeneratedToken, ...]
    stopped: str
    seed: int
    prompt_cache_bytes: int
    prompt_cache_kept: int

    @property
    def ids(self) -> tuple[int, ...]:
        """The prompt's ids and the generated ones."""
        return self.prompt_ids + tuple(t.token_id for t in self.generated)

    @property
    def tokens(self) -> tuple[str, ...]:
        """The prompt's readable tokens and the generated ones."""
        return self.prompt_tokens + tuple(t.token for t in self.generated)

    def to_json(self) -> str:
        """The generation as strict JSON (`explorer.core.trace.json_safe`: a
        masked score, −∞, is written ``"-Infinity"``): the layer's config, the
        prompt, and per generated token its position, id, readable token, rows
        of scaled scores and weights per head, mask, cache tokens and bytes."""
        config = {k: v for k, v in dataclasses.asdict(self.config).items() if v is not None}
        rows = [{"position": t.position, "token_id": t.token_id, "token": t.token,
                 "scaled_scores": t.scaled_scores.tolist(), "mask": t.mask.tolist(),
                 "attn_weights": t.attn_weights.tolist(), "cache_tokens": t.cache_tokens,
                 "cache_kept": t.cache_kept, "cache_bytes": t.cache_bytes, "mha_cache_bytes": t.mha_cache_bytes}
                for t in self.generated]
        return json.dumps(json_safe({
            "config": config, "prompt_ids": list(self.prompt_ids),
            "prompt_tokens": list(self.prompt_tokens), "generated": rows,
            "stopped": self.stopped, "seed": self.seed,
            "prompt_cache_bytes": self.prompt_cache_bytes}), allow_nan=False)

    def weights_matrix(self) -> Tensor:
        """The generated rows as one (n_heads, n_generated, n_tokens) matrix, zero
        right of each row's end: the lower rows of a causal attention matrix."""
        n = len(self.ids)
        out = torch.zeros(self.config.n_heads, len(self.generated), n)
        for i, token in enumerate(self.generated):
            out[:, i, :token.position + 1] = token.attn_weights
        return out


def checked_new_tokens(value: Any, name: str = "max_new_tokens") -> int:
    """``value`` when it is a whole number from 1 to `MAX_NEW_TOKENS` (not a
    bool); else `ModelError` naming it ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NEW_TOKENS:
        raise ModelError(name, f"{name} must be a whole number from 1 to {MAX_NEW_TOKENS} "
                               f"(got {shown(value)})")
    return value


def _check_request(model: LoadedModel, n_prompt: int, max_new_tokens: Any,
                   time_limit: Any) -> int:
    """``max_new_tokens`` as a whole number from 1 to `MAX_NEW_TOKENS`, within the
    model's positions after ``n_prompt`` tokens; a positive time limit. Else `ModelError`."""
    max_new_tokens = checked_new_tokens(max_new_tokens)
    if not isinstance(time_limit, (int, float)) or not 0 < time_limit <= GENERATION_SECONDS:
        raise ModelError("time_limit", f"time_limit must be more than 0 and at most "
                                       f"{GENERATION_SECONDS:g} seconds (got {shown(time_limit)})")
    room = model.max_tokens - n_prompt
    if room < 1:
        raise ModelError("text", f"the prompt fills all {model.max_tokens} positions of "
                                 f"{model.name!r}: shorten it to generate")
    return min(max_new_tokens, room)


def greedy_token(logits: Tensor, generator: torch.Generator) -> int:
    """The most likely next token of ``logits`` (vocab_size,); between tokens
    equally likely, one drawn by ``generator`` (seeded: the same every time)."""
    best = torch.nonzero(logits == logits.max()).flatten()
    if len(best) == 1:
        return int(best[0])
    return int(best[torch.randint(len(best), (1,), generator=generator)])


def cache_bytes(cache: Any) -> int:
    """Bytes of the keys and values a transformers ``DynamicCache`` holds, every layer."""
    total = 0
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, Tensor):
                total += t.numel() * t.element_size()
    return total


def kept_tokens(cache: Any, layer: int) -> int:
    """The tokens a transformers ``DynamicCache`` keeps for ``layer``: its keys'
    length (0 before any); a sliding-window layer keeps only the end of the
    sequence."""
    keys = getattr(cache.layers[layer], "keys", None) if layer < len(cache.layers) else None
    return int(keys.shape[-2]) if isinstance(keys, Tensor) else 0


def decode_row(hidden: Tensor, weights: dict[str, Tensor], config: DecoderConfig,
               position: int, cache: modern.KVCache) -> tuple[Tensor, Tensor, Tensor]:
    """One new token's row: its input ``hidden`` (1, d) at ``position`` gives its
    rotated query, key and value (`explorer.models.llama.token_steps`); the key
    and value are appended to ``cache`` (n_kv_heads, t, e), and the one query of
    each head reads every cached key of its K/V head.

    Returns ``(scaled_scores, mask, attn_weights)``: (n_heads, t), (t,) bool,
    (n_heads, t), t = the cache's length (position + 1).
    """
    s = token_steps(hidden, weights, config, torch.tensor([position]))
    cache.append(s["keys_rope"], s["values"])              # (k, 1, e) each
    keys, _ = cache.read()                                 # (k, t, e)
    scores = scores_of(s["queries_rope"], keys, config)[:, 0] * config.scaling  # (h, t)
    mask = attention_mask(1, keys.shape[1], config.window)[0]                   # (t,)
    return scores, mask, torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def _step(model: LoadedModel, block: torch.nn.Module, ids: Sequence[int], cache: Any
          ) -> tuple[Tensor, Tensor]:
    """One pass of the model with its KV cache: returns the last position's
    logits (vocab_size,) and the opened layer's input for the new tokens (n, d),
    float32."""
    caught: list[Tensor] = []

    def catch(module: Any, args: tuple, kwargs: dict) -> None:
        caught.append(args[0] if args else kwargs["hidden_states"])

    with _hooked(model, [lambda: block.register_forward_pre_hook(catch, with_kwargs=True)]):
        with torch.inference_mode():
            out = model.module(input_ids=torch.tensor([list(ids)]), past_key_values=cache,
                               use_cache=True, logits_to_keep=1)
    return out.logits[0, -1].to(torch.float32).clone(), caught[0][0].to(torch.float32).clone()


def generate(model: LoadedModel, text: str | None = None, *, input_ids: Any = None,
             max_new_tokens: int = DEFAULT_NEW_TOKENS, layer: int = 0, seed: int = 0,
             time_limit: float = GENERATION_SECONDS) -> Generation:
    """Generate up to ``max_new_tokens`` tokens greedily after ``text`` (or
    ``input_ids``), keeping each new token's row of attention in layer ``layer``
    (see `GeneratedToken`).

    Greedy: the most likely token each time, ties broken by a local
    ``torch.Generator`` seeded with ``seed``. Stops after ``max_new_tokens``
    (at most `MAX_NEW_TOKENS`), at the model's end-of-sequence token, at its
    last position, or after the token that passes ``time_limit`` seconds (at
    most `GENERATION_SECONDS`). Every generated token is also fed to the model
    once, so that its own row is computed. Raises `ModelError` for a model
    outside the Llama family, bad input, layer, or limits.
    """
    seq = model_input(model, text, input_ids)
    n_new = _check_request(model, len(seq.ids), max_new_tokens, time_limit)
    config = decoder_config(model, layer, input_ids=seq.ids, token_pieces=seq.tokens, text=text)
    block = model.anatomy.blocks(model.module)[config.layer]
    weights = anatomy.decoder_weights(block)
    generator = torch.Generator().manual_seed(int(seed))
    eos = getattr(model.module.config, "eos_token_id", None)
    eos = set(eos) if isinstance(eos, (list, tuple)) else {eos}
    started = time.perf_counter()

    from transformers import DynamicCache
    model_cache = DynamicCache(config=model.module.config)
    ours = modern.KVCache.empty(config.n_kv_heads, config.head_dim, config.head_dim)
    logits, hidden = _step(model, block, seq.ids, model_cache)                # the prefill
    with torch.no_grad():
        prompt = token_steps(hidden, weights, config, torch.arange(len(seq.ids)))
    ours.append(prompt["keys_rope"], prompt["values"])
    prompt_bytes = cache_bytes(model_cache)
    prompt_kept = kept_tokens(model_cache, config.layer)
    generated: list[GeneratedToken] = []
    stopped = "tokens" if n_new == max_new_tokens else "positions"
    for _ in range(n_new):
        token = greedy_token(logits, generator)
        position = len(seq.ids) + len(generated)
        logits, hidden = _step(model, block, [token], model_cache)           # one token
        with torch.no_grad():
            scores, mask, row = decode_row(hidden, weights, config, position, ours)
        nbytes = cache_bytes(model_cache)
        generated.append(GeneratedToken(
            position=position, token_id=token,
            token=readable_tokens(model.tokenizer, [token])[0], scaled_scores=scores,
            mask=mask, attn_weights=row, cache_tokens=len(ours),
            cache_kept=kept_tokens(model_cache, config.layer), cache_bytes=nbytes,
            mha_cache_bytes=nbytes * config.n_heads // config.n_kv_heads,
            seconds=time.perf_counter() - started))
        if token in eos:
            stopped = "eos"
            break
        if generated[-1].seconds > time_limit and len(generated) < n_new:
            stopped = "time"
            break
    return Generation(config, seq.ids, seq.tokens, tuple(generated), stopped, int(seed),
                      prompt_bytes, prompt_kept)


ROWS, BEYOND, OWN_ROWS = "generated rows", "beyond each row's end", "the model's own rows"
"""The names of `against_full_pass`'s parts (`OWN_ROWS`: only for a model whose
weights are not float32)."""


def against_full_pass(generation: Generation, model: LoadedModel) -> Agreement:
    """Compare every generated row of ``generation`` with row ``position`` of
    the model's attention weights in one full forward pass over the whole
    sequence (prompt and generated tokens), without a KV cache
    (`explorer.models.forward.decoder_layer_call`: ``output_attentions``).

    Our rows are float32 (computed from the opened layer's input in each
    cached pass). Two parts, each within `ROW_TOLERANCE` of the weights' dtype:
    `ROWS`, the largest |ours − full pass's| over every generated token's
    weights (n_heads, position + 1), ``inf`` when a row's length differs;
    `BEYOND`, the full pass's largest weight right of a row's end (0 in a causal
    model). The full pass's rows are float32: the model's own
    ``output_attentions`` for a float32 model; for one in bfloat16 (float16),
    float32 copies of the layer's modules run on the full pass's layer input
    (`explorer.models.forward.decoder_layer_call`). For such a model a third
    part, `OWN_ROWS`, compares our rows with the model's own rows in its dtype
    (``output_attentions`` of the same full pass, upcast exactly): the
    difference its rounding makes (issue 51's walk measured 7.8e-3 on Qwen3-0.6B).
    Raises `ModelError` when the generation comes from another model.
    """
    c = generation.config
    if (c.architecture, c.n_layers, c.n_heads) != (model.architecture, model.n_layers,
                                                  model.n_heads):
        raise ModelError("check", f"the generation comes from {c.model!r}, not {model.name!r}")
    call = decoder_layer_call(model, list(generation.ids), c.layer)
    full, own = call.attn_weights, call.own_attn_weights  # (h, N, N), float32
    diffs, own_diffs, beyond, n_values = [], [], 0.0, 0
    for token in generation.generated:
        p = token.position
        diffs.append(max_abs_diff(token.attn_weights, full[:, p, :p + 1]))
        if own is not None:
            own_diffs.append(max_abs_diff(token.attn_weights, own[:, p, :p + 1]))
        n_values += full[:, p, :p + 1].numel()
        if p + 1 < full.shape[-1]:
            beyond = max(beyond, float(full[:, p, p + 1:].abs().max()))
    diff = max(diffs, default=0.0)  # max_abs_diff gives no NaN: a one-sided NaN is inf
    tolerance = ROW_TOLERANCE.get(model.dtype, TOLERANCE)
    n_rows = len(generation.generated)
    kind = type(model.module).__name__
    where = (f"one full forward pass of {kind} {model.name!r}, layer {c.layer}, without a "
             "cache")
    reference = (f"the rows of {where} (output_attentions, float32)" if own is None else
                 f"the float32 rows of {where} (float32 copies of the layer's modules, "
                 f"its {model.dtype} weights upcast, on the pass's own layer input)")
    parts = [Agreement(ROWS, f"{n_rows} rows of every head", reference, diff, tolerance,
                       n_values=n_values),
             Agreement(BEYOND, "weights right of each row's end", "0 (causal)", beyond,
                       tolerance)]
    if own is not None:
        parts.append(Agreement(
            OWN_ROWS, f"{n_rows} rows of every head",
            f"the model's own {model.dtype} rows of {where} (output_attentions in "
            f"{model.dtype})", max(own_diffs, default=0.0), tolerance, n_values=n_values,
            note=f"{model.dtype} rounding"))
    return of_all(f"The {n_rows} generated rows (float32)", "attention weights, row by row",
                  reference, parts)


def rows_summary(check: Agreement, dtype: str) -> str:
    """`against_full_pass`'s result in words for the page: what was compared with
    what, in which dtype, and each largest difference, e.g. ``"The 8 generated
    rows, computed in float32, differ from the float32 rows of one full pass
    ... by at most 7.5e-08; from the model's own bfloat16 rows by at most 7.8e-03
    (bfloat16 keeps 8 bits of mantissa: a relative 3.9e-03 a rounding). Allowed:
    2e-02."``"""
    rows, beyond = check.part(ROWS), check.part(BEYOND)
    verdict = "✓" if check.ok else "✗"
    text = (f"{verdict} {check.name.removesuffix(' (float32)')}, computed in float32 from "
            f"the layer's input in each cached pass, differ from {rows.reference} by at most "
            f"{rows.max_abs_diff:.1e}")
    if OWN_ROWS in [p.name for p in check.parts]:
        own = check.part(OWN_ROWS)
        bits = {"bfloat16": 8, "float16": 11}.get(dtype)
        rounding = (f" ({dtype} keeps {bits} bits of mantissa: a relative "
                    f"{2.0 ** -bits:.1e} a rounding)" if bits else "")
        text += (f"; from {own.reference} by at most {own.max_abs_diff:.1e}{rounding}")
    return (text + f". Weight right of a row's end: at most {beyond.max_abs_diff:.1e}. "
            f"Allowed: {rows.tolerance:.0e}" + (" (float32 rounding)." if dtype == "float32"
                                               else f" (for {dtype} weights)."))
