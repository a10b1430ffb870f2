"""explorer: every intermediate matrix of scaled dot-product attention, in pure torch.

    >>> from explorer import AttentionConfig, compute_trace
    >>> trace = compute_trace(AttentionConfig(sentence="Life is short, eat dessert first"))
    >>> trace.tokens
    ['Life', 'is', 'short', 'eat', 'dessert', 'first']
    >>> trace["embeddings"].shape
    torch.Size([6, 3])

The compute modules (`config`, `tokenizer`, `recipes`, `attention`, `trace`,
`steps`) import torch only. `explorer.figures` (plotly, pandas) sits above them
and `explorer.ui` (Streamlit) above that.
"""

from explorer.config import AttentionConfig, ConfigError
from explorer.steps import STEPS, Step
from explorer.trace import Trace, compute_trace

__all__ = ["AttentionConfig", "ConfigError", "STEPS", "Step", "Trace", "compute_trace"]
