"""How attention learns: the backward pass of `explorer.core.trace.compute_trace`,
every gradient derived by hand (pure torch, no autograd) and checked against
``torch.autograd.grad`` (issue 38). One module per part, in the order a page
shows them:

- `settings`: the loss and training settings, their limits and choices (one place);
- `loss`: the loss a learner understands (next-token cross-entropy through a
  fixed unembedding, or the squared distance to a target context) and dL/dO;
- `gradients`: one function per gradient step, and `gradients.backward`,
  which chains them from dL/dO back to dL/dX;
- `check`: the same gradients by ``torch.autograd.grad``, and the largest
  difference of each;
- `terms`: the terms behind one cell of a gradient (click-to-explain);
- `training`: a few steps of SGD or AdamW on the hand-derived gradients;
- `saturation`: why √d_k, from the gradient's side.

FlashAttention-2's backward pass, tile by tile, builds on the modern page's
forward pass, so it lives beside it: `explorer.modern.flash_backward`.

Torch only: no Streamlit, Plotly or pandas. Modules are imported by their own
name (``from explorer.lessons.backward.gradients import backward``), so that
this package's import loads nothing.
"""
