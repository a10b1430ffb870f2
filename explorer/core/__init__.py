"""The book's attention, in pure torch: what every page is built on.

`config` (`AttentionConfig`, every limit, `ConfigError`), `tokenizer` (tokens,
ids, labels), `recipes` (seeded embeddings and weights), `attention` (one
hand-written function per step), `trace` (`compute_trace`, the pipeline),
`steps` (each step's symbol, formula and layout), `verify` (against
`nn.MultiheadAttention` and SDPA), `agreement` (how far a result is from its
reference, the one result type of every check), `literal` (the one place visitor text is
escaped). Imports torch, numpy and the standard library only.
"""
