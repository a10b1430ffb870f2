"""AppTest: the "Check your code" page, off by default, and with visitors' code
allowed (``EXPLORER_RUN_CODE=1``): a pasted class is checked in a child
process and its report shown."""

from __future__ import annotations

import pytest

from explorer import sandbox
from explorer.listings import MULTI_HEAD_ATTENTION
from explorer.ui.navigation import CHECK_PAGE, PAGES
from tests.test_app import all_charts, errors, open_link

PAGE = PAGES[CHECK_PAGE][0]
SOFTMAX_OVER_QUERIES = MULTI_HEAD_ATTENTION.replace(
    "keys.shape[-1]**0.5, dim=-1)", "keys.shape[-1]**0.5, dim=-2)")


def test_off_by_default_it_says_how_to_check_in_a_notebook_or_a_shell():
    assert not sandbox.ENABLED  # the tests' server environment sets nothing
    at = open_link(PAGE)
    assert not at.exception and errors(at) == []
    assert any("does not run visitors' code" in i.value for i in at.info)
    written = [c.value for c in at.code]
    assert any("check_module(MultiHeadAttention(" in c for c in written)
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
    assert "check_code" not in at.sidebar.code[0].value  # code never goes into a link


def test_a_pasted_class_with_a_classic_mistake_is_caught_at_its_step(code_allowed):
    at = check(SOFTMAX_OVER_QUERIES)
    assert errors(at)[0] == ("✗ Differs from the reference computed from your weights at "
                             "attn_weights.")
    table = at.dataframe[0].value
    assert table.loc["attn_scores", "result"] == "✓"
    assert table.loc["attn_weights", "result"] == "✗"
    shown = " ".join(m.value.replace("\\", "") for m in at.markdown)
    assert "softmax over the wrong dim" in shown
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
    at = open_link(PAGE, {"check_class": "CausalAttention", "d_out": "4", "num_heads": "1"})
    assert at.text_input(key="check_class").value == "CausalAttention"
    link = at.sidebar.code[0].value
    assert "check_class=CausalAttention" in link and "d_out=4" in link and "num_heads=1" in link
