"""The checker's box (issue 41, items 2 and 3): pasted code runs in bubblewrap's
namespaces with limits, its result comes back bounded and validated, and the
command line's exit status is the parent's own reading of that result.

Each attack of the issue is run for real, through `check_source` (the page's
path) and through ``python -m explorer check FILE`` (the command line's). On a
machine where the box cannot be made (`explorer.checker.box.problem`), the tests
that need it skip with that reason.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.checker import box, results
from explorer.checker.listings import MULTI_HEAD_ATTENTION
from explorer.checker.report import CheckFailure, CheckReport
from explorer.checker.sandbox import MAX_OUTPUT_BYTES, ROOT, check_source

PROBLEM = box.problem()
needs_box = pytest.mark.skipif(bool(PROBLEM), reason=f"the checker's box cannot be made "
                                                      f"here: {PROBLEM}")
CLASS = "MultiHeadAttention"
DIFFERS = MULTI_HEAD_ATTENTION.replace("keys.shape[-1]**0.5, dim=-1)",
                                       "keys.shape[-1]**0.5, dim=-2)")
SHORT = 8.0
"""The time limit of the checks that must be stopped (starting torch takes 1-3 s)."""


def attack(code: str, *, then: str = MULTI_HEAD_ATTENTION) -> str:
    """The learner's file: ``code`` first, then (by default) a class that matches."""
    return code.strip() + "\n\n" + then


def raised_text(outcome: CheckReport | CheckFailure) -> str:
    assert isinstance(outcome, CheckFailure), outcome
    return outcome.message + "\n" + outcome.details


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def processes_with(marker: str) -> list[int]:
    """The processes on this machine whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


# ---------------------------------------------------------------------------
# The result: bounded and validated (no box needed)
# ---------------------------------------------------------------------------
def test_a_result_of_another_kind_or_shape_is_refused():
    good = CheckFailure("timeout", "ran out").to_json().encode()
    assert results.parse(good) == CheckFailure("timeout", "ran out")
    forged = [
        {"kind": "failure", "failure": {"kind": "![x](http://127.0.0.1:1/x.png)",
                                        "message": "m", "details": ""}},
        {"kind": "failure", "failure": {"kind": "crash", "message": 3, "details": ""}},
        {"kind": "failure", "failure": {"kind": "crash", "message": "m", "extra": 1}},
        {"kind": "nothing"}, [], "text",
    ]
    for data in forged:
        with pytest.raises(ValueError):
            results.parse(json.dumps(data).encode())
    report = json.loads(CheckReport("M", True, [], None, None, None, ["a"]).to_json())
    assert results.parse(json.dumps(report).encode()).ok is True
    for field, value in (("ok", "true"), ("n_values", "12"), ("max_difference", "1e-3"),
                         ("tokens", "a")):
        bad = json.loads(json.dumps(report))
        bad["report"][field] = value  # numbers as text, a text for a list
        with pytest.raises(ValueError, match=field):
            results.parse(json.dumps(bad).encode())
    bad = json.loads(json.dumps(report))
    bad["report"]["steps"] = [{"step": "context", "status": "**bold**", "max_difference": 0}]
    with pytest.raises(ValueError, match="status"):
        results.parse(json.dumps(bad).encode())
    with pytest.raises(ValueError, match="more than"):
        results.parse(b" " * (results.MAX_RESULT_BYTES + 1))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=20) | st.sampled_from(sorted(results.FAILURES)),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(["kind", "failure", "report", "message",
                                                       "details", "steps", "ok", "x"]), inner,
                                      max_size=5), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_is_read_as_a_valid_result_or_refused_with_a_value_error(data):
    try:
        outcome = results.parse(json.dumps(data).encode())
    except ValueError:
        return
    assert isinstance(outcome, CheckFailure) and outcome.kind in results.FAILURES
    assert isinstance(outcome.message, str) and isinstance(outcome.details, str)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(results.FAILURES)), st.text(), st.text(max_size=9000))
def test_a_failure_comes_back_as_sent_its_texts_cut(kind, message, details):
    back = results.parse(CheckFailure(kind, message, details).to_json().encode())
    assert back == CheckFailure(kind, results.cut(message), results.cut(details))
    assert len(back.details) <= results.MAX_TEXT_CHARS


def test_texts_are_cut_to_their_bound():
    text = "x" * 30_000_000
    shown = results.failure("source", text, text)
    assert len(shown.message) <= results.MAX_TEXT_CHARS
    assert len(shown.details) <= results.MAX_TEXT_CHARS
    assert "29,996,060 characters cut" in shown.message
    three_mb = "y" * 3_000_000  # within the byte bound: read, and cut
    assert len(results.parse(CheckFailure("source", three_mb).to_json().encode()).message) \
        == len(results.cut(three_mb)) <= results.MAX_TEXT_CHARS
    with pytest.raises(ValueError, match="more than"):  # past it: refused, never kept
        results.parse(CheckFailure("source", text).to_json().encode())


# ---------------------------------------------------------------------------
# In the box
# ---------------------------------------------------------------------------
@needs_box
def test_a_matching_class_and_a_different_one_are_told_apart_in_the_box():
    assert check_source(MULTI_HEAD_ATTENTION, CLASS).ok is True
    differs = check_source(DIFFERS, CLASS)
    assert isinstance(differs, CheckReport) and differs.ok is False
    assert differs.first_step == "attn_weights"


@needs_box
@pytest.mark.slow
def test_a_grandchild_that_calls_setsid_is_killed_at_the_limit_and_the_check_returns():
    marker = f"{time.time_ns() % 10**9}.25"
    code = f"""
