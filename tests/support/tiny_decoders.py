"""Tiny random Llama-family checkpoints saved to folders: Llama, Mistral (sliding
window), Qwen2 (Q/K/V biases), Qwen3 (QK-norm) and Gemma 3 (QK-norm, sliding and
full layers, its own RMSNorm and score scale), offline, for
`tests/models/test_llama.py`.

As in `tests.support.tiny_models`, the constructors draw from the global RNG,
so they are built inside ``torch.random.fork_rng()``; then every parameter is
redrawn from a local ``torch.Generator``: norms' weights near 1 (Gemma's near
0, as it multiplies by 1 + weight), biases included, everything else N(0, std²).
Each folder gets a byte-level BPE ``tokenizer.json`` (any text reads; the
words of `tests.support.tiny_models.WORDS` are whole tokens).

Sizes: hidden 32, 2 layers, 4 query heads sharing 2 K/V heads (Mistral: 1,
multi-query), head_dim 8 (Qwen3 and Gemma 3 set 16, apart from hidden / heads),
RoPE θ chosen per model (not the default 10,000, so that a wrong θ shows).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers.convert_slow_tokenizer import bytes_to_unicode

from tests.support.tiny_models import MAX_POSITIONS, _gpt2_merges

COMMON = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-6,
              tie_word_embeddings=True)
"""What every tiny decoder shares (vocab_size is the tokenizer's)."""

TINY_DECODERS: dict[str, dict[str, Any]] = {
    "llama": dict(rope_parameters={"rope_type": "default", "rope_theta": 500.0},
                  tie_word_embeddings=False),
    "mistral": dict(num_key_value_heads=1, sliding_window=3,
                    rope_parameters={"rope_type": "default", "rope_theta": 300.0}),
    "qwen2": dict(rope_parameters={"rope_type": "default", "rope_theta": 700.0}),
    "qwen3": dict(head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 900.0}),
    "gemma3_text": dict(head_dim=16, query_pre_attn_scalar=12, sliding_window=3,
                        layer_types=["sliding_attention", "full_attention"],
                        rope_parameters={
                            "sliding_attention": {"rope_type": "default", "rope_theta": 200.0},
                            "full_attention": {"rope_type": "linear", "factor": 2.0,
                                               "rope_theta": 800.0}}),
}
"""Each architecture's tiny config, beside `COMMON`."""

CLASSES = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
           "mistral": ("MistralConfig", "MistralForCausalLM"),
           "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
           "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
           "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM")}


def randomise_decoder(module: torch.nn.Module, seed: int, std: float = 0.3,
                      norm_centre: float = 1.0) -> None:
    """Every parameter from a local generator: RMSNorm weights (names ending
    ``norm.weight``) near ``norm_centre``, everything else N(0, std²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g) * std
            p.copy_(norm_centre + noise / 3 if name.endswith("norm.weight") else noise)


def save_tokenizer(folder: Path) -> int:
    """A byte-level BPE tokenizer (GPT-2's alphabet and `_gpt2_merges`) as
    ``tokenizer.json``; returns its vocabulary size (the last id is ``<|eos|>``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    merges = _gpt2_merges()
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|eos|>"] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<|eos|>"])
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|eos|>"}))
    return len(vocab)


def tiny_config(architecture: str, vocab_size: int, dtype: torch.dtype = torch.float32,
                **changes: Any) -> Any:
    """The tiny config of ``architecture`` (a key of `TINY_DECODERS`), with ``changes``."""
    config_class = getattr(transformers, CLASSES[architecture][0])
    return config_class(**{**COMMON, **TINY_DECODERS[architecture], **changes},
                        vocab_size=vocab_size, eos_token_id=vocab_size - 1,
                        bos_token_id=None, pad_token_id=None, dtype=dtype)


def save_tiny_decoder(folder: Path, architecture: str, seed: int = 3,
                      dtype: torch.dtype = torch.float32, **changes: Any) -> Path:
    """A random ``architecture`` model (``"llama"``, ``"mistral"``, ``"qwen2"``,
    ``"qwen3"``, ``"gemma3_text"``) with its tokenizer, saved to ``folder`` in
    ``dtype``; ``changes`` override the tiny config."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab_size = save_tokenizer(folder)
    config = tiny_config(architecture, vocab_size, dtype, **changes)
    with torch.random.fork_rng():
        model = getattr(transformers, CLASSES[architecture][1])(config)
    randomise_decoder(model, seed, norm_centre=0.0 if architecture == "gemma3_text" else 1.0)
    model.to(dtype).save_pretrained(folder)
    return folder


if __name__ == "__main__":  # python -m tests.support.tiny_decoders DIR: every tiny decoder
    import sys

    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-decoders")
    for name in TINY_DECODERS:
        print(save_tiny_decoder(root / name, name))
