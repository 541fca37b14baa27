"""Which linear kernel runs a model's frozen linears on this machine, chosen by measuring it once.

Three paths that torch ships, and two of our own, compute ``x @ W.T + b`` for a frozen weight W [out, in]:

- STOCK: ``F.linear(x, W, b)``, what transformers runs;
- TRANSPOSED: ``x @ Wt`` with ``Wt = W.T`` made contiguous once (BLAS then streams W row by row);
- PACKED: W reordered once into oneDNN's blocked layout (``torch.ops.mkldnn._linear_pointwise``);
- NATIVE: W packed once into native.py's tiles of 32 outputs (row-invariant by construction), where it builds;
- DOT: NATIVE's tiles summed by vdpbf16ps (bf16, row-invariant by construction; half NATIVE's arithmetic a row),
  where the CPU has AVX512-BF16 and native.py builds it;
- AMX: W packed once into native_amx.c's blocks for Intel's AMX tiles (bf16, row-invariant by construction), where
  the CPU has AMX-BF16 and native.py builds it;
- BLOCKS: W read from the GGUF blocks it is held in (runtime/blocks.py), repacked once by native_blocks.c and widened
  in registers (row-invariant by construction; in float32 NATIVE's bits), where the model came from a GGUF whose
  block types the kernels read;
- BLOCKS_DOT: BLOCKS' integers summed a block at a time by vdpbf16ps, then scaled (bf16; its own bits), where DOT
  runs;
- BLOCKS_Q8: the blocks against each row quantised to 8 bits a block of 32 (native_blocks_q8.c: exact integer dot
  products, as llama.cpp computes them; row-invariant by construction, its own bits), where the library holds it;
- TRITON: triton_linear.py's fixed tiles on a GPU, row-invariant at any row count (chosen for a GPU's passes by
  padded.py, never timed here).

Which is fastest depends on the CPU and on the rows (measured on 2-vCPU cloud machines: on an
AMD EPYC with AVX2 PACKED won at every row count, and on an AMD EPYC of family 25 model 17 with AVX-512
too (docs/speed.md); on an Intel Xeon with AVX-512 STOCK won at 1 row, where PACKED cost +33 % a pass,
and TRANSPOSED at 4-16 rows). So ``kernel_times`` times the paths ``offered_paths`` finds here as passes run
them: on the products the forward really runs (the lean forward's fused QKV and gate/up weights,
``Product``), each through ``PlannedLinear``, so a pass of fewer rows than a path's floor is timed padded
to it (``row_floor``: a path whose floor is 64 pays for 64 rows in every AR pass), and the native kernels' paths
without Python a product (``PlannedLinear.bound``: the lean forward calls them all from C); all the layers' products
one after the other (as a pass streams them from memory, cold), and the LM head alone, at each of ``DECODE_ROWS``
rows (``TIMED_ROWS`` for the kernel table), one path at a time (its copies made, timed, dropped: at most one copy of
the weights beside them). ``plan_from`` keeps one path for the layers and one for the head, each the fastest summed over
a decoding pass's row counts (``DECODE_ROWS``), STOCK unless another is faster by ``MIN_GAIN``. One path
whatever the row count: a row must not round differently because of how many rows share its pass
(docs/method.md).

``cached_plan`` keeps plans in the machine profile (measured.py), keyed by the machine (``device.machine_key``), the
dtype, the products' shapes and the paths offered (``plan_key``), with the times and floors they were chosen from:
measured once, never re-timed on a load. Measuring times the row counts a plan is chosen on (``DECODE_ROWS``), the
likeliest winners first, and drops a path ``DROP_FACTOR`` slower than the fastest so far at a row count (a path
hopeless at one row is not timed at every other)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from . import native
from .blocks import blocks_of, held_types, with_blocks
from .device import bf16_hardware, machine_key, median_seconds
from .measured import ARITHMETIC_MARGIN, MIN_GAIN, measured

STOCK, TRANSPOSED, PACKED, NATIVE, DOT, AMX = "stock", "transposed", "packed", "native", "dot", "amx"
BLOCKS, BLOCKS_DOT, BLOCKS_Q8 = "blocks", "blocks-dot", "blocks-q8"  # native.KERNELS' kernels on a GGUF's blocks
TRITON = "triton"  # triton_linear.py's fixed tiles on a GPU: row-invariant at any row count (chosen for it, not timed)
PATHS = (STOCK, TRANSPOSED, PACKED, NATIVE, DOT, AMX, BLOCKS, BLOCKS_DOT, BLOCKS_Q8, TRITON)
BLOCK_PATHS = (BLOCKS, BLOCKS_DOT, BLOCKS_Q8)
NATIVE_PATHS = tuple(native.KERNELS)  # the native library's kernels: native.KERNELS, by these paths' names
TIMED_ROWS = (1, 2, 4, 8, 16, 32, 64, 128)  # the row counts of the kernel table (benchmarks/kernel_table.py)
DECODE_ROWS = (1, 4, 8, 16)  # an AR pass and tree passes: the rows a plan is chosen on (their times summed)
REPEATS = 5
DROP_FACTOR = 2.0  # a path this much slower than the fastest so far at a row count is timed no further
PLAN_VERSION = "v5"  # v3: priced as passes run (fused products, padded to each path's floor); v4: native ones bound;
#                      v5: DECODE_ROWS only, hopeless paths dropped
MIN_LAYERS_FOR_PROGRESS = 8  # a real model's timing takes seconds and shows its progress; a tiny one's is quiet
FLOOR_ROWS, FLOOR_BLOCKS = 64, (1, 2, 3, 4, 8)  # row_floor's rows, and the block sizes compared with one block
_floors: dict[tuple, int] = {}  # row_floor's measurements in this process
_said: set[str] = set()  # why the native, dot or AMX path cannot run, said once a process
logger = logging.getLogger(__name__)

_linear_pointwise = torch.ops.mkldnn._linear_pointwise.default
Product = tuple[torch.Tensor, "torch.Tensor | None"]  # a frozen weight [out, in] and its bias [out] (or None), as a pass runs it


@dataclass(frozen=True)
class KernelPlan:
    """The path of the layers' linears and the path of the LM head, for every row count."""

    layers: str
    head: str

    def describe(self) -> str:
        """e.g. 'layers packed, head stock'."""
        return f"layers {self.layers}, head {self.head}"

    @classmethod
    def from_entry(cls, entry: dict, offered: Sequence[str] = PATHS) -> KernelPlan:
        """A plan as ``cached_plan`` stores it (ValueError where it names a path not ``offered``: STOCK or one of the
        paths it was chosen among here)."""
        layers, head = entry["layers"], entry["head"]
        if not all(isinstance(path, str) and path in (STOCK, *offered) for path in (layers, head)):
            raise ValueError(f"paths not offered here: {layers!r}, {head!r}")
        return cls(layers, head)


