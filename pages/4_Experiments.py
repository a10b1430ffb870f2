"""Experiments: why √d_k, temperature, softmax's dim, permutation, compare."""

from explorer.lessons.pages import EXPERIMENTS_PAGE
from explorer.ui.cache import drawing
from explorer.ui.experiments import experiments
from explorer.ui.render import page_header
from explorer.ui.sidebar import settings

page_header(
    EXPERIMENTS_PAGE,
    "Poke at attention and watch what changes. Each experiment asks one question learners "
    "ask most, using the sentence and sizes from the sidebar; pick one below.",
)
with drawing(EXPERIMENTS_PAGE):  # its traces counted from the first on: they wait their turn
    view = settings(EXPERIMENTS_PAGE)
    if view is not None:
        experiments(view)
