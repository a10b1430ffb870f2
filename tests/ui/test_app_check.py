"""AppTest: the "Check your code" page, off by default, and with visitors' code
allowed (``EXPLORER_RUN_CODE=1``): a pasted class is checked in a child
process and its report shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from explorer.checker import sandbox
from explorer.checker.listings import MULTI_HEAD_ATTENTION
from explorer.core import literal
from explorer.lessons.pages import CHECK_PAGE
from explorer.server import budget
from explorer.ui.navigation import PAGES
from tests.support.apptest import all_charts, errors, open_link, page_link

PAGE = PAGES[CHECK_PAGE][0]
SOFTMAX_OVER_QUERIES = MULTI_HEAD_ATTENTION.replace(
    "keys.shape[-1]**0.5, dim=-1)", "keys.shape[-1]**0.5, dim=-2)")


def test_off_by_default_it_says_how_to_check_in_a_notebook_or_a_shell():
    assert not sandbox.ENABLED  # the tests' server environment sets nothing
    at = open_link(PAGE)
    assert not at.exception and errors(at) == []
    assert any("does not run visitors' code" in i.value for i in at.info)
    written = [c.value for c in at.code]
    # the default sizes: d_in, d_out, head_dim and num_heads all differ; context_length 6 + 3
    assert any("module = MultiHeadAttention(d_in=3, d_out=10, context_length=9," in c and
               "check_module(module, 'Your journey starts with one step', seed=123)" in c
               for c in written)
    assert any(c.startswith("python -m explorer check ") for c in written)
    assert [t.key for t in at.text_area] == []
    assert [b.key for b in at.button] == []


ROOM_FOR_CHECKS_MB = 2048
"""A server budget that holds its checks beside its pages (`budget.checks_problem`)."""


@pytest.fixture
def code_allowed(monkeypatch):
    """Visitors' code allowed, and no check run yet in this process."""
    from explorer.ui import checking

    monkeypatch.setattr(sandbox, "ENABLED", True)
    monkeypatch.setattr(budget, "MEMORY_BUDGET_BYTES", ROOM_FOR_CHECKS_MB * budget.MIB)
    checking._results.clear()


def check(code: str | None = None, **settings) -> object:
    """Open the page, paste ``code`` (default: the book's Listing 3.5), and press Check."""
    at = open_link(PAGE, {k: str(v) for k, v in settings.items()})
    if code is not None:
        at.text_area(key="check_code").set_value(code).run()
    at.button(key="check-run").click().run()
    assert not at.exception
    return at


def test_the_books_listing_matches(code_allowed):
    at = check()
    assert errors(at) == []
    assert at.success[0].value.startswith("✓ Matches the reference computed from your weights")
    assert "check_code" not in page_link(at)  # code never goes into a link


def test_a_pasted_class_with_a_classic_mistake_is_caught_at_its_step(code_allowed):
    at = check(SOFTMAX_OVER_QUERIES)
    assert errors(at)[0] == ("✗ Differs from the reference computed from your weights at "
                             "attn_weights.")
    table = at.dataframe[0].value
    assert table.loc["attn_scores", "result"] == "✓"
    assert table.loc["attn_weights", "result"] == "✗"
    shown = [t.value for t in at.text]
    assert any(t.startswith("Diagnosis: softmax over the wrong dim") for t in shown), shown
    assert not any(literal.WORD_JOINER in t for t in shown)  # copied as written
    assert {"check-difference-0", "check-difference-1"} <= set(all_charts(at))
    # The same request again comes from the cache: no button press needed.
    at.run()
    assert errors(at)[0].startswith("✗ Differs")


def test_code_that_cannot_run_gets_its_own_message_and_traceback(code_allowed):
    at = check("import torch\nclass MultiHeadAttention(torch.nn.Module):\n    def __init__(self\n")
    assert any("syntax" in e.lower() for e in errors(at)), errors(at)
    assert any("your_code.py" in c.value for c in at.code)


