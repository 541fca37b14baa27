"""Every Triton kernel compiles for the GPUs a session may be lent (an H100 or H200: sm_90; an A100: sm_80) in
bf16 and float32, here without a GPU: Triton's compiler and its bundled ptxas make the machine code, so a kernel
that would not build on a GPU fails here, not in a GPU session's minutes. Whether it runs right is the
interpreter tests' concern (test_logical_attention.py, test_triton_layer.py, test_device_walk.py). The compiler
runs in a process of its own: this one runs kernels under Triton's interpreter (tests/conftest.py), which patches
triton.language."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


def compile_kernels(dtype: str, capability: int) -> list[str]:
    """Compile every kernel for ``capability`` in ``dtype`` ("bf16", "fp32") at the default model's shapes; their
    names. Run in a process without Triton's interpreter (``__main__`` below)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from bita.decode import walk_kernel
    from bita.runtime import logical_attention, triton_layer, triton_linear

    scalar, index = "fp32", "i32"
    kernels = {  # each kernel's signature, and the constants it is launched with
        logical_attention._attend: (
            {"q_ptr": f"*{dtype}", "k_ptr": f"*{dtype}", "v_ptr": f"*{dtype}", "order_ptr": "*i32",
             "count_ptr": "*i32", "out_ptr": f"*{dtype}", "scaling": scalar,
             **dict.fromkeys(("q_row", "q_head", "kv_head", "kv_slot", "order_row", "out_row", "out_head"), index)},
            {"GROUPS": 3, "GROUPS_PADDED": 16, "DIM": 64, "BLOCK_KEYS": logical_attention.BLOCK}),
        triton_layer._rms_norm: (
            {"x_ptr": f"*{dtype}", "weight_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "width": index, "x_row": index,
             "eps": scalar}, {"BLOCK": 1024}),
        triton_layer._add_rms_norm: (
            {**dict.fromkeys(("residual_ptr", "x_ptr", "weight_ptr", "sum_ptr", "out_ptr"), f"*{dtype}"),
             "width": index, "eps": scalar}, {"BLOCK": 1024}),
        triton_layer._rotate_store: (
            {"qkv_ptr": f"*{dtype}", "cos_ptr": f"*{dtype}", "sin_ptr": f"*{dtype}", "positions_ptr": "*i64",
             "slots_ptr": "*i64", "keys_ptr": f"*{dtype}", "values_ptr": f"*{dtype}",
             **dict.fromkeys(("qkv_row", "kv_head", "kv_slot"), index)},
            {"HEADS": 9, "KV_HEADS": 3, "HALF": 32}),
        triton_layer._silu_mul: (
            {"gate_up_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "width": index}, {"BLOCK": triton_layer.SILU_BLOCK}),
        triton_linear._linear: (
            {**dict.fromkeys(("x_ptr", "weight_ptr", "bias_ptr", "out_ptr"), f"*{dtype}"),
             **dict.fromkeys(("rows", "outs", "ins", "x_row"), index)},
            {"HAS_BIAS": True, "ROWS": triton_linear.BLOCK_ROWS,
             "OUTS": triton_linear.BLOCK_OUT, "INS": triton_linear.BLOCK_IN}),
        walk_kernel._decide: (  # dtype-free: token ids and tree tensors
            {"chosen_ptr": "*i64", "tokens_ptr": "*i64",
             **dict.fromkeys(("parent_ptr", "depth_ptr", "ancestry_ptr", "earlier_ptr", "group_ptr"), "*i32"),
             "out_ptr": "*i64", "nodes": index}, {"BLOCK": 64}),
    }
    for kernel, (signature, constants) in kernels.items():
        source = ASTSource(fn=kernel, signature={**signature, **dict.fromkeys(constants, "constexpr")},
                           constexprs=constants)
        assert triton.compile(source, target=GPUTarget("cuda", capability, 32)).asm["cubin"], kernel.__name__
    return [kernel.__name__ for kernel in kernels]


@pytest.mark.parametrize("capability", [90, 80])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_every_kernel_compiles_to_gpu_machine_code(dtype, capability):
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [root, environment.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, __file__, dtype, str(capability)], capture_output=True, text=True,
                          env={**environment, "PYTHONPATH": path, "TRITON_DEFAULT_FP_FUSION": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["_attend", "_rms_norm", "_add_rms_norm", "_rotate_store", "_silu_mul", "_linear",
                                    "_decide"]


if __name__ == "__main__":  # python this_file.py DTYPE CAPABILITY
    print(" ".join(compile_kernels(sys.argv[1], int(sys.argv[2]))))
