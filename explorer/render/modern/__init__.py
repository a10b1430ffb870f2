"""The Modern attention page drawn: `figures` (its charts and tables) and
`export` (its PyTorch script, JSON and report)."""