import os, subprocess
subprocess.Popen(["/usr/bin/setsid", "/usr/bin/sleep", "{marker}"],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    while True:
        pass
while True:
    try:
        pass
    except BaseException:
        pass
"""
    started = time.monotonic()
    outcome = check_source(attack(code), CLASS, timeout=SHORT)
    took = time.monotonic() - started
    assert isinstance(outcome, CheckFailure) and outcome.kind == "timeout", outcome
    assert took < SHORT + 6
    time.sleep(0.5)
    assert processes_with(marker) == []


@needs_box
def test_children_holding_the_output_open_do_not_hold_the_check():
    marker = f"{time.time_ns() % 10**9}.5"
    code = f"""
import subprocess, sys
subprocess.Popen(["/usr/bin/sleep", "{marker}"], stdout=sys.stdout, stderr=sys.stderr,
                 start_new_session=True)
"""
    started = time.monotonic()
    outcome = check_source(attack(code), CLASS, timeout=30)
    assert isinstance(outcome, CheckReport) and outcome.ok, outcome
    assert time.monotonic() - started < 25
    time.sleep(0.5)
    assert processes_with(marker) == []


@needs_box
def test_the_code_cannot_signal_any_process_outside_the_box():
    sentinel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        code = f"""
import os, signal
tried = []
for pid in ({os.getpid()}, {sentinel.pid}):
    try:
        os.kill(pid, signal.SIGTERM)
        tried.append(f"{{pid}}: sent")
    except OSError as error:
        tried.append(f"{{pid}}: {{type(error).__name__}}")
raise RuntimeError("tried " + ", ".join(tried))
"""
        outcome = check_source(attack(code), CLASS)
        time.sleep(0.5)
        assert alive(sentinel.pid) and alive(os.getpid())
        # the server's pid and the sentinel's are not in the box's PID namespace
        text = raised_text(outcome)
        assert f"{os.getpid()}: ProcessLookupError" in text, text
        assert f"{sentinel.pid}: ProcessLookupError" in text, text
    finally:
        sentinel.kill()
        sentinel.wait()


@needs_box
def test_killing_its_parent_and_init_kills_only_the_box():
    code = """
import os, signal
os.kill(os.getppid(), signal.SIGTERM)
os.kill(1, signal.SIGKILL)
os.kill(-1, signal.SIGKILL)
"""
    outcome = check_source(attack(code), CLASS)
    assert isinstance(outcome, CheckFailure) and outcome.kind == "crash", outcome
    assert "without a result" in outcome.message
    assert alive(os.getpid())


@needs_box
def test_the_servers_environment_is_unreadable(monkeypatch):
    monkeypatch.setenv("EXPLORER_PROBE_SECRET", "s3cr3t-4-the-server")
    code = f"""
import os
seen = [repr(dict(os.environ))]
for path in ("/proc/{os.getpid()}/environ", "/proc/1/environ", "/proc/self/environ"):
    try:
        seen.append(path + " = " + open(path, "rb").read().decode("utf-8", "replace"))
    except OSError as error:
        seen.append(path + " : " + type(error).__name__)
raise RuntimeError(" | ".join(seen))
"""
    outcome = check_source(attack(code), CLASS)
    text = raised_text(outcome)
    assert "RuntimeError" in text
    assert f"/proc/{os.getpid()}/environ : FileNotFoundError" in text, text
    assert "s3cr3t" not in text and "EXPLORER_PROBE_SECRET" not in text


@needs_box
def test_no_network_not_even_the_servers_loopback():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    result = "connected"
except OSError as error:
    result = type(error).__name__
raise RuntimeError("network: " + result)
"""
        outcome = check_source(attack(code), CLASS)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert "network: ConnectionRefusedError" in raised_text(outcome)


@needs_box
def test_no_write_into_the_project_or_anywhere_but_its_own_tmp(tmp_path):
    targets = [ROOT / "explorer" / "pwned_by_the_box.py", ROOT / "pwned_by_the_box.txt",
               tmp_path / "pwned.txt"]
    code = f"""
written = []
for path in {[str(t) for t in targets]!r} + ["/tmp/mine.txt"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        written.append(path + " written")
    except OSError as error:
        written.append(path + " " + type(error).__name__)
raise RuntimeError(" | ".join(written))
"""
    outcome = check_source(attack(code), CLASS)
    text = raised_text(outcome)
    assert "/tmp/mine.txt written" in text, text
    for target in targets:
        assert not target.exists()
    assert f"{ROOT / 'explorer' / 'pwned_by_the_box.py'} OSError" in text, text


@needs_box
def test_a_result_forged_on_every_descriptor_is_refused():
    forged = json.dumps({"kind": "failure", "failure": {
        "kind": "![x](http://127.0.0.1:9/x.png)", "message": "FORGED", "details": ""}})
    frame = "0" * 64 + forged
    code = f"""
import os
frame = {frame!r}.encode()
paths = [f"/proc/self/fd/{{n}}" for n in os.listdir("/proc/self/fd")]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            paths += [f"/proc/{{pid}}/fd/{{n}}" for n in os.listdir(f"/proc/{{pid}}/fd")]
        except OSError:
            pass
for fd in range(3, 64):
    try:
        os.write(fd, frame)
    except OSError:
        pass
for path in paths:
    try:
        with open(path, "wb") as f:
            f.write(frame)
    except OSError:
        pass
os._exit(0)
"""
    outcome = check_source(attack(code), CLASS)
    assert isinstance(outcome, CheckFailure)
    assert outcome.kind in results.FAILURES
    assert "FORGED" not in outcome.message and "![" not in outcome.kind


def test_a_frame_without_the_runs_secret_is_refused(tmp_path):
    from explorer.checker.sandbox import _verified

    body = CheckFailure("timeout", "fine").to_json().encode()
    with open(tmp_path / "printed", "w+b") as printed:
        refused = _verified(b"0" * 64 + body, os.urandom(32), 0, printed)
    assert isinstance(refused, CheckFailure) and refused.kind == "crash"
    assert "not written by the checker" in refused.message


@needs_box
def test_a_30_mb_error_text_comes_back_cut():
    outcome = check_source(attack('raise ValueError("x" * 30_000_000)'), CLASS)
    assert isinstance(outcome, CheckFailure) and outcome.kind == "source"
    assert len(outcome.to_json()) < 3 * results.MAX_TEXT_CHARS
    assert "characters cut" in outcome.message


@needs_box
def test_printing_past_the_limit_is_stopped():
    code = f"""
import sys
while True:
    sys.stdout.write("y" * 2**20)
"""
    outcome = check_source(attack(code), CLASS, timeout=30)
    assert isinstance(outcome, CheckFailure) and outcome.kind == "output", outcome
    assert f"{MAX_OUTPUT_BYTES // 2**20} MB" in outcome.message


@needs_box
def test_a_fork_bomb_meets_the_process_limit():
    code = """
import os
n = 0
try:
    while True:
        if os.fork() == 0:
            import time
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as error:
    raise RuntimeError(f"stopped after {n} processes: {type(error).__name__}")
"""
    outcome = check_source(attack(code), CLASS, timeout=30)
    text = raised_text(outcome)
    stopped = int(text.split("stopped after ")[1].split()[0])
    assert 0 < stopped < box.MAX_PROCESSES, text


# ---------------------------------------------------------------------------
# The command line's exit status
# ---------------------------------------------------------------------------
def run_cli(tmp_path: Path, source: str, *flags: str, timeout: float = 120
            ) -> tuple[int, str, float]:
    path = tmp_path / "my_attention.py"
    path.write_text(source)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "explorer", "check", f"{path}:{CLASS}",
                           *flags], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


