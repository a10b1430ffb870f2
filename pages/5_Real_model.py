"""Real model: one layer and one head of GPT-2, BERT or a Llama-family model, step by step."""

import streamlit as st

from explorer.core.steps import stages, visible_steps
from explorer.lessons.pages import MODEL_PAGE
from explorer.ui import real_model
from explorer.ui.render import head_picker, page_header, query_picker, step_charts, token_table

page_header(
    MODEL_PAGE,
    "The same steps as the Self-attention page, inside a **trained model**: GPT-2 or a "
    "BERT-style encoder (all-MiniLM-L6-v2 comes installed and opens offline), with its own "
    "weights **and biases** (Q = X·W_query + b_query), or a Llama-family model "
    "(SmolLM2, Qwen3, a Llama, Mistral, Qwen2 or Gemma 3 folder) with RMSNorm, RoPE, "
    "grouped-query attention, QK-norm and generation token by token. Pick a layer and a head; "
    "every matrix below is that head's, computed here step by step and checked against the "
    "model's own numbers. The grid at the bottom shows every head at once: click one to "
    "open it.",
)
view = real_model.settings()
if view is not None and view.decoder:
    real_model.decoder_page(view)
elif view is not None:
    trace = view.trace
    head = head_picker(view)
    query_picker(view, "Highlight a query token in every chart")
    real_model.verification(view)
    real_model.standout(view)
    real_model.examples(view)

    st.header("Tokens as the model sees them")
    st.caption("The model's own tokenizer splits the sentence: GPT-2 writes a word's leading "
               "space as ·, BERT marks the rest of a split word with ## and adds [CLS] and "
               "[SEP]. Each id is the token's row in the model's vocabulary.")
    token_table(view)

    before, per_head, after = stages(visible_steps(trace))
    st.header(f"1. Layer {view.layer}'s input, and head {head}'s slice of the weights")
    step_charts(view, before, head=head, head_slice=True)

    st.header(f"2. Attention inside head {head}")
    step_charts(view, per_head, head=head)
    step_charts(view, ["context"], head=head, head_slice=True)

    st.header("3. The whole layer: every head's context side by side, then the output "
              "projection")
    step_charts(view, after)

    st.header("4. Every head at a glance")
    real_model.every_head(view, head)
