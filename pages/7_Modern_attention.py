"""Attention as today's open LLMs compute it: RoPE, grouped-query attention,
the sliding window, the KV cache and FlashAttention's online softmax."""

from explorer.lessons.pages import MODERN_PAGE
from explorer.ui import modern
from explorer.ui.render import page_header

page_header(
    MODERN_PAGE,
    "Chapter 3 builds the attention of GPT-2. The open models of 2024–2026 (Llama, Qwen, "
    "Gemma, Mistral) change five things, shown here step by step on your sentence: positions "
    "enter as **rotations** of Q and K (RoPE); several query heads **share** one key/value head; "
    "many layers see only a **window** of recent tokens; generation reads keys and values from a "
    "**cache**; and the kernels never build the n × n matrix (FlashAttention's **online "
    "softmax**). Each part is checked against an independent reference, and a tiny random "
    "Llama layer from `transformers` is reproduced at the end. **Click any cell of a chart** "
    "to see how its number was computed.",
)
view = modern.settings()
if view is not None:
    head = modern.head_picker(view)
    modern.rope(view, head)
    modern.grouped_query(view, head)
    modern.sliding_window(view, head)
    modern.kv_cache(view, head)
    modern.online_softmax(view, head)
    modern.llama_layer(view)