@needs_box
@pytest.mark.slow
@pytest.mark.parametrize("code, says", [
    ("import sys\nsys.exit(0)", "exit(0)"),
    ("import os\nos._exit(0)", "exit status 0"),
    ("exit(3)", "exit(3)"),
    ("raise ValueError('the numbers differ, honestly')", "ValueError"),
    ("import signal, os\nos.kill(os.getpid(), signal.SIGKILL)", "SIGKILL"),
])
def test_the_exit_status_is_2_whatever_the_code_does_to_end(tmp_path, code, says):
    status, output, _ = run_cli(tmp_path, attack(code))
    assert status == 2, output
    assert says in output


@needs_box
def test_the_exit_status_says_matches_and_differs(tmp_path):
    assert run_cli(tmp_path, MULTI_HEAD_ATTENTION)[0] == 0
    status, output, _ = run_cli(tmp_path, DIFFERS)
    assert status == 1, output
    assert "Differs" in output


@needs_box
@pytest.mark.slow
@pytest.mark.parametrize("code", [
    "while True:\n    try:\n        pass\n    except BaseException:\n        pass",
    "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
])
def test_code_that_will_not_stop_is_stopped_at_the_limit(tmp_path, code):
    status, output, took = run_cli(tmp_path, attack(code), "--timeout", str(SHORT))
    assert status == 2, output
    assert "stopped" in output
    assert took < SHORT + 10


