"""The native kernel path (bita/runtime/native.py, native_linear.c): the linear it computes, a row's result the
same whatever the pass's row count, and one clear reason where it cannot be built."""

import pytest
import torch
import torch.nn.functional as F

from bita.runtime import native
from bita.runtime.kernel_plan import NATIVE, row_floor, run_path, weight_copy

needs_native = pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))
DTYPES = [torch.float32, torch.bfloat16]


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("out_features", "in_features"), [(40, 24), (33, 7), (96, 130), (5, 1)])
def test_the_native_path_computes_the_linear(dtype, out_features, in_features):
    """Shapes off the kernel's tile (32 outputs) and pairs (odd inputs), with a bias, 0 to 13 rows."""
    generator = torch.Generator().manual_seed(out_features)
    weight = torch.randn(out_features, in_features, generator=generator).to(dtype)
    bias = torch.randn(out_features, generator=generator).to(dtype)
    packed = native.pack(weight)
    for rows in (0, 1, 2, 6, 7, 13):
        x = torch.randn(rows, in_features, generator=generator).to(dtype)
        expected = F.linear(x.double(), weight.double(), bias.double())
        out = native.linear(x, packed, bias, out_features)
        assert out.dtype == dtype and out.shape == (rows, out_features)
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(out.double(), expected, atol=tolerance * in_features ** 0.5, rtol=tolerance)


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_rows_result_does_not_depend_on_the_passs_other_rows(dtype):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(200, 576, generator=generator).to(dtype)
    x = torch.randn(64, 576, generator=generator).to(dtype)
    copy = weight_copy(NATIVE, weight)
    whole = run_path(NATIVE, x, weight, None, copy)
    for size in (1, 2, 5, 7, 13):
        for start in range(0, 64 - size + 1, size):
            assert torch.equal(run_path(NATIVE, x[start:start + size], weight, None, copy), whole[start:start + size])
    assert row_floor(NATIVE, weight, None, copy) == 1


def test_without_a_compiler_it_says_why(monkeypatch, tmp_path):
    monkeypatch.delenv(native.SWITCH, raising=False)
    monkeypatch.setattr(native, "_library", None)
    monkeypatch.setattr(native, "_failure", None)
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    assert native.unavailable(tmp_path) == "the native kernel could not be built: no C compiler found (cc, gcc or " \
                                           "clang; or set CC)"
    assert native.pack(torch.randn(4, 4)) is None


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_layer_kernels_compute_what_transformers_computes(dtype):
    """RMSNorm, rotary (in place), SiLU x up and a linear adding the residual, against transformers' torch
    operations: float32 within float rounding, bfloat16 within one bf16 rounding (their sums run in another
    order); rows that are views (apart in memory) and sizes off the vector width."""
    generator = torch.Generator().manual_seed(5)
    wide = torch.randn(6, 600, generator=generator).to(dtype)
    x, weight = wide[:, :580], torch.randn(580, generator=generator).to(dtype)  # rows 600 apart
    rounding = 1e-5 if dtype == torch.float32 else 1e-2
    variance = x.float().pow(2).mean(-1, keepdim=True)
    expected = weight * (x.float() * torch.rsqrt(variance + 1e-5)).to(dtype)
    torch.testing.assert_close(native.rms_norm(x, weight, 1e-5), expected, atol=rounding * 4, rtol=rounding)

    heads = torch.randn(6, 5, 72, generator=generator).to(dtype)  # D 72: 4 lanes past the vector width
    cos, sin = torch.randn(6, 72, generator=generator).to(dtype), torch.randn(6, 72, generator=generator).to(dtype)
    expected = heads * cos[:, None] + torch.cat([-heads[..., 36:], heads[..., :36]], -1) * sin[:, None]
    torch.testing.assert_close(native.rotate_(heads.clone(), cos, sin), expected, atol=rounding * 4, rtol=rounding)

    gate_up = torch.randn(6, 2 * 100, generator=generator).to(dtype)
    expected = F.silu(gate_up[:, :100]) * gate_up[:, 100:]
    torch.testing.assert_close(native.silu_mul(gate_up), expected, atol=rounding * 4, rtol=rounding)

    linear_weight = torch.randn(70, 40, generator=generator).to(dtype)
    inputs, residual = torch.randn(6, 40, generator=generator).to(dtype), torch.randn(6, 70, generator=generator).to(dtype)
    product = native.linear(inputs, native.pack(linear_weight), None, 70)
    assert torch.equal(native.linear(inputs, native.pack(linear_weight), None, 70, residual), residual + product)


def test_the_switch_turns_them_off(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_library", None)
    monkeypatch.setattr(native, "_failure", None)
    monkeypatch.setenv(native.SWITCH, "0")
    assert native.unavailable(tmp_path) == "the native kernels are off (BITA_NATIVE=0)"
    assert not list(tmp_path.iterdir())  # nothing built
