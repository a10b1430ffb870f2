"""The backward pass: every gradient of the attention, derived by hand and
checked against autograd; training; why √d_k; FlashAttention's backward (issue 38)."""

from explorer.lessons.pages import BACKWARD_PAGE
from explorer.ui.backward import INTRO, draw
from explorer.ui.render import step_page

step_page(BACKWARD_PAGE, INTRO, draw)
