"""Real models: GPT-2's, BERT's and the Llama family's own attention heads, step by step.

    >>> from explorer.models import load_model, compute_model_trace, against_model
    >>> model = load_model("gpt2")      # a folder, the local HF cache, or the Hub
    >>> trace = compute_model_trace(model, "The cat sat on the mat", layer=5, head=1)
    >>> trace["attn_weights"].shape     # (n_heads, n_tokens, n_tokens)
    torch.Size([12, 6, 6])
    >>> against_model(trace, model).ok  # vs output_attentions and the module's output
    True

Without weights on the machine, fetch GPT-2 small once while online:
``python -m explorer.models download gpt2``.

The Llama family (Llama, Mistral, Qwen2, Qwen3, Gemma 3 text), opened the same
way, is traced by `compute_decoder_trace` (``compute_model_trace`` says so):

    >>> model = load_model("smollm2-135m")
    >>> trace = compute_decoder_trace(model, "The cat sat on the mat", layer=3, head=4)
    >>> head_slice(trace).sharing           # the query heads sharing head 4's K/V head
    (3, 4, 5)
    >>> against_model_steps(trace, model).ok  # every step vs the model's own modules
    True
    >>> run = generate(model, "The cat sat on the", max_new_tokens=8, layer=3)
    >>> against_full_pass(run, model).ok    # each new row vs a full pass without cache
    True

Modules: `catalogue` (the models offered by name and the memory budget's
default), `anatomy` (where each architecture keeps its attention), `sizes`
(what a config asks for, checked before building), `loading`,
`packaged` (all-MiniLM-L6-v2 from its installed package, offline),
`tokens` (readable sub-word tokens), `forward` (hooked forward passes),
`errors` (what a model refuses, and why), `explain` (the terms behind a cell of
a Llama-family layer),
`layer_trace` (the trace), `layer_steps` (a Llama-family layer's steps, declared
once), `check` (against the model), `heads` (every head at
a glance; heads found by measuring), `llama` (a Llama-family layer, every
step), `generation` (token by token, each new row over the KV cache). Pure torch and transformers: no UI.

The names below load on first use (PEP 562), as in `explorer`: importing
`explorer.models.catalogue` (every page's settings need the model names) does
not import transformers, which only the Real model page needs.
"""

from importlib import import_module

_HOMES = {
    **dict.fromkeys(("TOLERANCE", "against_model", "assert_matches_model", "summary"),
                    "explorer.models.check"),
    **dict.fromkeys(("DOWNLOAD_COMMAND", "FolderUnusable", "ModelError", "ModelMismatch",
                     "ModelUnavailable", "download_command", "folder_message"),
                    "explorer.models.errors"),
    **dict.fromkeys(("EXAMPLES", "HeadExample", "HeadOverview", "HeadScore", "ResolvedExample",
                     "STANDOUT_SENTENCE", "Standout", "head_overview", "previous_token_heads",
                     "resolve_example", "standout_heads", "strongest_head"),
                    "explorer.models.heads"),
    **dict.fromkeys(("ModelConfig", "compute_model_trace", "model_trace_bytes"),
                    "explorer.models.layer_trace"),
    **dict.fromkeys(("LoadedModel", "download", "load_folder", "load_model",
                     "offline_reason", "page_default"), "explorer.models.loading"),
    **dict.fromkeys(("ModelSizes", "model_sizes"), "explorer.models.sizes"),
    **dict.fromkeys(("find_token", "model_input", "readable_piece", "readable_tokens"),
                    "explorer.models.tokens"),
    **dict.fromkeys(("DECODER_CHOICES", "DEFAULT_MODEL", "DEFAULT_NEW_TOKENS", "GENERATION_SECONDS",
                     "MAX_NEW_TOKENS", "MODEL_CHOICES", "ModelChoice"),
                    "explorer.models.catalogue"),
    **dict.fromkeys(("CLASSIC", "DECODERS", "EVERY_ARCHITECTURE"), "explorer.models.anatomy"),
    **dict.fromkeys(("DecoderConfig", "HeadSlice", "compute_decoder_trace", "decoder_trace_bytes",
                     "head_slice"), "explorer.models.llama"),
    **dict.fromkeys(("GeneratedToken", "Generation",
                     "against_full_pass", "generate"), "explorer.models.generation"),
    **dict.fromkeys(("against_model_steps",), "explorer.models.check"),
    **dict.fromkeys(("DecoderSizes",), "explorer.models.sizes"),
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'explorer.models' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
