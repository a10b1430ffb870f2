"""Every page of the app, declared once: the catalogue.

A `Page` holds what the rest of the app reads about a page: its name (the menu's
label and its title), its script in ``pages/``, its icon, the line Home shows
for it, what its HTML report holds, its section of the learner's guide, and its
`traits`, the kinds of thing it shows. From the catalogue:

- the menu (`explorer.ui.navigation.PAGES`) and Home's list of pages
  (``streamlit_app.py``);
- the settings a page takes (`explorer.ui.state.entries`: a setting names the
  traits, or the pages, it belongs to), its drawing allowance
  (`explorer.ui.cache.drawing`: `CHECKS_AS_IT_DRAWS`) and its report's button
  (`explorer.ui.downloads`);
- the tests, parametrised over `CATALOGUE` (tests/lessons/test_pages.py checks that
  every page has its script, its place in the menu, on Home, in the README and in
  the guide).

The worked examples (`explorer.lessons.presets`) name the page they open. How to
add a page: docs/contributing.md, "Adding a page".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

CONFIG = "config"
"""Drawn from the sidebar's `explorer.core.config.AttentionConfig` (the book's
trace): the sentence, d_in, the seed, how X is drawn, the worked examples."""
WEIGHTS = "weights"
"""Has trainable weights: d_k, d_v, how W_query, W_key and W_value are drawn."""
STEP_CHARTS = "step charts"
"""Walks the pipeline's steps as charts: a query to highlight, a cell to explain."""
TRACE = "trace"
"""Has a trace to take away: the "Take it with you" downloads, one matrix as CSV."""
HEADS = "heads"
"""Shows one head at a time."""
MULTI_HEAD = "multi-head"
"""Has the causal mask, the heads, dropout and out_proj in its own settings."""
OVERFLOW = "overflow"
"""Shows softmax overflowing as X is scaled up."""
CHECKS_AS_IT_DRAWS = "checks as it draws"
"""Recomputes its trace a second way while it draws (PyTorch's module, autograd),
which its drawing allowance counts."""
TRAITS = (CONFIG, WEIGHTS, STEP_CHARTS, TRACE, HEADS, MULTI_HEAD, OVERFLOW, CHECKS_AS_IT_DRAWS)
"""Every trait, for the tests."""


@dataclass(frozen=True)
class Page:
    """One page of the app.

    ``name``: the menu's label and the page's title; ``script``: its Streamlit
    script, from the project's folder (Home is ``streamlit_app.py``, the others
    ``pages/N_Name.py``, whose name gives the page's address); ``icon``: a
    Material icon; ``summary``: what Home says it shows (Markdown, the
    explorer's own text); ``report``: what its HTML report holds (the
    button's help); ``guide``: its section of the learner's guide, from
    ``docs/``; ``traits``: what it shows (`TRAITS`); ``traces``: how many traces of
    the sidebar's size it holds at once, which its drawing allowance counts
    (`explorer.ui.cache.drawing`; estimated from the page's code, not measured)."""

    name: str
    script: str
    icon: str
    summary: str
    guide: str
    report: str = ("Every chart of this page, the settings, tokens and ids, in one file that "
                   "opens offline.")
    traits: frozenset[str] = field(default_factory=frozenset)
    traces: int = 1

    @property
    def url_path(self) -> str:
        """The page's address after the server's root ("" for Home), as Streamlit
        makes it from the script's name (``pages/2_Self_attention.py``:
        ``Self_attention``)."""
        if not self.script.startswith("pages/"):
            return ""
        return PurePosixPath(self.script).stem.split("_", 1)[1]


HOME = Page(
    "Home", "streamlit_app.py", ":material/home:",
    "what the app is, how to use it, the worked examples, and the sentence's tokens and ids.",
    "guide/index.md", traits=frozenset({CONFIG, WEIGHTS, TRACE}))
SIMPLIFIED = Page(
    "Simplified attention", "pages/1_Simplified_attention.py", ":material/looks_one:",
    "no trainable weights, scores are X·Xᵀ (book section 3.3).", "guide/index.md",
    traits=frozenset({CONFIG, STEP_CHARTS, TRACE, OVERFLOW}),
    traces=4)  # its own and the three other normalisations
SELF_ATTENTION = Page(
    "Self-attention", "pages/2_Self_attention.py", ":material/looks_two:",
    "W_query, W_key and W_value, scaled by √d_k (section 3.4).", "guide/index.md",
    traits=frozenset({CONFIG, WEIGHTS, STEP_CHARTS, TRACE, OVERFLOW}))
