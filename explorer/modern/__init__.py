"""Attention as today's open models compute it: `attention` (RoPE, grouped-query
attention, the sliding window, the KV cache, the online softmax; `ModernConfig`,
`compute_modern`), `explain` (the terms behind any cell), `verify` (against
transformers' own functions and a tiny random Llama layer), `flash_backward`
(FlashAttention's backward pass, tile by tile), and `frontier/`, the attention
of 2026's open models (the Frontier attention page: latent, sparse, sinks, ring
buffers, gated, DeltaNet), one module per mechanism, `frontier.parts` computing
them all.
"""
