"""Self-attention with trainable weights (seeds 002 and 004, book §3.4)."""

from explorer.core.steps import visible_steps
from explorer.lessons.pages import SELF_ATTENTION_PAGE
from explorer.ui.lessons import softmax_overflow
from explorer.ui.render import query_picker, step_charts, step_page
from explorer.ui.state import View

INTRO = (
    "Scaled dot-product attention with **trainable weights**, as in section 3.4 of "
    "*Build a Large Language Model (From Scratch)* and Vaswani et al. (2017): "
    "three weight matrices project the embeddings X into queries Q, keys K and values V; "
    "the scores Q·Kᵀ are divided by √d_k, softmax turns each row into weights, and the "
    "context vectors are the weighted sums of the values. Each matrix below is drawn "
    "with its formula; hover or tap a cell to read its value, click it to see how it was computed."
)


def draw(view: View) -> None:
    query_picker(view, "Highlight a query token in every chart")
    step_charts(view, visible_steps(view.trace))
    softmax_overflow(view)


step_page(SELF_ATTENTION_PAGE, INTRO, draw)
