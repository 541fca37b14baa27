"""How a pass runs on this device: one ``Runtime`` per loaded model (runtime.py), made at load (build.py).

What it holds, by file: the forwards (lean_llama.py with static_kv.py; padded.py, its CUDA-graph replay;
transformers_forward.py), the attention (exact_attention.py, row-invariant; hf_attention.py, swapped into
transformers' models; layer_masks.py, sliding windows), the linears' kernels (kernel_plan.py, kernels.py),
the per-machine proofs and choices (invariance.py, precision.py) and the JSON tables they are cached in
(measured.py); device.py names the device and times work on it.
"""
