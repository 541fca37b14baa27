"""native_linear.c: a row's result is bitwise the same in a pass of any number of rows and at any place in it (bf16
and fp32, with bias and residual), close to torch's F.linear; and every ISA path the file holds (AVX-512 with and
without AVX512-BF16, AVX2 + FMA) builds and gives those same bits, each compiled alone where this CPU runs it."""

import ctypes
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bita.runtime import native
from bita.runtime.device import cpu_info

SOURCE = Path(native.__file__).with_name("native_linear.c")
ROW_COUNTS = range(1, 41)
SHAPES = ((70, 37), (96, 64), (33, 130))  # [out, in]: a partial tile, an odd K (bf16 pads a pair), whole tiles
ISAS = {  # name: (compiler flags past native.py's, the CPU flags it needs)
    "native": ((), ()),
    "avx512": (("-mno-avx512bf16",), ("avx512f", "avx512bw", "avx512dq", "avx512vl")),
    "avx2": (("-mno-avx512f",), ("avx2", "fma")),
}

pytestmark = pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))


def _build(folder: Path, isa: str) -> ctypes.CDLL:
    """native_linear.c alone, compiled with native.py's flags and ``ISAS[isa]``'s, loaded (skips where this CPU
    lacks the ISA)."""
    extra, needed = ISAS[isa]
    flags = set(cpu_info().get("flags", "").split())
    missing = [flag for flag in needed if flag not in flags]
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}")
    target = folder / f"linear-{isa}.so"
    if not target.exists():
        subprocess.run([native._compiler(), *native.FLAGS, *extra, f"-I{SOURCE.parent}", str(SOURCE), "-o",
                        str(target)], check=True, capture_output=True, timeout=native.COMPILE_TIMEOUT)
    library = ctypes.CDLL(str(target))
    for name in ("bita_linear_bf16", "bita_linear_f32"):
        getattr(library, name).argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 4
    for name in ("bita_pack_bf16", "bita_pack_f32"):
        getattr(library, name).argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] * 2
    library.bita_isa.restype = ctypes.c_char_p
    return library


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("native_linear")
    return lambda isa: _build(folder, isa)


def _suffix(dtype: torch.dtype) -> str:
    return "bf16" if dtype == torch.bfloat16 else "f32"


def _pack(library: ctypes.CDLL, weight: torch.Tensor) -> torch.Tensor:
    rows, columns = weight.shape
    depth = (columns + 1) // 2 * 2 if weight.dtype == torch.bfloat16 else columns
    packed = torch.empty(-(-rows // library.bita_tile()) * depth * library.bita_tile(), dtype=weight.dtype)
    getattr(library, f"bita_pack_{_suffix(weight.dtype)}")(weight.data_ptr(), packed.data_ptr(), rows, columns)
    return packed


def _linear(library: ctypes.CDLL, x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None,
            residual: torch.Tensor | None, out_features: int, threads: int = 2) -> torch.Tensor:
    rows, columns = x.shape
    out = torch.empty(rows, out_features, dtype=x.dtype)
    getattr(library, f"bita_linear_{_suffix(x.dtype)}")(
        x.data_ptr(), packed.data_ptr(), bias.data_ptr() if bias is not None else None,
        residual.data_ptr() if residual is not None else None, out.data_ptr(), rows, out_features, columns, threads)
    return out


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s bits as integers (NaNs and signed zeros compared too)."""
    return tensor.view(torch.int16 if tensor.dtype == torch.bfloat16 else torch.int32)


def _case(dtype: torch.dtype, shape: tuple[int, int], seed: int):
    generator = torch.Generator().manual_seed(seed)
    out_features, columns = shape
    weight = (torch.randn(out_features, columns, generator=generator) / columns ** 0.5).to(dtype)
    bias = torch.randn(out_features, generator=generator)
    x = torch.randn(max(ROW_COUNTS), columns, generator=generator).to(dtype)
    residual = torch.randn(max(ROW_COUNTS), out_features, generator=generator).to(dtype)
    return weight, bias, x, residual


def _invariant(library: ctypes.CDLL, dtype: torch.dtype, shape: tuple[int, int]) -> dict:
    """Every pass of M rows (M in ROW_COUNTS, with and without bias and residual) against each row alone, bitwise;
    returns the results of the largest passes (by bias/residual), for comparing builds."""
    weight, bias, x, residual = _case(dtype, shape, seed=sum(shape))
    packed = _pack(library, weight)
    largest = {}
    for with_bias in (False, True):
        for with_residual in (False, True):
            b = bias if with_bias else None
            add = residual if with_residual else None
            alone = torch.cat([_linear(library, x[i:i + 1].contiguous(), packed, b,
                                       add[i:i + 1].contiguous() if add is not None else None, shape[0], threads=1)
                               for i in range(x.shape[0])])
            for rows in ROW_COUNTS:
                start = (7 * rows) % (x.shape[0] - rows + 1)  # the rows sit at varying places of x
                part = x[start:start + rows].contiguous()
                got = _linear(library, part, packed, b,
                              add[start:start + rows].contiguous() if add is not None else None, shape[0])
                assert torch.equal(_bits(got), _bits(alone[start:start + rows])), \
                    f"{rows} rows from row {start}: a row differs from itself computed alone"
            expected = F.linear(x.float(), weight.float(), b)
            if add is not None:
                expected = expected.to(dtype).float() + add.float()
            tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-4
            torch.testing.assert_close(alone.float(), expected, atol=tolerance, rtol=tolerance)
            largest[with_bias, with_residual] = alone
    return largest


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}" for n, k in SHAPES])
def test_rows_invariant_and_isas_agree(libraries, dtype, shape):
    results = {}
    for isa in ISAS:
        try:
            library = libraries(isa)
        except pytest.skip.Exception:
            continue
        results[isa] = _invariant(library, dtype, shape)
    reference = results.pop("native")
    for isa, result in results.items():  # one order of sums, one FMA a product: the same bits on every ISA
        for key, value in result.items():
            assert torch.equal(_bits(value), _bits(reference[key])), f"{isa} differs from the native build ({key})"


def test_the_runtime_library_agrees(libraries):
    """native.linear (the runtime's library, all three C files) gives this file's bits."""
    library = libraries("native")
    for dtype in (torch.bfloat16, torch.float32):
        weight, bias, x, residual = _case(dtype, (70, 37), seed=1)
        ours = native.linear(x, native.pack(weight), bias, 70, residual=residual)
        assert torch.equal(_bits(ours), _bits(_linear(library, x, _pack(library, weight), bias, residual, 70)))
