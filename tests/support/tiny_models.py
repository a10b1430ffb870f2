"""Tiny random GPT-2 and BERT checkpoints saved to folders, with tokenizers that
read any sentence: the Real model page's tests and screenshots, offline.

As in `tests/models/test_models.py`, the models' constructors draw from the global
RNG, so they are built inside ``torch.random.fork_rng()`` (which leaves it as
it was); then every parameter is redrawn from a local ``torch.Generator``,
biases included (the default init zeroes them, which would hide a missing bias).

- GPT-2: byte-level BPE over all 256 bytes (any text reads), with merges that
  make whole tokens of `WORDS` ("·animal", "·it"), 2 layers × 2 heads, d_model 32.
- BERT: WordPiece over `WORDS`, the letters and "##" + letters (any lowercase
  word reads), 2 layers × 2 heads, d_model 32.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel
from transformers.convert_slow_tokenizer import bytes_to_unicode

WORDS = ("Life", "is", "short", "eat", "dessert", "first", "the", "The", "animal", "didn't",
         "cross", "street", "because", "it", "was", "too", "tired", "cat", "sat", "on", "mat",
         "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Drive", "Privet")
"""Words the tiny tokenizers keep whole (GPT-2 with its leading space too)."""
MAX_POSITIONS = 256


def randomise(module: torch.nn.Module, seed: int, std: float = 0.3) -> None:
    """Every parameter from a local generator, biases included (the default init
    zeroes them, which would hide a missing bias): LayerNorm weights near 1,
    everything else N(0, std²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g) * std
            is_norm = name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight",
                                     "LayerNorm.weight"))
            p.copy_(1.0 + noise / 3 if is_norm else noise)


def _gpt2_merges() -> list[tuple[str, str]]:
    """Merges that build each of `WORDS`, with and without GPT-2's leading space
    ('Ġ'), left to right: ('Ġ', 'a'), ('Ġa', 'n'), ('Ġan', 'i') ..."""
    byte_char = bytes_to_unicode()
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        for text in (" " + word, word):  # the spaced word's merges rank first
            chars = [byte_char[b] for b in text.encode()]
            joined = chars[0]
            for char in chars[1:]:
                if (joined, char) not in merges:
                    merges.append((joined, char))
                joined += char
    return merges


def save_tiny_gpt2(folder: Path, seed: int = 1, n_layer: int = 2, n_head: int = 2,
                   n_embd: int = 32, std: float = 0.3) -> Path:
    """A random GPT-2 and its byte-level BPE tokenizer, saved to ``folder``
    (weights N(0, std²), see `randomise`)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    merges = _gpt2_merges()
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    with torch.random.fork_rng():
        model = GPT2LMHeadModel(GPT2Config(
            n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=len(vocab),
            n_positions=MAX_POSITIONS, bos_token_id=len(vocab) - 1,
            eos_token_id=len(vocab) - 1))
    randomise(model, seed, std)
    model.save_pretrained(folder)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8")
    return folder


def write_tokenizer_json(folder: Path, added: int = 0, bpe: int = 0) -> Path:
    """Write ``folder / "tokenizer.json"``, replacing vocab.json and merges.txt
    (`save_tiny_gpt2`'s): that byte-level vocabulary and its merges, or with
    ``bpe`` a byte-level BPE of ``bpe`` entries (the 256 byte characters, then
    each token one character longer than another, shortest first), plus
    ``added`` added tokens ("tok0000000" ...; 135 bytes each). Streamed: 2 M
    added tokens make a 270 MB file in a few seconds."""
    if bpe:
        chars = list(bytes_to_unicode().values())
        vocab = {c: i for i, c in enumerate(chars)}
        merges: list[str] = []
        while len(vocab) < bpe:
            for prefix in [t for t in vocab if len(t) == max(map(len, vocab))]:
                for c in chars[:bpe - len(vocab)]:
                    vocab[prefix + c] = len(vocab)
                    merges.append(f"{prefix} {c}")
                if len(vocab) >= bpe:
                    break
    else:
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        merges = [line for line in (folder / "merges.txt").read_text(
            encoding="utf-8").splitlines()[1:] if line]
    for name in ("vocab.json", "merges.txt"):
        (folder / name).unlink(missing_ok=True)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tail = {"normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
            "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}
    entry = ('{{"id": {}, "content": "tok{:07d}", "single_word": false, "lstrip": false, '
             '"rstrip": false, "normalized": false, "special": false}}')
    path = folder / "tokenizer.json"
    with path.open("w", encoding="utf-8") as file:
        file.write('{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [')
        for start in range(0, added, 10_000):
            file.write(",".join(entry.format(len(vocab) + i, i)
                                for i in range(start, min(start + 10_000, added))))
            file.write("," if start + 10_000 < added else "")
        file.write("], " + json.dumps(tail)[1:])
    return path


def save_tiny_bert(folder: Path, seed: int = 2, n_layers: int = 2, n_heads: int = 2,
                   hidden: int = 32) -> Path:
    """A random BERT and its WordPiece vocabulary, saved to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    letters = string.ascii_lowercase + string.digits
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
             + sorted({w.lower() for w in WORDS}) + list(letters) + [f"##{c}" for c in letters]
             + list(string.punctuation))
    with torch.random.fork_rng():
        model = BertForMaskedLM(BertConfig(
            num_hidden_layers=n_layers, num_attention_heads=n_heads, hidden_size=hidden,
            intermediate_size=2 * hidden, vocab_size=len(vocab),
            max_position_embeddings=MAX_POSITIONS))
    randomise(model, seed)
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return folder


if __name__ == "__main__":  # python -m tests.support.tiny_models DIR: both models, for trying the page
    import sys

    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    print(save_tiny_gpt2(root / "gpt2"), save_tiny_bert(root / "bert"))


def plant_in_hub_cache(folder: Path, cache: Path, repo: str) -> Path:
    """Put the checkpoint in ``folder`` into a Hugging Face cache at ``cache``
    as the Hub repository ``repo`` (e.g. "distilgpt2"), as a download would
    leave it: ``models--<repo>/snapshots/<revision>/`` and ``refs/main``. A
    server started with ``HF_HUB_CACHE=cache`` and ``HF_HUB_OFFLINE=1`` then
    opens ``repo`` by name, so links that name a model can be tried offline."""
    import shutil

    revision = "0" * 40
    home = cache / f"models--{repo.replace('/', '--')}"
    shutil.copytree(folder, home / "snapshots" / revision, dirs_exist_ok=True)
    (home / "refs").mkdir(parents=True, exist_ok=True)
    (home / "refs" / "main").write_text(revision)
    return cache


def shard_weights(folder: Path, shards: list[str]) -> dict[str, str]:
    """Replace ``folder``'s model.safetensors by the shards ``shards`` and the
    model.safetensors.index.json that lists them, as ``save_pretrained`` does for
    a large model: the tensors dealt out in turn, shard ``i`` written where its
    name points from the folder (a name may be ``../x.safetensors`` or absolute);
    a name ending in ``.bin`` is written pickled, by ``torch.save``. Returns the
    index's weight map (tensor name -> shard name)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    weight_map = {name: shards[i % len(shards)] for i, name in enumerate(sorted(tensors))}
    for shard in shards:
        part = {name: tensors[name] for name, at in weight_map.items() if at == shard}
        path = folder / shard  # an absolute name replaces the folder
        if shard.endswith(".bin"):
            torch.save(part, path)
        else:
            save_file(part, str(path), metadata={"format": "pt"})
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": weight_map}), encoding="utf-8")
    return weight_map
