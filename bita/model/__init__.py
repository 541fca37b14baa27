"""The frozen model and what BiTA adds to it: loading (the embedded default or any HF causal LM), CPU
kernels, the adapter (prompt KV and mask embeddings) and the shipped adapters, its stored draft-rank
statistics, device naming and timing."""
