"""One verify-and-draft forward pass and the loops around it: attention masks and row layout, prefill
and tree step over a KV cache, the one verification walk (greedy and sampled), sampling settings,
stop conditions, step records, our AR loop and HF generate as the reference."""
