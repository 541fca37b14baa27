"""Which linear kernel runs M rows on this machine, chosen by measuring it once.

Three paths that torch ships compute ``x @ W.T + b`` for a frozen weight W [out, in]:

- STOCK: ``F.linear(x, W, b)``, what transformers runs;
- TRANSPOSED: ``x @ Wt`` with ``Wt = W.T`` made contiguous once (BLAS then streams W row by row);
- PACKED: W reordered once into oneDNN's blocked layout (``torch.ops.mkldnn._linear_pointwise``).

Which is fastest depends on the CPU and on M (measured on 2-vCPU machines of one workplace: on an
AMD EPYC with AVX2 PACKED won at every M, and on an AMD EPYC of family 25 model 17 with AVX-512 too
(docs/speed.md); on an Intel Xeon with AVX-512 STOCK won at 1 row, where PACKED cost +33 % a pass,
and TRANSPOSED at 4-16 rows). So ``measure_plan`` times the three on
the model's own weights at each of ``ROW_BUCKETS`` rows: all the layers' linears one after the
other (as a pass streams them from memory, cold), and the LM head alone, and keeps the path fastest
over a decoding pass's row counts, for every row count (a row must not round differently because of
how many rows share its pass), STOCK unless another is faster by ``MIN_GAIN``. Plans are cached on disk, keyed by CPU
model, ISA flags, threads, torch version, dtype and weight shapes (``plan_key``), with the times they
were chosen from. A plan timed while the machine was busy (a test suite, a Space's first start) can
be wrong for an idle one, so a cached plan is checked once per process against a quick probe at
``PROBE_BUCKETS`` and timed again, saying so, where the probe finds its path clearly slower.
"""

from __future__ import annotations

import hashlib
import json
import logging
import statistics
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .device import cpu_info, describe_cpu
from .json_table import write_table

STOCK, TRANSPOSED, PACKED = "stock", "transposed", "packed"
PATHS = (STOCK, TRANSPOSED, PACKED)
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)  # M rows take the first bucket >= M; past 128 (long prompts), the last
DECODE_BUCKETS = (2, 4, 8, 16)  # an AR pass (one row runs as two), and tree passes: what the plan is chosen on
MIN_GAIN = 0.03  # another path replaces STOCK only when at least this much faster
REPEATS = 5
PLAN_VERSION = "v2"  # v2: one path for every row count
MIN_LAYERS_FOR_PROGRESS = 8  # a real model's timing takes minutes and shows its progress; a tiny one's is quiet
PROBE_BUCKETS, PROBE_REPEATS = (2, 8), 2  # an AR pass and a small tree's: a cached plan's check (~1 s here)
PROBE_MARGIN = 0.15  # a cached plan is timed again where its path at a probed bucket is this much slower than the fastest
_probed: set[str] = set()  # plan keys checked in this process
FLOOR_ROWS, FLOOR_BLOCKS = 64, (1, 2, 3, 4, 8)  # row_floor's rows, and the block sizes compared with one block
_floors: dict[tuple, int] = {}  # row_floor's measurements in this process

_linear_pointwise = torch.ops.mkldnn._linear_pointwise.default
logger = logging.getLogger(__name__)


def bucket_of(rows: int) -> int:
    """Index into ROW_BUCKETS of the bucket that runs ``rows`` rows (every linear call asks: bisect)."""
    return min(bisect_left(ROW_BUCKETS, rows), len(ROW_BUCKETS) - 1)


@dataclass(frozen=True)
class KernelPlan:
    """The path per row bucket (``ROW_BUCKETS``) for the layers' linears and for the LM head."""

    layers: tuple[str, ...]
    head: tuple[str, ...]

    def describe(self) -> str:
        """e.g. 'layers: 1 stock, 2-64 transposed, 128 stock; head: packed'."""
        return f"layers: {_runs(self.layers)}; head: {_runs(self.head)}"


def _runs(paths: Sequence[str]) -> str:
    """'stock' when one path serves all buckets, else its runs of buckets: '1 stock, 2-128 transposed'."""
    runs: list[list] = []
    for size, path in zip(ROW_BUCKETS, paths):
        if runs and runs[-1][2] == path:
            runs[-1][1] = size
        else:
            runs.append([size, size, path])
    if len(runs) == 1:
        return runs[0][2]
    return ", ".join(f"{low}{'' if low == high else f'-{high}'} {path}" for low, high, path in runs)