def test_a_bad_seed_is_refused_before_anything_runs(code_allowed):
    at = open_link(PAGE)
    at.text_input(key="seed").set_value("abc").run()
    at.button(key="check-run").click().run()
    assert any("seed must be a whole number" in e for e in errors(at)), errors(at)


def test_the_class_and_its_sizes_are_in_the_link(code_allowed):
    at = open_link(PAGE, {"check_class": "CausalAttention", "d_out": "6", "num_heads": "1"})
    assert at.text_input(key="check_class").value == "CausalAttention"
    link = page_link(at)
    assert "check_class=CausalAttention" in link and "d_out=6" in link and "num_heads=1" in link


def snippet_texts(at) -> tuple[str, str]:
    notebook = next(c.value for c in at.code if "check_module(" in c.value)
    shell = next(c.value for c in at.code if c.value.startswith("python -m explorer check "))
    return notebook, shell


def test_the_snippets_carry_every_sidebar_value():
    at = open_link(PAGE, {"sentence": "hello big world", "d_in": "5", "d_out": "4",
                          "num_heads": "1", "seed": "9", "check_class": "CausalAttention",
                          "qkv_bias": "true"})
    notebook, shell = snippet_texts(at)
    assert "torch.manual_seed(9)" in notebook
    assert "module = CausalAttention(d_in=5, d_out=4, context_length=6,\n    dropout=0.0, " \
           "num_heads=1, qkv_bias=True)" in notebook
    assert "report = check_module(module, 'hello big world', seed=9)" in notebook
    assert shell == ("python -m explorer check my_attention.py:CausalAttention --d_in 5 "
                     "--d_out 4 --num_heads 1 --qkv_bias --sentence 'hello big world' --seed 9")


def test_the_snippets_carry_a_sentence_from_another_page():
    from explorer.lessons.pages import SELF_ATTENTION_PAGE

    at = open_link(PAGES[SELF_ATTENTION_PAGE][0])
    at.text_input(key="sentence").set_value("we saw it's cats").run()
    at.switch_page(PAGE).run()
    notebook, shell = snippet_texts(at)
    assert "check_module(module, \"we saw it's cats\", seed=123)" in notebook
    assert "--sentence 'we saw it'\"'\"'s cats'" in shell


def test_the_enabled_page_says_above_the_editor_that_the_code_runs_here(code_allowed):
    at = open_link(PAGE)
    warning = at.warning[0].value
    assert warning.startswith("Your code runs on this server in a box (bubblewrap)")
    for said in ("It has no network", f"{sandbox.TIMEOUT_S:g} s", f"{sandbox.MEMORY_MB:,} MB"):
        assert said in warning  # what the box allows, in its own numbers (issue 41)
    # above the editor: the warning comes first in the main area
    main = [type(e).__name__ for e in at.main]
    assert main.index("Warning") < main.index("TextArea")


def test_the_default_sizes_see_a_missing_scaling(code_allowed):
    at = check(MULTI_HEAD_ATTENTION.replace(" / keys.shape[-1]**0.5", ""))
    assert errors(at)[0].startswith("✗ Differs"), errors(at)
    assert any(t.value.startswith("Diagnosis: the scores are not scaled") for t in at.text)


def test_the_book_repositorys_block_size_class_and_keys_T_on_a_batch(code_allowed):
    from tests.support.learner_modules import CAUSAL_ATTENTION_BLOCK_SIZE

    at = check(CAUSAL_ATTENTION_BLOCK_SIZE, check_class="CausalAttention")
    assert errors(at) == [] and at.success[0].value.startswith("✓ Matches"), errors(at)
    keys_t = CAUSAL_ATTENTION_BLOCK_SIZE.replace("keys.transpose(1, 2)", "keys.T")
    at = check(keys_t, check_class="CausalAttention")  # needs a batch, and .T breaks it
    assert errors(at) == ["✗ Your code could not be checked: an error in forward (forward)."]
    assert ".T on a tensor of 3 dims, (2, 6, 10), reverses all its axes" in at.text[0].value
    at = check(keys_t.replace("b, n_tokens, d_in = x.shape", "n_tokens = x.shape[-2]"),
               check_class="CausalAttention")  # runs on one sentence only
    assert errors(at)[0].startswith("✗ Raises on the book's batch of two"), errors(at)
    assert any(t.value.startswith("Diagnosis: CausalAttention works on one sentence") and
               ".T on a tensor of 3 dims" in t.value for t in at.text)


