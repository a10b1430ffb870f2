"""A step's verdict in a check (`explorer.checker.check`), and its symbol in the
report's table: its own module, so that the report's view
(`explorer.render.check_view`) needs nothing of the checker at run time.

``UNSURE``: the step differs under a reading of the module the check is not
sure of (a head count guessed, a layer it could not place), so it gives no ✗.
"""

MATCH, DIFFERS, NOT_SEEN, UNSURE = "match", "differs", "not seen", "unsure"
SYMBOLS = {MATCH: "✓", DIFFERS: "✗", NOT_SEEN: "—", UNSURE: "?"}
"""A verdict's symbol in the report's table."""
