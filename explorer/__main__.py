"""Command line: check your own attention class against the book's numbers.

    python -m explorer check my_attention.py:MultiHeadAttention --d_in 3 --d_out 4 \\
        --num_heads 2 --sentence "Your journey starts with one step"

Prints the table of steps (`explorer.checker.check.CheckReport.text`) and exits 0 when
the class computes what the reference computes, 1 when it differs, 2 when it
cannot be checked (usage, a file that does not load, weights not found by the
book's names, an error in its ``__init__`` or ``forward``, more than
``--timeout`` seconds or ``--memory_mb`` MB), with a message and the last lines
of the code's own traceback, never the checker's; 130 after Ctrl-C, with one
line and no traceback either.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

OK, DIFFERS, CANNOT_CHECK, INTERRUPTED = 0, 1, 2, 130
"""The exit statuses."""


def _parser() -> argparse.ArgumentParser:
    from explorer.checker.learner import MEMORY_MB, TIMEOUT_S  # torch: inside main's Ctrl-C guard

    parser = argparse.ArgumentParser(
        prog="python -m explorer",
        description="Tools of the self-attention explorer.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check", help="check your own attention class, step by step",
        description="Build FILE's class as the book builds chapter 3's classes (after "
                    "torch.manual_seed(SEED)), run it on the sentence, and compare every "
                    "step with the explorer's reference computed from its own weights. Exit "
                    "status: 0 it matches, 1 it differs, 2 it cannot be checked.")
    check.add_argument("target", metavar="FILE:CLASS",
                       help="a Python file and the nn.Module class in it, e.g. "
                            "my_attention.py:MultiHeadAttention")
    check.add_argument("--d_in", type=int, default=3, help="the inputs' width (default 3)")
    check.add_argument("--d_out", type=int, default=4,
                       help="the class's d_out (default 4: with 2 heads, head_dim 2, where a "
                            "missing √head_dim shows)")
    check.add_argument("--num_heads", type=int, default=2,
                       help="passed when __init__ takes num_heads (default 2)")
    check.add_argument("--sentence", default=None,
                       help='the input (default "Your journey starts with one step", with the '
                            "book's hand-picked vectors when d_in is 3)")
    check.add_argument("--seed", type=int, default=123,
                       help="torch.manual_seed before building, and the embedding table's "
                            "seed (default 123, as the book)")
    check.add_argument("--context_length", type=int, default=None,
                       help="passed when __init__ takes it, or block_size (default: the number "
                            "of tokens)")
    check.add_argument("--dropout", type=float, default=0.0,
                       help="passed when __init__ takes it (default 0.0)")
    check.add_argument("--qkv_bias", action="store_true",
                       help="pass qkv_bias=True when __init__ takes it")
    check.add_argument("--dropout_seed", type=int, default=None,
                       help="with --dropout > 0: compare with dropout on, both sides using "
                            "the masks of this seed")
    check.add_argument("--timeout", type=float, default=TIMEOUT_S,
                       help=f"stop the code after this many seconds (default {TIMEOUT_S:g}; "
                            "0: no limit)")
    check.add_argument("--memory_mb", type=int, default=MEMORY_MB,
                       help=f"stop the code when it needs more memory than this (default "
                            f"{MEMORY_MB:,} MB; 0: no limit)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _check(args: argparse.Namespace) -> int:
    from explorer.core.config import ConfigError
    from explorer.checker.sandbox import check_code

    file, _, class_name = args.target.rpartition(":")
    if not file or not class_name:
        print(f"error: give FILE:CLASS, e.g. my_attention.py:MultiHeadAttention "
              f"(got {args.target!r})", file=sys.stderr)
        return CANNOT_CHECK
    path = Path(file)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"error: cannot read {file}: {error}", file=sys.stderr)
        return CANNOT_CHECK
    sys.path.insert(0, str(path.resolve().parent))  # its own imports, as `python FILE` has
    try:
        report = check_code(source, class_name, d_in=args.d_in, d_out=args.d_out,
                            num_heads=args.num_heads, sentence=args.sentence, seed=args.seed,
                            dropout=args.dropout, qkv_bias=args.qkv_bias,
                            context_length=args.context_length,
                            dropout_seed=args.dropout_seed, filename=str(path),
                            timeout=args.timeout or None, memory_mb=args.memory_mb or None,
                            interface="cli")
    except ConfigError as error:  # CheckError too: the code, its weights or the input
        print(f"error: {error}", file=sys.stderr)
        details = getattr(error, "details", "")
        if details:
            print(details, file=sys.stderr)
        return CANNOT_CHECK
    print(report.to_json() if args.json else report.text())
    return OK if report.ok else DIFFERS


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        return _check(args)
    except KeyboardInterrupt:
        print("stopped (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
