"""One verify-and-draft forward pass and the loops around it, on the model's runtime (bita/runtime/):
attention masks and row layout, prefill and tree step over a KV cache, the pass's logits and verdict, the
one verification walk (greedy and sampled), sampling settings, stop conditions, step records, our AR loop
and HF generate as the reference."""
