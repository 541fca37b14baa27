"""Which dtype a CPU model runs in, and whether its passes are proved row-invariant there.

``--dtype auto`` on a CPU measures, as ``--kernels auto`` does: the model's AR pass and an 8-row tree-sized pass
are timed on its runtime in float32 and in bfloat16, the bf16 passes are probed for row invariance
(invariance.py), and bf16 is taken where the probe holds and it is faster by more than ``ARITHMETIC_MARGIN`` (within
it, a fact of the CPU decides: ``rule_for_this_cpu``), on bf16 hardware (AMX, AVX512-BF16)
or not (the native kernels widen bf16 weights to fp32 in registers: half the bytes a pass reads, on a 2-vCPU
AVX2-only Zen 3 an AR pass 17.1 ms in bf16 against 39.9 in fp32); float32 where neither bf16 hardware nor the
native kernels are here. The choice and its invariance proof are measured once per machine profile
(measured.py), keyed by machine, torch version, dtype and model shapes, like the kernel plans.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from .blocks import held_types
from .device import bf16_hardware, machine_key, median_seconds
from . import native
from .invariance import Invariance, probe_row_invariance
from .measured import ARITHMETIC_MARGIN, measured
from .runtime import Runtime

INVARIANCE_VERSION = "v9"  # v2: linears padded to their measured row floor; v3: transformers' path probed too;
#                             v4: a probe keyed by its runtime (kernel paths included), the native path offered;
#                             v5: native attention in the lean forward; v6: CUDA passes wait for their staging
#                             copy (before, the probe raced it on a GPU); v7: keyed by device.machine_key;
#                             v8: the native stack in one call (the dtype choice's key holds no forward: its times
#                             were of the Python loop's passes); v9: bf16 attention on AMX tiles where they run
TIMED_CONTEXT, TIMED_ROWS, TIMED_REPEATS = 128, 8, 5


def rule_for_this_cpu(timing: str) -> tuple[str, str]:
    """The dtype where the two were timed within ``ARITHMETIC_MARGIN`` of each other, and why: a fact of the CPU
    decides, so that every machine of one kind gives its users the same arithmetic (the same tokens) whatever a
    moment's noise measured: bfloat16 where it computes bf16 products in hardware, else float32."""
    dtype, fact = ("bfloat16", "bf16 products in hardware") if bf16_hardware() else ("float32", "no bf16 products "
                                                                                                "in hardware")
    return dtype, (f"within {ARITHMETIC_MARGIN:.0%} of each other ({timing}): the rule for a CPU with {fact} "
                   f"takes {dtype}")


def model_key(model: nn.Module, what: str, runtime_key: str = "", weights: str = "dense") -> str:
    """What a cached probe or choice depends on: the machine (``machine_key``; for a probe, its runtime's key,
    which holds it, and the forward and kernel paths whose arithmetic it checked), the model's dtype and shapes, and
    for a choice ``weights`` (kernels.apply_kernels') with the GGUF block types its linears are held in."""
    config = model.config.get_text_config()
    shapes = [getattr(config, name, None) for name in ("model_type", "hidden_size", "intermediate_size",
                                                       "num_hidden_layers", "num_attention_heads",
                                                       "num_key_value_heads", "vocab_size")]
    dtype = model.get_input_embeddings().weight.dtype
    held = held_types(model.modules())
    blocks = [f"weights {weights} {'+'.join(held)}"] if held and weights != "dense" else []
    return "|".join([what, runtime_key or machine_key(), str(dtype), str(shapes), *blocks, INVARIANCE_VERSION])


def checked_invariance(runtime: Runtime, path: Path | None) -> Invariance:
    """The row-invariance probe of ``runtime``'s passes, cached in the JSON table ``path``."""
    return measured(path, model_key(runtime.model, "row-invariance", runtime.key), "row-invariance probe",
                    lambda: asdict(probe_row_invariance(runtime)), lambda entry: Invariance(**entry))


def checked_pass_milliseconds(runtime: Runtime, path: Path | None) -> dict[str, float]:
    """``pass_milliseconds`` of ``runtime``, cached in the JSON table ``path``."""
    return measured(path, model_key(runtime.model, "pass-milliseconds", runtime.key), "pass timing",
                    lambda: pass_milliseconds(runtime))