MULTI_HEAD_ATTENTION = Page(
    "Causal & multi-head attention", "pages/3_Causal_and_multi_head.py", ":material/looks_3:",
    "the causal mask, dropout, several heads and the output projection, checked against "
    "PyTorch (sections 3.5 and 3.6).", "guide/index.md",
    traits=frozenset({CONFIG, WEIGHTS, STEP_CHARTS, TRACE, HEADS, MULTI_HEAD,
                      CHECKS_AS_IT_DRAWS}))
EXPERIMENTS = Page(
    "Experiments", "pages/4_Experiments.py", ":material/science:",
    "why √d_k, temperature, softmax's dim, permutation, and two configurations compared.",
    "guide/index.md", traits=frozenset({CONFIG, WEIGHTS, TRACE}),
    traces=3)  # its own and two more (compare's A and B, the permutation's two)
REAL_MODEL = Page(
    "Real model", "pages/5_Real_model.py", ":material/memory:",
    "the same steps inside GPT-2, BERT or a Llama-family model (SmolLM2, Qwen3, Mistral, "
    "Gemma 3), one trained head at a time, token by token while it generates.",
    "guide/real-models.md", traits=frozenset({STEP_CHARTS, TRACE, HEADS}))
CHECK = Page(
    "Check your code", "pages/6_Check_your_code.py", ":material/fact_check:",
    "paste your own attention class and see the first step where it differs.",
    "checking.md")
MODERN = Page(
    "Modern attention", "pages/7_Modern_attention.py", ":material/bolt:",
    "RoPE, grouped-query attention, the sliding window, the KV cache and FlashAttention's "
    "online softmax, as Llama, Qwen and Mistral compute them.", "guide/modern-attention.md",
    report="Every chart of this page, part by part, with the settings, in one file that "
           "opens offline.")
BACKWARD = Page(
    "Backward pass", "pages/8_Backward_pass.py", ":material/undo:",
    "every gradient of attention, derived by hand and checked against autograd.",
    "guide/backward.md",
    report="The forward pass's charts, the settings, tokens and ids, in one file that opens "
           "offline (the gradients are in the script and the JSON below).",
    traits=frozenset({CONFIG, WEIGHTS, TRACE, HEADS, MULTI_HEAD, CHECKS_AS_IT_DRAWS}))
FRONTIER = Page(
    "Frontier attention", "pages/9_Frontier_attention.py", ":material/rocket_launch:",
    "multi-head latent attention, DeepSeek's sparse attention, learned sinks, the "
    "ring-buffer cache, gated attention and Gated DeltaNet, each checked against "
    "transformers.", "guide/frontier-attention.md",
    report="No HTML report: every part's matrices, checks and settings are in the page's "
           "JSON.",
    traits=frozenset({HEADS}))

CATALOGUE: tuple[Page, ...] = (HOME, SIMPLIFIED, SELF_ATTENTION, MULTI_HEAD_ATTENTION,
                               EXPERIMENTS, REAL_MODEL, CHECK, MODERN, BACKWARD, FRONTIER)
"""The app's pages, in menu order."""
BY_NAME = {page.name: page for page in CATALOGUE}
"""Each `Page` by its name."""


def having(*traits: str) -> frozenset[str]:
    """The names of the pages that have every trait of ``traits`` (`TRAITS`).
    Raises ValueError for a trait that is not one of `TRAITS`."""
    unknown = set(traits) - set(TRAITS)
    if unknown:
        raise ValueError(f"no such trait: {sorted(unknown)}")
    return frozenset(page.name for page in CATALOGUE if set(traits) <= page.traits)


HOME_PAGE = HOME.name
SIMPLIFIED_PAGE = SIMPLIFIED.name
SELF_ATTENTION_PAGE = SELF_ATTENTION.name
MULTI_HEAD_PAGE = MULTI_HEAD_ATTENTION.name
EXPERIMENTS_PAGE = EXPERIMENTS.name
MODEL_PAGE = REAL_MODEL.name
CHECK_PAGE = CHECK.name
MODERN_PAGE = MODERN.name
BACKWARD_PAGE = BACKWARD.name
FRONTIER_PAGE = FRONTIER.name
"""The pages' names, as the settings, presets and pages' scripts name them."""
