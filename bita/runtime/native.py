"""Native kernels: frozen linears at the memory's pace for a few rows (native_linear.c) and row-invariant attention
over a static KV cache (native_attention.c), both summing in an order fixed by a row's own data.

oneDNN's and BLAS's products read a one-row pass's weights at about half the memory's pace on a 2-vCPU AMD EPYC
(family 25 model 17: 12.5 ms for the default model's linears in bf16 at 1 row, where 269 MB stream in about
8 ms), and their per-row arithmetic depends on the row count (``kernel_plan.row_floor``). native_linear.c packs
each weight once into contiguous tiles of 32 outputs and sums each output in vector lanes in the order of k, so
a pass streams every weight once and a row's result does not depend on the pass's other rows.

native_amx.c computes the same linears in bf16 on Intel's AMX tiles (TDPBF16PS: 16 rows x 16 outputs x 32 inputs an
instruction), each row's sums in an order fixed by the row alone, so that a tree pass's 16 rows cost about what one
row costs; it is compiled into the library only where the compiler's -march=native enables AMX-BF16, and runs once
Linux grants the process the tiles (``amx_unavailable`` says why not, in one line).

Where the CPU has AVX512-BF16, native_linear.c also holds the "dot" kernel: the same tiles, each lane's pair of
products added by one vdpbf16ps instead of two float32 FMAs (same order, same roundings, but subnormal inputs and
partial sums taken as zero), which halves a many-row pass's arithmetic: on a 2-vCPU AMD EPYC of family 25 model 17
the default model's linears at 12 rows took 10.8 ms instead of 15.1 (1 row: 8.7 and 8.2). The kernel plan times it
beside the others (``dot_unavailable`` says why it is not offered, in one line).

native_layer.c does a layer's elementwise work (RMSNorm, rotary, SiLU x up) in one call each, and a linear adds
the residual as it stores its output. native_stack.c calls them all, layer after layer, for a whole pass
(native_stack.py).

native_attention.c gives each row the attention of its visible cache slots taken in slot order (its logical keys:
the same sequence for a row in an AR pass and in a tree pass), with every sum in an order fixed by that sequence;
it replaces exact_attention.py's torch operations (about 25 a layer; 131 us a layer for one row after 300 cached
here, 359 us for 8 tree rows) in the lean forward. native_amx_attention.c keeps that promise in bf16 on the AMX tiles
(scores and weighted values as tile products), which bf16 attention runs on wherever the AMX kernels run
(``attention_on_tiles``; the tiles are asked for as the library loads, so one kernel serves every pass of a
process): on a 2-vCPU Xeon of family 6 model 207, 16 tree rows after 300 cached took 73 us a layer instead of 175,
one row 24 instead of 25 (benchmarks/native_attention.py). native_attention.h holds what the two share.

The C files are compiled once per machine, at first use, with the system's C compiler (``cc``, or ``$CC``) and
``FLAGS`` (``-O3 -march=native -fopenmp``), and loaded with ctypes; they run on torch's OpenMP threads
(``torch.get_num_threads()``). The library lives only in the bita cache's ``native/`` (``~/.cache/bita/native``,
or ``$BITA_CACHE/native``), created private (mode 0o700): a folder that another user owns or that others may write
to is refused, since a library found there would be loaded and run. It is named by a hash of the sources, ``FLAGS``
and this CPU's flags, so a library of other sources never loads and a cached one loads with no compiler installed
(the compiler is not in the name: delete the library to rebuild it with another). A compile is stopped after
``COMPILE_TIMEOUT`` seconds; a failure (the compiler's first error line) is remembered beside the library, in
``native-<hash>.failed`` with the compiler's path, size and time, so that later processes do not try the same
compiler on the same sources again: delete that file to retry. Where the kernels cannot be built or loaded (no
compiler, no AVX2 and FMA, an unsafe folder), or ``BITA_NATIVE=0``, ``unavailable`` says why in one line: the kernel
plan does not offer the native path and the lean forward runs torch's operations (exact_attention.py).

The wrappers check the dtype, device, layout and sizes the C code relies on (attribute comparisons, no tensor
operations) and raise ``ValueError`` on a misuse that would otherwise read or write out of bounds.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import NamedTuple

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from ..package_data import cache_root
from .blocks import blocks_of
from .device import cpu_info

SOURCES = tuple(Path(__file__).with_name(name)
                for name in ("native_linear.c", "native_attention.c", "native_layer.c", "native_amx.c",
                             "native_amx_attention.c", "native_stack.c", "native_blocks.c", "native_blocks_q8.c"))
HEADERS = tuple(Path(__file__).with_name(name)
                for name in ("native_simd.h", "native_tiles.h", "native_attention.h", "native_blocks.h"))
DTYPES = (torch.bfloat16, torch.float32)
BF16_DTYPES = (torch.bfloat16,)  # the AMX and dot kernels take bf16 alone
AMX_BLOCK, AMX_CHUNK = 16, 32  # native_amx.c's packing: blocks of 16 outputs, chunks of 32 inputs
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")  # part of the library's name
COMPILE_TIMEOUT = 300  # seconds a compile may take (about 3 here) before it is stopped and counts as failed
ROTARY_MAX_DIM = 512  # the longest head native_layer.c's rotary takes (its float rotated[512])
SWITCH = "BITA_NATIVE"  # 0: never build or run the native kernels (torch's paths run, as where they cannot build)


class Limits(NamedTuple):
    """The built library's constants: outputs a packed tile holds, and what ``attend`` takes (query heads per
    key/value head, head dimension: at most ``dim``, a multiple of ``lanes``)."""

    tile: int
    groups: int
    dim: int
    lanes: int


class CompileError(RuntimeError):
    """The compiler failed or ran past ``COMPILE_TIMEOUT`` (remembered on disk: ``_build``)."""


_library: ctypes.CDLL | None = None
_limits: Limits | None = None
_failure: str | None = None
_amx_failure: str | None = None  # why the AMX path cannot run here ("" once it was found to run)


def _compiler() -> str | None:
    """The C compiler on the PATH: ``$CC`` (else ``cc``), gcc or clang (None: none)."""
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")


def _cache_folder() -> Path:
    """The bita cache's ``native/`` folder, where kernels.py keeps the library beside the kernel plans."""
    from .kernels import NATIVE_FOLDER
    return cache_root() / NATIVE_FOLDER


