"""A page for `tests/test_private.py`: what `explorer.ui.private` reads in a live
session of `streamlit run`, written on the page."""

import streamlit as st

from explorer.ui import cache, private

st.write(f"in_app_test={private.in_app_test()}")
seen = []
for i in range(200):  # enough messages that some wait in the queues
    st.write(f"line {i}")
    seen.append(private.unsent_messages())
counts = [n for n in seen if n is not None]
st.write(f"types={sorted({type(n).__name__ for n in seen})} most={max(counts, default=None)}")
cache._wait_until_sent(30)
st.write(f"after_wait={private.unsent_messages()}")