def test_an_unknown_constructor_argument_says_which_fields_to_set(code_allowed):
    from tests.support.learner_modules import CAUSAL_ATTENTION_BLOCK_SIZE

    at = check(CAUSAL_ATTENTION_BLOCK_SIZE.replace("block_size, dropout", "block_size, p_drop"),
               check_class="CausalAttention")
    assert errors(at) == ["✗ Your code could not be checked: an error building the class "
                          "(__init__)."]
    assert at.text[0].value.startswith("CausalAttention.__init__ needs p_drop, which the check "
                                       "does not know")
    assert at.text[0].value.endswith("then set it in the sidebar's d_in, d_out, num_heads or "
                                     "qkv_bias field (context_length is the sentence's number "
                                     "of tokens, dropout 0).")


# ---------------------------------------------------------------------------
# What the check assumes: page controls, carried by the link (issue 36)
# ---------------------------------------------------------------------------
def test_what_the_check_assumes_is_set_on_the_page_and_carried_by_the_link():
    at = open_link(PAGE, {"check_causal": "causal", "check_n_heads": "2"})
    assert at.selectbox(key="check_causal").value == "causal"
    assert at.number_input(key="check_n_heads").value == 2
    link = page_link(at)
    assert "check_causal=causal" in link and "check_n_heads=2" in link
    notebook, shell = snippet_texts(at)
    assert "check_module(module, 'Your journey starts with one step', seed=123, causal=True, " \
           "n_heads=2)" in notebook
    assert "--causal --n_heads 2 --sentence" in shell
    at = open_link(PAGE, {"check_causal": "not causal"})
    assert "--no-causal --sentence" in snippet_texts(at)[1]


def test_a_corpus_sample_gets_the_same_verdict_on_the_page_as_through_the_api(code_allowed):
    """A representative sample of tests/checker/corpus.py, pasted whole: the page's
    verdict line is the API's (the module built as the page builds it)."""
    from explorer.checker.check import check_module
    from explorer.checker.learner import build_module
    from tests.checker.corpus_cases import BY_NAME, SOURCE
    from tests.checker.test_corpus import CONTEXT

    for name in ("NanoCausalSelfAttention", "GPT2Attention", "D2LDecoderSelfAttention",
                 "MinSoftmaxOverQueries", "SdpaForgotIsCausal", "NanoMaskNotSliced",
                 "BertKeysFromQuery", "LucidCrossAttention", "LucidChunkedAttention",
                 "ArenaScaledByDModel", "GPT2NotScaled"):
        case = BY_NAME[name]
        api = check_module(build_module(case.cls, d_in=3, d_out=10, num_heads=2,
                                        context_length=CONTEXT), interface="app")
        at = check(SOURCE, check_class=name)
        shown = (at.success if case.right else at.error)[0].value
        assert shown == literal.markdown(api.summary()), (name, shown)
        assert at.text[0].value == api.settings[0]  # what was assumed, and why
        if not case.right:
            assert any(t.value.startswith("Diagnosis: ") for t in at.text), name
    # What the page says it assumes reaches the check: the same verdict as the API's
    case = BY_NAME["NanoCausalSelfAttention"]
    api = check_module(build_module(case.cls, d_in=3, d_out=10, num_heads=2,
                                    context_length=CONTEXT), causal=False, n_heads=5,
                       interface="app")
    at = check(SOURCE, check_class=case.name, check_causal="not causal", check_n_heads="5")
    assert not api.ok and at.error[0].value == literal.markdown(api.summary())
    assert at.text[0].value == ("assumed: not causal (as you said (causal=False)), set by you; "
                                "5 heads (as you said (n_heads=5)), set by you; dropout p = 0 "
                                "(its attn_dropout), declared")


