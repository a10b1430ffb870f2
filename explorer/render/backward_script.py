"""Take the backward pass home: a standalone PyTorch script (issue 38).

`backward_script(config, loss_config)` writes a script that imports only
torch (and argparse). It runs the forward pass exactly as the forward pages'
script does (`explorer.render.export.pytorch_script`, included unchanged:
the same tokens, seeds and steps, printed), then:

1. the loss (`explorer.lessons.backward.loss`): next-token cross-entropy
   through the unembedding ``torch.manual_seed(seed); nn.Linear(d, V,
   bias=False)`` (the book's ``out_head``, Listing 4.7), or the squared
   distance to ``torch.randn(n, d)`` of the target's own generator;
2. every gradient by hand, from its formula, with torch's tensor operations
   only (`explorer.lessons.backward.gradients.backward`'s rules, in the same
   order), each printed under ``--- dL/d<step> (shape) ---``;
3. the forward pass again with ``requires_grad``, ``loss.backward()``, and
   for every gradient the largest |hand − autograd|, printed one per line
   (`CHECK_LINE`) with ``ok`` or ``DIFFERENT``; the script exits with status 1
   if any differs.

``--save FILE`` saves ``{"steps", "gradients", "loss", "differences"}``
with ``torch.save``. Visitor text (the sentence, the link) enters the script
only as the forward script puts it (a ``repr()`` literal or a one-line comment).
"""

from __future__ import annotations

from explorer.core.config import AttentionConfig
from explorer.lessons.backward.check import TOLERANCE
from explorer.lessons.backward.loss import IGNORE_INDEX
from explorer.lessons.backward.settings import NEXT_TOKEN, LossConfig
from explorer.render.export import pytorch_script

SCRIPT_FILE = "backward.py"
JSON_FILE = "gradients.json"
GRADIENT_HEADING = "--- dL/d{name} {shape} ---"
"""How the script heads each printed gradient, e.g. ``--- dL/dqueries (2, 6, 1) ---``."""
LOSS_LINE = "loss = {value:.6f}"
"""How the script prints the loss (the page writes it with the same six decimals)."""
CHECK_LINE = "{name:<16} max |hand - autograd| = {diff:.3e}  {verdict}"
"""One line of the script's check, per gradient."""

_HEADER = [
    "# The backward pass of scaled dot-product attention: every gradient by hand,",
    "# in plain PyTorch, checked against loss.backward(). Written by the",
    "# self-attention explorer's Backward pass page.",
    "#",
    "#   python backward.py                  prints the forward pass, the loss, every",
    "#                                       gradient and its check against autograd",
    "#   python backward.py --save grads.pt  also saves them: torch.load('grads.pt') is a",
    "#                                       dict: steps, gradients, loss, differences",
    "#",
    "# The forward pass below is the explorer's attention.py for the same settings.",
    "",
]


def _loss_code(config: AttentionConfig, loss_config: LossConfig) -> list[str]:
    """The loss on the output rows, and dL/d(rows), by hand."""
    rows = "output" if config.has_out_proj else "context"
    lines = ["# ---------------------------------------------------------------------------",
             "# The loss, and where the backward pass starts: dL/dO",
             "# ---------------------------------------------------------------------------",
             "torch.set_grad_enabled(False)  # every gradient below is computed by hand",
             f'rows = steps["{rows}"]  # O: the rows the loss reads',
             "n_rows, width = rows.shape"]
    if loss_config.loss == NEXT_TOKEN:
        lines += [
            "# Next-token prediction: a fixed unembedding U, drawn as the book's out_head",
            "# (Listing 4.7) after torch.manual_seed(seed), logits over the vocabulary, and the",
            "# cross-entropy of each position's next token (the last one has none: -100)",
            f"torch.manual_seed({config.seed})",
            "U = torch.nn.Linear(width, len(vocab), bias=False).weight.detach().T  # (d, V)",
            f"targets = torch.full_like(sentence_int, {IGNORE_INDEX})",
            "targets[:-1] = sentence_int[1:]",
            f"kept = targets != {IGNORE_INDEX}",
            "logits = rows @ U  # (n, V)",
            "log_p = torch.log_softmax(logits, dim=-1)",
            "loss = -log_p[kept].gather(1, targets[kept, None]).mean()",
            "# dL/dlogits = (softmax(logits) - onehot(target)) / N, 0 for the last position",
            "onehot = torch.zeros_like(logits)",
            "onehot[kept, targets[kept]] = 1.0",
            "d_logits = (log_p.exp() - onehot) * kept[:, None] / kept.sum()",
            "d_rows = d_logits @ U.T  # dL/dO = dL/dlogits U^T",
        ]
    else:
        seed = loss_config.seed_of_target(config)
        lines += [
            "# The squared distance to a target context T from its own generator",
            f"T = torch.randn(n_rows, width, generator=torch.Generator().manual_seed({seed}))",
            "loss = ((rows - T) ** 2).mean()",
            "d_rows = 2 * (rows - T) / rows.numel()  # dL/dO",
        ]
    return [*lines, f'print("\\n{LOSS_LINE}".format(value=float(loss)))']


