"""Home page of the self-attention explorer: `streamlit run streamlit_app.py`."""

import streamlit as st

from explorer.core import literal
from explorer.core.config import AttentionConfig
from explorer.core.tokenizer import RULE
from explorer.lessons import pages
from explorer.ui.presets import gallery
from explorer.ui.render import page_header, token_table
from explorer.ui.sidebar import settings


def page_list() -> str:
    """Every page of the catalogue but Home, in menu order, with what it shows."""
    return "\n".join(f"   - **{literal.markdown(page.name)}**: {page.summary}"
                     for page in pages.CATALOGUE if page is not pages.HOME)


DEFAULTS = AttentionConfig()
page_header(
    "Self-attention explorer",
    "See **every intermediate matrix of self-attention** for a sentence you type: "
    "the embeddings, the query/key/value projections, the scores, the softmax weights "
    "and the context vectors, each as an interactive heatmap.",
)
st.markdown(
    f"""
**How to use it**

1. The settings are in the sidebar (on a phone it is folded away: open it with the **»**
   button at the top left). Type a sentence and pick the sizes there: `d_in` (embedding
   width), `d_k` (query/key width), `d_v` (value width) and a `seed`. The *Advanced*
   section chooses how X and the weights are drawn, scaling and the normalisation.
2. Open a page from the sidebar's menu:
{page_list()}
3. Hover or tap any cell to read its value; **click it to see how it was computed**. The
   settings stay as you move between pages, and the link in the sidebar reproduces
   exactly what you see.

The defaults ("{literal.markdown(DEFAULTS.sentence)}", d_in={DEFAULTS.d_in},
d_k={DEFAULTS.d_k}, d_v={DEFAULTS.d_v}, seed={DEFAULTS.seed}) follow the teaching notebook
"Embedding an input sentence": an `nn.Embedding(50000, 3)` table, then the weights with
`torch.randn`, after `torch.manual_seed(123)`. The book's chapter 3 itself uses the
hand-picked vectors of "Your journey starts with one step" and draws its weights with
`torch.rand`: the worked examples below load those (*Hand-picked vectors, no weights* and
*SelfAttention_v1*).
"""
)
view = settings(pages.HOME_PAGE)

st.subheader("Start from a worked example")
st.caption("Each example loads the exact setup of a book section or teaching notebook; "
           "while you leave it unchanged, the page checks every number it prints.")
gallery()

if view is not None:
    st.subheader("Tokens and ids")
    st.caption(literal.markdown(RULE) + " A token's id is its position in the sorted vocabulary.")
    token_table(view)
