"""The bare-Streamlit floors of `benchmarks.browser`: a Streamlit page that prints a
title, a line of text and one `st.number_input` with its value, in the app's wide
layout and served with the same options (`benchmarks.browser.SERVER_ENV`,
`.streamlit/config.toml`). Its first open is what Streamlit itself costs before the
app draws anything; its rerun after an edit of the number, what any edit costs."""

import streamlit as st

st.set_page_config(page_title="Bare Streamlit", layout="wide")
st.title("Bare Streamlit")
st.write("A page that only prints text: the floor of a first open.")
n = st.number_input("n", min_value=0, max_value=10**9, value=1, key="n")
st.write(f"n = {n}")