# ---------------------------------------------------------------------------
# A class name reaches generated code only as an identifier (issue 41, item 1)
# ---------------------------------------------------------------------------
MARKER = "MARKER"
HOSTILE_CLASSES = [
    f'__import__("os").system("touch {MARKER}") or MultiHeadAttention',
    "a; import os", f"MultiHeadAttention(); open('{MARKER}', 'w'); X", "A\nimport os",
    f"$(touch {MARKER})", "class", "lambda", "None", "match", "print", "__import__", "exec",
    "ｅｘｅｃ", "ｉｍｐｏｒｔ", "Multi\u200bHead", "1Attention", "Attention-2", "a" * 300,
]
"""Values no snippet may carry: code, shell, keywords (soft ones too), built-ins,
full-width letters that Python would read as `exec` and `import`, invisible characters."""
LOOKALIKES = ["MultiHeadAttentiоn", "Ｍ" + "ultiHeadAttention"]
"""Identifiers that only look like a class name (a Cyrillic о; the second one is
full-width, and refused like any NFKC-unstable name)."""


def _values(**more) -> dict:
    return {"check_class": "MultiHeadAttention", "sentence": JOURNEY, "seed": "123",
            "d_in": 3, "d_out": 10, "num_heads": 2, "qkv_bias": False, **more}


JOURNEY = "Your journey starts with one step"


@pytest.mark.parametrize("name", HOSTILE_CLASSES)
def test_a_class_name_that_is_no_identifier_gets_no_snippet_and_no_link(name):
    from explorer.core.config import ConfigError
    from explorer.ui.checking import snippets
    from explorer.ui.state.entries import ENTRIES

    with pytest.raises(ConfigError) as caught:
        snippets(_values(check_class=name))
    assert caught.value.field == "check_class"
    assert "the class name must" in str(caught.value)  # a message saying what it must be
    with pytest.raises(ConfigError):
        ENTRIES["check_class"].kind.parse("check_class", name)


def _fake_explorer(folder) -> None:
    """A stand-in ``explorer.checker.check.check_module`` that records its call, and
    a ``python`` that records its arguments: running a snippet then runs nothing
    else of the app, and shows what it was given."""
    package = folder / "explorer" / "checker"
    package.mkdir(parents=True)
    (folder / "explorer" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "check.py").write_text(
        "import json\ndef check_module(module, sentence, **kw):\n"
        "    json.dump({'module': type(module).__name__, 'sentence': sentence, **kw},\n"
        "              open('called.json', 'w'))\n    return 'report'\n")
    (folder / "python").write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open('argv.json', 'w'))\n")
    (folder / "python").chmod(0o755)


def _run_snippets(folder, notebook: str, shell: str, cls: str = "MultiHeadAttention"):
    """Run both snippets in ``folder``: the notebook after defining ``cls`` (as the page
    says: "after defining your class"), the shell with the recording ``python``."""
    env = {"PATH": f"{folder}:{os.environ['PATH']}", "PYTHONPATH": str(folder)}
    defined = (f"class {cls}:\n    def __init__(self, **sizes):\n        self.sizes = sizes\n"
               if cls.isidentifier() else "")
    done = subprocess.run([sys.executable, "-c", defined + notebook], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)
    ran = subprocess.run(["bash", "-c", shell], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=60)
    return done, ran



