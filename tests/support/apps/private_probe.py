"""A page for `tests/ui/test_private.py`: what `explorer.ui.private` reads in a live
session of `streamlit run`, written on the page."""

import streamlit as st

from explorer.ui import cache, private

st.write(f"in_app_test={private.in_app_test()}")
seen = []
# Enough messages, and large enough (200 of 40 kB), that some must wait in the queues:
# the browser reads them slower than the script writes them. (200 short lines, sent as
# fast as they came, once left every count 0.)
for i in range(200):
    st.text(f"line {i} " + "x" * 40_000)
    seen.append(private.unsent_messages())
counts = [n for n in seen if n is not None]
st.write(f"types={sorted({type(n).__name__ for n in seen})} most={max(counts, default=None)}")
cache._wait_until_sent(30)
st.write(f"after_wait={private.unsent_messages()}")
