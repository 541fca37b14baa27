"""A layer's elementwise work on a GPU, one Triton kernel each (``LayerOps``, lean_llama.py): RMSNorm, rotary in
place, SiLU(gate) x up. native_layer.c's counterpart: transformers' torch operations take ~25 kernels a layer
for these (casts, powers, means, negations, concatenations), each a launch even in a CUDA graph; here 4.

Each program works within one row (RMSNorm: the row's whole width in one block; rotary: one head of a row;
SiLU x up: a block of a row's columns), so a row's result depends only on the row: row-invariant by
construction, whatever the pass's rows. Values are rounded to the tensor's dtype where transformers' torch
operations store theirs (the normalised row before the weight, each product and the sum of rotary, SiLU before
the product), so bf16 results stay within a rounding of transformers' (float32 sums may round in another order
than torch's mean).

Run on a CPU under Triton's interpreter in the tests (tests/runtime/test_triton_layer.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def rounded(x, dtype: tl.constexpr):
    """float32 x rounded to ``dtype``, to nearest with ties to even. For bf16 by hand: Triton's interpreter, which
    runs these kernels in the tests, truncates its own conversion to bf16 (a GPU rounds to nearest either way)."""
    if dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # to nearest, ties to even, at bf16's 16th bit
        return bits.to(tl.float32, bitcast=True).to(tl.bfloat16)  # exact: the low 16 bits are zero
    else:
        return x.to(dtype)


@triton.jit
def _rms_norm(x_ptr, weight_ptr, out_ptr, width, x_row, eps, BLOCK: tl.constexpr):
    row, column = tl.program_id(0), tl.arange(0, BLOCK)
    inside = column < width
    x = tl.load(x_ptr + row * x_row + column, mask=inside, other=0.0).to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(x * x, 0) / width + eps)
    normed = rounded(x * scale, out_ptr.dtype.element_ty).to(tl.float32)
    weight = tl.load(weight_ptr + column, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * width + column, rounded(weight * normed, out_ptr.dtype.element_ty), mask=inside)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm of x [R, H] (rows ``x.stride(0)`` apart, the last dimension contiguous), weight
    [H] -> [R, H] contiguous, in x's dtype."""
    rows, width = x.shape
    out = torch.empty(rows, width, dtype=x.dtype, device=x.device)
    _rms_norm[(rows,)](x, weight, out, width, x.stride(0), eps, BLOCK=triton.next_power_of_2(width))
    return out


@triton.jit
def _rotate(x_ptr, cos_ptr, sin_ptr, x_row, x_head, HALF: tl.constexpr):
    row, head, column = tl.program_id(0), tl.program_id(1), tl.arange(0, HALF)
    at = x_ptr + row * x_row + head * x_head + column
    first, second = tl.load(at).to(tl.float32), tl.load(at + HALF).to(tl.float32)
    dtype = x_ptr.dtype.element_ty
    cos_first = tl.load(cos_ptr + row * 2 * HALF + column).to(tl.float32)
    cos_second = tl.load(cos_ptr + row * 2 * HALF + HALF + column).to(tl.float32)
    sin_first = tl.load(sin_ptr + row * 2 * HALF + column).to(tl.float32)
    sin_second = tl.load(sin_ptr + row * 2 * HALF + HALF + column).to(tl.float32)
    # x cos + rotate_half(x) sin, rotate_half(x) = (-second, first); each product and the sum rounded
    new_first = rounded(first * cos_first, dtype).to(tl.float32) + rounded(-second * sin_first, dtype).to(tl.float32)
    new_second = rounded(second * cos_second, dtype).to(tl.float32) + rounded(first * sin_second, dtype).to(tl.float32)
    tl.store(at, rounded(new_first, dtype))
    tl.store(at + HALF, rounded(new_second, dtype))


def rotate_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in place on x [R, heads, D] (heads D apart, rows ``x.stride(0)`` apart; D a power of two
    times 2), by cos, sin [R, D] contiguous (each row's position). Returns x."""
    rows, heads, dim = x.shape
    _rotate[(rows, heads)](x, cos, sin, x.stride(0), x.stride(1), HALF=dim // 2)
    return x


@triton.jit
def _silu_mul(gate_up_ptr, out_ptr, width, BLOCK: tl.constexpr):
    row, block = tl.program_id(0), tl.program_id(1)
    column = block * BLOCK + tl.arange(0, BLOCK)
    inside = column < width
    gate = tl.load(gate_up_ptr + row * 2 * width + column, mask=inside, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + row * 2 * width + width + column, mask=inside, other=0.0).to(tl.float32)
    dtype = out_ptr.dtype.element_ty
    silu = rounded(gate / (1.0 + tl.exp(-gate)), dtype).to(tl.float32)
    tl.store(out_ptr + row * width + column, rounded(silu * up, dtype), mask=inside)


SILU_BLOCK = 1024  # columns a program


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up [R, 2I] contiguous (gate, then up) -> silu(gate) x up [R, I]."""
    rows, width = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty(rows, width, dtype=gate_up.dtype, device=gate_up.device)
    _silu_mul[(rows, triton.cdiv(width, SILU_BLOCK))](gate_up, out, width, BLOCK=SILU_BLOCK)
    return out
