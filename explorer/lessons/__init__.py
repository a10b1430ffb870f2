"""What the pages teach beside the steps: `pages` (the page catalogue: every
page declared once), `presets` (the worked examples and the
numbers their sources print; every page's name), `explain` (the terms behind
any cell), `experiments` (the Experiments page's numbers), `backward` (the
Backward pass page: the loss, every gradient by hand, its check against
autograd, the cell terms, training, why √d_k). Torch only.
"""
