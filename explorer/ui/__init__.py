"""The Streamlit glue: every page's pieces, above `explorer.render`'s figures.

The frame: `navigation` (the menu, from the page catalogue), `sidebar` (the
settings every attention page shares), `state/` (every setting and view value,
declared once, and the link), `widgets` (their widgets), `render` (the chart
walk, the explained cell, tables, the page header), `component` (the one
component that draws every chart), `cache` (traces and tables shared by every
session, bounded by bytes), `private` (Streamlit's private parts, in one
place), `downloads` (the sidebar's "Take it with you"), `matrices`
(hand-entered matrices), `presets` (the worked examples), `lessons` (two short
lessons).

One module per page's own pieces: `multihead`, `experiments`, `real_model`,
`checking`, `modern`, `frontier`, `backward` (and `backward_data`, what it computes).
"""
