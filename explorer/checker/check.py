"""Check your own attention code: where does it first differ from the book's?

    >>> from explorer.checker.check import check_module
    >>> report = check_module(MultiHeadAttention(d_in=3, d_out=4, context_length=6,
    ...                                          dropout=0.0, num_heads=2))
    >>> report.ok, report.first_difference.step, report.mistake
    (False, 'attn_weights', 'softmax_over_queries')
    >>> print(report)  # the table of steps, the first difference, the diagnosis

How it works:

1. `explorer.checker.learner.read_weights` reads the module's projections: by the
   book's names (chapter 3 of "Build a Large Language Model (From Scratch)") or
   the others' (query, q_proj, W_q, to_q, wq ...), as nn.Linear, GPT-2's
   Conv1D, an nn.Sequential holding one, a parameter, a fused layer (any layout
   of its columns), a list of 3 or 4 layers, per-head modules, or a wrapped
   ``nn.MultiheadAttention``; and what the weights do not say, with the reason
   (the report's first line, `_assumptions`): causal or not, and the head count.
   Both are settings (``causal=``, ``n_heads=``); unset, they are read from the
   module (`explorer.checker.learner.causal_evidence`, `heads_evidence`) and
   from what its forward shows (a mask it builds, ``is_causal=True``, the head
   axis of its scores: `_heads_from_tensors`).
2. `explorer.checker.learner.run_forward` runs the learner's forward once, on a
   batch of two different sentences (X and `second_sentence`, else on X), and
   keeps every tensor it makes; the learner changes nothing in their code.
   Biases the forward adds on its own are found in those tensors (`_found_biases`),
   and another reading of the weights is used when the forward computes that
   one (``LearnerWeights.alternatives``). A forward that raises on the
   sentence but runs on exactly as many tokens as its mask is a mask not cut
   to the sentence (`_mask_not_sliced`).
3. The reference: `explorer.checker.mistakes.pipeline_steps` (the explorer's own
   attention, `explorer.core.trace.attention_steps`, one function per step) on
   the same inputs with those weights, in the learner's order of mask and
   scale (`_masks_first`: the book masks first).
4. Each reference step, in that order (`COMPARED` or `MASK_FIRST`), is matched
   to one of those tensors: equal to the tolerance, whatever the layout of the
   heads ((b, num_heads, n, head_dim), (b, n, num_heads, head_dim) or the heads
   side by side, (b, n, d_out)) and with or without a batch axis of 1. The
   returned tensor must equal the last step.
5. When the output differs, each classic mistake of `explorer.checker.mistakes`
   (and one projection computed with another's weights) is computed from the
   same weights; the one whose output equals the learner's names the mistake,
   and its first step that the learner's tensors show is the first difference.
   Without one, the first difference is the first step with no match from
   which no matching step is computed (`_undone`, `_locate`). A step without a
   match that feeds a matching one is right, only never computed on its own:
   "not seen", —; when such steps come right before the difference, it is
   reported "between" the first of them and it (`_since`).
6. A reading the check is not sure of (a head count guessed, parameters it did
   not place, a fused layer whose queries no layout gives) gives "?" rather than
   ✗ (`_uncertain`). `hidden_steps` and `_blind`: a warning for each step or
   classic mistake the sizes cannot see. The check runs within
   `explorer.checker.limits.limits`.

Dropout: compared off unless the module is in train() mode with p > 0 and a
``dropout_seed`` is given; then the check draws the keep-masks from
``torch.Generator().manual_seed(dropout_seed)`` and hands the same masks to the
learner's dropout calls and to the reference, so the result is the same on
every machine. Without a seed, a module in train() mode drops weights at random,
and the report says that this is what differs.

The report (`explorer.checker.report`) is a plain dataclass of lists, numbers and
text that round-trips through JSON; the comparisons, to the tolerance and in every
layout, are `explorer.checker.comparison`'s. Pure torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from explorer.checker.comparison import (
    TOLERANCE,
    YourTensors,
    agreeing,
    close,
    nearest,
    share_agreeing,
)
from explorer.checker.learner import (
    HEAD_ATTRIBUTES,
    MEMORY_MB,
    TIMEOUT_S,
    CheckError,
    LearnerWeights,
    Recording,
    read_weights,
    run_forward,
    triangle,
    unread_parameters,
)
from explorer.checker.limits import limits
from explorer.checker.listings import DEFAULT_SIZES
from explorer.checker.mistakes import (
    DROPOUT_ACTIVE,
    MISTAKES,
    Sizes,
    dropout_diagnosis,
    dropout_keep_mask,
    mistaken_steps,
    pipeline_steps,
)
from explorer.checker.report import (
    SIZES_BLIND,
    CheckReport,
    Difference,
    StepResult,
)
from explorer.checker.verdicts import DIFFERS, MATCH, NOT_SEEN, UNSURE
from explorer.core import attention as att
from explorer.core import recipes
from explorer.core.agreement import max_abs_diff
from explorer.core.config import MAX_ATTENTION_CELLS, AttentionConfig
from explorer.core.steps import STEPS, TOKENS
from explorer.core.tokenizer import token_labels, tokenize
from explorer.core.trace import attention_steps, embed
from explorer.lessons.presets import JOURNEY_INPUTS, JOURNEY_SENTENCE

__all__ = ["COMPARED", "CheckError", "check_module", "reference_steps"]

COMPARED = ("queries", "keys", "values", "attn_scores", "scaled_scores", "masked_scores",
            "attn_weights", "dropped_weights", "context", "output")
"""The steps compared, in pipeline order (those the module's attention has)."""
MASK_FIRST = tuple({"scaled_scores": "masked_scores", "masked_scores": "scaled_scores"}.get(s, s)
                   for s in COMPARED)
"""The same steps when the code masks before it scales, as the book does."""
MAX_OUTLINED = 512
"""At most this many differing cells are listed (and outlined in the charts)."""
NO_BATCH = "no_batch"
"""The slug of a module that runs on one sentence but not on the book's batch."""


# ---------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------
def _inputs(d_in: int, sentence: str | None, inputs: Any, seed: int
            ) -> tuple[Tensor, list[str], str]:
    """X, the tokens that label its rows, and a sentence saying where X came from.

    ``inputs`` (n, d_in) or (b, n, d_in) wins; its rows are labelled with the
    sentence's tokens when one is given, else ``x1 … xn``. Else the sentence
    (default `JOURNEY_SENTENCE`) is embedded as the app does (embedding="table",
    ``seed``), except that the journey sentence with d_in = 3 gets the book's
    hand-picked vectors (§3.3.1), as the book's code does.
    """
    if inputs is not None:
        x = torch.as_tensor(inputs).detach().to(torch.float32)
        if x.dim() not in (2, 3) or x.shape[-1] != d_in or x.shape[-2] == 0 or x.shape[0] == 0:
            raise CheckError("inputs", f"inputs must have shape (n_tokens, d_in) or (b, n_tokens, "
                                       f"d_in) with d_in = {d_in}, the rows of W_query "
                                       f"(got {tuple(x.shape)})")
        n = x.shape[-2]
        tokens = [f"x{i + 1}" for i in range(n)] if sentence is None else tokenize(sentence)
        if len(tokens) != n:
            raise CheckError("sentence", f"the sentence has {len(tokens)} tokens but inputs has "
                                         f"{n} rows: give one token per row, or no sentence")
        return x, tokens, f"your inputs {tuple(x.shape)}" + (
            ", every batch item checked" if x.dim() == 3 and x.shape[0] > 1 else "")
    sentence = JOURNEY_SENTENCE if sentence is None else sentence
    config = AttentionConfig(sentence=sentence, d_in=d_in, d_k=1, d_v=1, seed=seed)
    if _book_vectors(sentence, d_in):
        return (torch.tensor(JOURNEY_INPUTS), config.tokens,
                "the book's hand-picked vectors for this sentence (§3.3.1)")
    return (embed(config)[0], config.tokens,
            f"nn.Embedding({config.vocab_size:,}, {d_in}) looked up by token id, after "
            f"torch.manual_seed({seed}) (the app's embedding=table)")


def _book_vectors(sentence: str | None, d_in: int) -> bool:
    """Whether X is the book's hand-picked vectors (§3.3.1): the journey sentence
    with d_in = 3."""
    return sentence in (None, JOURNEY_SENTENCE) and d_in == 3


def _validate(weights: LearnerWeights, x: Tensor, tokens: list[str]) -> None:
    """The explorer's limits, through `AttentionConfig` (tokens, sizes, heads,
    finite numbers of at most ±1e6), and the work: b · n_heads · n² cells."""
    AttentionConfig(sentence=" ".join(tokens), d_in=weights.d_in, d_k=weights.d_k,
                    d_v=weights.d_v, n_heads=weights.n_heads, embedding="given",
                    embeddings=x.reshape(-1, x.shape[-2], x.shape[-1])[0],
                    weight_init="given", W_query=weights.W_query, W_key=weights.W_key,
                    W_value=weights.W_value, causal=weights.causal)
    if not torch.isfinite(x).all():
        raise CheckError("inputs", "inputs must be finite numbers (no NaN or infinity)")
    batch = x.shape[0] if x.dim() == 3 else 1
    cells = batch * weights.n_heads * x.shape[-2] ** 2
    if cells > MAX_ATTENTION_CELLS:
        raise CheckError("inputs", f"b × n_heads × n_tokens² must be at most "
                                   f"{MAX_ATTENTION_CELLS:,} (got {cells:,}): check fewer "
                                   "batch items or tokens")


BATCH = 2
"""The book runs chapter 3's classes on a batch of two, ``torch.stack((inputs, inputs))``;
the check's batch of two holds two different sentences (`second_sentence`)."""


def second_sentence(x: Tensor, seed: int, book_vectors: bool) -> Tensor:
    """The batch's second sentence: as many tokens as X (n, d_in), each vector
    drawn from ``torch.Generator().manual_seed(seed + 1)`` as X's were (uniform
    in [0, 1) like the book's hand-picked vectors when ``book_vectors``, else
    normal like an nn.Embedding table's rows), so that code mixing the batch's
    items shows."""
    generator = torch.Generator().manual_seed((seed + 1) % 2**63)
    draw = torch.rand if book_vectors else torch.randn
    return draw(tuple(x.shape), generator=generator)


SCORE_SPREAD = 4.0
"""How far apart the largest and smallest scaled score of a row are made, on average,
when X has to be scaled (`_spread_inputs`): a few units, where softmax is neither
uniform nor one-hot, so that a scale off by √head_dim moves the weights well above
`TOLERANCE`."""


def _score_spread(weights: LearnerWeights, xb: Tensor) -> float:
    """The mean, over rows, of (largest − smallest) scaled score (Q Kᵀ / √head_dim,
    unmasked) at inputs ``xb`` (b, n, d_in)."""
    steps = attention_steps(xb, weights.params(), n_heads=weights.n_heads)
    scores = steps["scaled_scores"]
    return float((scores.amax(-1) - scores.amin(-1)).mean())


def _spread_inputs(weights: LearnerWeights, x: Tensor, second: Tensor | None, where: str
                   ) -> tuple[Tensor, Tensor | None, str]:
    """X and the batch's second sentence, both multiplied by one number c when at
    X a classic mistake would give the reference's own numbers (`_blind`) and
    scaling X lets it show: c makes each row's scaled scores span about
    `SCORE_SPREAD` whatever the weights' scale (GPT-2's std 0.02 makes them span
    thousandths, where a missing ÷ √head_dim changes nothing above the
    tolerance). Scores grow as c² (as c with biases), so c is found in a few
    steps. ``where`` gains the factor and why; the sizes are never changed."""
    xb = x[None] if second is None else torch.stack((x, second))
    pipeline = {"n_heads": weights.n_heads, "causal": weights.causal, "dropout": 0.0,
                "keep_mask": None}

    def blind(c: float) -> list[str]:
        return _blind(weights, xb * c, pipeline, pipeline_steps(xb * c, weights.params(),
                                                                **pipeline))

    before = blind(1.0)
    spread = _score_spread(weights, xb)
    if not before or not math.isfinite(spread) or spread <= 0:
        return x, second, where
    c = 1.0
    for _ in range(6):
        now = _score_spread(weights, xb * c)
        if not math.isfinite(now) or now <= 0 or abs(now / SCORE_SPREAD - 1) < 0.05:
            break
        c = min(max(c * math.sqrt(SCORE_SPREAD / now), 1e-3), 1e4)
    if abs(c - 1) < 0.05 or len(blind(c)) >= len(before):
        return x, second, where
    return x * c, None if second is None else second * c, (
        f"{where}, × {c:.3g} so that each row's scaled scores span about {SCORE_SPREAD:g} "
        f"(at your weights' scale they span {spread:.2g}, too little for every classic "
        "mistake to show)")




def _blind_sizes(weights: LearnerWeights, blind: list[str]) -> str:
    """Why a check that matched cannot be trusted: at the learner's sizes the
    classic mistakes ``blind`` give the reference's own numbers, whatever X; and
    the sizes that would tell (the check's defaults, `DEFAULT_SIZES`, where d_in,
    d_out, head_dim and num_heads all differ)."""
    d = DEFAULT_SIZES
    return (f"{SIZES_BLIND} (d_in {weights.d_in}, d_out {weights.d_k}, num_heads "
            f"{weights.n_heads}, head_dim {weights.head_dim}) these mistakes give the "
            f"reference's own numbers: {', '.join(blind)}; sizes that would tell: d_in "
            f"{d['d_in']}, d_out {d['d_out']}, num_heads {d['num_heads']} (head_dim "
            f"{d['d_out'] // d['num_heads']}), where d_in, d_out, head_dim and num_heads "
            "all differ")


def _mask_not_sliced(module: nn.Module, weights: LearnerWeights, error: CheckError,
                     x: Tensor, tokens: list[str], interface: str) -> CheckReport:
    """When the forward raised on every try: a report of the mask not sliced to
    the sentence, if the module holds a causal mask of another size
    (context_length, `explorer.checker.learner.triangle`) and its forward runs
    on a sentence of exactly that many tokens; else ``error`` is raised."""
    n = x.shape[-2]
    sizes = {t.shape[-1] for _, t in module.named_buffers()
             if triangle(t) is not None and t.shape[-1] != n}
    sizes |= {t.shape[-1] for t in vars(module).values()
              if isinstance(t, Tensor) and triangle(t) is not None and t.shape[-1] != n}
    for size in sorted(sizes):
        probe = torch.randn((BATCH, size, weights.d_in), generator=torch.Generator().manual_seed(0))
        try:
            run_forward(module, probe, weights)
        except CheckError:
            continue
        diagnosis = (f"the mask, ({size}, {size}) for context_length = {size}, is used whole "
                     f"rather than cut to the sentence's {n} tokens: forward raises on "
                     f"{n} tokens and runs on exactly {size}; slice it, "
                     "self.mask.bool()[:num_tokens, :num_tokens] (both axes)")
        return CheckReport(
            module=type(module).__name__, ok=False, steps=[], first_difference=None,
            diagnosis=diagnosis, mistake=MASK_NOT_SLICED, tokens=tokens,
            settings=[_assumptions(weights)],
            notes=[f"On {n} tokens: {error}"],
            raised=f"Raises on a sentence of {n} tokens, shorter than its mask "
                   f"({size} × {size}); it runs only when the sentence is exactly "
                   f"context_length = {size} tokens long")
    raise error


MASK_NOT_SLICED = "mask_not_sliced"
"""The slug of a mask used whole, not cut to the sentence's length."""


def _record(module: nn.Module, x: Tensor, second: Tensor | None, weights: LearnerWeights,
            masks) -> tuple[Recording, Tensor, str, CheckError | None]:
    """Run the forward, and say on what: (recording, X it ran on, a note, the
    error of the batch of two when only one sentence worked).

    ``masks(b)``: the dropout keep-masks for a batch of b (or None). Without a
    ``second`` sentence, X runs as given, and (n, d_in) that raises as a batch
    of one. Else first on a batch of two different sentences,
    ``torch.stack((X, second))`` (b = 2, as chapter 3 does), then on X (n,
    d_in), then on a batch of one; when all raise, the error of the run that
    got furthest is raised.
    """
    given = second is None
    def run(inputs: Tensor) -> Recording:
        return run_forward(module, inputs, weights, masks(inputs.shape[0] if inputs.dim() == 3
                                                          else 1))

    if x.dim() == 3:
        tries = [x]
    else:
        tries = [x, x[None]] if given else [torch.stack((x, second)), x, x[None]]
    errors: list[CheckError] = []
    for inputs in tries:
        try:
            recording = run(inputs)
        except CheckError as error:
            errors.append(error)
            continue
        batch_error = errors[0] if errors and not given else None
        note = "" if inputs.dim() == 2 or not errors else \
            f"forward needs a batch axis: it ran on a batch of one, {tuple(inputs.shape)}"
        return recording, inputs, note, batch_error
    furthest = max(errors, key=lambda error: error.progress)  # the first, among equals
    reversed_shapes = [shape for error in errors for shape in error.reversed_shapes]
    if reversed_shapes:  # name the cause
        raise CheckError(furthest.field, f"{str(furthest).rstrip('.')}. The cause: "
                                         f"{_reversed_text(reversed_shapes)}.",
                         furthest.details, furthest.progress, reversed_shapes)
    raise furthest


BEHAVES_CAUSAL = ("forward, measured: a new last token changes its own row of the output and "
                  "no earlier one")
"""Why a module that holds and makes no mask the check recognises is causal (`_behaves_causal`)."""


def _behaves_causal(module: nn.Module, weights: LearnerWeights, x_run: Tensor,
                    recording: Recording, masks) -> bool:
    """Whether ``module`` behaves as causal attention, measured: its forward run
    again with the last token's vector replaced (drawn from a fixed generator, at
    X's scale), the same dropout masks: every earlier row of the output is as it
    was, and the last row changed. (A loop over prefixes, or a mask the check
    does not recognise, shows here.) False for torch's MultiheadAttention (its
    token axis may come first), fewer than 2 tokens, or a forward that raises."""
    n = x_run.shape[-2]
    if n < 2 or weights.torch_mha is not None or weights.inner_mha is not None:
        return False
    changed = x_run.clone()
    g = torch.Generator().manual_seed(0)
    changed[..., -1, :] = torch.randn(changed[..., -1, :].shape, generator=g) * (
        float(x_run.abs().max()) + 1.0)
    try:
        again = run_forward(module, changed, weights, masks(changed.shape[0] if
                                                            changed.dim() == 3 else 1))
    except CheckError:
        return False
    before, after = recording.output, again.output
    if before.shape != after.shape or before.dim() < 2 or before.shape[-2] != n:
        return False
    return close(before[..., :-1, :], after[..., :-1, :]) and \
        not close(before[..., -1, :], after[..., -1, :])


def _reversed_text(shapes: list[tuple[int, ...]]) -> str:
    """What ``.T`` on a tensor of 3 or more dims did, and the fix."""
    shape = shapes[0]
    return (f".T on a tensor of {len(shape)} dims, {shape}, reverses all its axes (to "
            f"{shape[::-1]}), not just the last two: write keys.transpose(-2, -1), as the "
            "book's CausalAttention writes keys.transpose(1, 2)")


def _batch_outcome(module: nn.Module, weights: LearnerWeights, error: CheckError,
                   x: Tensor) -> tuple[bool, str]:
    """When the module raised on the book's batch of two but ran on X (n, d_in):
    (whether that is a mistake, what to say). The book runs CausalAttention,
    the wrapper and MultiHeadAttention on batches (a mask or heads), and
    SelfAttention_v1 and v2 on one sentence."""
    name = type(module).__name__
    pair = (BATCH, *x.shape)
    cause = f" The cause: {_reversed_text(error.reversed_shapes)}." \
        if error.reversed_shapes else ""
    if weights.causal or weights.n_heads > 1:
        return True, (f"{name} works on one sentence, {tuple(x.shape)}, but not on the book's "
                      f"batch of two, torch.stack((inputs, inputs)) of shape {pair}: "
                      f"{str(error).rstrip('.')}."
                      f"{cause}")
    return False, (f"forward raised on the book's batch of two, {pair}, so it was checked on "
                   f"one sentence, {tuple(x.shape)}, as the book runs SelfAttention_v1 and v2: "
                   f"{str(error).rstrip('.')}.{cause}")


def spell(interface: str, **values: Any) -> str:
    """How to set ``values`` where the check runs: ``dropout=0.1, dropout_seed=1``
    in Python (``"api"``), ``--dropout 0.1 --dropout_seed 1`` on the command line
    (``"cli"``); on the page (``"app"``), d_out and num_heads are sidebar fields,
    the rest are set in Python or on the command line."""
    if interface == "cli":
        return " ".join(f"--{name} {value}" for name, value in values.items())
    python = ", ".join(f"{name}={value}" for name, value in values.items())
    if interface != "app":
        return python
    if set(values) <= {"d_in", "d_out", "num_heads", "sentence", "seed", "n_heads", "causal"}:
        return " and ".join(f"{name} = {value}" for name, value in values.items()) + \
            " in the sidebar"
    return (f"{python} in a notebook, or "
            f"{' '.join(f'--{name} {value}' for name, value in values.items())} on the "
            "command line (this page builds your class with dropout 0)")


def _has_dropout(module: nn.Module, weights: LearnerWeights) -> bool:
    return (weights.inner_mha is not None or weights.torch_mha is not None
            or isinstance(getattr(module, "dropout", None), (int, float))
            or any(isinstance(m, nn.Dropout) for m in module.modules()))


def hidden_steps(module: nn.Module, weights: LearnerWeights, n_tokens: int,
                 interface: str = "api") -> list[str]:
    """The steps these sizes cannot see, one sentence each: head_dim = 1 hides
    the scaling (√1 = 1), one token the causal mask and softmax's axis, and
    dropout p = 0 in a module with dropout hides dropout."""
    out = []
    if weights.head_dim == 1:
        size = f"head_dim = {weights.d_k} / {weights.n_heads} = 1" if weights.n_heads > 1 \
            else "d_k = 1"
        out.append(f"{size}: dividing the scores "
                   "by √head_dim = √1 changes nothing, so these sizes cannot show a missing "
                   "or wrong scaling; check with head_dim 2 or more ("
                   f"{spell(interface, d_out=2 * weights.n_heads, num_heads=weights.n_heads)})")
    if n_tokens == 1:
        out.append("one token: it attends only to itself, so the causal mask and softmax's "
                   "axis change nothing; check a sentence of two or more tokens")
    if weights.dropout == 0 and _has_dropout(module, weights):
        out.append("dropout p = 0: dropout changes nothing, so a dropout mistake (left on in "
                   "eval() mode, applied to the scores) cannot show; check it with "
                   f"{spell(interface, dropout=0.1, dropout_seed=1)}")
    return out


def _dropout_note(weights: LearnerWeights, dropout_seed: int | None, dropout_on: bool,
                  interface: str = "api") -> str:
    """What the report says about dropout: the module's mode, and whether the
    comparison has dropout on."""
    p, mode = weights.dropout, "train()" if weights.training else "eval()"
    if p == 0 or not weights.training:
        off = f"{mode} mode: dropout (p = {p:g}) is off, and compared off" if p else ""
        seed = "dropout_seed is used only in train() mode with dropout p > 0"
        return "; ".join(note for note in (off, seed if dropout_seed is not None else "") if note)
    if dropout_on:
        return (f"{mode} mode with dropout p = {p:g}: compared with dropout on, your dropout "
                f"calls and the reference both using the keep-masks of "
                f"torch.Generator().manual_seed({dropout_seed})")
    how = ("torch.nn.MultiheadAttention draws its masks inside one function, where no "
           "dropout_seed can reach: call .eval()"
           if weights.torch_mha is not None or weights.inner_mha is not None else
           f"pass {spell(interface, dropout_seed=1)} to compare with dropout on")
    return (f"{mode} mode with dropout p = {p:g}: compared with dropout off, since dropout "
            f"masks are random and differ between machines ({how})")


def _found_biases(module: nn.Module, weights: LearnerWeights, xb: Tensor, yours: YourTensors) -> None:
    """Biases the module adds on its own, found in what its forward computed.

    For each of W_query, W_key, W_value read without a bias: a tensor of the
    learner's equal to X·W + c for one nonzero vector c (the same for every
    token and batch item; laid out with or without heads), as
    ``Q = einsum(...); Q += self.bias_q`` makes. c becomes the bias (written
    into ``weights``, and named in ``weights.found``). Only when X has two
    different rows at least: with one, any tensor is X·W plus a constant."""
    if not bool((xb != xb[:, :1]).any()):
        return
    for step, w_name, b_name in (("queries", "W_query", "b_query"), ("keys", "W_key", "b_key"),
                                 ("values", "W_value", "b_value")):
        if getattr(weights, b_name) is not None:
            continue
        plain = att.split_heads(att.project(xb, getattr(weights, w_name)), weights.n_heads)
        whole, _ = yours.candidates(step, tuple(plain.shape))
        for _, tensor in whole:
            shift = (tensor - plain)[:1, :, :1, :]  # (1, h, 1, head_dim): token 0 of item 0
            if not bool(torch.isfinite(shift).all()) or \
                    float(shift.abs().max()) <= TOLERANCE["atol"] or not close(plain + shift, tensor):
                continue
            bias = att.combine_heads(shift)[0, 0]  # (d,)
            named = [name for name, p in module.named_parameters()
                     if p.shape == bias.shape and close(p.detach().float(), bias)]
            setattr(weights, b_name, bias)
            weights.found.append(f"{named[0] if named else 'a bias'} added to X·{w_name} "
                                 "(found in what forward computes)")
            break


_STACKED = (" (a batch of two different sentences: yours, and a second of as many tokens "
            "drawn from seed + 1)")


SET_BY_YOU, DECLARED, MEASURED, GUESSED, BY_DEFAULT = (
    "set by you", "declared", "measured", "a guess", "by default")
"""Where an assumption of the report's first line came from (`source_of`)."""


def source_of(why: str) -> str:
    """Where the reason ``why`` (a `LearnerWeights` ``causal_why`` / ``heads_why``, or
    the dropout's) puts an assumption: `SET_BY_YOU` (an override), `MEASURED` (seen
    while forward ran: a mask it made, is_causal=True, the scores' head axis, no mask
    at all), `GUESSED` (nothing said: 1 head), `BY_DEFAULT` (torch's
    MultiheadAttention, not causal unless told) or `DECLARED` (what the module holds:
    a mask buffer, a head-count attribute, a class name, its weights' layout)."""
    if why.startswith("as you said"):
        return SET_BY_YOU
    if why.startswith(("forward", "the head axis seen", "no mask")):
        return MEASURED
    if why.startswith("no head count"):
        return GUESSED
    if why.startswith("torch.nn.MultiheadAttention is causal only"):
        return BY_DEFAULT
    return DECLARED


def _assumptions(weights: LearnerWeights) -> str:
    """The report's first line: each assumption the check made about the module
    (causal, heads, dropout p), why, and where it came from (`source_of`)."""
    causal_why = weights.causal_why or "no mask in the module or its forward"
    causal = f"{'causal' if weights.causal else 'not causal'} ({causal_why}), " \
        f"{source_of(causal_why)}"
    heads = f"{weights.n_heads} head{'s' if weights.n_heads > 1 else ''} ({weights.heads_why}), " \
        f"{source_of(weights.heads_why)}"
    dropout = f"dropout p = {weights.dropout:g}" + (
        f" ({weights.dropout_why}), {DECLARED}" if weights.dropout_why else ", none declared")
    return f"assumed: {causal}; {heads}; {dropout}"


def _settings(weights: LearnerWeights, x: Tensor, tokens: list[str], where: str,
              stacked: bool = False) -> list[str]:
    sizes = (f"d_in={weights.d_in}, d_k={weights.d_k}, d_v={weights.d_v}, "
             f"n_heads={weights.n_heads}" +
             (f" (head_dim {weights.head_dim})" if weights.n_heads > 1 else "") +
             (", causal" if weights.causal else "") + (", out_proj" if weights.W_out is not None
                                                       else ""))
    return [_assumptions(weights), sizes, "read: " + "; ".join(weights.found),
            f"inputs: {' '.join(tokens)!r} ({len(tokens)} tokens), {where}",
            f"ran on a tensor of shape {tuple(x.shape)}"
            f"{_STACKED if stacked else ''}, "
            f"{'train()' if weights.training else 'eval()'} mode"]


def _slice(tensor: Tensor, batch: int, head: int | None) -> Tensor:
    return tensor[batch] if head is None else tensor[batch, head]


def _difference_at(step: str, ours: Tensor, yours: Tensor | None, tokens: list[str],
                   returned: Tensor | None, second: bool = False) -> Difference:
    """The first differing cell of ``step`` (batch, head, row, column order),
    and the (batch, head) slice around it, ours and the learner's; ``second``:
    batch item 1 is the check's own second sentence (its rows are numbered)."""
    per_head = ours.dim() == 4
    labels = token_labels(tokens)
    cols = labels if STEPS[step].cols.labels == TOKENS else \
        [f"dim {j}" for j in range(ours.shape[-1])]
    if yours is None:  # (the first head, when there are heads)
        shown = _slice(ours, 0, 0 if per_head else None)
        note = (f"your forward returned a tensor of shape {tuple(returned.shape)}; the reference "
                f"has {tuple(ours.shape[1:])} per batch item" if returned is not None else
                f"none of your tensors has this step's shape, {tuple(ours.shape[1:])} per batch "
                "item")
        return Difference(step, 0, 0 if per_head and ours.shape[1] > 1 else None, None, None,
                          None, None, shown.tolist(), None, [], labels, cols, note)
    differs = ~agreeing(ours, yours)
    first = differs.nonzero()[0].tolist()
    batch, head = first[0], first[1] if per_head else None
    if batch > 0 and second:  # the batch's second sentence: its tokens have no words
        labels = [f"#{i + 1}" for i in range(len(tokens))]
        cols = labels if STEPS[step].cols.labels == TOKENS else cols
    row, col = first[-2], first[-1]
    mine, theirs = _slice(ours, batch, head), _slice(yours, batch, head)
    cells = _slice(differs, batch, head).nonzero()[:MAX_OUTLINED].tolist()
    named_head = head if per_head and ours.shape[1] > 1 else None  # one head: no head to name
    return Difference(step, batch, named_head, row, col, float(mine[row, col]),
                      float(theirs[row, col]), mine.tolist(), theirs.tolist(), cells, labels, cols)


def _sizes(weights: LearnerWeights, n_tokens: int, pipeline: dict) -> Sizes:
    return Sizes(d_in=weights.d_in, d_k=weights.d_k, head_dim=weights.head_dim,
                 n_heads=weights.n_heads, n_tokens=n_tokens, causal=weights.causal,
                 out_proj=weights.W_out is not None,
                 square=any(w.shape[0] == w.shape[1]
                            for w in (weights.W_query, weights.W_key, weights.W_value)),
                 dropout=pipeline["dropout"], keep_mask=pipeline["keep_mask"])


class _Variant(NamedTuple):
    """A classic mistake computed: its slug, its diagnosis and its steps."""

    slug: str
    diagnosis: str
    steps: dict[str, Tensor]


def _variants(weights: LearnerWeights, x: Tensor, pipeline: dict, reference: dict,
              yours: YourTensors, interface: str = "api") -> list[_Variant]:
    """Each classic mistake that changes the output, computed from the same X and weights.

    Dropout left on comes first, recognised in the learner's tensors
    (`explorer.checker.mistakes.dropout_keep_mask`), then `MISTAKES` in their order.
    """
    final = [s for s in COMPARED if s in reference][-1]
    out = []
    if "dropped_weights" not in reference:
        weights_ = reference["attn_weights"]
        dropped = yours.find("attn_weights", weights_,
                             lambda ours, t: dropout_keep_mask(ours, t) is not None)
        if dropped is not None:
            keep, p = dropout_keep_mask(weights_, dropped)
            steps = pipeline_steps(x, weights.params(), **{**pipeline, "dropout": p,
                                                             "keep_mask": keep})
            zeroed = int(((keep == 0) & (weights_ > 0)).sum())
            out.append(_Variant(DROPOUT_ACTIVE, dropout_diagnosis(
                p, zeroed, int((weights_ > 0).sum()), weights.training,
                spell(interface, dropout_seed=1)), steps))
    sizes = _sizes(weights, x.shape[-2], pipeline)
    for mistake in MISTAKES.values():
        if not mistake.applies(sizes):
            continue
        try:
            steps = mistaken_steps(mistake, sizes, x, weights.params(), **pipeline)
        except RuntimeError:  # a mistake these shapes do not allow
            continue
        if not close(reference[final], steps[final]):
            out.append(_Variant(mistake.slug, mistake.diagnosis(sizes), steps))
    return out + _mixed_projections(weights, x, pipeline, reference) + _context_from_keys(
        weights, x, pipeline, reference)


_PROJECTION_OF = {"queries": ("W_query", "b_query"), "keys": ("W_key", "b_key"),
                  "values": ("W_value", "b_value")}


def _mixed_projections(weights: LearnerWeights, x: Tensor, pipeline: dict,
                       reference: dict) -> list[_Variant]:
    """One projection computed with another's weights (``keys = self.W_query(x)``):
    a variant for each ordered pair whose shapes allow it; then two projections
    swapped (``keys = self.W_value(x)``, ``values = self.W_key(x)``), each pair."""
    final = [s for s in COMPARED if s in reference][-1]
    out = []
    names = list(_PROJECTION_OF)
    for i, step in enumerate(names):
        for other in names[i + 1:]:
            (w, b), (w_other, b_other) = _PROJECTION_OF[step], _PROJECTION_OF[other]
            params = weights.params()
            if params[w_other].shape != params[w].shape:
                continue
            params[w], params[b], params[w_other], params[b_other] = \
                params[w_other], params[b_other], params[w], params[b]
            steps = pipeline_steps(x, params, **pipeline)
            if not close(reference[final], steps[final]):
                out.append(_Variant(MIXED_PROJECTION, f"the {step} and the {other} are "
                                    f"swapped: the {step} are computed with {w_other} and the "
                                    f"{other} with {w}: {step} = self.{w}(x), {other} = "
                                    f"self.{w_other}(x)", steps))
    for step, (w, b) in _PROJECTION_OF.items():
        for other, (w_other, b_other) in _PROJECTION_OF.items():
            params = weights.params()
            if other == step or params[w_other].shape != params[w].shape:
                continue
            params[w], params[b] = params[w_other], params[b_other]
            steps = pipeline_steps(x, params, **pipeline)
            if not close(reference[final], steps[final]):
                out.append(_Variant(MIXED_PROJECTION, f"the {step} are computed with "
                                    f"{w_other}, not {w}: {step} = self.{w}(x)",
                                    steps))
    return out


MIXED_PROJECTION = "projection_mixed_up"
"""The slug of one projection computed with another's weights."""
CONTEXT_FROM_KEYS = "context_from_keys"
"""The slug of the context computed as attn_weights @ keys, the values right."""


def _context_from_keys(weights: LearnerWeights, x: Tensor, pipeline: dict,
                       reference: dict) -> list[_Variant]:
    """The context line's slip, ``attn_weights @ keys`` (Listing 3.2 with keys for
    values): the values are computed right, the context from the keys. The same
    output as ``values = self.W_key(x)``, but with the reference's values."""
    params = weights.params()
    if params["W_key"].shape != params["W_value"].shape:
        return []
    params["W_value"], params["b_value"] = params["W_key"], params["b_key"]
    steps = pipeline_steps(x, params, **pipeline)
    final = [s for s in COMPARED if s in reference][-1]
    if close(reference[final], steps[final]):
        return []
    steps["values"] = reference["values"]
    return [_Variant(CONTEXT_FROM_KEYS, "the context is computed from the keys, not the values: "
                                        "context = attn_weights @ values", steps)]


def _blind(weights: LearnerWeights, x: Tensor, pipeline: dict, reference: dict) -> list[str]:
    """The classic mistakes these sizes and inputs cannot show, by slug: those
    whose output equals the reference's here (none at the check's default sizes,
    where d_in, d_out, head_dim and num_heads differ)."""
    final = [s for s in COMPARED if s in reference][-1]
    sizes = _sizes(weights, x.shape[-2], pipeline)
    blind = []
    for mistake in MISTAKES.values():
        if not mistake.applies(sizes):
            continue
        try:
            steps = mistaken_steps(mistake, sizes, x, weights.params(), **pipeline)
        except RuntimeError:
            continue
        if close(reference[final], steps[final]):
            blind.append(mistake.slug)
    return blind


def _blind_warning(blind: list[str]) -> list[str]:
    """`_blind`'s mistakes as the report's warning line (none when there are none)."""
    if not blind:
        return []
    return [f"at these sizes and inputs, these mistakes give the reference's own numbers, so "
            f"this check cannot show them: {', '.join(blind)}"]


def _diagnosis(explaining: list[_Variant]) -> str:
    """The first explaining mistake's diagnosis, and any other one that gives
    the same numbers (√d_out = d_k when d_out = 4 and head_dim = 2 ...)."""
    first, *others = explaining
    if not others:
        return first.diagnosis
    return first.diagnosis + "".join(f"; or, with the same numbers here: {v.diagnosis}"
                                     for v in others)


def _downstream(step: str, names: list[str]) -> list[str]:
    """The steps computed from ``step``: Q and K feed the scores, V only the
    context; every later step feeds the next."""
    if step in ("queries", "keys"):
        return names[names.index("attn_scores"):]
    if step == "values":
        return [s for s in ("context", "output") if s in names]
    return names[names.index(step) + 1:]


def _undone(names: list[str], found: dict[str, Tensor | None]) -> list[str]:
    """The steps with no match from which no matching step is computed: where
    the difference may lie. (A step without a match that feeds a matching one
    is right, only never computed on its own: masking before scaling skips
    the scaled scores.)"""
    return [s for s in names if found[s] is None and
            all(found[t] is None for t in _downstream(s, names))]


def _coincidental(step: str, variant: _Variant, reference: dict[str, Tensor],
                  names: list[str]) -> bool:
    """Whether a match of ``step`` is, in ``variant``'s story, another step's numbers:
    the variant differs from the reference at ``step``, and at another step it
    differs by computing ``step``'s reference numbers there (keys and values
    swapped: their values tensor holds the reference's keys)."""
    if step not in variant.steps or close(reference[step], variant.steps[step]):
        return False
    return any(other != step and other in variant.steps
               and variant.steps[other].shape == reference[step].shape
               and not close(reference[other], variant.steps[other])
               and close(reference[step], variant.steps[other]) for other in names)


_Located = tuple[str, Tensor | None, "_Variant | None", str]
"""(step, their tensor there, the mistake that explains it or None, its diagnosis)."""


def _locate(names: list[str], reference: dict[str, Tensor], found: dict[str, Tensor | None],
            variants: list[_Variant], lookup) -> _Located:
    """Where the learner's numbers first differ: (step, their tensor there, the
    mistake that explains it or None, its diagnosis). ``lookup(step)``: the
    `YourTensors` to search for that step.

    A decision table: the rules of `_Where` in this order, the first that
    finds a step deciding (each states its tie-breaks):

    1. `_Where.explained_output`: a mistake whose output equals theirs;
    2. `_Where.mistake_in_two`: a mistake seen in two or more of their new tensors;
    3. `_Where.kindred`, agreeing: their new tensor of a step's kind, equal in a cell;
    4. `_Where.kindred`, not agreeing: the nearest such tensor;
    5. else the last step and what forward returned (`_Where.last_step`).
    """
    where = _Where(names, reference, found, variants, lookup)
    return (where.explained_output() or where.mistake_in_two() or where.kindred(agreeing=True)
            or where.kindred(agreeing=False) or where.last_step())


@dataclass
class _Where:
    """The rules of `_locate`, over one check's steps and tensors."""

    names: list[str]
    reference: dict[str, Tensor]
    found: dict[str, Tensor | None]
    variants: list[_Variant]
    lookup: Any

    def explained_output(self) -> _Located | None:
        """A mistake whose output equals theirs (the first such of `_variants`'
        order): its first step that their tensors show and the reference's do
        not; the diagnosis names every such mistake."""
        final = self.names[-1]
        explaining = [v for v in self.variants
                      if self.lookup(final).find(final, v.steps[final]) is not None]
        agreeing = [v for v in explaining if self.agrees(v)]
        explaining = agreeing or explaining
        for variant in explaining[:1]:
            for step in self.names:
                theirs = None if step not in variant.steps or (
                    self.found[step] is not None
                    and not _coincidental(step, variant, self.reference, self.names)) \
                    else self.lookup(step).find(step, variant.steps[step])
                if theirs is not None:
                    return step, theirs, variant, _diagnosis(explaining)
        return None

    def agrees(self, variant: _Variant) -> bool:
        """Whether ``variant`` agrees with every step their code showed matching the
        reference: each such tensor of theirs is one the variant's story computes too,
        at some step. (Issue 45: their reference values rule out "values =
        self.W_key(x)", whose story never computes them, for a context computed from
        the keys; keys and values swapped computes both. Where no explaining mistake
        agrees, all are named, as before.)"""
        return all(any(t.shape == self.reference[s].shape and close(self.reference[s], t)
                       for t in variant.steps.values())
                   for s in self.names[:-1] if self.found[s] is not None)

    def mistake_in_two(self) -> _Located | None:
        """A mistake whose values, new ones (no step of the reference's), are
        theirs at two or more of the steps `_undone` (two mistakes at once: the
        first of `_variants`' is named), from the first of those steps."""
        for variant in self.variants:
            shown = [s for s in _undone(self.names, self.found) if s in variant.steps
                     and self.new(variant.steps[s])
                     and self.lookup(s).find(s, variant.steps[s]) is not None]
            if len(shown) >= 2:
                return (shown[0], self.lookup(shown[0]).find(shown[0], variant.steps[shown[0]]),
                        variant, variant.diagnosis)
        return None

    def kindred(self, agreeing: bool) -> _Located | None:
        """Unnamed: the first `_undone` step but the last for which they have a
        new tensor of its kind (`kind`); ``agreeing``: one equal to it in at
        least one cell, the most agreeing (the last made, what their next step
        used, among equals); else the nearest of all such tensors."""
        for step in _undone(self.names, self.found)[:-1]:
            options = [t for t in self.lookup(step).options(step, self.reference[step])
                       if self.new(t) and self.kind(t) == step
                       and (not agreeing or share_agreeing(self.reference[step], t))]
            if options:
                theirs = max(reversed(options), key=lambda t: share_agreeing(self.reference[step], t)) \
                    if agreeing else nearest(self.reference[step], options)
                return step, theirs, None, ""
        return None

    def last_step(self) -> _Located:
        """The last step, with the nearest of what forward returned."""
        step = self.names[-1]
        return step, nearest(self.reference[step],
                              self.lookup(step).options(step, self.reference[step])), None, ""

    def new(self, tensor: Tensor) -> bool:
        """Not equal to any step of the reference's."""
        return not any(close(self.reference[s], tensor) for s in self.names)

    def kind(self, tensor: Tensor) -> str:
        """The reference step of ``tensor``'s shape that it agrees with in the
        most cells (then: the least largest difference; then: the earliest)."""
        same_shape = [s for s in self.names if self.reference[s].shape == tensor.shape]
        return min(same_shape, key=lambda s: (-share_agreeing(self.reference[s], tensor),
                                              max_abs_diff(self.reference[s], tensor)))


def check_module(module: nn.Module, sentence: str | None = None, *, inputs: Any = None,
                 seed: int = 123, causal: bool | None = None, n_heads: int | None = None,
                 dropout_seed: int | None = None, timeout: float | None = TIMEOUT_S,
                 memory_mb: int | None = MEMORY_MB, interface: str = "api") -> CheckReport:
    """Compare a learner's attention module with the reference, step by step.

    ``module``: an ``nn.Module`` with the book's names (see
    `explorer.checker.learner.read_weights`), or a ``torch.nn.MultiheadAttention``.
    Inputs: ``inputs``, a tensor (n_tokens, d_in) or (b, n_tokens, d_in) (every
    batch item is checked), whose rows ``sentence`` may label; else
    ``sentence`` (default "Your journey starts with one step") embedded as the
    app does with ``seed`` (embedding="table"), or for the journey sentence with
    d_in = 3 the book's hand-picked vectors, as the book uses them. The forward
    gets a batch of two different sentences, X and a second one of the same
    length (`second_sentence`), (2, n, d_in); if that raises, X (n, d_in),
    then a batch of one. A module with a mask or heads that
    runs only without the batch is a difference (``mistake="no_batch"``, with
    the ``.T`` on a 3-D tensor named when that is the cause); SelfAttention_v1
    and v2, which the book runs on one sentence, get a note. ``interface``
    (``"api"``, ``"cli"``, ``"app"``): how the advice spells settings (`spell`).
    ``timeout`` (s) and ``memory_mb``: `explorer.checker.limits.limits` around the
    check (None: no limit).
    ``causal`` (None: read from the module, `assumptions`): compare with the
    causal mask or without it (for ``nn.MultiheadAttention``: pass the causal
    mask). ``n_heads`` (None: read from the module): the number of heads.
    The report's first line says what was assumed and why.
    ``dropout_seed``: compare with dropout on, in train() mode (see the module
    docstring).

    Reproduces the book's Listings 3.1-3.5 (scaled dot-product attention,
    Vaswani et al. 2017 eq. 1) with the module's own weights. Returns a
    `CheckReport`. Raises `CheckError` (a `ConfigError`) when the weights are not
    found by the book's names, the inputs do not fit, or the forward raises
    (with the last lines of its traceback), and `ConfigError` for sizes beyond
    the explorer's limits.
    """
    with limits(timeout, memory_mb, interface):
        return _check(module, sentence, inputs, seed, causal, n_heads, dropout_seed, interface)


def _check(module: nn.Module, sentence: str | None, inputs: Any, seed: int,
           causal: bool | None, n_heads: int | None, dropout_seed: int | None,
           interface: str) -> CheckReport:
    """`check_module` without its limits."""
    weights = read_weights(module, causal, n_heads)
    x, tokens, where = _inputs(weights.d_in, sentence, inputs, seed)
    second = None if inputs is not None else second_sentence(
        x, seed, _book_vectors(sentence, weights.d_in))
    n = x.shape[-2]
    dropout_on = _dropout_compared(weights, dropout_seed)

    def masks(batch: int) -> Tensor | None:
        return recipes.dropout_mask((batch, weights.n_heads, n, n), weights.dropout,
                                    dropout_seed) if dropout_on else None

    if inputs is None:
        x, second, where = _spread_inputs(weights, x, second, where)
    _validate(weights, x if second is None else torch.stack((x, second)), tokens)
    try:
        recording, x_run, how, batch_error = _record(module, x, second, weights, masks)
    except CheckError as error:
        return _mask_not_sliced(module, weights, error, x, tokens, interface)
    if n_heads is None and not weights.heads_known:
        weights = _heads_from_tensors(module, weights, causal, recording, x_run)
        if dropout_on and weights.n_heads > 1:
            recording, x_run, how, batch_error = _record(module, x, second, weights, masks)
    if recording.causal_seen and causal is None and not weights.causal:
        for reading in (weights, *weights.alternatives):
            reading.causal, reading.causal_why = True, recording.causal_seen
    if causal is None and not weights.causal and _behaves_causal(module, weights, x_run,
                                                                  recording, masks):
        for reading in (weights, *weights.alternatives):
            reading.causal, reading.causal_why = True, BEHAVES_CAUSAL
    h = weights.n_heads
    xb = x_run if x_run.dim() == 3 else x_run[None]  # the reference always has a batch axis
    batch = xb.shape[0]
    keep_masks = masks(batch)
    yours = YourTensors(recording.tensors, batch, h)
    returned = YourTensors([recording.output], batch, h)
    pipeline = {"n_heads": h, "causal": weights.causal,
                "dropout": weights.dropout if dropout_on else 0.0, "keep_mask": keep_masks}
    weights, reference, queries_read = _reading(module, weights, xb, yours, pipeline)
    pipeline["mask_first"] = _masks_first(reference, yours, pipeline)
    if pipeline["mask_first"]:
        reference = pipeline_steps(xb, weights.params(), **pipeline)
    names = [s for s in (MASK_FIRST if pipeline["mask_first"] else COMPARED) if s in reference]
    final = names[-1]

    def lookup(step: str) -> YourTensors:
        """Where to look for a step: in every tensor theirs made, but the last
        step only in what forward returned."""
        return returned if step == final else yours

    found = {s: lookup(s).find(s, reference[s]) for s in names}
    ok = found[final] is not None
    first = theirs = mistake = None
    diagnosis = ""
    story: dict[str, Tensor | None] = {}  # their tensor at a step, as the mistake tells it
    if not ok:
        variants = _variants(weights, xb, pipeline, reference, yours, interface)
        first, theirs, mistake, diagnosis = _locate(names, reference, found, variants, lookup)
        if mistake is not None:  # a step matched by another step's numbers is no match
            for s in names:
                if found[s] is not None and _coincidental(s, mistake, reference, names):
                    found[s] = None
                    story[s] = lookup(s).find(s, mistake.steps[s])

    results = _step_results(names, reference, found, first, theirs, lookup, story)
    n_values, worst = _matched_totals(results, reference)
    if theirs is not None and first is not None and theirs.shape != reference[first].shape:
        theirs = None  # (their output has another width: said in the difference's note)
    first_difference = None if first is None else _difference_at(
        first, reference[first], theirs, tokens, recording.output if first == final else None,
        second is not None)
    if first_difference is not None:
        first_difference.since = _since(first, names, found)
    notes = [note for note in (how, _dropout_note(weights, dropout_seed, dropout_on, interface))
             if note]
    slug = mistake.slug if mistake else None
    if not ok and slug is None and recording.dropped:
        slug, diagnosis = _dropout_elsewhere(recording.dropped, reference)
    if batch_error is not None:
        ok, slug, diagnosis = _batch_verdict(module, weights, batch_error, x_run,
                                             (ok, slug, diagnosis), notes)
    uncertain = "" if ok or slug is not None else _uncertain(module, weights, queries_read,
                                                               interface)
    blind = _blind(weights, xb, pipeline, reference)
    if ok and blind and inputs is None:
        ok, uncertain = False, _blind_sizes(weights, blind)
        first_difference = None
    if uncertain:
        results = [StepResult(r.step, UNSURE, r.max_difference) if r.status == DIFFERS else r
                   for r in results]
    return CheckReport(
        module=type(module).__name__, ok=ok, steps=results, first_difference=first_difference,
        diagnosis=diagnosis or None, mistake=slug, tokens=tokens,
        settings=_settings(weights, x_run, tokens, where, second is not None and
                           x_run.dim() == 3 and x_run.shape[0] == BATCH),
        notes=notes + recording.notes,
        warnings=hidden_steps(module, weights, n, interface) + _blind_warning(blind),
        n_values=n_values, max_difference=worst[0], worst_step=worst[1], uncertain=uncertain)


def _batch_verdict(module: nn.Module, weights: LearnerWeights, batch_error: CheckError,
                   x_run: Tensor, verdict: tuple[bool, str | None, str], notes: list[str]
                   ) -> tuple[bool, str | None, str]:
    """The verdict (ok, mistake slug, diagnosis) once the book's batch failed
    where one sentence ran (`_batch_outcome`): code that passes one sentence but
    is wrong on a batch is no pass (`NO_BATCH`); otherwise the batch's failure
    is the first of ``notes``."""
    wrong, text = _batch_outcome(module, weights, batch_error, x_run)
    if wrong and verdict[0]:
        return False, NO_BATCH, text
    notes.insert(0, text)
    return verdict


def _dropout_compared(weights: LearnerWeights, dropout_seed: int | None) -> bool:
    """Whether dropout is compared on, with masks drawn from ``dropout_seed``:
    in train mode with p > 0 and a seed, and not inside nn.MultiheadAttention,
    which draws its dropout in one function where no masks can be handed in."""
    return (weights.training and weights.dropout > 0 and dropout_seed is not None
            and weights.torch_mha is None and weights.inner_mha is None)


def _heads_from_tensors(module: nn.Module, weights: LearnerWeights, causal: bool | None,
                        recording: Recording, x_run: Tensor) -> LearnerWeights:
    """The head count when the module names none: the head axis of the first
    tensor of the scores' shape its forward made, (b, num_heads, n, n) or
    (b·num_heads, n, n) ((b, n, n): one head). The weights read again with
    it; as read (one head, ``heads_known`` False) when no such tensor shows one."""
    b, n = (x_run.shape[0] if x_run.dim() == 3 else 1), x_run.shape[-2]
    for t in recording.tensors:
        if tuple(t.shape[-2:]) != (n, n) or t.dim() not in (2, 3, 4):
            continue
        if t.dim() == 2:
            if x_run.dim() == 3:  # a mask made in forward, not scores
                continue
            h, shape = 1, tuple(t.shape)
        elif t.dim() == 4 and t.shape[0] == b:
            h, shape = t.shape[1], tuple(t.shape)
        elif t.dim() == 3 and t.shape[0] % b == 0:
            h, shape = t.shape[0] // b, tuple(t.shape)
        else:
            continue
        try:
            read = read_weights(module, causal, h)
        except CheckError:
            continue
        read.heads_why = f"the head axis seen in forward's {shape} scores"
        for reading in read.alternatives:
            reading.heads_why = read.heads_why
        return read
    return weights


def _masks_first(reference: dict[str, Tensor], yours: YourTensors, pipeline: dict) -> bool:
    """Whether the learner's code masks the scores before it scales them (the
    book's order) rather than after: the order in which more steps match; when
    as many do, the order the first new tensor of the scores' shape made after
    the scores follows: agreeing with the scores as they are in more cells
    (masked, unscaled) than with the scaled scores."""
    if not pipeline["causal"]:
        return False
    scores, scaled = reference["attn_scores"], reference["scaled_scores"]
    masked_first = _masked_unscaled(reference)
    after = sum(yours.find(s, reference[s]) is not None for s in ("scaled_scores", "masked_scores"))
    before = sum(yours.find(s, t) is not None for s, t in
                 (("masked_scores", masked_first), ("scaled_scores", reference["masked_scores"])))
    if before != after:
        return before > after
    whole, _ = yours.candidates("attn_scores", tuple(scores.shape))
    for _, t in whole:
        if close(scores, t) or close(scaled, t) or close(reference["masked_scores"], t):
            continue
        plain, divided = share_agreeing(scores, t), share_agreeing(scaled, t)
        if plain != divided:
            return plain > divided
    return False


def _masked_unscaled(reference: dict[str, Tensor]) -> Tensor:
    """The scores masked before they are scaled, as the book computes them:
    the reference's scores with −∞ where its masked scores have it."""
    hidden = reference["masked_scores"] == -math.inf
    return reference["attn_scores"].masked_fill(hidden, -math.inf)


def _since(first: str, names: list[str], found: dict[str, Tensor | None]) -> str | None:
    """The earliest step before ``first`` that their code never computes on its
    own and from which ``first`` is computed: the difference may start there."""
    for step in names[:names.index(first)]:
        if found[step] is None and first in _downstream(step, names) and \
                all(found[t] is None for t in _downstream(step, names)
                    if names.index(t) < names.index(first)):
            return step
    return None


def _dropout_elsewhere(shapes: list[tuple[int, ...]], reference: dict[str, Tensor]
                       ) -> tuple[str | None, str]:
    """Dropout applied to a tensor that is not the attention weights (the values,
    the context, the output): (slug, diagnosis), or (None, "") when every
    dropout call was on the weights' shape."""
    weights_shape = tuple(reference["attn_weights"].shape[-2:])
    other = [shape for shape in shapes if tuple(shape[-2:]) != weights_shape]
    if not other:
        return None, ""
    return DROPOUT_ELSEWHERE, (f"dropout is applied to a tensor of shape {other[0]}, not to "
                               f"the attention weights (…, {weights_shape[0]}, "
                               f"{weights_shape[1]}): the book drops attention weights, "
                               "attn_weights = self.dropout(attn_weights), after softmax")


DROPOUT_ELSEWHERE = "dropout_elsewhere"
"""The slug of dropout applied to another tensor than the attention weights."""


def _uncertain(module: nn.Module, weights: LearnerWeights, queries_read: bool,
               interface: str) -> str:
    """Why a difference may be the check's misreading rather than the code's
    mistake ("" when the reading is sure): a head count guessed, parameters
    that were not placed, a fused layer whose queries are in none of the
    layouts tried."""
    reasons = []
    if not weights.heads_known:
        reasons.append(f"no head count was found (no {', '.join(HEAD_ATTRIBUTES)} attribute "
                       "on it or its config, no head axis in the tensors forward makes), so 1 "
                       f"was assumed; say how many with {spell(interface, n_heads='N')}")
    unread = unread_parameters(module, weights)
    if unread:
        reasons.append(f"the check could not place {', '.join(unread[:4])}"
                       f"{' …' if len(unread) > 4 else ''}: they may change the output in a "
                       "way it does not compute")
    if weights.fused and not queries_read:
        reasons.append("none of the layouts tried for the fused layer's columns gives the "
                       "queries your forward computes")
    return "; ".join(reasons)


def _matched_totals(results: list[StepResult], reference: dict[str, Tensor]
                    ) -> tuple[int, tuple[float, str]]:
    """The numbers compared in the matching steps, and the largest difference
    with its step ((0.0, "") when none matched)."""
    matched = [r for r in results if r.status == MATCH]
    return (sum(reference[r.step].numel() for r in matched),
            max(((r.max_difference, r.step) for r in matched), default=(0.0, "")))


def _reading(module: nn.Module, weights: LearnerWeights, xb: Tensor, yours: YourTensors,
             pipeline: dict[str, Any]) -> tuple[LearnerWeights, dict[str, Tensor], bool]:
    """The reading of the module's weights its forward computes, the reference
    steps of it (scaling before masking), and whether its queries were seen:
    the weights as read, then each other reading of them (a fused layer's other
    layouts, square parameters used as x @ W.T): the first whose queries the
    forward computed (else the first reading)."""
    for candidate in (weights, *weights.alternatives):
        _found_biases(module, candidate, xb, yours)
        reference = pipeline_steps(xb, candidate.params(), **pipeline)
        if yours.find("queries", reference["queries"]) is not None:
            return candidate, reference, True
    return weights, pipeline_steps(xb, weights.params(), **pipeline), False


def _step_results(names: list[str], reference: dict[str, Tensor],
                  found: dict[str, Tensor | None], first: str | None, theirs: Tensor | None,
                  lookup, story: dict[str, Tensor | None] | None = None) -> list[StepResult]:
    """Each step's verdict: matched (with the largest difference), differs (from
    the first difference on, with their nearest tensor's difference, or the one
    the named mistake's ``story`` puts there), or not seen (before it, or a step
    whose tensor they never made)."""
    story = story or {}
    results, undone = [], _undone(names, found)
    for i, s in enumerate(names):
        if found[s] is not None:
            results.append(StepResult(s, MATCH, max_abs_diff(reference[s], found[s])))
        elif first is None or s not in undone or i < names.index(first):
            results.append(StepResult(s, NOT_SEEN))
        else:
            closest = theirs if s == first else story[s] if story.get(s) is not None else \
                nearest(reference[s], lookup(s).options(s, reference[s]))
            results.append(StepResult(s, DIFFERS, None if closest is None or
                                      closest.shape != reference[s].shape
                                      else max_abs_diff(reference[s], closest)))
    return results


def reference_steps(module: nn.Module, inputs: Any, *, causal: bool | None = None,
                    n_heads: int | None = None) -> dict[str, Tensor]:
    """The reference's steps for ``module``'s weights on ``inputs``, as
    `check_module` compares them (dropout off).

    inputs: (n, d_in) -> steps without a batch axis, or (b, n, d_in) -> with it;
    per-head steps (n_heads, n, ·) drop their head axis for a single head, as in
    `explorer.core.trace.compute_trace`: queries (n, d_k), attn_weights (n, n),
    context (n, d_v), output (n, d_out). Raises `CheckError` as `check_module`.
    """
    weights = read_weights(module, causal, n_heads)
    x, _, _ = _inputs(weights.d_in, None, inputs, 0)
    xb = x if x.dim() == 3 else x[None]
    steps = attention_steps(xb, weights.params(), n_heads=weights.n_heads, causal=weights.causal)
    out = {}
    for name in (s for s in COMPARED if s in steps):
        tensor = steps[name] if x.dim() == 3 else steps[name][0]
        single_head = weights.n_heads == 1 and name not in ("context", "output")
        out[name] = tensor.squeeze(-3) if single_head else tensor
    return out
