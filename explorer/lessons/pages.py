"""Every page's name, here and nowhere else.

The menu (`explorer.ui.navigation.PAGES`) gives each its script and icon; the
worked examples (`explorer.lessons.presets`) name the page they open; the
memory budget's drawing allowance and the downloads name the page they serve.
"""

HOME_PAGE = "Home"
SIMPLIFIED_PAGE = "Simplified attention"
SELF_ATTENTION_PAGE = "Self-attention"
MULTI_HEAD_PAGE = "Causal & multi-head attention"
EXPERIMENTS_PAGE = "Experiments"
MODEL_PAGE = "Real model"
CHECK_PAGE = "Check your code"
MODERN_PAGE = "Modern attention"
BACKWARD_PAGE = "Backward pass"
