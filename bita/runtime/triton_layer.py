"""A layer's elementwise work on a GPU in Triton kernels (``FusedLayerOps``, lean_llama.py): RMSNorm, the
residual's add with the norm after it, rotary with the cache write, SiLU(gate) x up. native_layer.c's
counterpart: transformers' torch operations take ~25 kernels a layer for these (casts, powers, means,
negations, concatenations, the residual adds, the cache's copies), each a launch even in a CUDA graph; here 4:
``add_rms_norm`` twice (the residual of each half, then the norm that follows it), ``rotate_store`` (queries
rotated in place, keys rotated and values copied into the cache at the rows' slots, the rotary table read at
the rows' positions) and ``silu_mul``.

Each program works within one row (a norm: the row's whole width in one block; rotary: one head of a row;
SiLU x up: a block of a row's columns), so a row's result depends only on the row: row-invariant by
construction, whatever the pass's rows. Values are rounded to the tensor's dtype where transformers' torch
operations store theirs (the residual's sum, the normalised row before the weight, each product and the sum
of rotary, SiLU before the product), so bf16 results stay within a rounding of transformers' (float32 sums may
round in another order than torch's mean), and the fused kernels give the bits of the steps they fuse.

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
def normalised(x, weight_ptr, column, inside, width, eps, dtype: tl.constexpr):
    """LlamaRMSNorm of one row x [BLOCK] float32 (zero past ``width``) by the weight at ``weight_ptr``, in dtype."""
    scale = 1.0 / tl.sqrt(tl.sum(x * x, 0) / width + eps)
    normed = rounded(x * scale, dtype).to(tl.float32)
    weight = tl.load(weight_ptr + column, mask=inside, other=0.0).to(tl.float32)
    return rounded(weight * normed, dtype)


@triton.jit
def _rms_norm(x_ptr, weight_ptr, out_ptr, width, x_row, eps, BLOCK: tl.constexpr):
    row, column = tl.program_id(0), tl.arange(0, BLOCK)
    inside = column < width
    x = tl.load(x_ptr + row * x_row + column, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * width + column,
             normalised(x, weight_ptr, column, inside, width, eps, out_ptr.dtype.element_ty), mask=inside)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm of x [R, H] (rows ``x.stride(0)`` apart, the last dimension contiguous), weight
    [H] -> [R, H] contiguous, in x's dtype."""
    rows, width = x.shape
    out = torch.empty(rows, width, dtype=x.dtype, device=x.device)
    _rms_norm[(rows,)](x, weight, out, width, x.stride(0), eps, BLOCK=triton.next_power_of_2(width))
    return out


@triton.jit
def _add_rms_norm(residual_ptr, x_ptr, weight_ptr, sum_ptr, out_ptr, width, eps, BLOCK: tl.constexpr):
    row, column = tl.program_id(0), tl.arange(0, BLOCK)
    inside = column < width
    at = row * width + column
    dtype = out_ptr.dtype.element_ty
    total = rounded(tl.load(residual_ptr + at, mask=inside, other=0.0).to(tl.float32)
                    + tl.load(x_ptr + at, mask=inside, other=0.0).to(tl.float32), dtype)
    tl.store(sum_ptr + at, total, mask=inside)
    tl.store(out_ptr + at, normalised(total.to(tl.float32), weight_ptr, column, inside, width, eps, dtype), mask=inside)


def add_rms_norm(residual: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """residual + x (both [R, H] contiguous) and its LlamaRMSNorm by weight [H], one kernel: (sum, normed), each
    [R, H] in x's dtype, the sum rounded to it before the norm reads it (transformers' ``residual + out``, then the
    next norm)."""
    rows, width = x.shape
    total, out = (torch.empty(rows, width, dtype=x.dtype, device=x.device) for _ in range(2))
    _add_rms_norm[(rows,)](residual, x, weight, total, out, width, eps, BLOCK=triton.next_power_of_2(width))
    return total, out


@triton.jit
def _rotate_store(qkv_ptr, cos_ptr, sin_ptr, positions_ptr, slots_ptr, keys_ptr, values_ptr, qkv_row, kv_head,
                  kv_slot, HEADS: tl.constexpr, KV_HEADS: tl.constexpr, HALF: tl.constexpr):
    """One program: head ``program_id(1)`` of row ``program_id(0)``: a query head rotated in place, a key head
    rotated into the key buffer, a value head copied into the value buffer, at the row's slot."""
    row, head, column = tl.program_id(0), tl.program_id(1), tl.arange(0, HALF)
    at = qkv_ptr + row * qkv_row + head * 2 * HALF + column
    first, second = tl.load(at), tl.load(at + HALF)
    slot = tl.load(slots_ptr + row)
    if head < HEADS + KV_HEADS:
        x_first, x_second = first.to(tl.float32), second.to(tl.float32)
        dtype = qkv_ptr.dtype.element_ty
        table = tl.load(positions_ptr + row) * 2 * HALF + column
        cos_first, cos_second = tl.load(cos_ptr + table).to(tl.float32), tl.load(cos_ptr + table + HALF).to(tl.float32)
        sin_first, sin_second = tl.load(sin_ptr + table).to(tl.float32), tl.load(sin_ptr + table + HALF).to(tl.float32)
        # x cos + rotate_half(x) sin, rotate_half(x) = (-second, first); each product and the sum rounded
        new_first = rounded(rounded(x_first * cos_first, dtype).to(tl.float32)
                            + rounded(-x_second * sin_first, dtype).to(tl.float32), dtype)
        new_second = rounded(rounded(x_second * cos_second, dtype).to(tl.float32)
                             + rounded(x_first * sin_second, dtype).to(tl.float32), dtype)
        if head < HEADS:
            tl.store(at, new_first)
            tl.store(at + HALF, new_second)
        else:
            into = keys_ptr + (head - HEADS) * kv_head + slot * kv_slot + column
            tl.store(into, new_first)
            tl.store(into + HALF, new_second)
    else:
        into = values_ptr + (head - HEADS - KV_HEADS) * kv_head + slot * kv_slot + column
        tl.store(into, first)
        tl.store(into + HALF, second)


def rotate_store(projected: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                 slots: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A layer's rotary and cache write, one kernel. projected [R, (heads + 2 kv_heads) D] (queries, keys, values;
    rows ``projected.stride(0)`` apart, the last dimension contiguous); cos, sin [T, D] the rotary tables
    (contiguous), positions [R] the rows' positions in them; slots [R] the rows' cache slots in keys, values
    [kv_heads, K, D] (a layer's buffers, D apart). The queries are rotated in place, the keys rotated into
    ``keys`` and the values copied into ``values``, at the rows' slots. Returns the queries [R, heads, D], a
    view of ``projected``."""
    rows, dim = projected.shape[0], keys.shape[-1]
    kv_heads = keys.shape[0]
    _rotate_store[(rows, heads + 2 * kv_heads)](projected, cos, sin, positions, slots, keys, values,
                                                projected.stride(0), keys.stride(0), keys.stride(1), HEADS=heads,
                                                KV_HEADS=kv_heads, HALF=dim // 2)
    return projected[:, :heads * dim].view(rows, heads, dim)


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
