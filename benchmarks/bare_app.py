"""The bare-Streamlit floor of `benchmarks.browser`'s first open: a Streamlit page
that prints a title and a line of text, in the app's wide layout and served with
the same options (`benchmarks.browser.SERVER_ENV`, `.streamlit/config.toml`).
Its first open is what Streamlit itself costs before the app draws anything."""

import streamlit as st

st.set_page_config(page_title="Bare Streamlit", layout="wide")
st.title("Bare Streamlit")
st.write("A page that only prints text: the floor of a first open.")
