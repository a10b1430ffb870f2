"""Experiments: why √d_k, temperature, softmax's dim, permutation, compare."""

from explorer.presets import EXPERIMENTS_PAGE
from explorer.ui import experiments, urlstate
from explorer.ui.render import page_header
from explorer.ui.sidebar import settings

page_header(
    EXPERIMENTS_PAGE,
    "Poke at attention and watch what changes. Each tab asks one question learners ask "
    "most, using the sentence and sizes from the sidebar.",
)
view = settings(EXPERIMENTS_PAGE, view=(urlstate.EXPERIMENT,),
                view_checks={urlstate.EXPERIMENT: experiments.check_tab})
if view is not None:
    experiments.tabs(view.trace)
