"""What the pages teach beside the steps: `presets` (the worked examples and the
numbers their sources print; every page's name), `explain` (the terms behind
any cell), `experiments` (the Experiments page's numbers). Torch only.
"""