def _by_hand_code(config: AttentionConfig) -> list[str]:
    """Every gradient from its formula, with a head axis throughout."""
    c = config
    heading = GRADIENT_HEADING.format(name="{name}", shape="{tuple(tensor.shape)}")
    lines = [
        "# ---------------------------------------------------------------------------",
        "# Every gradient by hand, backwards (each step: Y = A B gives dA = dY B^T, dB = A^T dY)",
        "# ---------------------------------------------------------------------------",
        f"H = {c.n_heads}  # heads",
        "grads = {}  # step name -> dL/d(step), shaped as the step",
        "",
        "",
        "def heads(t):",
        '    """A per-head step with its head axis (H, n, .), also for one head."""',
        "    return t if t.dim() == 3 else t[None]",
        "",
        "",
        "def side_by_side(t):",
        '    """(H, n, w) -> (n, H*w): the heads side by side, as the context is."""',
        "    return t.transpose(0, 1).reshape(t.shape[1], -1)",
        "",
        "",
        "def split(t):",
        '    """(n, H*w) -> (H, n, w): each head its columns."""',
        "    return t.view(t.shape[0], H, -1).transpose(0, 1)",
        "",
        "",
        "d = d_rows",
    ]
    if c.has_out_proj:
        lines += ["# Output projection O = Z W_out + b_out",
                  'grads["output"] = d',
                  'grads["W_out"] = steps["context"].T @ d  # Z^T dO',
                  'grads["b_out"] = d.sum(dim=0)  # b_out is added to every row',
                  'd = d @ steps["W_out"].T  # dZ = dO W_out^T']
    mixing = "dropped_weights" if c.dropout > 0 else "attn_weights"
    source = "masked_scores" if c.causal else "scaled_scores"
    lines += ['grads["context"] = d',
              "# Context Z = alpha V, per head",
              "d_context = split(d)",
              f'grads["values"] = heads(steps["{mixing}"]).transpose(-2, -1) @ d_context'
              "  # alpha^T dZ",
              'd_weights = d_context @ heads(steps["values"]).transpose(-2, -1)  # dZ V^T']
    if c.dropout > 0:
        lines += ["# Dropout: a dropped weight gets no gradient, a kept one is scaled by 1/(1-p)",
                  'grads["dropped_weights"] = d_weights',
                  f'd_weights = d_weights * heads(steps["dropout_mask"]) / (1 - {c.dropout!r})']
    lines += ['grads["attn_weights"] = d_weights',
              'alpha = heads(steps["attn_weights"])',
              "row_sum = (alpha * d_weights).sum(dim=-1, keepdim=True)  # rowsum(alpha * dalpha)"]
    if c.normalization == "sum":
        lines += ["# alpha = w / rowsum(w): dL/dw = (dalpha - rowsum(alpha * dalpha)) / rowsum(w)",
                  f'w = heads(steps["{source}"])',
                  'masked = w == float("-inf")',
                  "total = w.masked_fill(masked, 0.0).sum(dim=-1, keepdim=True)",
                  "d_scores = ((d_weights - row_sum) / total).masked_fill(masked, 0.0)"]
    else:
        lines += ["# Softmax: dL/dw = alpha * (dalpha - rowsum(alpha * dalpha)), the Jacobian",
                  "# diag(alpha) - alpha alpha^T of each row applied to its dalpha",
                  "d_scores = alpha * (d_weights - row_sum)"]
    lines.append(f'grads["{source}"] = d_scores')
    if c.causal:
        lines += ["# The causal mask: a masked score (-inf) has no effect, so no gradient",
                  'd_scores = d_scores.masked_fill(steps["causal_mask"], 0.0)',
                  'grads["scaled_scores"] = d_scores']
    if c.scale:
        lines += ["# The scaling omega / sqrt(head_dim)",
                  'd_scores = d_scores / heads(steps["keys"]).shape[-1] ** 0.5']
    lines += ['grads["attn_scores"] = d_scores',
              "# Scores omega = Q K^T",
              'grads["queries"] = d_scores @ heads(steps["keys"])  # domega K',
              'grads["keys"] = d_scores.transpose(-2, -1) @ heads(steps["queries"])  # domega^T Q',
              "# The weights: head h's gradient lands in the columns it was cut from",
              'X = steps["embeddings"]',
              "d_x = torch.zeros_like(X)",
              'for step, weight, bias in (("queries", "W_query", "b_query"), '
              '("keys", "W_key", "b_key"),',
              '                           ("values", "W_value", "b_value")):',
              "    d_projected = side_by_side(grads[step])",
              "    grads[weight] = X.T @ d_projected  # X^T dQ",
              "    if bias in steps:",
              "        grads[bias] = d_projected.sum(dim=0)",
              "    d_x = d_x + d_projected @ steps[weight].T  # one of X's three paths",
              'grads["embeddings"] = d_x',
              "if H == 1:  # one head is shown without its head axis, as in the forward pass",
              "    grads = {name: g[0] if g.dim() == 3 else g for name, g in grads.items()}",
              "for name, tensor in grads.items():",
              f'    print(f"\\n{heading}")',
              "    print(tensor)"]
    return lines


