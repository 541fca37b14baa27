"""Native kernels: frozen linears at the memory's pace for a few rows (native_linear.c) and row-invariant attention
over a static KV cache (native_attention.c), both summing in an order fixed by a row's own data.

oneDNN's and BLAS's products read a one-row pass's weights at about half the memory's pace on a 2-vCPU AMD EPYC
(family 25 model 17: 12.5 ms for the default model's linears in bf16 at 1 row, where 269 MB stream in about
8 ms), and their per-row arithmetic depends on the row count (``kernel_plan.row_floor``). native_linear.c packs
each weight once into contiguous tiles of 32 outputs and sums each output in vector lanes in the order of k, so
a pass streams every weight once and a row's result does not depend on the pass's other rows.

native_layer.c does a layer's elementwise work (RMSNorm, rotary, SiLU x up) in one call each, and a linear adds
the residual as it stores its output.

native_attention.c gives each row the attention of its visible cache slots taken in slot order (its logical keys:
the same sequence for a row in an AR pass and in a tree pass), with every sum in an order fixed by that sequence;
it replaces exact_attention.py's torch operations (about 25 a layer; 131 us a layer for one row after 300 cached
here, 359 us for 8 tree rows) in the lean forward.

The C files are compiled once per machine, at first use, with the system's C compiler (``cc``, or ``$CC``) and
``-O3 -march=native -fopenmp``, into ``directory`` (the bita cache's ``native/``), named by a hash of the sources,
the compiler's version and this CPU's flags; the library is loaded with ctypes and runs on torch's OpenMP threads
(``torch.get_num_threads()``). Where it cannot be built (no compiler, no AVX2 and FMA), or ``BITA_NATIVE=0``,
``unavailable`` says why in one line: the kernel plan does not offer the native path and the lean forward runs
torch's operations (exact_attention.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from .device import cpu_info

SOURCES = tuple(Path(__file__).with_name(name) for name in ("native_linear.c", "native_attention.c", "native_layer.c"))
HEADER = Path(__file__).with_name("native_simd.h")
DTYPES = (torch.bfloat16, torch.float32)
SWITCH = "BITA_NATIVE"  # 0: never build or run the native kernels (torch's paths run, as where they cannot build)
_library: ctypes.CDLL | None = None
_failure: str | None = None


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")


def _build(directory: Path) -> ctypes.CDLL:
    """Compile the native kernels for this machine into ``directory`` (once: kept by name) and load them."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C compiler found (cc, gcc or clang; or set CC)")
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False).stdout
    source = b"".join(path.read_bytes() for path in (*SOURCES, HEADER))
    digest = hashlib.sha1(source + version.encode() + cpu_info().get("flags", "").encode()).hexdigest()[:16]
    target = directory / f"native_linear-{digest}.so"
    if not target.exists():
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            built = Path(scratch) / target.name
            result = subprocess.run([compiler, "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC",
                                     *map(str, SOURCES), "-o", str(built)], capture_output=True, text=True, check=False)
            if result.returncode:
                raise RuntimeError(f"{Path(compiler).name} failed: {result.stderr.strip().splitlines()[-1:]}")
            built.replace(target)  # atomic: a concurrent process finds a whole file or none
    library = ctypes.CDLL(str(target))
    pointer, integer = ctypes.c_void_p, ctypes.c_int
    for name in ("bita_linear_bf16", "bita_linear_f32"):
        getattr(library, name).argtypes = [pointer] * 5 + [integer] * 4
    for name in ("bita_rms_norm_bf16", "bita_rms_norm_f32"):
        getattr(library, name).argtypes = [pointer] * 3 + [integer] * 3 + [ctypes.c_float, integer]
    for name in ("bita_rotary_bf16", "bita_rotary_f32"):
        getattr(library, name).argtypes = [pointer] * 3 + [integer] * 5
    for name in ("bita_silu_mul_bf16", "bita_silu_mul_f32"):
        getattr(library, name).argtypes = [pointer] * 2 + [integer] * 3
    for name in ("bita_pack_bf16", "bita_pack_f32"):
        getattr(library, name).argtypes = [pointer] * 2 + [integer] * 2
    for name in ("bita_attend_bf16", "bita_attend_f32"):
        getattr(library, name).argtypes = [pointer] * 5 + [integer] * 6 + [ctypes.c_float, integer]
    library.bita_attention_limits.argtypes = [ctypes.POINTER(ctypes.c_int)] * 2
    library.bita_isa.restype = ctypes.c_char_p
    return library


def unavailable(directory: Path | None = None) -> str | None:
    """Why the native path cannot run here (None: it can), building it at the first call in this process in
    ``directory`` (None: a folder in the system's temporary directory)."""
    global _library, _failure
    if _library is None and _failure is None:
        where = directory or Path(tempfile.gettempdir()) / f"bita-native-{os.getuid()}"
        if os.environ.get(SWITCH, "1") == "0":
            _failure = f"the native kernels are off ({SWITCH}=0)"
            return _failure
        try:
            _library = _build(where)
        except (OSError, RuntimeError) as error:
            _failure = f"the native kernel could not be built: {error}"
    return _failure


