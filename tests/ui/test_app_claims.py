"""What Home and the multi-head page say, held to the facts (issue 40): every page
listed, what the defaults follow, the tokenizer's rule as `tokenize` follows it,
and the PyTorch check that compares dropout too."""

from __future__ import annotations

from explorer import AttentionConfig
from explorer.core import literal
from explorer.core.tokenizer import RULE
from explorer.lessons.pages import HOME_PAGE, MULTI_HEAD_PAGE
from explorer.lessons.presets import PRESETS
from explorer.ui.navigation import PAGES
from tests.support.apptest import errors, open_page
from tests.support.server import HOME
from tests.ui.test_app_multihead import TWO_HEADS


def _visible(text: str) -> str:
    return text.replace("\\", "").replace(literal.WORD_JOINER, "")


def test_home_lists_every_page_and_says_what_the_defaults_follow():
    at = open_page(HOME)
    assert not at.exception and errors(at) == []
    text = _visible(" ".join(m.value for m in at.main.markdown))
    for page in PAGES:
        if page != HOME_PAGE:
            assert f"**{page}**" in text, page
    assert "pick the sizes in the sidebar" not in text and "folded away" in text
    assert "explorer.ui.navigation" not in text  # no module text printed by Streamlit's magic
    assert "book's code" not in text and "equal what" not in text
    assert "nn.Embedding(50000, 3)" in text and "torch.randn" in text
    defaults = AttentionConfig()
    assert (defaults.vocab_size, defaults.d_in, defaults.embedding, defaults.weight_init) == (
        50000, 3, "table", "randn")
    # the book's own vectors: the two worked examples Home names
    for slug, name in (("journey", "Hand-picked vectors, no weights"),
                       ("self-attention-v1", "SelfAttention_v1")):
        assert PRESETS[slug].title.startswith(name) and f"*{name}*" in text
    assert PRESETS["self-attention-v1"].config.weight_init == "rand"
    captions = _visible(" ".join(c.value for c in at.main.caption))
    assert _visible(literal.markdown(RULE)) in captions or RULE in captions


def test_the_multi_head_check_compares_dropout():
    at = open_page(PAGES[MULTI_HEAD_PAGE][0], TWO_HEADS)
    assert not at.exception
    line = next(s.value for s in at.success if "Verified against PyTorch" in s.value)
    assert "(after dropout)" in line
    notes = " ".join(c.value for c in at.main.caption)
    assert "Dropout compared too" in _visible(notes) and "compared off" not in notes