@needs_box
def test_children_that_keep_the_pipe_open_do_not_make_a_loop(tmp_path):
    code = ("import subprocess, sys\n"
            "subprocess.Popen(['/usr/bin/sleep', '300'], stdout=sys.stdout, stderr=sys.stderr)")
    status, output, _ = run_cli(tmp_path, attack(code), "--timeout", "30")
    assert status == 0, output
    assert "loop" not in output


@needs_box
@pytest.mark.slow
@pytest.mark.parametrize("code, says", [
    ("def down(n):\n    return down(n + 1)\ndown(0)", "recursed too deeply"),
    # through map, a C function: each level takes C stack, past its end at this limit
    ("import sys\nsys.setrecursionlimit(10**8)\ndef down(n):\n"
     "    return list(map(down, [n + 1]))\ndown(0)", "recursion deeper than the C stack"),
])
def test_deep_recursion_is_told_as_recursion(tmp_path, code, says):
    status, output, _ = run_cli(tmp_path, attack(code))
    assert status == 2, output
    assert says in output and "loop" not in output


@needs_box
def test_the_code_sees_its_own_folder_for_its_imports(tmp_path):
    tmp_path.chmod(0o755)  # a root server's box runs as nobody: the folder is others' to read
    (tmp_path / "helpers_of_mine.py").write_text("SCALE = 0.5\n")
    status, output, _ = run_cli(tmp_path, attack("import helpers_of_mine"))
    assert status == 0, output