@pytest.mark.parametrize("sentence, seed", [
    (f"'); open('{MARKER}', 'w'); ('", "123"),
    (f'"""; import os; os.system("touch {MARKER}"); """', "7"),
    (f"$(touch {MARKER}) `touch {MARKER}`", f'1); open("{MARKER}", "w"); (1'),
    (JOURNEY, f"__import__('os').system('touch {MARKER}')"),
])
def test_hostile_sentences_and_seeds_run_as_literals(tmp_path, sentence, seed):
    from explorer.ui.checking import snippets

    _fake_explorer(tmp_path)
    notebook, shell = snippets(_values(sentence=sentence, seed=seed))
    done, ran = _run_snippets(tmp_path, notebook, shell)
    assert not (tmp_path / MARKER).exists()
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--sentence") + 1] == sentence  # one argument, as written
    assert argv[argv.index("--seed") + 1] == seed
    if done.returncode == 0:  # a bad seed stops at torch.manual_seed, a text
        called = json.loads((tmp_path / "called.json").read_text())
        assert called["sentence"] == sentence and called["module"] == "MultiHeadAttention"
    else:
        assert "manual_seed" in done.stderr


def test_a_lookalike_identifier_runs_as_a_name_and_nothing_else(tmp_path):
    from explorer.core.config import ConfigError
    from explorer.ui.checking import snippets

    _fake_explorer(tmp_path)
    notebook, shell = snippets(_values(check_class=LOOKALIKES[0]))
    done, ran = _run_snippets(tmp_path, notebook, shell, cls="MultiHeadAttention")
    assert "NameError" in done.stderr and not (tmp_path / MARKER).exists()
    assert json.loads((tmp_path / "argv.json").read_text())[3] == \
        f"my_attention.py:{LOOKALIKES[0]}"
    with pytest.raises(ConfigError):
        snippets(_values(check_class=LOOKALIKES[1]))


def test_a_hostile_class_in_a_link_is_refused_and_the_snippet_runs_the_default(tmp_path):
    hostile = HOSTILE_CLASSES[0]
    at = open_link(PAGE, {"check_class": hostile})
    assert not at.exception
    assert any("check_class: the class name must be a Python identifier" in e
               for e in errors(at)), errors(at)
    assert at.text_input(key="check_class").value == "MultiHeadAttention"
    notebook, shell = snippet_texts(at)
    assert "__import__" not in notebook + shell and "check_class=" not in page_link(at)
    _fake_explorer(tmp_path)
    done, _ = _run_snippets(tmp_path, notebook, shell)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / MARKER).exists()


def test_a_hostile_class_typed_in_the_sidebar_gets_a_message_and_no_snippet():
    at = open_link(PAGE)
    at.text_input(key="check_class").set_value(HOSTILE_CLASSES[1]).run()
    assert not at.exception
    assert any(e.startswith("check_class: the class name must be a Python identifier")
               for e in errors(at)), errors(at)
    assert not any("check_module(" in c.value or c.value.startswith("python -m explorer")
                   for c in at.code)


def test_the_command_line_refuses_a_class_name_that_is_no_identifier(tmp_path):
    from explorer.__main__ import CANNOT_CHECK, main

    (tmp_path / "my_attention.py").write_text(MULTI_HEAD_ATTENTION)
    assert main(["check", f"{tmp_path}/my_attention.py:a; import os"]) == CANNOT_CHECK


# ---------------------------------------------------------------------------
# Issue 52: a forged report, a visitor's one check, the wait told, the budget
# ---------------------------------------------------------------------------
def test_a_report_the_code_forged_is_shown_as_text(code_allowed, monkeypatch):
    """The box's report names its worst step and place; code can forge them."""
    from explorer.checker.report import CheckReport
    from explorer.ui import checking

    forged = CheckReport("M", True, [], None, None, "**bold** [a link](http://127.0.0.1:1/x) "
                         "![img](http://127.0.0.1:1/i.png)", ["a"], n_values=3,
                         max_difference=0.0)
    monkeypatch.setattr(checking.sandbox, "check_source", lambda *a, **k: forged)
    at = check()
    assert at.success[0].value == literal.markdown(forged.summary())
    assert "**bold**" not in at.success[0].value and "](http" not in at.success[0].value


