"""Attention as today's open models compute it: `attention` (RoPE, grouped-query
attention, the sliding window, the KV cache, the online softmax; `ModernConfig`,
`compute_modern`), `explain` (the terms behind any cell), `verify` (against
transformers' own functions and a tiny random Llama layer); `frontier/`, the
attention of 2026's open models (the Frontier attention page), one module per
mechanism, `frontier.parts` computing them all.
"""