def test_no_box_says_why(monkeypatch):
    monkeypatch.setattr(box.shutil, "which", lambda name: None)
    monkeypatch.setattr(box, "_BWRAP", "/nonexistent/bwrap")
    box.problem.cache_clear()
    try:
        assert "bubblewrap is not installed" in box.problem()
    finally:
        monkeypatch.undo()
        box.problem.cache_clear()
    assert box.problem() == PROBLEM


def test_the_page_stays_off_and_says_why_without_a_box(monkeypatch):
    from explorer.checker import sandbox
    from explorer.lessons.pages import CHECK_PAGE
    from explorer.ui.navigation import PAGES
    from tests.support.apptest import open_link

    monkeypatch.setattr(sandbox, "ENABLED", True)
    monkeypatch.setattr(box, "problem", lambda: "bubblewrap could not make the box here "
                                                "(bwrap: No permissions to create new namespace)")
    at = open_link(PAGES[CHECK_PAGE][0])
    assert not at.exception
    said = [e.value for e in at.error]
    assert any("the box cannot be made here" in s and "No permissions to create new namespace"
               in s.replace("\\", "") for s in said), said
    assert [t.key for t in at.text_area] == [] and [b.key for b in at.button] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="root only: RLIMIT_NPROC limits other users")
def test_as_root_without_a_pids_cgroup_no_code_runs(monkeypatch):
    monkeypatch.setattr(box, "_hierarchy", lambda controller: None)
    outcome = check_source(MULTI_HEAD_ATTENTION, CLASS)
    assert isinstance(outcome, CheckFailure) and outcome.kind == "crash"
    assert outcome.message == f"the check could not make its box: {box.ROOT_UNCAPPED}"
    box.problem.cache_clear()
    try:
        assert box.problem() == box.ROOT_UNCAPPED
    finally:
        monkeypatch.undo()
        box.problem.cache_clear()


@needs_box
def test_the_supervisor_cannot_be_read_or_traced_from_the_code():
    code = """
import ctypes, os
parent, seen = os.getppid(), []
try:  # its names only (a root server's box may not even list them)
    fds = [f"/proc/{parent}/fd/{n}" for n in os.listdir(f"/proc/{parent}/fd")]
except PermissionError:
    fds = [f"/proc/{parent}/fd/3"]
for path in fds + [f"/proc/{parent}/mem", f"/proc/{parent}/environ"]:
    try:
        open(path, "r+b").read(1)
        seen.append(path + " opened")
    except OSError as error:
        seen.append(path + " " + type(error).__name__)
PTRACE_ATTACH = 16
libc = ctypes.CDLL(None, use_errno=True)
seen.append(f"ptrace {libc.ptrace(PTRACE_ATTACH, parent, 0, 0)} {ctypes.get_errno()}")
raise RuntimeError(" | ".join(seen))
"""
    text = raised_text(check_source(attack(code), CLASS))
    assert "/fd/3 PermissionError" in text, text  # its descriptors: the result pipe among them
    assert "opened" not in text, text
    for what in ("mem", "environ"):
        assert f"/{what} PermissionError" in text, text
    assert "ptrace -1 1" in text, text  # EPERM


def test_without_the_box_the_same_child_still_decides_the_outcome():
    """The command line's fallback where bubblewrap is missing: no box, but the
    supervisor and its validated result all the same."""
    assert check_source(MULTI_HEAD_ATTENTION, CLASS, boxed=False).ok is True
    ended = check_source(attack("import os\nos._exit(0)"), CLASS, boxed=False)
    assert isinstance(ended, CheckFailure) and ended.kind == "exit"
    assert "exit status 0" in ended.message
