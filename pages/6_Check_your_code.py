"""Check your code: a learner's own attention class against the reference, step by step."""

from explorer.lessons.pages import CHECK_PAGE
from explorer.ui import checking
from explorer.ui.render import page_header

page_header(
    CHECK_PAGE,
    "Wrote `SelfAttention_v1`, `CausalAttention` or `MultiHeadAttention` yourself and got a "
    "number that differs from the book's? Paste your class: the explorer builds it as the "
    "book does (after `torch.manual_seed`), runs it on the sentence, records every tensor "
    "its `forward` makes, and compares each step with its own computation from **your** "
    "weights. It shows the first step where your code goes its own way and names the "
    "classic mistake when one explains it (softmax over the wrong dim, scaling by d_k, the "
    "mask after the softmax …).",
)
request = checking.settings()
if request is not None:
    outcome = checking.result(request)
    if outcome is not None:
        checking.report(outcome)
