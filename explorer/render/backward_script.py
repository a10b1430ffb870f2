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
from explorer.render.script_templates import template

SCRIPT_FILE = "backward.py"
JSON_FILE = "gradients.json"
GRADIENT_HEADING = "--- dL/d{name} {shape} ---"
"""How the script heads each printed gradient, e.g. ``--- dL/dqueries (2, 6, 1) ---``."""
LOSS_LINE = "loss = {value:.6f}"
"""How the script prints the loss (the page writes it with the same six decimals)."""
CHECK_LINE = "{name:<16} max |hand - autograd| = {diff:.3e}  {verdict}"
"""One line of the script's check, per gradient."""

def _blocks(config: AttentionConfig, loss_config: LossConfig) -> list[list[str]]:
    """The blocks of the template ``backward.py`` that the settings need: the loss,
    every gradient by hand, the same by autograd and the check."""
    c = config
    next_token = loss_config.loss == NEXT_TOKEN
    unmask = ["autograd_unmask_causal" if c.causal else "autograd_unmask"] * \
        (c.normalization == "sum")
    return [
        ["loss", "loss_next_token" if next_token else "loss_target", "loss_print"],
        ["by_hand", *["by_hand_out_proj"] * c.has_out_proj, "by_hand_context",
         *["by_hand_dropout"] * (c.dropout > 0), "by_hand_weights",
         "by_hand_sum" if c.normalization == "sum" else "by_hand_softmax", "by_hand_scores",
         *["by_hand_causal"] * c.causal, *["by_hand_scale"] * c.scale, "by_hand_qkv"],
        ["autograd", "autograd_scale" if c.scale else "autograd_no_scale",
         *["autograd_causal"] * c.causal, *unmask, f"autograd_{c.normalization}",
         *["autograd_dropout"] * (c.dropout > 0), "autograd_context",
         *["autograd_out_proj"] * c.has_out_proj,
         "autograd_next_token" if next_token else "autograd_target", "check"]]


def backward_script(config: AttentionConfig, loss_config: LossConfig = LossConfig(),
                    link: str | None = None) -> str:
    """The standalone script of ``config``'s backward pass for ``loss_config``
    (see the module docstring); ``link``: the page's link, written as a comment
    of the forward script's header. Returns the source as a string.

    The text is the template ``explorer/render/scripts/backward.py``
    (`explorer.render.script_templates`): `_blocks` picks its blocks after the
    forward script (`explorer.render.export.pytorch_script`)."""
    c = config
    blocks = template("backward")
    values = {
        "rows": "output" if c.has_out_proj else "context", "seed": c.seed,
        "ignore_index": IGNORE_INDEX, "loss_line": LOSS_LINE, "n_heads": c.n_heads,
        "mixing": "dropped_weights" if c.dropout > 0 else "attn_weights", "p": repr(c.dropout),
        "source": "masked_scores" if c.causal else "scaled_scores",
        "s": "masked" if c.causal else "scaled", "a": "dropped" if c.dropout > 0 else "alpha",
        "gradient_heading": GRADIENT_HEADING.format(name="{name}",
                                                    shape="{tuple(tensor.shape)}"),
        "tolerance": repr(TOLERANCE), "check_line": CHECK_LINE}
    if loss_config.loss != NEXT_TOKEN:
        values["target_seed"] = loss_config.seed_of_target(c)
    backward_part = "\n\n".join("\n".join(blocks[name].fill(**values) for name in part)
                                for part in _blocks(c, loss_config))
    return blocks["header"].fill() + "\n\n" + pytorch_script(c, link=link) + "\n\n" + \
        backward_part + "\n"
