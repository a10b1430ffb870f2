"""What is drawn and downloaded: `payload` (a chart as data, its matrices as
float32 bytes), `figures` (the Plotly figures of every step), `export` (the
PyTorch script, CSV, the HTML report), `check_view` (a check's report drawn),
`decoder` (a Llama-family layer's charts), `decoder_script` (a Llama-family
layer as a PyTorch script), `backward` and `backward_script` (the Backward
pass page's figures and script), `modern/` (the Modern page's figures and
downloads), `frontier` (the Frontier page's charts, tables and JSON), `frontier_script`
(the Frontier page as a script checked against transformers),
`script_templates` (the downloadable scripts' text: the template files of
``scripts/``, Python themselves, filled in), and `chart/`, the browser
modules that draw a payload with Plotly.js (served as ``static/explorer-chart.js``).
Plotly, pandas and numpy; no Streamlit.
"""
