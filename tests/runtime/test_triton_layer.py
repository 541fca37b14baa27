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
def test_the_residuals_add_and_the_norm_after_it_give_the_bits_of_the_two_steps(dtype):
    """One kernel for transformers' ``residual + out`` then the next RMSNorm: the sum rounded to the dtype, then
    normed as rms_norm norms it; a row's bits the same alone."""
    residual, x = random(5, 72, dtype=dtype), random(5, 72, dtype=dtype, seed=1)
    weight = random(72, dtype=dtype, seed=2)
    total, normed = triton_layer.add_rms_norm(residual, x, weight, 1e-5)
    assert torch.equal(total, residual + x)
    assert torch.equal(normed, triton_layer.rms_norm(residual + x, weight, 1e-5))
    alone = triton_layer.add_rms_norm(residual[2:3].clone(), x[2:3].clone(), weight, 1e-5)
    assert torch.equal(alone[0][0], total[2]) and torch.equal(alone[1][0], normed[2])


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_rotary_and_the_cache_write_give_the_bits_of_torchs_rotary_and_copies(dtype):
    """A projection's rows (3 query heads, 2 key/value heads, rows 8 columns apart past them) at positions read in
    the rotary table, written at scattered slots of a layer's buffers: queries rotated in place as
    TorchOps.rotate_ rotates them, keys rotated into the key buffer, values copied, every other slot untouched."""
    rows, heads, kv_heads, dim = 4, 3, 2, 16
    width = (heads + 2 * kv_heads) * dim
    projected = random(rows, width + 8, dtype=dtype)[:, :width]
    angles = random(50, dim, dtype=torch.float32, seed=2)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    positions, slots = torch.tensor([7, 8, 30, 49]), torch.tensor([3, 9, 4, 0])
    keys, values = random(kv_heads, 12, dim, dtype=dtype, seed=3), random(kv_heads, 12, dim, dtype=dtype, seed=4)
    expected = TorchOps.rotate_(projected.clone().view(rows, heads + 2 * kv_heads, dim)[:, :heads + kv_heads],
                                cos[positions], sin[positions])
    expected_keys, expected_values = keys.clone(), values.clone()
    expected_keys[:, slots] = expected[:, heads:].transpose(0, 1)
    expected_values[:, slots] = projected[:, (heads + kv_heads) * dim:].reshape(rows, kv_heads, dim).transpose(0, 1)
    queries = triton_layer.rotate_store(projected, heads, cos, sin, positions, slots, keys, values)
    assert queries.data_ptr() == projected.data_ptr() and queries.shape == (rows, heads, dim)
    assert torch.equal(queries, expected[:, :heads])  # the same products and sum, rounded where transformers rounds
    assert torch.equal(keys, expected_keys) and torch.equal(values, expected_values)


@pytest.mark.parametrize("dtype", list(TOLERANCES))
def test_silu_times_up_past_one_block(dtype):
    width = triton_layer.SILU_BLOCK + 40
    gate_up = random(3, 2 * width, dtype=dtype)
    out = triton_layer.silu_mul(gate_up)
    torch.testing.assert_close(out, TorchOps.silu_mul(gate_up), atol=TOLERANCES[dtype], rtol=TOLERANCES[dtype])
    assert torch.equal(triton_layer.silu_mul(gate_up[1:2].clone())[0], out[1])