def pack(weight: torch.Tensor) -> torch.Tensor | None:
    """The oneDNN-blocked copy of ``weight`` [out, in], or None where this CPU cannot run it
    (bf16 needs AVX-512 BW/VL/DQ or AVX-NE-CONVERT)."""
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
    except RuntimeError:
        return None


def offered_paths(weight: torch.Tensor, native_folder: Path | None = None) -> tuple[str, ...]:
    """The paths a plan chooses among for weights like ``weight``: torch's (STOCK, TRANSPOSED, and PACKED where
    oneDNN packs it), except in bf16 on a CPU without bf16 products in hardware (``bf16_hardware``; STOCK alone
    where no native path runs either): there the vendor GEMMs' emulated bf16 rounds a row otherwise in some passes
    than alone (1 in 10 random passes of 32 rows on a Xeon of family 6 model 207 without AVX512-BF16; no row floor
    catches it); NATIVE where native.py builds here (in ``native_folder``) and takes its dtype, DOT and AMX where
    their kernels run here too and the weight is bf16, BLOCKS (and BLOCKS_DOT where DOT runs) where the weight is
    held in GGUF blocks (``blocks_of``); where the native path cannot run, one warning (logged once) says why, and
    where the DOT or AMX path cannot, one info line."""
    vendor = weight.dtype != torch.bfloat16 or bf16_hardware()  # emulated bf16 GEMMs are not row-invariant (below)
    paths = [STOCK, TRANSPOSED] if vendor else []
    if vendor and torch.backends.mkldnn.is_available() and pack(weight) is not None:
        paths.append(PACKED)
    why = native.unavailable(native_folder)
    if why is None and weight.dtype in native.DTYPES:
        paths.append(NATIVE)
    elif why is not None and why not in _said:
        _said.add(why)
        logger.warning("%s; the kernel plan chooses among %s", why, ", ".join(paths))
    for path, why_not in ((DOT, native.dot_unavailable()), (AMX, native.amx_unavailable())):
        if why_not is None and weight.dtype in native.BF16_DTYPES:
            paths.append(path)
        elif why is None and why_not is not None and why_not not in _said:
            _said.add(why_not)
            logger.info("%s; the kernel plan offers no %s path", why_not, path)
    if blocks_of(weight) is not None:
        paths += [path for path in BLOCK_PATHS if native.KERNELS[path].unavailable() is None
                  and weight.dtype in native.KERNELS[path].dtypes and native.reads(path, weight)]
    return tuple(paths or [STOCK])  # no native path either: STOCK, and the row-invariance probe says what it is


