"""Home page of the self-attention explorer: `streamlit run streamlit_app.py`."""

import streamlit as st

from explorer.lessons.pages import HOME_PAGE
from explorer.ui.presets import gallery
from explorer.ui.render import page_header, token_table
from explorer.ui.sidebar import settings

page_header(
    "Self-attention explorer",
    "See **every intermediate matrix of self-attention** for a sentence you type: "
    "the embeddings, the query/key/value projections, the scores, the softmax weights "
    "and the context vectors, each as an interactive heatmap.",
)
st.markdown(
    """
**How to use it**

1. Type a sentence and pick the sizes in the sidebar: `d_in` (embedding width),
   `d_k` (query/key width), `d_v` (value width) and a `seed`. The *Advanced*
   section chooses how X and the weights are drawn, scaling and the normalisation.
2. Open a page from the sidebar:
   - **Simplified attention**: no trainable weights, scores are X·Xᵀ (book section 3.3).
   - **Self-attention**: W_query, W_key and W_value, scaled by √d_k (section 3.4).
   - **Causal & multi-head attention**: the causal mask, dropout, several heads and
     the output projection, checked against PyTorch (sections 3.5 and 3.6).
   - **Experiments**: why √d_k, temperature, softmax's dim, permutation, and two
     configurations compared.
   - **Real model**: the same steps inside GPT-2 or BERT, one trained head at a time.
3. Hover or tap any cell to read its value; **click it to see how it was computed**. The
   settings stay as you move between pages, and the link in the sidebar reproduces
   exactly what you see.

With the defaults ("Life is short, eat dessert first", d_in=3, d_k=2, d_v=4,
seed=123) the numbers equal what `torch.manual_seed(123)` and the book's code print.
"""
)
view = settings(HOME_PAGE)

st.subheader("Start from a worked example")
st.caption("Each example loads the exact setup of a book section or teaching notebook; "
           "while you leave it unchanged, the page checks every number it prints.")
gallery()

if view is not None:
    st.subheader("Tokens and ids")
    st.caption("The sentence is split on whitespace and punctuation at word ends is "
               "stripped. A token's id is its position in the sorted vocabulary.")
    token_table(view)
