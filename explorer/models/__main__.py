"""Command line: fetch model weights once, for offline use.

    python -m explorer.models download gpt2            # into the Hugging Face cache
    python -m explorer.models download gpt2 bert-base-uncased
    python -m explorer.models download smollm2-135m qwen3-0.6b   # the Llama family
    python -m explorer.models download gpt2 --to models/   # also save models/gpt2/
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from explorer.models.errors import ModelError
from explorer.models.loading import download


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status (0 = success)."""
    parser = argparse.ArgumentParser(
        prog="python -m explorer.models",
        description="Fetch GPT-2 / BERT / Llama-family weights from the Hugging Face Hub "
                    "once, so that the explorer's real-model page works offline.")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("download", help="fetch models into the local cache")
    fetch.add_argument("names", nargs="*", default=["gpt2"],
                       help="model names (default: gpt2), e.g. gpt2 distilgpt2 bert-base-uncased "
                            "smollm2-135m qwen3-0.6b")
    fetch.add_argument("--to", metavar="FOLDER", type=Path,
                       help="also save each model to FOLDER/<name> with save_pretrained")
    args = parser.parse_args(argv)
    for name in args.names:
        try:
            where = download(name, None if args.to is None else args.to / name)
        except ModelError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"{name}: ready offline, in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
