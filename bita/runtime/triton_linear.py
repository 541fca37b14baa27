"""Linears row-invariant at any row count on a GPU (Triton): a matrix product whose tiles never change.

cuBLAS picks its kernel, tile sizes and split of the reduction by the product's shape, so a row of a 1-row
product (an AR pass) and the same row among 40 (a tree pass) may be summed in different orders and differ in
the last bit. Here every product runs one kernel with fixed tiles (``BLOCK_ROWS`` x ``BLOCK_OUT`` outputs a
program, the reduction in blocks of ``BLOCK_IN`` inputs, one after the other, each a ``tl.dot`` of float32
values, no TF32, accumulating in float32: bf16 products are exact in float32, and Triton's interpreter, which
tests this kernel, has no bf16 products), so an output's sum runs the same steps whatever the row count and
wherever its row sits: a row's result depends on the row and the weight alone (the fixed-tile approach of
batch-invariant matmuls). A bias is added to the float32 sum (as cuBLAS's epilogue adds it); a residual is
added by the norm after the product (triton_layer.add_rms_norm).

Tested under Triton's interpreter (tests/runtime/test_triton_linear.py) and compiled for sm_90 and sm_80
without a GPU (tests/runtime/test_triton_compile.py).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .triton_layer import rounded

BLOCK_ROWS, BLOCK_OUT, BLOCK_IN = 16, 64, 64
# Under Triton's interpreter (the tests, on a CPU) tl.dot is numpy's matmul, whose BLAS may sum a row's products in
# an order that depends on the row's place in the tile (OpenBLAS's Haswell sgemm on a Zen 3: one row at 16 places,
# 20 of 32 differed); there a block's products are summed input by input instead: the same steps for every row, as
# the compiled kernel's fixed tiles take on a GPU.
INTERPRETED = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")


@triton.jit(do_not_specialize=["rows"])  # one compiled kernel for every row count (the LM head's vary a pass)
def _linear(x_ptr, weight_ptr, bias_ptr, out_ptr, rows, outs, ins, x_row,
            HAS_BIAS: tl.constexpr, ROWS: tl.constexpr, OUTS: tl.constexpr, INS: tl.constexpr):
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    out = tl.program_id(1) * OUTS + tl.arange(0, OUTS)
    row_inside, out_inside = row < rows, out < outs
    total = tl.zeros([ROWS, OUTS], tl.float32)
    for start in range(0, ins, INS):
        column = start + tl.arange(0, INS)
        column_inside = column < ins
        x = tl.load(x_ptr + row[:, None] * x_row + column[None, :], mask=row_inside[:, None] & column_inside[None, :],
                    other=0.0)  # [ROWS, INS]
        weight = tl.load(weight_ptr + out[None, :] * ins + column[:, None],
                         mask=out_inside[None, :] & column_inside[:, None], other=0.0)  # [INS, OUTS]
        x, weight = x.to(tl.float32), weight.to(tl.float32)
        if INTERPRETED:
            total += tl.sum(x[:, :, None] * weight[None, :, :], axis=1)
        else:
            total = tl.dot(x, weight, total, input_precision="ieee")
    dtype = out_ptr.dtype.element_ty
    if HAS_BIAS:
        total += tl.load(bias_ptr + out, mask=out_inside, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + row[:, None] * outs + out[None, :], rounded(total, dtype),
             mask=row_inside[:, None] & out_inside[None, :])


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., in] (the last dimension contiguous) -> [..., out] = x W^T (+ bias), W = ``weight`` [out, in]
    contiguous, in x's dtype."""
    flat = x.reshape(-1, x.shape[-1])
    rows, (outs, ins) = flat.shape[0], weight.shape
    out = torch.empty(rows, outs, dtype=x.dtype, device=x.device)
    if rows:
        _linear[(triton.cdiv(rows, BLOCK_ROWS), triton.cdiv(outs, BLOCK_OUT))](
            flat, weight, bias if bias is not None else weight, out, rows, outs, ins, flat.stride(0),
            HAS_BIAS=bias is not None, ROWS=BLOCK_ROWS, OUTS=BLOCK_OUT, INS=BLOCK_IN)
    return out.view(*x.shape[:-1], outs)
