"""Where a model runs and how long its work takes: device naming, device-synchronised timing,
and the LM head applied to chosen rows. Used by every layer above the model."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn


def device_of(model: nn.Module) -> torch.device:
    return model.get_input_embeddings().weight.device


def cpu_info() -> dict[str, str]:
    """This CPU's /proc/cpuinfo fields (its first processor's; empty where there is none)."""
    cpuinfo = Path("/proc/cpuinfo")
    fields = {}
    for line in cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []:
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def describe_cpu() -> str:
    """e.g. 'AMD EPYC, family 25 model 17, AVX512, 2 threads': the model name (with family and model
    numbers, which tell one generation from another where the name does not), the widest vector ISA
    torch's kernels use here, and torch's intra-op threads."""
    info = cpu_info()
    parts = [info.get("model name", "unknown CPU")]
    if "cpu family" in info and "model" in info:
        parts.append(f"family {info['cpu family']} model {info['model']}")
    return ", ".join(parts + [torch.backends.cpu.get_cpu_capability(), f"{torch.get_num_threads()} threads"])


def describe_device(device: torch.device) -> str:
    """e.g. 'cuda:0 (NVIDIA H100 80GB HBM3)' or 'cpu (AMD EPYC, family 25 model 17, AVX512, 2 threads)'."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({describe_cpu()})"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, fn):
    """Call ``fn()``; return (its result, wall seconds), synchronised with the device."""
    synchronize(device)
    started = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - started


def output_logits(model: nn.Module, hidden: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor] | None = None
                  ) -> torch.Tensor:
    """LM head on selected rows only: hidden [..., H] -> float logits [..., V] (a planned head pads a lone
    row to its kernel's floor: kernel_plan.row_floor); ``head``: in place of the model's (its weight)."""
    logits = (head or model.get_output_embeddings())(hidden).float()
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits
