"""AppTest: the "Check your code" page, off by default, and with visitors' code
allowed (``EXPLORER_RUN_CODE=1``): a pasted class is checked in a child
process and its report shown."""

from __future__ import annotations

import pytest

from explorer.core import literal
from explorer.checker import sandbox
from explorer.checker.listings import MULTI_HEAD_ATTENTION
from explorer.ui.navigation import PAGES
from explorer.lessons.pages import CHECK_PAGE
from tests.ui.test_app import all_charts, errors, open_link, page_link

PAGE = PAGES[CHECK_PAGE][0]
SOFTMAX_OVER_QUERIES = MULTI_HEAD_ATTENTION.replace(
    "keys.shape[-1]**0.5, dim=-1)", "keys.shape[-1]**0.5, dim=-2)")


def test_off_by_default_it_says_how_to_check_in_a_notebook_or_a_shell():
    assert not sandbox.ENABLED  # the tests' server environment sets nothing
    at = open_link(PAGE)
    assert not at.exception and errors(at) == []
    assert any("does not run visitors' code" in i.value for i in at.info)
    written = [c.value for c in at.code]
    assert any("module = MultiHeadAttention(d_in=3, d_out=4, context_length=6," in c and
               "check_module(module, 'Your journey starts with one step', seed=123)" in c
               for c in written)
    assert any(c.startswith("python -m explorer check ") for c in written)
    assert [t.key for t in at.text_area] == []
    assert [b.key for b in at.button] == []


@pytest.fixture
def code_allowed(monkeypatch):
    """Visitors' code allowed, and no check run yet in this process."""
    from explorer.ui import checking

    monkeypatch.setattr(sandbox, "ENABLED", True)
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
    assert "module = CausalAttention(d_in=5, d_out=4, context_length=3,\n    dropout=0.0, " \
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
    assert ".T on a tensor of 3 dims, (2, 6, 4), reverses all its axes" in at.text[0].value
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