def _autograd_code(config: AttentionConfig, loss_config: LossConfig) -> list[str]:
    """The forward pass again with requires_grad, loss.backward(), and the check."""
    c = config
    source = "masked" if c.causal else "scaled"
    if c.normalization == "softmax":
        weights = f"torch.softmax({source}, dim=-1)"
    elif c.normalization == "naive_softmax":
        weights = f"torch.exp({source}) / torch.exp({source}).sum(dim=-1, keepdim=True)"
    else:
        weights = ("unmasked / unmasked.sum(dim=-1, keepdim=True)")
    lines = [
        "# ---------------------------------------------------------------------------",
        "# The same gradients by autograd: the forward pass again, then loss.backward()",
        "# ---------------------------------------------------------------------------",
        "torch.set_grad_enabled(True)",
        "leaves = {name: steps[name].detach().clone().requires_grad_(True) for name in",
        '          ("embeddings", "W_query", "W_key", "W_value", "b_query", "b_key", "b_value",',
        '           "W_out", "b_out") if name in steps}',
        "found = dict(leaves)  # step name -> the tensor whose .grad autograd fills",
        "",
        "",
        "def keep(name, tensor):",
        '    """Ask autograd to keep the gradient of an intermediate step."""',
        "    tensor.retain_grad()",
        "    found[name] = tensor",
        "    return tensor",
        "",
        "",
        'x = leaves["embeddings"]',
        "projected = {}",
        'for step, weight, bias in (("queries", "W_query", "b_query"), ("keys", "W_key", "b_key"),',
        '                           ("values", "W_value", "b_value")):',
        "    p = x @ leaves[weight] + (leaves[bias] if bias in leaves else 0)",
        "    projected[step] = keep(step, split(p))",
        'q, k, v = projected["queries"], projected["keys"], projected["values"]',
        'scores = keep("attn_scores", q @ k.transpose(-2, -1))',
        ('scaled = keep("scaled_scores", scores / k.shape[-1] ** 0.5)' if c.scale else
         'scaled = keep("scaled_scores", scores * 1.0)'),
    ]
    if c.causal:
        lines.append('masked = keep("masked_scores", scaled.masked_fill(steps["causal_mask"], '
                     '-torch.inf))')
        if c.normalization == "sum":
            lines.append('unmasked = masked.masked_fill(steps["causal_mask"], 0.0)')
    elif c.normalization == "sum":
        lines.append("unmasked = scaled")
    lines.append(f'alpha = keep("attn_weights", {weights})')
    mixing = "alpha"
    if c.dropout > 0:
        lines.append(f'dropped = keep("dropped_weights", alpha * heads(steps["dropout_mask"]) '
                     f'/ (1 - {c.dropout!r}))')
        mixing = "dropped"
    lines.append(f'context = keep("context", side_by_side({mixing} @ v))')
    rows = "context"
    if c.has_out_proj:
        lines.append('output = keep("output", context @ leaves["W_out"] + leaves["b_out"])')
        rows = "output"
    if loss_config.loss == NEXT_TOKEN:
        lines.append(f"reference = torch.nn.functional.cross_entropy({rows} @ U, targets, "
                     f"ignore_index={IGNORE_INDEX})")
    else:
        lines.append(f"reference = torch.nn.functional.mse_loss({rows}, T)")
    lines += [
        "reference.backward()",
        "",
        "",
        "def largest_difference(ours, theirs):",
        '    """max |ours - theirs|; equal non-finite values (both nan, both -inf) count as 0."""',
        "    ours, theirs = ours.double(), theirs.double()",
        "    same = (ours == theirs) | (ours.isnan() & theirs.isnan())",
        "    diff = torch.where(same, torch.zeros_like(ours), (ours - theirs).abs())",
        '    return float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0',
        "",
        "",
        'print("\\nThe check: every hand-derived gradient against loss.backward()")',
        "differences = {\"loss\": abs(float(loss) - float(reference.detach()))}",
        "for name, ours in grads.items():",
        "    theirs = found[name].grad",
        "    if H == 1 and theirs.dim() == 3:",
        "        theirs = theirs[0]",
        "    differences[name] = largest_difference(ours, theirs)",
        "failed = []",
        "for name, diff in differences.items():",
        "    theirs = found[name].grad if name in found else reference.detach()",
        "    finite = theirs[theirs.isfinite()]",
        "    largest = float(finite.abs().max()) if finite.numel() else 0.0",
        f"    ok = diff <= {TOLERANCE!r} * max(1.0, largest)",
        "    failed += [] if ok else [name]",
        f'    print("{CHECK_LINE}".format(name=name, diff=diff, '
        'verdict="ok" if ok else "DIFFERENT"))',
        "if args.save:",
        "    torch.save({\"steps\": steps, \"gradients\": grads, \"loss\": float(loss),",
        "                \"differences\": differences}, args.save)",
        '    print(f"\\nsaved the steps, {len(grads)} gradients and the check to {args.save}")',
        "if failed:",
        '    raise SystemExit(f"these gradients differ from autograd: {\', \'.join(failed)}")',
    ]
    return lines


def backward_script(config: AttentionConfig, loss_config: LossConfig = LossConfig(),
                    link: str | None = None) -> str:
    """The standalone script of ``config``'s backward pass for ``loss_config``
    (see the module docstring); ``link``: the page's link, written as a comment
    of the forward script's header. Returns the source as a string."""
    parts = [_loss_code(config, loss_config), _by_hand_code(config),
             _autograd_code(config, loss_config)]
    backward_part = "\n\n".join("\n".join(lines) for lines in parts)
    return "\n".join(_HEADER) + "\n" + pytorch_script(config, link=link) + "\n\n" + \
        backward_part + "\n"
