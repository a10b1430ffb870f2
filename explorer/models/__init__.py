"""Real models: GPT-2's and BERT's own attention heads, step by step.

    >>> from explorer.models import load_model, compute_model_trace, against_model
    >>> model = load_model("gpt2")      # a folder, the local HF cache, or the Hub
    >>> trace = compute_model_trace(model, "The cat sat on the mat", layer=5, head=1)
    >>> trace["attn_weights"].shape     # (n_heads, n_tokens, n_tokens)
    torch.Size([12, 6, 6])
    >>> against_model(trace, model).ok  # vs output_attentions and the module's output
    True

Without weights on the machine, fetch GPT-2 small once while online:
``python -m explorer.models download gpt2``.

Modules: `anatomy` (where each architecture keeps its attention), `sizes` (what
a config asks for, checked before building), `loading`,
`tokens` (readable sub-word tokens), `forward` (hooked forward passes),
`layer_trace` (the trace), `check` (against the model), `heads` (every head at
a glance; heads found by measuring). Pure torch and transformers: no UI.
"""

from explorer.models.check import TOLERANCE, ModelCheck, against_model, assert_matches_model
from explorer.models.errors import (DOWNLOAD_COMMAND, FolderUnusable, ModelError,
                                    ModelMismatch, ModelUnavailable, download_command,
                                    folder_message)
from explorer.models.heads import (
    EXAMPLES,
    HeadExample,
    HeadOverview,
    HeadScore,
    ResolvedExample,
    head_overview,
    previous_token_heads,
    resolve_example,
    strongest_head,
)
from explorer.models.layer_trace import ModelConfig, compute_model_trace, model_trace_bytes
from explorer.models.loading import (LoadedModel, download, load_folder, load_model,
                                     offline_reason)
from explorer.models.sizes import ModelSizes, model_sizes
from explorer.models.tokens import find_token, model_input, readable_piece, readable_tokens

__all__ = [
    "DOWNLOAD_COMMAND", "EXAMPLES", "TOLERANCE", "FolderUnusable", "HeadExample",
    "HeadOverview", "HeadScore", "LoadedModel", "ModelCheck", "ModelConfig", "ModelError",
    "ModelMismatch", "ModelSizes", "ModelUnavailable", "ResolvedExample", "against_model",
    "assert_matches_model", "compute_model_trace", "download", "download_command",
    "find_token", "folder_message", "head_overview", "load_folder", "load_model",
    "model_input", "model_sizes", "model_trace_bytes", "offline_reason", "previous_token_heads",
    "readable_piece", "readable_tokens", "resolve_example", "strongest_head",
]