def weight_copy(path: str, weight: torch.Tensor) -> torch.Tensor | None:
    """The copy of ``weight`` [out, in] that ``path`` reads, made once: TRANSPOSED [in, out] contiguous, PACKED
    oneDNN's blocked layout, NATIVE and DOT native.py's tiles, AMX native_amx.c's blocks, BLOCKS and BLOCKS_DOT the
    GGUF blocks it is held in, repacked; None for STOCK (the weight itself)."""
    if path == TRANSPOSED:
        return weight.detach().t().contiguous()
    if path in NATIVE_PATHS:
        return native.pack(weight, path)
    return pack(weight) if path == PACKED else None


def run_path(path: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, copy: torch.Tensor | None,
             floor: int = 1, residual: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., in] -> [..., out] by ``path`` on ``copy``, the weight's ``weight_copy``, plus ``residual`` ([..., out])
    where given: the product rounded to the dtype, then added (the native kernels' paths add it as they store the
    product). Fewer than ``floor`` rows run padded to ``floor`` (copies of the last row): below its floor a
    path may round a row differently (``row_floor``)."""
    rows = x.numel() // x.shape[-1]
    if rows < floor:
        flat = x.reshape(rows, x.shape[-1])
        padded = torch.cat([flat, flat[-1:].expand(floor - rows, -1)])
        out = run_path(path, padded, weight, bias, copy)[:rows].reshape(*x.shape[:-1], -1)
    elif path in NATIVE_PATHS:
        return native.linear(x, copy, bias, weight.shape[0], None if residual is None else residual.contiguous(), path)
    elif path == TRITON:
        from . import triton_linear  # Triton: only where a GPU's row-invariant passes ask for it
        out = triton_linear.linear(x, weight, bias)
    elif path == PACKED:
        out = _linear_pointwise(x, copy, bias, "none", [], "")
    elif path == TRANSPOSED:
        out = x @ copy
        out = out + bias if bias is not None else out
    else:
        out = F.linear(x, weight, bias)
    return out if residual is None else residual + out


class PlannedLinear:
    """A frozen weight [out, in] (and bias [out]) run on one path: the path's copy of the weight made
    once, and passes of fewer rows than the path's floor on this weight padded to it (``row_floor``; on
    a CPU, where kernels were planned)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, path: str):
        self.copy = weight_copy(path, weight)
        if path in BLOCK_PATHS:  # the blocks are the weights: no dense copy held beside them
            weight = torch.empty(weight.shape, dtype=weight.dtype, device="meta")
        self.weight, self.bias, self.path = weight, bias, path
        self.floor = row_floor(path, weight, bias, self.copy) if weight.device.type == "cpu" and path != TRITON else 1

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x [..., in] -> [..., out], plus ``residual`` ([..., out]) where given (``run_path``)."""
        return run_path(self.path, x, self.weight, self.bias, self.copy, self.floor, residual)

    @property
    def called_from_c(self) -> bool:
        """Whether the lean forward's stack calls this product from C (native_stack.py): on a native kernel's path,
        no row padded to a floor."""
        return self.path in NATIVE_PATHS and self.floor == 1

    def bound(self, x: torch.Tensor) -> Callable[[], object]:
        """This linear on x [..., in] as a pass runs it: where ``called_from_c``, the C call with its arguments bound
        once (native.bound_linear: no Python is paid a product); else this Python call."""
        if self.called_from_c:
            return native.bound_linear(x, self.copy, self.bias, self.weight.shape[0], kernel=self.path)[1]
        return lambda: self(x)


@torch.inference_mode()
def row_floor(path: str, weight: torch.Tensor, bias: torch.Tensor | None, copy: torch.Tensor | None) -> int:
    """The fewest rows from which ``path`` gives a row bitwise the same result whatever the row count:
    random rows run in blocks of M (every M in ``FLOOR_BLOCKS``) against the same rows in one block of
    ``FLOOR_ROWS``; the floor is the least block size from which every tested size agrees. Kernels
    pick their algorithm by shape (one row: a matrix-vector product; a long reduction: split), so a
    row alone may round otherwise than among others (docs/method.md). Measured once per weight shape,
    dtype and path in a process (~0.6 s for a 49152-row head here; 16 rows missed a difference that shows
    in one row of ten)."""
    key = (path, tuple(weight.shape), weight.dtype, bias is not None)
    if key not in _floors:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(FLOOR_ROWS, weight.shape[1], generator=generator).to(weight.dtype)
        whole = run_path(path, x, weight, bias, copy)
        agrees = {size: all(torch.equal(run_path(path, x[start:start + size], weight, bias, copy),
                                        whole[start:start + size])
                            for start in range(0, FLOOR_ROWS - size + 1, size)) for size in FLOOR_BLOCKS}
        _floors[key] = next((size for size in FLOOR_BLOCKS if all(agrees[s] for s in FLOOR_BLOCKS if s >= size)),
                            FLOOR_ROWS)
    return _floors[key]


def _fastest(seconds: dict[str, float]) -> str:
    """The fastest path: STOCK unless another is MIN_GAIN faster (or STOCK was dropped as hopeless); BLOCKS_Q8, whose
    8-bit activations change the arithmetic (the tokens), only where ARITHMETIC_MARGIN faster than the fastest blocks
    path of float activations: within it a fixed rule, not the clock, keeps the exact one."""
    best = min(seconds, key=seconds.get)
    exact = [path for path in (BLOCKS, BLOCKS_DOT) if path in seconds]
    if best == BLOCKS_Q8 and exact:
        closest = min(exact, key=seconds.get)
        best = closest if seconds[BLOCKS_Q8] >= (1 - ARITHMETIC_MARGIN) * seconds[closest] else best
    return best if STOCK not in seconds or seconds[best] < (1 - MIN_GAIN) * seconds[STOCK] else STOCK


def products_of(modules: Sequence[nn.Linear]) -> list[Product]:
    """Each module's weight [out, in] (carrying the GGUF blocks it is held in, where it is: ``blocks_of``) and bias:
    the products a forward that runs the modules one by one runs."""
    return [(with_blocks(module.weight.detach(), blocks_of(module)), module.bias) for module in modules]


@torch.inference_mode()
def kernel_times(layers: Sequence[Product], head: Product | None, paths: Sequence[str] | None = None,
                 rows: Sequence[int] = DECODE_ROWS, repeats: int = REPEATS, drop: float = DROP_FACTOR) -> dict:
    """Median seconds of each path at each of ``rows`` rows over ``repeats`` rounds, as passes run them: through
    ``PlannedLinear`` (a pass below the path's floor padded to it) on the products the forward runs (``layers``
    one after the other, ``head`` alone). One path at a time, the likeliest winners first (our kernels, then
    torch's): its copies are made, timed and dropped; a path ``drop`` times slower than the fastest so far at a row
    count is not timed at the rows after it (no entry there: it cannot win). {"rows": [...], "layers": [per row
    count {path: seconds}], "head": [...], "floors": {"layers": {path: the highest floor among the layers},
    "head": {...}}}; {} and no floors where there is no weight."""
    stacks = {"layers": list(layers), "head": [head] if head is not None else []}
    paths = paths or offered_paths(stacks["layers"][0][0] if layers else head[0])
    times: dict = {"rows": list(rows), **{name: [{} for _ in rows] for name in stacks},
                   "floors": {name: {} for name in stacks}}
    quiet = len(layers) < MIN_LAYERS_FOR_PROGRESS
    ordered = sorted(paths, key=lambda path: -PATHS.index(path))
    for path in tqdm(ordered, desc="measuring this CPU's kernels once", unit="path", disable=quiet):
        for name, products in stacks.items():
            if not products or path in BLOCK_PATHS and not all(native.reads(path, weight) for weight, _ in products):
                continue  # a stack not held throughout in blocks the path's kernel reads has no such path
            planned = [PlannedLinear(weight, bias, path) for weight, bias in products]
            times["floors"][name][path] = max(linear.floor for linear in planned)
            for index, count in enumerate(rows):
                inputs = {weight.shape[1]: torch.randn(count, weight.shape[1], dtype=weight.dtype)
                          for weight, _ in products}
                calls = [linear.bound(inputs[linear.weight.shape[1]]) for linear in planned]
                seconds = median_seconds({count: lambda: [call() for call in calls]}, repeats)[count]
                best = min(times[name][index].values(), default=seconds)
                times[name][index][path] = seconds
                if seconds > drop * best:
                    break
            del planned  # this path's copies go before the next path's are made
    return times


def summed_times(times: dict[str, list], name: str, rows: Sequence[int]) -> dict[str, float]:
    """Each path's seconds for ``name`` ("layers" or "head") summed over ``rows`` in a ``kernel_times``
    table, of the paths timed at all of them ({} where there was no weight)."""
    used = [seconds for count, seconds in zip(times["rows"], times[name]) if count in rows and seconds]
    if not used:
        return {}
    timed = set.intersection(*(set(seconds) for seconds in used))
    return {path: sum(seconds[path] for seconds in used) for path in used[0] if path in timed}


def plan_from(times: dict[str, list]) -> KernelPlan:
    """The fastest path for the layers and for the head over a decoding pass's row counts (``DECODE_ROWS``,
    summed, each as passes run it: padded to the path's floor) in a ``kernel_times`` table (STOCK where
    there was no weight)."""
    def fastest(name: str) -> str:
        totals = summed_times(times, name, DECODE_ROWS)
        return _fastest(totals) if totals else STOCK

    return KernelPlan(fastest("layers"), fastest("head"))


def measure_plan(layers: Sequence[Product], head: Product | None, paths: Sequence[str] | None = None) -> KernelPlan:
    return plan_from(kernel_times(layers, head, paths))


def plan_key(layers: Sequence[Product], head: Product | None, paths: Sequence[str] | None = None) -> str:
    """What a plan depends on: this machine (``machine_key``), the dtype, the products' shapes, the block types they
    are held in (where a blocks path is offered) and the paths it chose among."""
    shapes = sorted({tuple(weight.shape) for weight, _ in layers}) + ([tuple(head[0].shape)] if head else [])
    weight = layers[0][0] if layers else head[0]
    paths = paths or offered_paths(weight)
    digest = hashlib.sha1(str(shapes).encode()).hexdigest()[:12]
    held = held_types([w for w, _ in layers] + ([head[0]] if head else []))
    blocks = [f"blocks {'+'.join(held)}"] if held and set(paths) & set(BLOCK_PATHS) else []
    return "|".join([machine_key(), str(weight.dtype), f"shapes {digest}", *blocks, "+".join(paths), PLAN_VERSION])


def cached_plan(path: Path | None, layers: Sequence[Product], head: Product | None,
                paths: Sequence[str] | None = None,
                timed_layers: Callable[[], Sequence[Product]] | None = None) -> KernelPlan:
    """The plan for these products on this machine: read from the machine profile ``path``, or measured over
    ``paths`` once and stored there with its times (also where the entry is unreadable). ``path`` None: measured,
    not kept. ``timed_layers``: the layers' products to time where ``layers`` hold their shapes alone (the key's)."""
    paths = paths or offered_paths(layers[0][0] if layers else head[0])

    def measure() -> dict:
        times = kernel_times(timed_layers() if timed_layers else layers, head, paths)
        plan = plan_from(times)
        return {"layers": plan.layers, "head": plan.head, "seconds": times}

    return measured(path, plan_key(layers, head, paths), "kernel plan", measure,
                    lambda entry: KernelPlan.from_entry(entry, paths))
