"""A layer's elementwise work in Triton (bita/runtime/triton_layer.py), run here under Triton's interpreter:
within a rounding of transformers' operations (``TorchOps``) in float32 and bf16, and a row's result the same
whatever rows run beside it."""

import pytest
import torch
import triton
import triton.language as tl

from bita.runtime import triton_layer
from bita.runtime.lean_llama import TorchOps

TOLERANCES = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}


@triton.jit
def _round(x_ptr, out_ptr, count, BLOCK: tl.constexpr):
    at = tl.arange(0, BLOCK)
    tl.store(out_ptr + at, triton_layer.rounded(tl.load(x_ptr + at, mask=at < count), out_ptr.dtype.element_ty),
             mask=at < count)


def test_bf16_rounds_to_nearest_with_ties_to_even_as_torch_does():
    """``rounded``, every kernel's conversion to bf16 (Triton's interpreter truncates its own, which drifted a
    30-layer bf16 model 0.5 from transformers'): random values, two ties, the largest float32s."""
    values = torch.cat([100 * random(4093, dtype=torch.float32), torch.tensor([1.00390625, 1.01171875, -3e38])])
    out = torch.empty(len(values), dtype=torch.bfloat16)
    _round[(1,)](values, out, len(values), BLOCK=4096)
    assert torch.equal(out, values.to(torch.bfloat16)) and out[-3:-1].tolist() == [1.0, 1.015625]


def random(*shape, dtype, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_rms_norm_on_rows_apart(dtype):
    """Rows 96 apart (a slice of a wider tensor), a width that is not a power of two."""
    wide, weight = random(5, 96, dtype=dtype), random(72, dtype=dtype, seed=1)
    x = wide[:, :72]
    out = triton_layer.rms_norm(x, weight, 1e-5)
    torch.testing.assert_close(out, TorchOps.rms_norm(x, weight, 1e-5), atol=TOLERANCES[dtype], rtol=TOLERANCES[dtype])
    assert torch.equal(triton_layer.rms_norm(x[3:4], weight, 1e-5)[0], out[3])


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_rotary_in_place_on_queries_and_keys_of_a_projection(dtype):
    """x: the first 6 heads of 7 in a projection's rows (keys and queries; the values after them untouched)."""
    rows, heads, dim = 4, 6, 16
    projected = random(rows, 7 * dim, dtype=dtype)
    angles = random(rows, dim, dtype=torch.float32, seed=2)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    expected = TorchOps.rotate_(projected[:, :heads * dim].clone().view(rows, heads, dim), cos, sin)
    values = projected[:, heads * dim:].clone()
    out = triton_layer.rotate_(projected[:, :heads * dim].view(rows, heads, dim), cos, sin)
    assert out.data_ptr() == projected.data_ptr() and torch.equal(projected[:, heads * dim:], values)
    assert torch.equal(out, expected)  # the same products and sum, rounded where transformers rounds them


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_silu_times_up_past_one_block(dtype):
    width = triton_layer.SILU_BLOCK + 40
    gate_up = random(3, 2 * width, dtype=dtype)
    out = triton_layer.silu_mul(gate_up)
    torch.testing.assert_close(out, TorchOps.silu_mul(gate_up), atol=TOLERANCES[dtype], rtol=TOLERANCES[dtype])
    assert torch.equal(triton_layer.silu_mul(gate_up[1:2].clone())[0], out[1])
