"""The attention of the newest open models, part by part, each checked against an
independent reference: latent attention, sparse attention, sinks, the ring-buffer
cache, gated attention and Gated DeltaNet (issue 48)."""

from explorer.lessons.pages import FRONTIER_PAGE
from explorer.ui import frontier
from explorer.ui.cache import drawing
from explorer.ui.render import page_header

page_header(
    FRONTIER_PAGE,
    "The Modern attention page shows what Llama, Qwen and Mistral changed in GPT-2's attention. "
    "The newest open models go further: DeepSeek caches a small **latent** instead of keys and "
    "values and lets each query keep only its **top-k** keys; gpt-oss gives each head a learned "
    "**sink** that takes part of every row's weight; sliding-window layers decode from a "
    "**ring buffer**; Qwen3-Next **gates** each head's output; Gated DeltaNet replaces the "
    "cache by a **state** of fixed size. Each part below computes every matrix from your "
    "sentence and checks it against an independent reference. **Click any cell of a chart** "
    "to see what it holds.",
)
with drawing(FRONTIER_PAGE):
    view = frontier.settings()
    if view is not None:
        frontier.parts(view, frontier.head_picker(view))