def describe() -> str:
    """The SIMD code the native path runs, e.g. 'avx512-bf16' (``unavailable()`` first)."""
    return _library.bita_isa().decode() if _library is not None else "unavailable"


def pack(weight: torch.Tensor) -> torch.Tensor | None:
    """``weight`` [N, K] (bf16 or float32, on the CPU) packed for ``linear`` (flat, in the weight's dtype), or None
    where the native path cannot run it."""
    if weight.dtype not in DTYPES or weight.device.type != "cpu" or unavailable() is not None:
        return None
    rows, columns = weight.shape
    tile = _library.bita_tile()
    tiles, depth = -(-rows // tile), (columns + 1) // 2 * 2 if weight.dtype == torch.bfloat16 else columns
    packed = torch.empty(tiles * depth * tile, dtype=weight.dtype)
    source = weight.detach().contiguous()
    name = "bita_pack_bf16" if weight.dtype == torch.bfloat16 else "bita_pack_f32"
    getattr(_library, name)(source.data_ptr(), packed.data_ptr(), rows, columns)
    return packed


def _suffix(dtype: torch.dtype) -> str:
    return "bf16" if dtype == torch.bfloat16 else "f32"


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] (the packed weight's dtype) -> [..., out_features] = x W^T + bias, W the weight ``pack`` packed;
    with ``residual`` (contiguous, the output's shape) residual + that, the product rounded to the dtype first."""
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty(flat.shape[0], out_features, dtype=x.dtype)
    if flat.shape[0]:
        bias32 = bias.detach().float().contiguous() if bias is not None else None
        getattr(_library, f"bita_linear_{_suffix(x.dtype)}")(
            flat.data_ptr(), packed.data_ptr(), bias32.data_ptr() if bias32 is not None else None,
            residual.data_ptr() if residual is not None else None, out.data_ptr(), flat.shape[0], out_features,
            flat.shape[1], torch.get_num_threads())
    return out.view(*x.shape[:-1], out_features)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm of x [R, H] (rows may be apart; the last dimension contiguous), weight [H] in x's
    dtype: [R, H] (native_layer.c)."""
    out = torch.empty(x.shape, dtype=x.dtype)
    getattr(_library, f"bita_rms_norm_{_suffix(x.dtype)}")(x.data_ptr(), weight.data_ptr(), out.data_ptr(), x.shape[0],
                                                            x.shape[1], x.stride(0), eps, torch.get_num_threads())
    return out


def rotate_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in place on x [R, heads, D] (heads D apart, rows ``x.stride(0)`` apart), by cos, sin [R, D]
    contiguous (each row's position): x cos + rotate_half(x) sin, as transformers computes it. Returns x."""
    rows, heads, dim = x.shape
    getattr(_library, f"bita_rotary_{_suffix(x.dtype)}")(x.data_ptr(), cos.data_ptr(), sin.data_ptr(), rows, heads, dim,
                                                          x.stride(0), torch.get_num_threads())
    return x


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up [R, 2I] contiguous (gate, then up) -> silu(gate) * up [R, I], as transformers computes it."""
    rows, width = gate_up.shape
    out = torch.empty(rows, width // 2, dtype=gate_up.dtype)
    getattr(_library, f"bita_silu_mul_{_suffix(gate_up.dtype)}")(gate_up.data_ptr(), out.data_ptr(), rows, width // 2,
                                                                  torch.get_num_threads())
    return out


def attention_unsupported(heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> str | None:
    """Why ``attend`` cannot run a model of this shape and dtype on this machine (None: it can)."""
    why = unavailable()
    if why is not None:
        return why
    most_groups, most_dim = ctypes.c_int(), ctypes.c_int()
    lanes = _library.bita_attention_limits(ctypes.byref(most_groups), ctypes.byref(most_dim))
    if dtype not in DTYPES or heads % kv_heads or heads // kv_heads > most_groups.value or head_dim % lanes \
            or head_dim > most_dim.value:
        return (f"native attention takes bf16 or float32, up to {most_groups.value} query heads per key/value head and "
                f"a head dimension that is a multiple of {lanes} up to {most_dim.value}")
    return None


def attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Each row's attention over the cache slots it sees, in slot order (native_attention.c): query [R, heads, D],
    keys and values [kv_heads, capacity, D] a layer's whole buffers (contiguous, the query's dtype), allowed [R, K]
    bool (K <= capacity: which slots each row sees). Returns [R, heads, D] (``attention_unsupported`` first)."""
    rows, heads, dim = query.shape
    query, mask = query.contiguous(), allowed.contiguous()
    out = torch.empty_like(query)
    getattr(_library, f"bita_attend_{_suffix(query.dtype)}")(query.data_ptr(), keys.data_ptr(), values.data_ptr(), mask.data_ptr(), out.data_ptr(),
                            rows, heads, keys.shape[0], dim, keys.shape[1], mask.shape[1], dim ** -0.5,
                            torch.get_num_threads())
    return out