@torch.inference_mode()
def pass_milliseconds(runtime: Runtime) -> dict[str, float]:
    """Median ms of an AR pass and of a TIMED_ROWS-row pass after TIMED_CONTEXT tokens on ``runtime``."""
    embed = runtime.model.get_input_embeddings()
    tokens = (torch.arange(3, 3 + TIMED_CONTEXT + TIMED_ROWS) % embed.weight.shape[0]).to(embed.weight.device)
    cache = runtime.new_cache(rows=len(tokens))
    try:
        runtime.run(cache, embed(tokens[:TIMED_CONTEXT]), torch.arange(TIMED_CONTEXT),
                    torch.ones(TIMED_CONTEXT, TIMED_CONTEXT, dtype=torch.bool).tril())
        runs = {}
        for rows in (1, TIMED_ROWS):
            allowed = torch.ones(rows, TIMED_CONTEXT + rows, dtype=torch.bool).tril(TIMED_CONTEXT)
            embeds, positions = embed(tokens[TIMED_CONTEXT:TIMED_CONTEXT + rows]), TIMED_CONTEXT + torch.arange(rows)

            def run(rows=rows, embeds=embeds, positions=positions, allowed=allowed):
                runtime.run(cache, embeds, positions, allowed)
                cache.crop(-rows)
            runs[f"{rows} rows"] = run
        return {name: 1000 * seconds for name, seconds in median_seconds(runs, TIMED_REPEATS, runtime.device).items()}
    finally:
        runtime.release(cache)


@dataclass(frozen=True)
class DtypeChoice:
    """What ``--dtype auto`` took on this CPU and why."""

    dtype: str  # "float32" | "bfloat16"
    reason: str


def choose_cpu_dtype(model: nn.Module, prepare: Callable[[nn.Module], Runtime], path: Path | None,
                     weights: str = "dense") -> tuple[Runtime, DtypeChoice]:
    """The runtime ``prepare`` makes of ``model`` (float32, not yet prepared) in the dtype ``--dtype auto``
    takes (module docstring): float32, or bfloat16 where measured better; ``weights``: what ``prepare`` was told
    (a choice is kept for each, with the block types it ran on)."""
    if not bf16_hardware() and native.unavailable() is not None:
        return prepare(model), DtypeChoice("float32", "no bf16 hardware and no native kernels on this CPU")
    prepared: dict[torch.dtype, Runtime] = {}

    def measure() -> dict:
        prepared[torch.bfloat16] = half = prepare(copy.deepcopy(model).to(torch.bfloat16))
        prepared[torch.float32] = full = prepare(model)
        invariance = checked_invariance(half, path)
        return {"float32": pass_milliseconds(full), "bfloat16": pass_milliseconds(half),
                "invariance": invariance.describe(), "invariant": invariance.holds}

    found = measured(path, model_key(model, "dtype-choice", weights=weights), "dtype choice", measure)
    costs = {name: sum(found[name].values()) for name in ("float32", "bfloat16")}
    timing = ", ".join(f"{name} {' / '.join(f'{ms:.1f}' for ms in found[name].values())} ms at 1 / {TIMED_ROWS} rows"
                       for name in ("float32", "bfloat16"))
    if not found["invariant"]:
        choice = DtypeChoice("float32", f"bfloat16 passes are {found['invariance']} ({timing})")
    elif min(costs.values()) >= (1 - ARITHMETIC_MARGIN) * max(costs.values()):
        choice = DtypeChoice(*rule_for_this_cpu(timing))
    elif costs["bfloat16"] > costs["float32"]:
        choice = DtypeChoice("float32", f"bfloat16 is slower here ({timing})")
    else:
        hardware = "bf16 hardware" if bf16_hardware() else "bf16 widened to fp32 by the native kernels"
        choice = DtypeChoice("bfloat16", f"{hardware}, row-invariant, faster ({timing})")
    dtype = getattr(torch, choice.dtype)
    return prepared.get(dtype) or prepare(model.to(dtype)), choice
