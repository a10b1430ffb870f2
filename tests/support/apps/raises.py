"""A Streamlit page whose script raises: tests/browser/test_browser_seam.py pins
that Streamlit shows an uncaught exception as the element every browser test
looks for (``[data-testid='stException']``), with its text redacted."""

import streamlit as st

st.write("before the exception")
raise RuntimeError("the server's secret: 8c1f0e")