def _private(directory: Path) -> None:
    """Create ``directory`` private (mode 0o700) where it is missing; refuse it where another user owns it or group
    or others may write to it, or where a folder above it (symbolic links resolved) is another user's (root's
    aside) or writable by others without the sticky bit (as /tmp has): a library found there is loaded and run, and no
    one else may swap it, or a folder on its way, between the check and the load."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = directory.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o022:
        raise RuntimeError(f"{directory} must be yours and writable by you alone (it is mode "
                           f"{status.st_mode & 0o777:o}, owner uid {status.st_uid}): chmod 700 it, or remove it")
    for folder in directory.resolve().parents:
        above = folder.stat()
        if above.st_uid not in (os.getuid(), 0) or above.st_mode & 0o022 and not above.st_mode & 0o1000:
            raise RuntimeError(f"{directory} lies in {folder}, which another user may change (mode "
                               f"{above.st_mode & 0o7777:o}, owner uid {above.st_uid}): set BITA_CACHE to a folder "
                               "of your own")


def _digest() -> str:
    """The library's name: a hash of what decides its code (the sources, ``FLAGS``, this CPU's flags), each part
    prefixed by its length so that no two sets of parts hash alike. Runs no compiler."""
    hasher = hashlib.sha256()
    for part in (*(path.read_bytes() for path in (*SOURCES, *HEADERS)), " ".join(FLAGS).encode(),
                 cpu_info().get("flags", "").encode()):
        hasher.update(len(part).to_bytes(8, "little") + part)
    return hasher.hexdigest()[:16]


def _identity(compiler: str) -> str:
    """The compiler as a failure remembers it, without running it: its real path, size and modification time."""
    real = os.path.realpath(compiler)
    status = os.stat(real)
    return f"{real} {status.st_size} {status.st_mtime_ns}"


def _remembered(marker: Path, identity: str) -> str | None:
    """The error line of an earlier failed compile by the compiler ``identity`` names, kept in ``marker`` (None:
    no such failure)."""
    try:
        compiler, _, error = marker.read_text().partition("\n")
    except OSError:
        return None
    return error if compiler == identity and error else None


def _error_line(output: str, status: int) -> str:
    """The compiler's first line that says "error", else its last line, else its exit status."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return next((line for line in lines if "error" in line.lower()), lines[-1] if lines else f"exit status {status}")


