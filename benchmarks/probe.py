"""The attack probes of issues 41 and 52, rerun: `make probe`.

Each row is one way the app was attacked (a shared link that plants code,
pasted code leaving its box, the CLI's exit status, links that crash or
freeze a visitor, input changed without a word, messages that point
elsewhere, the public demo's server settings, visitor text rendered as
markup). A row runs the tests that carry out that attack, through the page
(AppTest), the browser (Chromium), Streamlit's protocol, the CLI and the
box, and counts what was tried and what failed. Two rows are the fuzzers of
`tests.support.fuzzing`: random URL parameter sets on every page, and
random values for `AttentionConfig`; each of their inputs is one try.

The table is printed as Markdown and written to ``benchmarks/results/probe.md``
(``--out`` for another file). Exit status 1 when any try failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Probe:
    """One row: what the attack is (``what``, the issue's item) and the test
    nodes that carry it out (pytest node ids, files or ``file::test``)."""

    what: str
    item: str
    nodes: tuple[str, ...]


PROBES = (
    Probe("A shared link or a typed class name plants code in a snippet or script", "1",
          ("tests/ui/test_app_check.py::test_a_class_name_that_is_no_identifier_gets_no_snippet_and_no_link",
           "tests/ui/test_app_check.py::test_hostile_sentences_and_seeds_run_as_literals",
           "tests/ui/test_app_check.py::test_a_lookalike_identifier_runs_as_a_name_and_nothing_else",
           "tests/ui/test_app_check.py::test_a_hostile_class_in_a_link_is_refused_and_the_snippet_runs_the_default",
           "tests/ui/test_app_check.py::test_a_hostile_class_typed_in_the_sidebar_gets_a_message_and_no_snippet",
           "tests/ui/test_app_check.py::test_the_command_line_refuses_a_class_name_that_is_no_identifier",
           "tests/render/test_export.py::test_hostile_sentence_and_link_stay_data",
           "tests/render/test_backward_script.py")),
    Probe("Pasted code escapes its box (children, signals, /proc, network, files, "
          "forged results, huge texts)", "2", ("tests/checker/test_sandbox_box.py",)),
    Probe("The CLI's exit status (sys.exit, os._exit, exceptions, loops, SIGALRM, "
          "recursion)", "3",
          ("tests/checker/test_sandbox_box.py::test_the_exit_status_is_2_whatever_the_code_does_to_end",
           "tests/checker/test_sandbox_box.py::test_the_exit_status_says_matches_and_differs",
           "tests/checker/test_sandbox_box.py::test_code_that_will_not_stop_is_stopped_at_the_limit",
           "tests/checker/test_sandbox_box.py::test_children_that_keep_the_pipe_open_do_not_make_a_loop",
           "tests/checker/test_sandbox_box.py::test_deep_recursion_is_told_as_recursion")),
    Probe("Links past a bound, forged or malformed widget values, a tab past its byte "
          "budget, a burst of large configurations", "4",
          ("tests/ui/test_bounds.py", "tests/server/test_forged_values.py",
           "tests/server/test_malformed_widget_states.py", "tests/server/test_tab_budget.py",
           "tests/browser/test_browser_tab_budget.py", "tests/ui/test_app_model_tab.py",
           "tests/server/test_memory.py")),
    Probe("Input changed or dropped without a word (cells, long pastes, long links)", "5",
          ("tests/ui/test_typed.py", "tests/browser/test_browser_tables.py",
           "tests/server/test_server_settings.py::test_a_too_long_link_gets_the_explorers_message")),
    Probe("Messages that point elsewhere (separators, sizes, cells, tokenizers)", "6",
          ("tests/ui/test_csv_import.py",)),
    Probe("The public demo's server settings", "7", ("tests/server/test_server_settings.py",)),
    Probe("Issue 52: pasted code as root (the host's uid, /proc/sys, the init traced, user "
          "namespaces, memory in total, /dev/shm and memfds, output, the CLI's /tmp)",
          "52.1-3, 5", ("tests/checker/test_box_holds.py",)),
    Probe("Issue 52: the queue (one check per visitor, its place and wait told, the budget) "
          "and a forged report rendered as markup", "52.4, 6",
          ("tests/ui/test_app_check.py::test_a_report_the_code_forged_is_shown_as_text",
           "tests/ui/test_app_check.py::test_a_visitor_with_a_check_running_gets_no_second_one",
           "tests/ui/test_app_check.py::test_a_waiting_check_is_told_its_place_and_its_longest_wait",
           "tests/ui/test_app_check.py::test_on_the_default_budget_the_page_says_checks_do_not_fit")),
    Probe("Visitor text rendered as markup (every page, link values, sentences, files, "
          "exports)", "all",
          ("tests/browser/test_hostile.py", "tests/core/test_literal.py",
           "tests/render/test_export.py", "tests/browser/test_browser_export.py")),
)


def run_tests(nodes: tuple[str, ...], workers: int) -> tuple[int, int, int, float]:
    """Run ``nodes`` with pytest; (tried, failed, skipped, seconds). Errors count
    as failures; a node that selects nothing counts as one failure."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", str(workers),
                        f"--junitxml={report}", *nodes], cwd=ROOT, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
        if not report.exists():
            return 0, 1, 0, seconds
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        tried, failed, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "skipped"))
        failed += int(suite.get("errors", 0))
        return tried, failed + (tried == 0), skipped, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=600, help="random URL parameter sets")
    parser.add_argument("--configs", type=int, default=5_000, help="random AttentionConfig values")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "probe.md")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows = []
    for probe in PROBES:
        tried, failed, skipped, seconds = run_tests(probe.nodes, args.workers)
        rows.append((probe.item, probe.what, f"{tried} tests", failed, skipped, seconds))
        print(f"{probe.item}: {tried} tried, {failed} failed ({seconds:.0f} s)", flush=True)

    from tests.support import fuzzing
    for what, fuzz, n in (("Random URL parameter sets on every page (AppTest)",
                           fuzzing.fuzz_pages, args.urls),
                          ("Random values for AttentionConfig and compute_trace",
                           fuzzing.fuzz_backend, args.configs)):
        started = time.perf_counter()
        counts, problems = fuzz(n)
        crashes = counts.get(fuzzing.CRASH, 0) + counts.get(fuzzing.NAN_UNDOCUMENTED, 0)
        rows.append(("4, 5", what, f"{sum(counts.values())} inputs", crashes, 0,
                     time.perf_counter() - started))
        print(f"fuzz: {sum(counts.values())} tried, {crashes} failed", *problems[:5],
              sep="\n  ", flush=True)

    lines = ["| item | probe | tried | failed | skipped | seconds |", "|---|---|---|---|---|---|"]
    lines += [f"| {item} | {what} | {tried} | {failed} | {skipped} | {seconds:.0f} |"
              for item, what, tried, failed, skipped, seconds in rows]
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(f"# The probe of issue 41, {time.strftime('%Y-%m-%d %H:%M')}\n\n"
                        f"{table}\n", encoding="utf-8")
    raise SystemExit(1 if any(row[3] for row in rows) else 0)


if __name__ == "__main__":
    main()