def pack(weight: torch.Tensor) -> torch.Tensor | None:
    """The oneDNN-blocked copy of ``weight`` [out, in], or None where this CPU cannot run it
    (bf16 needs AVX-512 BW/VL/DQ or AVX-NE-CONVERT)."""
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
    except RuntimeError:
        return None


def run_path(path: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
             transposed: torch.Tensor | None, packed: torch.Tensor | None, floor: int = 1) -> torch.Tensor:
    """x [..., in] -> [..., out] by ``path``; ``transposed`` [in, out] and ``packed`` are the
    weight's copies for those paths. Fewer than ``floor`` rows run padded to ``floor`` (copies of the
    last row): below its floor a path may round a row differently (``row_floor``)."""
    rows = x.numel() // x.shape[-1]
    if rows < floor:
        flat = x.reshape(rows, x.shape[-1])
        padded = torch.cat([flat, flat[-1:].expand(floor - rows, -1)])
        return run_path(path, padded, weight, bias, transposed, packed)[:rows].reshape(*x.shape[:-1], -1)
    if path == PACKED:
        return _linear_pointwise(x, packed, bias, "none", [], "")
    if path == TRANSPOSED:
        out = x @ transposed
        return out + bias if bias is not None else out
    return F.linear(x, weight, bias)


@torch.inference_mode()
def row_floor(path: str, weight: torch.Tensor, bias: torch.Tensor | None, transposed: torch.Tensor | None,
              packed: torch.Tensor | None) -> int:
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
        whole = run_path(path, x, weight, bias, transposed, packed)
        agrees = {size: all(torch.equal(run_path(path, x[start:start + size], weight, bias, transposed, packed),
                                        whole[start:start + size])
                            for start in range(0, FLOOR_ROWS - size + 1, size)) for size in FLOOR_BLOCKS}
        _floors[key] = next((size for size in FLOOR_BLOCKS if all(agrees[s] for s in FLOOR_BLOCKS if s >= size)),
                            FLOOR_ROWS)
    return _floors[key]