def _compile(compiler: str, target: Path) -> None:
    """Compile the sources with ``FLAGS`` into ``target``, whole or not at all (a concurrent process finds a whole
    file or none); past ``COMPILE_TIMEOUT`` seconds the compiler and what it started are killed. Raises
    ``CompileError`` with the compiler's error line."""
    name = Path(compiler).name
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        with subprocess.Popen([compiler, *FLAGS, *map(str, SOURCES), "-o", str(built)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True) as process:
            try:
                output = process.communicate(timeout=COMPILE_TIMEOUT)[0]
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # its own process group: cc1 and as too
                raise CompileError(f"{name} was stopped after {COMPILE_TIMEOUT} s") from None
        if process.returncode:
            raise CompileError(f"{name} failed: {_error_line(output, process.returncode)}")
        built.replace(target)


def _build(directory: Path) -> ctypes.CDLL:
    """The native kernels for this machine, loaded from ``directory`` (``_private``), compiled into it first where
    no library of these sources, flags and CPU is there: a cached library loads without running a compiler."""
    _private(directory)
    target = directory / f"native-{_digest()}.so"
    if not target.exists():
        compiler = _compiler()
        if compiler is None:
            raise RuntimeError("no C compiler found (cc, gcc or clang; or set CC)")
        _compile_once(compiler, target)
    return _load(target)


def _compile_once(compiler: str, target: Path) -> None:
    """``_compile``, unless this compiler failed on these sources before: a failure is remembered beside ``target``
    (``native-<hash>.failed``: the compiler's ``_identity``, then its error line) until that file is deleted."""
    marker, identity = target.with_suffix(".failed"), _identity(compiler)
    error = _remembered(marker, identity)
    if error is None:
        try:
            _compile(compiler, target)
        except CompileError as failure:
            error = str(failure)
            marker.write_text(f"{identity}\n{error}")
        else:
            marker.unlink(missing_ok=True)  # another compiler's failure, now moot
            return
    raise RuntimeError(f"{error} (remembered in {marker}: delete it to retry)")


def _load(target: Path) -> ctypes.CDLL:
    """The library ``target`` loaded, its functions' argument types declared."""
    library = ctypes.CDLL(str(target))
    pointer, integer = ctypes.c_void_p, ctypes.c_int
    for name in ("bita_linear_bf16", "bita_linear_f32", "bita_amx_linear", "bita_dot_linear"):
        if hasattr(library, name):  # bita_amx_linear, bita_dot_linear: where the compiler enabled AMX-BF16, AVX512-BF16
            getattr(library, name).argtypes = [pointer] * 5 + [integer] * 4
    for name in ("bita_rms_norm_bf16", "bita_rms_norm_f32"):
        getattr(library, name).argtypes = [pointer] * 3 + [integer] * 3 + [ctypes.c_float, integer]
    for name in ("bita_rotary_bf16", "bita_rotary_f32"):
        getattr(library, name).argtypes = [pointer] * 3 + [integer] * 5
    for name in ("bita_silu_mul_bf16", "bita_silu_mul_f32"):
        getattr(library, name).argtypes = [pointer] * 2 + [integer] * 3
    for name in ("bita_pack_bf16", "bita_pack_f32", "bita_amx_pack"):
        if hasattr(library, name):
            getattr(library, name).argtypes = [pointer] * 2 + [integer] * 2
    for name in ("bita_attend_bf16", "bita_attend_f32"):
        getattr(library, name).argtypes = [pointer] * 5 + [integer] * 6 + [ctypes.c_float, integer]
    library.bita_stack.argtypes = [pointer] + [integer] * 3 + [pointer] * 5 + [integer, pointer] + [integer] * 8 + \
        [ctypes.c_float] * 2 + [integer]
    for name in ("bita_blocks_linear_bf16", "bita_blocks_linear_f32", "bita_blocks_dot_linear",
                 "bita_blocks_q8_linear_bf16", "bita_blocks_q8_linear_f32"):
        if hasattr(library, name):  # bita_blocks_dot_linear: where the compiler enabled AVX512-BF16; the q8 ones
            getattr(library, name).argtypes = [pointer] * 5 + [integer] * 4  # where AVX-512 comes with BW, or none
    for name in ("bita_blocks_size", "bita_blocks_q8_size"):
        if hasattr(library, name):
            getattr(library, name).argtypes, getattr(library, name).restype = [integer] * 3, ctypes.c_longlong
    for name in ("bita_blocks_pack", "bita_blocks_q8_pack"):
        if hasattr(library, name):
            getattr(library, name).argtypes = [pointer] * 2 + [integer] * 3
    if hasattr(library, "bita_blocks_q8_isa"):
        library.bita_blocks_q8_isa.restype = ctypes.c_char_p
    library.bita_attention_limits.argtypes = [ctypes.POINTER(ctypes.c_int)] * 2
    if hasattr(library, "bita_attention_on_tiles"):  # a build of earlier sources has none (benchmarks' --against)
        library.bita_attention_on_tiles.argtypes = [integer]
    library.bita_isa.restype = ctypes.c_char_p
    return library


def load_beside(path: Path) -> ctypes.CDLL:
    """Another build of the native library (a benchmark's ``--against``) loaded beside this one as this one loads:
    its tiles asked for, so that its bf16 attention runs on them where this one's would."""
    library = _load(path.resolve())
    if hasattr(library, "bita_amx_enable"):  # a build with AMX code
        library.bita_amx_enable()
    return library


def _limits_of(library: ctypes.CDLL) -> Limits:
    """The constants ``library`` was compiled with."""
    groups, dim = ctypes.c_int(), ctypes.c_int()
    lanes = library.bita_attention_limits(ctypes.byref(groups), ctypes.byref(dim))
    return Limits(library.bita_tile(), groups.value, dim.value, lanes)


def unavailable(directory: Path | None = None) -> str | None:
    """Why the native path cannot run here (None: it can), loading it (built first where needed: ``_build``) at the
    first call in this process from ``directory`` (None: the bita cache's ``native/``)."""
    global _library, _limits, _failure, _amx_failure
    if _library is None and _failure is None:
        if os.environ.get(SWITCH, "1") == "0":
            _failure = f"the native kernels are off ({SWITCH}=0)"
            return _failure
        try:
            _library = _build(directory or _cache_folder())
            _limits = _limits_of(_library)
        except (OSError, RuntimeError) as error:
            _failure = f"the native kernel could not be built: {error}"
        else:  # asked as the library loads, so that bf16 attention runs on one kernel for every pass of a process
            status = _library.bita_amx_enable()
            _amx_failure = ("the AMX kernel is not built: the compiler's -march=native does not enable AMX-BF16 here"
                            if status < 0 else
                            f"Linux refused this process the AMX tiles (arch_prctl: {os.strerror(status)})"
                            if status > 0 else "")
    return _failure


def amx_unavailable() -> str | None:
    """Why the AMX kernels (native_amx.c, native_amx_attention.c) cannot run here (None: they can): the native
    library must load, hold the AMX code (the compiler enabled AMX-BF16 for this CPU) and Linux must grant this
    process the tiles' state (asked once, as the library loads)."""
    return unavailable() or _amx_failure or None


def dot_unavailable() -> str | None:
    """Why the dot kernel (native_linear.c's tiles summed by vdpbf16ps) cannot run here (None: it can): the native
    library must load and hold it (the compiler's -march=native enabled AVX512-BF16 for this CPU)."""
    why = unavailable()
    if why is None and not hasattr(_library, "bita_dot_linear"):
        why = "the dot kernel is not built: the compiler's -march=native does not enable AVX512-BF16 here"
    return why


def q8_unavailable() -> str | None:
    """Why the 8-bit-activation blocks kernel (native_blocks_q8.c) cannot run here (None: it can): the native library
    must load and hold it (not built where the CPU has AVX-512 without its byte instructions, AVX512-BW)."""
    why = unavailable()
    if why is None and not hasattr(_library, "bita_blocks_q8_linear_f32"):
        why = "the 8-bit-activation kernel is not built: the CPU has AVX-512 without AVX512-BW"
    return why


def integer_dots() -> str:
    """The byte products the 8-bit-activation kernel runs here: 'avx512-vnni', 'avx-vnni', 'avx512bw' or 'avx2'
    ('unavailable' where it cannot run: ``q8_unavailable``)."""
    return "unavailable" if q8_unavailable() else _library.bita_blocks_q8_isa().decode()


def attention_on_tiles(head_dim: int, dtype: torch.dtype) -> bool:
    """Whether ``attend`` runs on the AMX tiles (native_amx_attention.c: bf16, where the library holds the AMX code and
    the process was granted the tiles, heads of a dimension the kernel takes; the library's own rule,
    ``bita_attention_on_tiles``) rather than on vector lanes (native_attention.c)."""
    return dtype == torch.bfloat16 and unavailable() is None and bool(_library.bita_attention_on_tiles(head_dim))


def describe() -> str:
    """The SIMD code the native path runs, e.g. 'avx512-bf16' (``unavailable()`` first)."""
    return _library.bita_isa().decode() if _library is not None else "unavailable"


def _shown(tensor: torch.Tensor) -> str:
    """e.g. 'torch.float32 [4, 6] (strides (6, 1)) on cpu': what a misuse error says of a tensor."""
    return f"{tensor.dtype} {list(tensor.shape)} (strides {tensor.stride()}) on {tensor.device}"


def _fits(tensor: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> bool:
    """``tensor`` is of ``dtype`` and ``shape``, contiguous, on the CPU."""
    return tensor.dtype == dtype and tensor.is_cpu and tensor.shape == shape and tensor.is_contiguous()


def _packed_size(rows: int, columns: int, dtype: torch.dtype) -> int:
    """Elements of ``pack``'s copy of a weight [rows, columns]: whole tiles of outputs, bf16 inputs in pairs."""
    depth = (columns + 1) // 2 * 2 if dtype == torch.bfloat16 else columns
    return -(-rows // _limits.tile) * depth * _limits.tile


def _amx_packed_size(rows: int, columns: int, dtype: torch.dtype) -> int:
    """Elements of ``amx_pack``'s copy of a weight [rows, columns]: whole blocks of outputs and chunks of inputs."""
    return -(-rows // AMX_BLOCK) * AMX_BLOCK * -(-columns // AMX_CHUNK) * AMX_CHUNK


def _blocks_size(rows: int, columns: int, source) -> int:
    """Bytes of ``pack``'s copy of a weight [rows, columns] held as ``source``'s GGUF blocks (0: not a type or
    shape native_blocks.c reads: Q4_0, Q4_1, Q8_0)."""
    return _library.bita_blocks_size(source.type, rows, columns)


def _q8_size(rows: int, columns: int, source) -> int:
    """The same for native_blocks_q8.c, which reads Q5_0, Q4_K, Q5_K and Q6_K too."""
    return _library.bita_blocks_q8_size(source.type, rows, columns)


def reads(kernel: str, weight: torch.Tensor) -> bool:
    """Whether the blocks kernel ``kernel`` reads the blocks ``weight`` [rows, columns] is held in (their type and
    shape; False where it is held in none or the kernel cannot run here)."""
    spec, source = KERNELS[kernel], blocks_of(weight)
    return source is not None and spec.unavailable() is None and bool(spec.packed_size(*weight.shape, source))


class Kernel(NamedTuple):
    """A linear kernel of the library: why it cannot run here, the dtypes it takes, its packed copy's size (of a
    weight [rows, columns] and its dtype, or for ``blocks`` its BlockSource), its C functions ({} the dtype's suffix)
    and its number in native_stack.c's ``KERNEL_*`` enum; ``blocks``: it reads a weight's GGUF blocks
    (runtime/blocks.py), packed as bytes, not the weight."""

    unavailable: Callable[[], str | None]
    dtypes: tuple[torch.dtype, ...]
    packed_size: Callable[[int, int, object], int]
    pack: str
    linear: str
    stack: int
    blocks: bool = False


# The library's linear kernels, by the kernel plan's name for their path (kernel_plan.NATIVE_PATHS): the one table
KERNELS = {"native": Kernel(unavailable, DTYPES, _packed_size, "bita_pack_{}", "bita_linear_{}", 0),
           "amx": Kernel(amx_unavailable, BF16_DTYPES, _amx_packed_size, "bita_amx_pack", "bita_amx_linear", 1),
           "dot": Kernel(dot_unavailable, BF16_DTYPES, _packed_size, "bita_pack_{}", "bita_dot_linear", 2),
           "blocks": Kernel(unavailable, DTYPES, _blocks_size, "bita_blocks_pack", "bita_blocks_linear_{}", 3, True),
           "blocks-dot": Kernel(dot_unavailable, BF16_DTYPES, _blocks_size, "bita_blocks_pack",
                                "bita_blocks_dot_linear", 4, True),
           "blocks-q8": Kernel(q8_unavailable, DTYPES, _q8_size, "bita_blocks_q8_pack", "bita_blocks_q8_linear_{}",
                               5, True)}


def pack(weight: torch.Tensor, kernel: str = "native") -> torch.Tensor | None:
    """``weight`` [N, K] (bf16 or float32, on the CPU) packed for ``linear`` by ``kernel`` ("native":
    native_linear.c's tiles; "dot": the same tiles, bf16 only; "amx": native_amx.c's blocks, bf16 only), flat in the
    weight's dtype; "blocks" and "blocks-dot" (bf16 only): the GGUF blocks the weight is held in
    (``blocks.blocks_of``: its values need not be there, a meta tensor will do) repacked by native_blocks.c, flat
    uint8. None where that kernel cannot run it."""
    spec = KERNELS[kernel]
    if weight.dtype not in spec.dtypes or weight.device.type not in ("cpu", "meta") or spec.unavailable() is not None:
        return None
    if weight.dim() != 2:
        raise ValueError(f"native.pack takes a weight [out, in], not {_shown(weight)}")
    if spec.blocks:
        return _pack_blocks(weight, spec)
    if weight.is_meta:
        return None
    rows, columns = weight.shape
    packed = torch.empty(spec.packed_size(rows, columns, weight.dtype), dtype=weight.dtype)
    source = weight.detach().contiguous()
    getattr(_library, spec.pack.format(_suffix(weight.dtype)))(source.data_ptr(), packed.data_ptr(), rows, columns)
    return packed


def _pack_blocks(weight: torch.Tensor, spec: Kernel) -> torch.Tensor | None:
    """The GGUF blocks ``weight`` [N, K] is held in, repacked for ``spec`` (None: none, or none the kernels read).
    Raises ValueError where they are not of the weight's shape, or the file changed."""
    source = blocks_of(weight)
    if source is None or not spec.packed_size(*weight.shape, source):
        return None
    if tuple(weight.shape) != (source.rows, source.columns):
        raise ValueError(f"native.pack: {source.name} blocks of [{source.rows}, {source.columns}] for a weight "
                         f"{list(weight.shape)}")
    block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(source.type)]
    raw = torch.from_numpy(source.raw())
    if tuple(raw.shape) != (source.rows, source.columns // block * block_bytes):  # what the C packer reads, no more
        raise ValueError(f"native.pack: {source.name} blocks of {list(raw.shape)} bytes for a weight "
                         f"[{source.rows}, {source.columns}]")
    packed = torch.empty(spec.packed_size(*weight.shape, source), dtype=torch.uint8)
    getattr(_library, spec.pack)(raw.data_ptr(), packed.data_ptr(), source.type, *weight.shape)
    return packed


def _packed_fits(packed: torch.Tensor, spec: Kernel, dtype: torch.dtype, rows: int, columns: int) -> bool:
    """``packed`` is ``pack``'s copy of a weight [rows, columns] for ``spec`` (blocks: its header says that shape)."""
    if not spec.blocks:
        return _fits(packed, dtype, (spec.packed_size(rows, columns, dtype),))
    return isinstance(packed, torch.Tensor) and packed.dtype == torch.uint8 and packed.is_cpu and packed.dim() == 1 \
        and packed.numel() >= 12 and packed[:12].view(torch.int32)[1:].tolist() == [rows, columns]


def _suffix(dtype: torch.dtype) -> str:
    """The C functions' suffix for ``dtype``."""
    return "bf16" if dtype == torch.bfloat16 else "f32"


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int,
           residual: torch.Tensor | None = None, kernel: str = "native") -> torch.Tensor:
    """x [..., K] (the packed weight's dtype) -> [..., out_features] = x W^T + bias, W the weight ``pack`` packed
    for ``kernel``; with ``residual`` (contiguous, the output's shape) residual + that, the product rounded to the
    dtype first."""
    out, call = bound_linear(x, packed, bias, out_features, residual, kernel)
    call()
    return out


def bound_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int,
                 residual: torch.Tensor | None = None,
                 kernel: str = "native") -> tuple[torch.Tensor, Callable[[], None]]:
    """``linear``'s output [..., out_features] (empty) and the C call that fills it, its arguments checked and bound
    once: each call costs the kernel and ctypes' few us alone (what native_stack.c pays a product, with no ctypes)."""
    spec, shape, dtype = KERNELS[kernel], x.shape, x.dtype
    if dtype not in spec.dtypes or not x.is_cpu or not shape:
        raise ValueError(f"native.linear ({kernel}) takes x [..., in] in "
                         f"{' or '.join(map(str, spec.dtypes))} on the CPU, not {_shown(x)}")
    if spec.unavailable() is not None:
        raise ValueError(f"native.linear ({kernel}) cannot run here: {spec.unavailable()}")
    columns, out_shape = shape[-1], (*shape[:-1], out_features)
    if not _packed_fits(packed, spec, dtype, out_features, columns):
        raise ValueError(f"native.linear: packed is not pack()'s copy of a {dtype} weight [{out_features}, {columns}] "
                         f"for the {kernel} kernel: {_shown(packed)}")
    if bias is not None and (not bias.is_cpu or bias.shape != (out_features,)):
        raise ValueError(f"native.linear: bias must be [{out_features}] on the CPU, not {_shown(bias)}")
    if residual is not None and not _fits(residual, dtype, out_shape):
        raise ValueError(f"native.linear: residual must be {dtype} {list(out_shape)} contiguous on the CPU, not "
                         f"{_shown(residual)}")
    flat = x.reshape(-1, columns).contiguous()
    rows = flat.shape[0]
    out = torch.empty(rows, out_features, dtype=dtype)
    if not rows:
        return out.view(out_shape), lambda: None
    bias32 = bias.detach().float().contiguous() if bias is not None else None
    function = getattr(_library, spec.linear.format(_suffix(dtype)))
    arguments = (flat.data_ptr(), packed.data_ptr(), bias32.data_ptr() if bias32 is not None else None,
                 residual.data_ptr() if residual is not None else None, out.data_ptr(), rows, out_features, columns,
                 torch.get_num_threads())
    # the default holds the tensors whose addresses are bound, alive as long as the call
    return out.view(out_shape), lambda alive=(flat, bias32, residual, out): function(*arguments)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm of x [R, H] (rows may be apart; the last dimension contiguous), weight [H] in x's
    dtype: [R, H] (native_layer.c)."""
    shape, strides = x.shape, x.stride()
    if x.dtype not in DTYPES or not x.is_cpu or len(shape) != 2 or strides[1] != 1:
        raise ValueError(f"native.rms_norm takes x [R, H] in bf16 or float32 on the CPU, its last dimension "
                         f"contiguous, not {_shown(x)}")
    if not _fits(weight, x.dtype, (shape[1],)):
        raise ValueError(f"native.rms_norm: weight must be {x.dtype} [{shape[1]}] on the CPU, not {_shown(weight)}")
    out = torch.empty(shape, dtype=x.dtype)
    getattr(_library, f"bita_rms_norm_{_suffix(x.dtype)}")(x.data_ptr(), weight.data_ptr(), out.data_ptr(), shape[0],
                                                            shape[1], strides[0], eps, torch.get_num_threads())
    return out


def rotate_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in place on x [R, heads, D] (heads D apart, rows ``x.stride(0)`` apart), by cos, sin [R, D]
    contiguous (each row's position): x cos + rotate_half(x) sin, as transformers computes it. Returns x."""
    shape, strides = x.shape, x.stride()
    if x.dtype not in DTYPES or not x.is_cpu or len(shape) != 3 or strides[2] != 1 or strides[1] != shape[2] \
            or shape[2] > ROTARY_MAX_DIM:
        raise ValueError(f"native.rotate_ takes x [R, heads, D] in bf16 or float32 on the CPU, heads D apart, D at "
                         f"most {ROTARY_MAX_DIM}, not {_shown(x)}")
    rows, heads, dim = shape
    if not _fits(cos, x.dtype, (rows, dim)) or not _fits(sin, x.dtype, (rows, dim)):
        raise ValueError(f"native.rotate_: cos and sin must be {x.dtype} [{rows}, {dim}] contiguous on the CPU, not "
                         f"{_shown(cos)} and {_shown(sin)}")
    getattr(_library, f"bita_rotary_{_suffix(x.dtype)}")(x.data_ptr(), cos.data_ptr(), sin.data_ptr(), rows, heads, dim,
                                                          strides[0], torch.get_num_threads())
    return x


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up [R, 2I] contiguous (gate, then up) -> silu(gate) * up [R, I], as transformers computes it."""
    shape = gate_up.shape
    if gate_up.dtype not in DTYPES or not gate_up.is_cpu or len(shape) != 2 or shape[1] % 2 \
            or not gate_up.is_contiguous():
        raise ValueError(f"native.silu_mul takes gate_up [R, 2I] in bf16 or float32, contiguous on the CPU, not "
                         f"{_shown(gate_up)}")
    rows, width = shape
    out = torch.empty(rows, width // 2, dtype=gate_up.dtype)
    getattr(_library, f"bita_silu_mul_{_suffix(gate_up.dtype)}")(gate_up.data_ptr(), out.data_ptr(), rows, width // 2,
                                                                  torch.get_num_threads())
    return out


def _attention_fits(heads: int, kv_heads: int, head_dim: int) -> bool:
    """``attend`` takes ``heads`` query heads over ``kv_heads`` key/value heads of ``head_dim`` (the library's
    limits)."""
    return kv_heads > 0 and not heads % kv_heads and heads // kv_heads <= _limits.groups \
        and not head_dim % _limits.lanes and 0 < head_dim <= _limits.dim


def _attention_limits() -> str:
    """What ``attend`` takes, in words."""
    return (f"native attention takes bf16 or float32, up to {_limits.groups} query heads per key/value head and a head "
            f"dimension that is a multiple of {_limits.lanes} up to {_limits.dim}")


def attention_unsupported(heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> str | None:
    """Why ``attend`` cannot run a model of this shape and dtype on this machine (None: it can)."""
    why = unavailable()
    if why is None and (dtype not in DTYPES or not _attention_fits(heads, kv_heads, head_dim)):
        why = _attention_limits()
    return why


def attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Each row's attention over the cache slots it sees, in slot order (native_attention.c): query [R, heads, D],
    keys and values [kv_heads, capacity, D] a layer's whole buffers (contiguous, the query's dtype), allowed [R, K]
    bool (K <= capacity: which slots each row sees). Returns [R, heads, D] (``attention_unsupported`` first)."""
    dtype, shape, cache, visible = query.dtype, query.shape, keys.shape, allowed.shape
    if dtype not in DTYPES or not query.is_cpu or len(shape) != 3 or len(cache) != 3:
        raise ValueError(f"native.attend takes query [R, heads, D] in bf16 or float32 on the CPU and keys [kv_heads, "
                         f"capacity, D], not {_shown(query)} and {_shown(keys)}")
    (rows, heads, dim), (kv_heads, capacity, _) = shape, cache
    if not _fits(keys, dtype, (kv_heads, capacity, dim)) or not _fits(values, dtype, cache):
        raise ValueError(f"native.attend: keys and values must be {dtype} [kv_heads, capacity, {dim}] alike, "
                         f"contiguous on the CPU, not {_shown(keys)} and {_shown(values)}")
    if not _attention_fits(heads, kv_heads, dim):
        raise ValueError(f"native.attend: {heads} query heads on {kv_heads} key/value heads of dimension {dim}: "
                         f"{_attention_limits()}")
    if allowed.dtype != torch.bool or not allowed.is_cpu or len(visible) != 2 or visible[0] != rows \
            or visible[1] > capacity:
        raise ValueError(f"native.attend: allowed must be bool [{rows}, K <= {capacity}] on the CPU, not "
                         f"{_shown(allowed)}")
    query, mask = query.contiguous(), allowed.contiguous()
    out = torch.empty_like(query)
    getattr(_library, f"bita_attend_{_suffix(dtype)}")(
        query.data_ptr(), keys.data_ptr(), values.data_ptr(), mask.data_ptr(), out.data_ptr(), rows, heads, kv_heads,
        dim, capacity, visible[1], dim ** -0.5, torch.get_num_threads())
    return out
