"""What the server holds for every visitor: `settings` (every ``EXPLORER_*``
environment variable, read by one rule) and `budget` (the memory budget and
its shares). No Streamlit: the compute parts read them too.
"""
