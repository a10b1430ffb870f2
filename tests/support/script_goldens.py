"""Every downloadable script, generated for a fixed set of inputs, as text: the
golden harness of the move from string-building code to template files
(`explorer.render.scripts`).

    python -m tests.support.script_goldens write DIR   # from the code before a change
    python -m tests.support.script_goldens check DIR   # after it: byte for byte

``write`` saves one file per (script, case); ``check`` regenerates them and
lists every file that differs (exit 1), so a change to a script's text is never
silent. The cases: the defaults, every preset (worked example), causal
multi-head with dropout, given matrices, each weight init and normalization,
hostile visitor text, backward configs, Modern configs and a decoder config of
a tiny random model (`tests.support.tiny_decoders`).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from explorer import AttentionConfig, compute_trace
from explorer.lessons.backward.settings import TARGET, LossConfig
from explorer.lessons.presets import PRESETS

HOSTILE = ("it's \"\"\" a \\ back\\slash'); import os; os.system('touch pwned')#\n"
           "new\tline \r {args} $x ${y} __d_in__ \u2028 \x85 \x0c end''' '\"")
HOSTILE_LINK = ("http://localhost:8501/?x=1\nimport os; os.system('touch pwned')\n"
                "# -*- coding: utf-7 -*-\r\u2028+AAo-import os $link __link__")
_SMALL = {"vocab_size": 100}

ATTENTION_CASES: dict[str, tuple[AttentionConfig, str | None]] = {
    "defaults": (AttentionConfig(), None),
    "defaults-link": (AttentionConfig(), "http://localhost:8501/?seed=123"),
    **{f"preset-{slug}": (preset.config, None) for slug, preset in PRESETS.items()},
    "dropout-out-proj": (AttentionConfig(dropout=0.3, dropout_seed=7, out_proj=True, **_SMALL),
                         None),
    "multi-head-causal-dropout": (AttentionConfig(
        sentence="the cat sat on the mat", d_in=4, d_k=4, d_v=6, n_heads=2, causal=True,
        dropout=0.2, **_SMALL), HOSTILE_LINK),
    "three-heads-no-out-proj-sum": (AttentionConfig(
        d_in=5, d_k=6, d_v=3, n_heads=3, out_proj=False, normalization="sum", **_SMALL), None),
    "causal-sum": (AttentionConfig(causal=True, normalization="sum"), None),
    "causal-naive": (AttentionConfig(causal=True, normalization="naive_softmax"), None),
    "uniform-rand-scale-off": (AttentionConfig(embedding="uniform", weight_init="rand",
                                               scale=False, seed=1), None),
    "linear-multi-head": (AttentionConfig(weight_init="linear", d_in=6, d_k=8, d_v=4, n_heads=4,
                                          seed=3, **_SMALL), None),
    "identity-table-naive": (AttentionConfig(weight_init="identity", d_in=4, d_k=4, d_v=4,
                                             normalization="naive_softmax", **_SMALL), None),
    "given-all-two-heads": (AttentionConfig(
        sentence="a b", d_in=2, d_k=2, d_v=2, n_heads=2, embedding="given",
        embeddings=((0.1, -2.5), (1e-7, 3.0)), weight_init="given",
        W_query=((1, 2), (3, 4)), W_key=((0.5, 0), (0, 0.25)), W_value=((-1, 1), (1, -1))),
        None),
    "given-x-randn-causal-sum": (AttentionConfig(
        sentence="one two three", d_in=2, d_k=2, d_v=3, embedding="given",
        embeddings=((1, 2), (3, 4), (5, 6)), causal=True, normalization="sum", scale=False),
        None),
    "hostile-sentence": (AttentionConfig(sentence=HOSTILE, **_SMALL), HOSTILE_LINK),
}
"""name -> (config, link): every option of every setting of the attention script."""

BACKWARD_CASES: dict[str, tuple[AttentionConfig, LossConfig, str | None]] = {
    "page-default": (AttentionConfig(causal=True, n_heads=2), LossConfig(), None),
    "one-head-target": (AttentionConfig(), LossConfig(TARGET), "http://localhost/?seed=1"),
    "dropout-sum-unscaled": (AttentionConfig(causal=True, dropout=0.3, n_heads=2,
                                             normalization="sum", scale=False), LossConfig(),
                             None),
    "naive-table-linear-out-proj": (
        AttentionConfig(normalization="naive_softmax", weight_init="linear", embedding="table",
                        out_proj=True, seed=5), LossConfig(TARGET, 7), None),
    "given-two-tokens": (AttentionConfig(sentence="a b", d_in=2, d_k=2, d_v=2, embedding="given",
                                         embeddings=((0.1, -2.5), (1e-7, 3.0))), LossConfig(),
                         None),
    "hostile": (AttentionConfig(sentence=HOSTILE, causal=True), LossConfig(), HOSTILE_LINK),
    "sum-not-causal": (AttentionConfig(normalization="sum"), LossConfig(TARGET), None),
}
"""name -> (config, loss config, link) of the backward script."""

MODERN_CASES: dict[str, tuple[dict, AttentionConfig, str | None]] = {
    "defaults": ({}, AttentionConfig(), None),
    "interleaved-one-kv-head": (
        {"rope_pairing": "interleaved", "rope_offset": 9, "n_kv_heads": 1, "prefill": 3,
         "block_q": 4, "block_k": 3, "window": 2}, AttentionConfig(),
        "http://localhost/Modern_attention"),
    "hostile": ({}, AttentionConfig(sentence=HOSTILE), HOSTILE_LINK),
}
"""name -> (ModernConfig changes, X's config, link) of the Modern script."""

_SHORT, _LONG = "the cat sat on the mat", " ".join(["the cat sat on the mat"] * 6)
DECODER_CASES = {"llama": ("llama", 1, 1, torch.float32, _SHORT),
                 "mistral": ("mistral", 0, 2, torch.float32, _SHORT),
                 "qwen3": ("qwen3", 0, 3, torch.float32, _SHORT),
                 "qwen3-bfloat16-long": ("qwen3", 1, 2, torch.bfloat16, _LONG),
                 "gemma3": ("gemma3_text", 0, 1, torch.float32, _LONG)}
"""name -> (architecture, layer, head, dtype, sentence) of the decoder script, on tiny
random models (the long sentence: token ids on several lines)."""


def attention_scripts() -> Iterator[tuple[str, Callable[[], str]]]:
    from explorer.render.export import pytorch_script

    for name, (config, link) in ATTENTION_CASES.items():
        yield f"attention-{name}.py", lambda c=config, li=link: pytorch_script(c, link=li)


def modern_scripts() -> Iterator[tuple[str, Callable[[], str]]]:
    from explorer.core.tokenizer import token_labels
    from explorer.modern.attention import ModernConfig, modern_attention
    from explorer.render.modern.export import modern_script

    for name, (changes, x_config, link) in MODERN_CASES.items():
        def make(changes=changes, x_config=x_config, link=link) -> str:
            trace = modern_attention(compute_trace(x_config)["embeddings"],
                                     ModernConfig(**changes), x_config.seed)
            return modern_script(trace, list(token_labels(x_config.tokens)), x_config.seed,
                                 link)
        yield f"modern-{name}.py", make


def backward_scripts() -> Iterator[tuple[str, Callable[[], str]]]:
    from explorer.render.backward_script import backward_script

    for name, (config, loss, link) in BACKWARD_CASES.items():
        yield (f"backward-{name}.py",
               lambda c=config, lo=loss, li=link: backward_script(c, lo, link=li))


def decoder_scripts(folder: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    from explorer.models import EVERY_ARCHITECTURE, compute_decoder_trace, load_folder
    from explorer.render.decoder_script import decoder_script
    from tests.support.tiny_decoders import save_tiny_decoder

    for name, (architecture, layer, head, dtype, sentence) in DECODER_CASES.items():
        def make(architecture=architecture, layer=layer, head=head, dtype=dtype,
                 sentence=sentence, name=name) -> str:
            model_folder = save_tiny_decoder(folder / name, architecture, dtype=dtype)
            model = load_folder(model_folder, architectures=EVERY_ARCHITECTURE)
            trace = compute_decoder_trace(model, sentence, layer=layer)
            return decoder_script(trace.config, "MODEL_FOLDER", head, text=HOSTILE,
                                  link=HOSTILE_LINK, new_tokens=5)
        yield f"decoder-{name}.py", make


def every_script(folder: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    """(file name, a function writing the script) for every case above; the
    decoders' tiny models are saved under ``folder``."""
    yield from attention_scripts()
    yield from modern_scripts()
    yield from backward_scripts()
    yield from decoder_scripts(folder)


def main(argv: list[str]) -> int:
    command, out = argv[0], Path(argv[1])
    differ = []
    with tempfile.TemporaryDirectory() as models:
        for name, make in every_script(Path(models)):
            text = make()
            path = out / name
            if command == "write":
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", errors="surrogatepass")
            elif path.read_text(encoding="utf-8", errors="surrogatepass") != text:
                differ.append(name)
            print(name, "differs" if name in differ else "ok")
    print(f"{len(differ)} differ: {differ}" if differ else "every script is byte-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
