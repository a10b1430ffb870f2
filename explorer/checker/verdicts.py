"""A step's verdict in a check (`explorer.checker.check`), and its symbol in the
report's table: its own module, so that the report's view
(`explorer.render.check_view`) needs nothing of the checker at run time.
"""

MATCH, DIFFERS, NOT_SEEN = "match", "differs", "not seen"
SYMBOLS = {MATCH: "✓", DIFFERS: "✗", NOT_SEEN: "—"}
"""A verdict's symbol in the report's table."""
