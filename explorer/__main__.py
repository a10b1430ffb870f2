"""Command line: check your own attention class against the book's numbers.

    python -m explorer check my_attention.py:MultiHeadAttention --d_in 3 --d_out 10 \\
        --num_heads 2 --sentence "Your journey starts with one step" [--causal] [--n_heads 2]

Prints the table of steps (`explorer.checker.report.CheckReport.text`) and exits 0 when
the class computes what the reference computes, 1 when it differs, 2 when it
cannot be checked or the check cannot tell (a head count it had to guess: the
report says so) (usage, a file that does not load, weights not found by the
book's names, an error in its ``__init__`` or ``forward``, more than
``--timeout`` seconds or ``--memory_mb`` MB), with a message and the last lines
of the code's own traceback, never the checker's; 130 after Ctrl-C, with one
line and no traceback either. The code runs in a child process, in its box
where bubblewrap can make one (`explorer.checker.sandbox.check_source`): the
status is this process's reading of the child's validated result, whatever the
code does (``exit()``, ``os._exit()``, signals, a loop that catches everything).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

OK, DIFFERS, CANNOT_CHECK, INTERRUPTED = 0, 1, 2, 130
"""The exit statuses."""


def _parser() -> argparse.ArgumentParser:
    from explorer.checker.learner import MEMORY_MB, TIMEOUT_S  # torch: inside main's Ctrl-C guard
    from explorer.checker.listings import CONTEXT_MARGIN, DEFAULT_SIZES

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
    sizes = DEFAULT_SIZES
    check.add_argument("--d_in", type=int, default=sizes["d_in"],
                       help=f"the inputs' width (default {sizes['d_in']})")
    check.add_argument("--d_out", type=int, default=sizes["d_out"],
                       help=f"the class's d_out (default {sizes['d_out']}: with "
                            f"{sizes['num_heads']} heads, d_in, d_out, head_dim and num_heads "
                            "all differ, so that every scaling mistake shows)")
    check.add_argument("--num_heads", type=int, default=sizes["num_heads"],
                       help=f"passed when __init__ takes num_heads (default {sizes['num_heads']})")
    check.add_argument("--causal", action=argparse.BooleanOptionalAction, default=None,
                       help="compare with the causal mask (--causal) or without (--no-causal); "
                            "default: causal when the module holds or builds a triangular mask, "
                            "calls scaled_dot_product_attention with is_causal=True, or has "
                            "Causal in its class name")
    check.add_argument("--n_heads", type=int, default=None,
                       help="the number of heads the check assumes; default: the module's "
                            "num_heads, n_head, n_heads, num_attention_heads, heads or nhead "
                            "(or its config's), else the head axis its forward shows")
    check.add_argument("--sentence", default=None,
                       help='the input (default "Your journey starts with one step", with the '
                            "book's hand-picked vectors when d_in is 3)")
    check.add_argument("--seed", type=int, default=123,
                       help="torch.manual_seed before building, and the embedding table's "
                            "seed (default 123, as the book)")
    check.add_argument("--context_length", type=int, default=None,
                       help="passed when __init__ takes it, or block_size (default: the number "
                            f"of tokens + {CONTEXT_MARGIN}, so that a mask not cut to the "
                            "sentence shows)")
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
    from explorer.checker.sandbox import OPTIONS, check_source

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
    from explorer.checker import box
    from explorer.checker.report import CheckFailure

    problem = box.problem()  # the box where it can be made, a plain child elsewhere
    if problem:
        print(f"note: {problem}; your code runs in a child process without the box",
              file=sys.stderr)
    folder = path.resolve().parent
    options = {name: getattr(args, name) for name in OPTIONS if hasattr(args, name)}
    # The code runs in a child process; this one decides the exit status from
    # the child's validated result, whatever the code does (exit, signals, loops)
    report = check_source(source, class_name, filename=str(path),
                          folder=str(folder), timeout=args.timeout or None,
                          memory_mb=args.memory_mb or None, interface="cli",
                          boxed=not problem, **options)
    if isinstance(report, CheckFailure):
        print(f"error: {report.message}", file=sys.stderr)
        if report.details:
            print(report.details, file=sys.stderr)
        if (not problem and os.geteuid() == 0 and folder.stat().st_mode & 0o005 != 0o005
                and "ModuleNotFoundError" in report.message + report.details):
            print(f"note: as root, the box runs your code as the user nobody, which may not "
                  f"read {folder}: let others read it for your file's imports of its "
                  "neighbours (chmod o+rx)", file=sys.stderr)
        return CANNOT_CHECK
    print(report.to_json() if args.json else report.text())
    return OK if report.ok else CANNOT_CHECK if report.uncertain else DIFFERS


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
