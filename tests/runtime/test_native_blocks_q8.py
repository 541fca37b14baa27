"""The 8-bit-activation kernel on GGUF blocks (native_blocks_q8.c), for each block type it reads (Q4_0, Q4_1, Q8_0
and Q5_0 written by gguf-py; Q4_K, Q5_K, Q6_K random blocks, de-quantised by gguf-py for the reference): a row's result is the same bits alone and among any other rows, in float32 and bf16; it is the
arithmetic its docstring states (each row's block of 32 quantised to dx = max|x| / 127 and round(x / dx), exact
integer block sums, scaled block after block), checked against numpy's; it stays close to a float64 product; and
every ISA build of it (AVX2, AVX512-BW, AVX512-VNNI, AVX-VNNI) compiles, the ones this CPU runs checked in full."""

import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import forget_native
from gguf import GGMLQuantizationType
from gguf_weights import BLOCK_TYPES, Q8_ONLY_TYPES, block_weight

from bita.runtime import native
from bita.runtime.blocks import blocks_of, with_blocks
from bita.runtime.kernel_plan import BLOCKS_Q8, offered_paths

SHAPES = ((70, 64), (96, 32), (33, 128), (16, 160))  # [out, in]: outputs off a tile, one block, several, one tile
SUPER_SHAPES = ((70, 256), (33, 512), (16, 768))  # the same for K-quants' blocks of 256
ROWS = (1, 2, 4, 5, 6, 9, 12, 13, 16, 17, 24)  # about each sweep's row block (5 on AVX2, 12 on AVX-512)
needs_q8 = pytest.mark.skipif(native.q8_unavailable() is not None, reason=str(native.q8_unavailable()))
ALL_TYPES = BLOCK_TYPES + Q8_ONLY_TYPES
kinds = pytest.mark.parametrize("kind", ALL_TYPES, ids=[kind.name for kind in ALL_TYPES])
# each ISA build: its -march and the CPU flags it needs to run (none: compiled and named, not run here)
BUILDS = {"haswell": ("avx2", ("avx2", "fma")), "skylake-avx512": ("avx512bw", ("avx512f", "avx512bw")),
          "icelake-server": ("avx512-vnni", ("avx512f", "avx512bw", "avx512_vnni")),
          "alderlake": ("avx-vnni", ("avx2", "avx_vnni"))}


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int16 if tensor.dtype == torch.bfloat16 else torch.int32)


def quantised(x: np.ndarray) -> np.ndarray:
    """x [M, K] float32 as the kernel takes it: each row's block of 32 quantised (dx = max|x| / 127, q = round(x / dx),
    nearest even) and given back as q dx, in float64."""
    blocks = x.reshape(x.shape[0], -1, 32)
    dx = (np.abs(blocks).max(-1) / np.float32(127)).astype(np.float32)
    inverse = np.where(dx != 0, np.float32(1) / np.where(dx != 0, dx, 1), 0).astype(np.float32)
    q = np.rint(blocks * inverse[..., None])
    return (q * dx[..., None].astype(np.float64)).reshape(x.shape)


def _check(tmp_path, kind, dtype: torch.dtype) -> None:
    """Each shape, with and without bias and residual: a row alone and among 1..24 rows at varying places (two
    threads) gives the same bits; in float32 they are the stated arithmetic's (the rows quantised, then multiplied
    by the de-quantised weight exactly: the integer sums are exact, the float32 scaling rounds a little); all close
    to a float64 product of the rows as they are."""
    for index, shape in enumerate(SHAPES if kind in BLOCK_TYPES else SUPER_SHAPES):
        weight = block_weight(tmp_path, *shape, kind, seed=index)
        copy = native.pack(with_blocks(weight.to(dtype), blocks_of(weight)), BLOCKS_Q8)
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(max(ROWS), shape[1], generator=generator).to(dtype)
        bias = torch.randn(shape[0], generator=generator)
        residual = torch.randn(max(ROWS), shape[0], generator=generator).to(dtype)
        for extra_bias, extra_residual in ((None, None), (bias, residual)):
            def product(part):
                return native.linear(x[part], copy, extra_bias, shape[0],
                                     None if extra_residual is None else extra_residual[part], BLOCKS_Q8)
            alone = torch.cat([product(slice(i, i + 1)) for i in range(len(x))])
            for rows in ROWS:
                start = (5 * rows) % (len(x) - rows + 1)
                part = slice(start, start + rows)
                assert torch.equal(_bits(product(part)), _bits(alone[part])), f"{shape}, {rows} rows from {start}"
            if extra_bias is None:
                exact = F.linear(x.double(), weight.double())
                scale = exact.abs().max().item()
                torch.testing.assert_close(alone.double(), exact, atol=4e-2 * scale, rtol=4e-2)
                if dtype == torch.float32:
                    stated = quantised(x.numpy()) @ weight.double().numpy().T
                    np.testing.assert_allclose(alone.numpy(), stated, rtol=1e-5, atol=1e-5 * scale)


@needs_q8
@kinds
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bf16"])
def test_a_row_is_the_same_alone_and_among_others_and_the_stated_arithmetic(tmp_path, kind, dtype):
    _check(tmp_path, kind, dtype)


@needs_q8
def test_the_kernel_is_offered_on_blocks_alone_and_refuses_another_copy(tmp_path):
    weight = block_weight(tmp_path, 40, 64, GGMLQuantizationType.Q4_1)
    assert BLOCKS_Q8 in offered_paths(weight) and BLOCKS_Q8 not in offered_paths(weight.clone())
    assert native.pack(weight.clone(), BLOCKS_Q8) is None
    packed = native.pack(weight, BLOCKS_Q8)
    assert packed.numel() == native.pack(weight, "blocks").numel()  # no larger than the float kernel's copy
    with pytest.raises(ValueError):
        native.linear(torch.randn(2, 64), packed, None, 41, kernel=BLOCKS_Q8)
    zeros = native.linear(torch.zeros(3, 64), packed, None, 40, kernel=BLOCKS_Q8)
    assert torch.equal(zeros, torch.zeros(3, 40))  # dx = 0: no division by it


@pytest.mark.parametrize("march", list(BUILDS))
def test_each_isa_build(monkeypatch, tmp_path, march):
    """Every ISA build compiles and names the byte products it runs; the ones this CPU runs are built whole and
    checked in full, the others compiled alone (the kernel's source, for that -march)."""
    compiler = native._compiler()
    if compiler is None or native.unavailable() is not None:
        pytest.skip(str(native.unavailable() or "no C compiler"))
    named, needs = BUILDS[march]
    flags = native.cpu_info().get("flags", "").split()
    if not all(flag in flags for flag in needs):  # compiled for a CPU this one is not: not run
        source = next(path for path in native.SOURCES if path.name == "native_blocks_q8.c")
        built = subprocess.run([compiler, "-O2", f"-march={march}", "-c", str(source), "-o", str(tmp_path / "q8.o")],
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        assert named.encode() + b"\0" in (tmp_path / "q8.o").read_bytes()  # INTEGER_DOTS, as the build holds it
        return
    forget_native(monkeypatch, march)
    assert native.unavailable(tmp_path / "native") is None and native.integer_dots() == named
    for kind in ALL_TYPES:
        _check(tmp_path, kind, torch.float32)
