"""A tokenizer's memory per byte of its files, measured: ``python -m benchmarks.tokenizer_memory``.

For each case (`CASES`) it saves a tiny random GPT-2 (`tests.support.tiny_models`)
with a tokenizer.json of a given shape to a temporary folder, then, in a fresh
Python that has imported transformers as the server has, reads the resident
memory (``VmRSS`` in ``/proc/self/status``), loads the tokenizer as the Real
model page does (`explorer.models.loading._tokenizer`), and reads it again
(and ``VmHWM``, the peak). It prints the tokenizer files' bytes, the growth,
and the growth per file byte: what `explorer.models.loading.TOKENIZER_BYTES_PER_FILE_BYTE`
must cover. Two shapes:

- ``added-N``: the tiny byte-level vocabulary plus N added tokens (the issue's
  folder: 2 M added tokens);
- ``bpe-N``: a byte-level BPE of N entries and N - 256 merges, the shape of a
  real model's tokenizer.json (GPT-2 50,257; Llama 3 128,256; Qwen 151,643;
  Gemma 3 262,144).

    python -m benchmarks.tokenizer_memory                 # every case
    python -m benchmarks.tokenizer_memory added-100000 bpe-50257
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from explorer.models.loading import tokenizer_file_bytes
from tests.support.tiny_models import save_tiny_gpt2, write_tokenizer_json

CASES = ("added-0", "added-100000", "added-500000", "added-2000000",
         "bpe-50257", "bpe-128256", "bpe-151643", "bpe-262144")
MIB = 2**20

_PROBE = """
import gc, json, sys
from explorer.models import loading  # transformers, torch, as in the server
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
gc.collect()
before = status("VmRSS:")
tokenizer, problem = loading._tokenizer(sys.argv[1], local_files_only=True)
gc.collect()
print(json.dumps({"before": before, "after": status("VmRSS:"), "peak": status("VmHWM:"),
                  "entries": len(tokenizer) if tokenizer is not None else 0,
                  "problem": problem}))
"""


def save_folder(root: Path, case: str) -> Path:
    """A tiny GPT-2 in ``root / case`` whose tokenizer.json has the shape ``case``
    (``added-N`` or ``bpe-N``, `tests.support.tiny_models.write_tokenizer_json`)."""
    kind, n = case.split("-")
    folder = save_tiny_gpt2(root / case)
    write_tokenizer_json(folder, **({"added": int(n)} if kind == "added" else {"bpe": int(n)}))
    return folder


def measure(folder: Path) -> dict:
    """The tokenizer's growth of resident memory in a fresh Python, in bytes."""
    run = subprocess.run([sys.executable, "-c", _PROBE, str(folder)], capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    print("| case | files (MB) | entries | resident growth (MB) | peak growth (MB) "
          "| growth / file byte | peak / file byte |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            folder = save_folder(Path(tmp), case)
            files = tokenizer_file_bytes(str(folder))
            m = measure(folder)
            grew, peak = m["after"] - m["before"], m["peak"] - m["before"]
            print(f"| {case} | {files / MIB:,.1f} | {m['entries']:,} | {grew / MIB:,.0f} "
                  f"| {peak / MIB:,.0f} | {grew / files:.2f} | {peak / files:.2f} |",
                  flush=True)
            for path in folder.iterdir():
                path.unlink()


if __name__ == "__main__":
    main()
