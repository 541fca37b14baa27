"""Making a model's runtime when it is loaded: its kernels, which forward runs its passes, the dtype
``--dtype auto`` takes on a CPU, and the row-invariance probe; measured once per machine and cached in
the machine profile under the cache folder (measured.py).

Which forward (runtime.py lists the kinds): with ``--kernels auto`` a Llama-family model the lean forward
supports runs it, on a CPU as it is and on a CUDA device as fixed-shape passes replayed as CUDA graphs
(row-invariant ones where Triton runs and the probe proves them, else the fastest row buckets), once a pass
of every bucket agreed with transformers' forward (else transformers' path, with a warning);
every other model runs transformers' forward, with our attention where ``--kernels auto`` installed it.
Passes whose token rows attend exactly are probed for row invariance (invariance.py).
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from .kernel_plan import KernelPlan
from .kernels import apply_kernels
from .lean_llama import LeanLlama, lean_unsupported
from .measured import PROFILE_FILE
from .padded import (
    FASTEST,
    FIXED_TILES,
    INVARIANT_ROWS,
    TRITON_LAYERS,
    PaddedLean,
    compare_with_transformers,
    one_shape,
)
from .precision import checked_invariance, checked_pass_milliseconds, choose_cpu_dtype
from .runtime import Forward, Runtime, register
from .threads import others_busy, set_configured
from .transformers_forward import TransformersForward

# On a GPU, how far a CUDA-graph forward's rows may be from transformers' before it runs (padded.Agreement): in fp32
# the worst row's relative L2; in bf16/fp16 the median row's (sums rounded otherwise drift over the layers: on
# SmolLM2 in bf16, fixed-tile linears or attention in logical order leave rows 0.01-0.02 from transformers' after
# 30 layers, as far as transformers' bf16 is from its fp32, measured on a CPU; a broken forward ~1)
FP32_TOLERANCE, HALF_TOLERANCE = 1e-4, 0.2


def prepare(model: nn.Module, kernels: str = "auto", plan: KernelPlan | None = None, plan_file: Path | None = None,
            lean: bool = True, probe_file: Path | None = None, weights: str = "auto",
            eight_bit: bool = False) -> Runtime:
    """``model``'s runtime, not yet probed: ``kernels`` installed (kernels.py: ``plan`` as given, else the plan
    cached in ``plan_file``, else measured; ``weights``: which a GGUF's blocks may replace; ``eight_bit``: whether the
    plan may take 8-bit activations on them) and its forward chosen (the
    lean one where ``lean``, ``kernels`` is "auto" and the model is of its family; on a GPU, probes cached in
    ``probe_file`` help choose it)."""
    plan, exact_attention = apply_kernels(model, kernels, plan_file, plan, weights, eight_bit)
    lean_forward = lean and kernels == "auto" and lean_unsupported(model) is None
    forward = choose_lean(model, plan, probe_file) if lean_forward else None
    return Runtime(model, forward or TransformersForward(model, exact=exact_attention), plan=plan)


def choose_lean(model: nn.Module, plan: KernelPlan | None, probe_file: Path | None = None) -> Forward | None:
    """The lean forward of ``model``: on a CPU as it is; on a CUDA device replayed as CUDA graphs: of the row-invariant
    ``graphed_forwards`` that may run here (``rejected``), the quickest (``quickest``); where none may, the fastest
    shapes if they may; saying why of each it passes over (None where none may: transformers' path runs)."""
    lean = LeanLlama(model, plan)
    if lean.device.type == "cpu":
        return lean
    candidates, proved = graphed_forwards(lean), []
    for index, graphed in enumerate(candidates):
        if proved and not graphed.exact_rows:
            break  # the fastest shapes run only where no row-invariant passes may
        why = rejected(model, Runtime(model, graphed, plan=plan), probe_file)
        if why is None:
            proved.append(graphed)
            continue
        then = "passed over" if index + 1 < len(candidates) else "decoding runs transformers' path, slower"
        warnings.warn(f"the lean forward's passes ({graphed.describe()}) {why}: {then}", stacklevel=3)
    if not proved:
        return None
    chosen = quickest(model, proved, plan, probe_file)
    lean.caches.forget_recorded(keep={chosen.kind, chosen.fastest().kind})
    return chosen


def quickest(model: nn.Module, forwards: list[PaddedLean], plan: KernelPlan | None,
             probe_file: Path | None) -> PaddedLean:
    """Of ``forwards``, the one whose AR pass and ``TIMED_ROWS``-row pass take least together, measured once per
    machine (cached in ``probe_file``). On an H100 in bf16 the one shape of 64 rows took 1.9 / 2.1 ms and the
    fixed-tile linears 5.7 / 5.8 ms (benchmarks/results/h100/2026-11-26-gpu-check); another GPU may differ."""
    if len(forwards) == 1:
        return forwards[0]
    costs = [sum(checked_pass_milliseconds(Runtime(model, forward, plan=plan), probe_file).values())
             for forward in forwards]
    return forwards[costs.index(min(costs))]


def rejected(model: nn.Module, candidate: Runtime, probe_file: Path | None) -> str | None:
    """Why ``candidate``'s CUDA-graph passes may not run ``model`` (None: they may): they disagree with transformers'
    forward (``compare_with_transformers``: a pass of every bucket, row by row), or claim row invariance that the
    probe does not prove here (cached in ``probe_file``), or fail (a kernel that never ran on this GPU)."""
    tolerance = FP32_TOLERANCE if candidate.dtype == torch.float32 else HALF_TOLERANCE
    try:
        agreement = compare_with_transformers(model, candidate.forward)
        if not agreement.within(tolerance, half=candidate.dtype != torch.float32):
            return (f"disagree with transformers' forward (relative L2 of the rows: worst "
                    f"{agreement.worst_relative_l2:.2e}, median {agreement.median_relative_l2:.2e}, against "
                    f"{tolerance:.0e}; a clear argmax differs on {agreement.top1_differs} of {agreement.rows} rows)")
        invariance = checked_invariance(candidate, probe_file) if candidate.forward.exact_rows else None
    except Exception as error:  # noqa: BLE001 - a kernel that fails on a GPU it never ran on must not stop a load
        return f"failed on this GPU ({error!r})"
    return None if invariance is None or invariance.holds else f"are {invariance.describe()}"


def graphed_forwards(lean: LeanLlama) -> list[PaddedLean]:
    """The CUDA-graph forwards a GPU tries: row-invariant passes (where Triton imports) with Triton's fixed-tile
    linears at row buckets (an AR pass at its own rows) and at one shape of ``INVARIANT_ROWS`` rows (cuBLAS), then
    the fastest shapes (not row-invariant) with Triton's layer kernels, then with transformers' operations."""
    try:
        with_triton = [PaddedLean(lean, way) for way in (FIXED_TILES, one_shape(INVARIANT_ROWS), TRITON_LAYERS)]
    except ImportError as error:
        warnings.warn(f"Triton cannot be imported ({error}): passes on this GPU are not row-invariant", stacklevel=4)
        with_triton = []
    return [*with_triton, PaddedLean(lean, FASTEST)]


def make_runtime(model: nn.Module, kernels: str, choose_dtype: bool, dtype_reason: str, cache: Path,
                 weights: str = "auto") -> Runtime:
    """The runtime a loaded ``model`` runs with, registered for it (runtime.runtime_of). ``choose_dtype``:
    ``--dtype auto`` on a CPU with ``--kernels auto`` (``model`` in float32 until chosen: precision.py; the kernel
    plan may then take 8-bit activations on a GGUF's blocks: kernels.allowed_paths); else ``dtype_reason`` says why
    its dtype. ``weights``: kernels.apply_kernels'. Kernel plans and precision probes
    are kept in the machine profile in ``cache``."""
    profile = cache / PROFILE_FILE

    def prepared(candidate: nn.Module) -> Runtime:
        return prepare(candidate, kernels, plan_file=profile, probe_file=profile, weights=weights,
                       eight_bit=choose_dtype)

    if choose_dtype:
        runtime, choice = choose_cpu_dtype(model, prepared, profile, weights)
        dtype_reason = choice.reason
    else:
        runtime = prepared(model)
    invariance = checked_invariance(runtime, profile) if runtime.forward.exact_rows else None
    set_configured()  # the count requests start from and go back to: torch's now
    others_busy(False)  # a first reading of the machine's load: the first request's threads count from here
    return register(replace(runtime, dtype_reason=dtype_reason, invariance=invariance))