def test_a_visitor_with_a_check_running_gets_no_second_one(code_allowed, monkeypatch):
    from explorer.ui import checking

    ran = []
    monkeypatch.setattr(checking.sandbox, "check_source", lambda *a, **k: ran.append(1))
    monkeypatch.setattr(checking, "visitor", lambda: "203.0.113.7")
    checking._visitors.add("203.0.113.7")  # its check in another tab, still running
    try:
        at = check()
    finally:
        checking._visitors.discard("203.0.113.7")
    assert ran == []
    assert any("one check at a time for each visitor" in w.value for w in at.warning)


def test_a_waiting_check_is_told_its_place_and_its_longest_wait(code_allowed, monkeypatch):
    """Two checks hold the server; a third visitor is told it waits for both."""
    import threading

    from explorer.ui import checking

    told, release, holding = [], threading.Event(), threading.Barrier(3)
    monkeypatch.setattr(checking, "wait_message",
                        lambda ahead: told.append(ahead) or f"{ahead} ahead")

    def hold():
        with budget.CHECKS.reserve(budget.CHECK_BYTES, "a check"):
            holding.wait()
            release.wait(10)

    others = [threading.Thread(target=hold) for _ in range(budget.CHECKS_AT_ONCE)]
    for thread in others:
        thread.start()
    holding.wait()
    threading.Timer(2.0, release.set).start()
    at = check()
    for thread in others:
        thread.join()
    assert told and told[0] == budget.CHECKS_AT_ONCE, told
    assert at.success  # it ran once its turn came


def test_the_wait_message_counts_rounds_of_the_time_limit():
    from explorer.ui.checking import MAX_RUNNING, wait_message

    assert MAX_RUNNING == 2
    assert wait_message(1) == ("Your check waits its turn: 1 check is ahead of it, so it "
                               f"starts within {sandbox.TIMEOUT_S:g} s.")
    assert f"within {2 * sandbox.TIMEOUT_S:g} s" in wait_message(3)


def test_on_the_default_budget_the_page_says_checks_do_not_fit(monkeypatch):
    monkeypatch.setattr(sandbox, "ENABLED", True)
    at = open_link(PAGE)
    assert not at.exception
    said = " ".join(e.value for e in at.error)
    assert "cannot hold 2 checks of 384 MB" in said, said
    assert literal.markdown("EXPLORER_MEMORY_BUDGET_MB=1408 or more") in said, said
    assert [b.key for b in at.button] == []


TOO_LONG = "a" * 25_000
"""One 25,000-character word: more than `MAX_SENTENCE_CHARS` (issue 52)."""
TOO_MANY = " ".join(["word"] * 600)
"""600 tokens in 2,999 characters: more than `MAX_TOKENS` (issue 52)."""


@pytest.mark.parametrize("sentence, message", [
    (TOO_LONG, "sentence must be at most 20,000 characters (got 25,000)"),
    (TOO_MANY, "sentence must have between 1 and 512 tokens (got 600)"),
    ("   ", "sentence must have between 1 and 512 tokens (got 0)"),
])
def test_a_sentence_beyond_the_limits_gets_a_message_and_no_snippet(sentence, message):
    at = open_link(PAGE)
    at.text_input(key="sentence").set_value(sentence).run()
    assert not at.exception
    assert message in errors(at), errors(at)
    assert not any("check_module(" in c.value or c.value.startswith("python -m explorer")
                   for c in at.code)
    from explorer.core.config import ConfigError
    from explorer.ui.checking import snippets
    with pytest.raises(ConfigError, match="sentence must"):
        snippets(_values(sentence=sentence))


def test_a_sentence_beyond_the_limits_is_refused_before_anything_runs(code_allowed,
                                                                       monkeypatch):
    from explorer.checker import box

    monkeypatch.setattr(box, "problem", lambda: None)  # a box, as on a server that has one
    monkeypatch.setattr(sandbox, "check_source", lambda *a, **k: pytest.fail("it ran"))
    at = open_link(PAGE)
    at.text_input(key="sentence").set_value(TOO_MANY).run()
    at.button(key="check-run").click().run()
    assert not at.exception and not at.success
    assert "sentence must have between 1 and 512 tokens (got 600)" in errors(at), errors(at)