def _median_seconds(runs: dict[str, Callable[[], object]], repeats: int = REPEATS) -> dict[str, float]:
    """Median wall seconds of each run, interleaved ``repeats`` times after one warm-up round."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_index in range(repeats + 1):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            if round_index:
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def _fastest(seconds: dict[str, float]) -> str:
    best = min(seconds, key=seconds.get)
    return best if seconds[best] < (1 - MIN_GAIN) * seconds[STOCK] else STOCK


@torch.inference_mode()
def kernel_times(layers: list[nn.Linear], head: nn.Linear | None, paths: Sequence[str] = PATHS,
                 buckets: Sequence[int] = ROW_BUCKETS, repeats: int = REPEATS) -> dict[str, list[dict[str, float]]]:
    """Median seconds of each path on these weights at each of ``buckets`` rows over ``repeats`` rounds:
    {"layers": [per bucket {path: seconds}], "head": [...]}; "layers" runs all of them one after the other."""
    def copies(module):
        weight = module.weight
        return (weight, module.bias, weight.t().contiguous() if TRANSPOSED in paths else None,
                pack(weight) if PACKED in paths else None)

    stacks = {"layers": [copies(m) for m in layers], "head": [copies(head)] if head is not None else []}
    times: dict[str, list[dict[str, float]]] = {name: [] for name in stacks}
    for rows in tqdm(buckets, desc="timing this CPU's kernels once (cached)", unit="row bucket",
                     disable=len(layers) < MIN_LAYERS_FOR_PROGRESS or buckets == PROBE_BUCKETS):
        for name, stack in stacks.items():
            inputs = {}
            for weight, *_ in stack:
                inputs.setdefault(weight.shape[1], torch.randn(rows, weight.shape[1], dtype=weight.dtype))

            def run(path, stack=stack, inputs=inputs):
                return [run_path(path, inputs[w.shape[1]], w, b, t, p) for w, b, t, p in stack]

            runs = {path: (lambda p=path: run(p)) for path in paths}
            times[name].append(_median_seconds(runs, repeats) if stack else {})
    return times


def plan_from(times: dict[str, list[dict[str, float]]]) -> KernelPlan:
    """One path for every bucket, for the layers and for the head: the fastest over the buckets a
    decoding pass uses (``DECODE_BUCKETS``, summed) in ``kernel_times``' table (STOCK where there was no
    weight). One path, because kernels round differently: a row computed by two paths, or by one path
    in another row count class, could come out differently, and a pass must be row-invariant
    (docs/method.md)."""
    def uniform(table: list[dict[str, float]]) -> tuple[str, ...]:
        used = [seconds for rows, seconds in zip(ROW_BUCKETS, table) if rows in DECODE_BUCKETS and seconds]
        if not used:
            return (STOCK,) * len(ROW_BUCKETS)
        return (_fastest({path: sum(seconds[path] for seconds in used) for path in used[0]}),) * len(ROW_BUCKETS)

    return KernelPlan(uniform(times["layers"]), uniform(times["head"]))


def measure_plan(layers: list[nn.Linear], head: nn.Linear | None, paths: Sequence[str] = PATHS) -> KernelPlan:
    return plan_from(kernel_times(layers, head, paths))


def probe_disagrees(plan: KernelPlan, probe: dict[str, list[dict[str, float]]]) -> str | None:
    """Where ``probe`` (``kernel_times`` at PROBE_BUCKETS, summed over them) finds the plan's path for
    the layers or the head more than PROBE_MARGIN slower than the fastest path, what it found; else None."""
    for name, chosen in (("layers", plan.layers), ("head", plan.head)):
        tables = [seconds for seconds in probe[name] if seconds]
        if not tables:
            continue
        totals = {path: sum(seconds[path] for seconds in tables) for path in tables[0]}
        path, best = chosen[bucket_of(PROBE_BUCKETS[0])], min(totals, key=totals.get)
        if path not in totals or totals[path] > (1 + PROBE_MARGIN) * totals[best]:
            taken = f"{1000 * totals[path]:.1f} ms" if path in totals else "not available"
            return f"{name} at {' + '.join(map(str, PROBE_BUCKETS))} rows: the plan's {path} {taken}, " \
                   f"{best} {1000 * totals[best]:.1f} ms now"
    return None


def plan_key(layers: list[nn.Linear], head: nn.Linear | None) -> str:
    """What a plan depends on: this CPU (name, generation, vector ISA, threads; a hash of its flags),
    torch's version, the dtype and the weights' shapes."""
    shapes = sorted({tuple(m.weight.shape) for m in layers}) + ([tuple(head.weight.shape)] if head else [])
    weights = layers[0].weight if layers else head.weight
    digest = hashlib.sha1(f"{cpu_info().get('flags', '')}|{shapes}".encode()).hexdigest()[:12]
    return "|".join([describe_cpu(), torch.__version__, str(weights.dtype), digest, PLAN_VERSION])


def cached_plan(path: Path, layers: list[nn.Linear], head: nn.Linear | None,
                paths: Sequence[str] = PATHS) -> KernelPlan:
    """The plan for these weights on this machine: read from the JSON file ``path`` (checked against
    a probe once per process, ``probe_disagrees``), or measured over ``paths`` and added to it with its
    times (also when the file is unreadable, or the probe disagrees)."""
    key = plan_key(layers, head)
    try:
        stored = json.loads(path.read_text()).get(key) if path.is_file() else None
        plan = KernelPlan(tuple(stored["layers"]), tuple(stored["head"])) if stored else None
    except (OSError, ValueError, KeyError, TypeError):
        plan = None  # unreadable or corrupted: measure again and rewrite
    if plan is not None:
        if key in _probed:
            return plan
        _probed.add(key)
        disagreement = probe_disagrees(plan, kernel_times(layers, head, paths, PROBE_BUCKETS, PROBE_REPEATS))
        if disagreement is None:
            return plan
        logger.warning("the cached kernel plan disagrees with a probe now (%s): timing this CPU's kernels again",
                       disagreement)
    _probed.add(key)
    times = kernel_times(layers, head, paths)
    plan = plan_from(times)
    try:
        table = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        table = {}
    table[key] = {**asdict(plan), "seconds": times}
    write_table(path, table)
    return plan
