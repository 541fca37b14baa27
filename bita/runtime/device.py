"""Where a model runs and how long its work takes: device naming, device-synchronised timing,
and the LM head applied to chosen rows. Used by every layer above the model."""

from __future__ import annotations

import hashlib
import importlib.metadata
import statistics
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn


def device_of(model: nn.Module) -> torch.device:
    return model.get_input_embeddings().weight.device


def bf16_hardware() -> bool:
    """Whether this CPU computes bf16 products in hardware (AMX or AVX512-BF16) and oneDNN uses it."""
    flags = set(cpu_info().get("flags", "").split())
    return bool(flags & {"amx_bf16", "avx512_bf16"}) and torch.ops.mkldnn._is_mkldnn_bf16_supported()


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


@lru_cache(maxsize=1)
def kernel_sources_digest() -> str:
    """A hash of the native kernels' sources (this folder's C files and headers): a measurement of their paths
    holds only for the code that was measured."""
    hasher = hashlib.sha1()
    for source in sorted(Path(__file__).parent.glob("native*.[ch]")):
        hasher.update(source.name.encode() + source.read_bytes())
    return hasher.hexdigest()[:12]


def machine_key(device: torch.device | str = "cpu") -> str:
    """What every measurement of ``device`` in the machine profile depends on (measured.py), facts only: the device
    as ``describe_device`` names it (on a CPU its model, vector ISA and torch's threads), a hash of this CPU's flags,
    torch's and transformers' versions and a hash of the native kernels' sources."""
    flags = hashlib.sha1(cpu_info().get("flags", "").encode()).hexdigest()[:12]
    return "|".join([describe_device(torch.device(device)), f"flags {flags}", f"torch {torch.__version__}",
                     f"transformers {importlib.metadata.version('transformers')}",
                     f"kernels {kernel_sources_digest()}"])


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def long_tensor(values: list[int], offset: int = 0) -> torch.Tensor:
    """[len(values)] int64 on the host, ``offset`` added: built through numpy, ~4 us where ``torch.tensor`` of a
    list takes ~15 (a step makes two before its pass: the candidate ids and the cache's kept rows)."""
    array = np.array(values, dtype=np.int64)
    return torch.from_numpy(array + offset if offset else array)


def first_argmax(vector: torch.Tensor) -> int:
    """The index of the first maximum of a float ``vector`` [V] (torch's rule), a Python int: on the CPU through
    numpy, whose vectorised scan took 7 us over 49152 float32 on a 2-vCPU Xeon where torch's took 144 (a greedy
    step reads one or more rows' argmax); elsewhere torch's, one number back."""
    if vector.device.type == "cpu" and vector.dtype in (torch.float32, torch.float64):
        return int(vector.numpy().argmax())
    return int(vector.argmax())


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host ``tensor`` on ``device`` without waiting for the work queued there: on a GPU it goes through
    pinned memory in a non-blocking copy (``.to`` from pageable memory waits for the stream: a copy queued
    behind a running pass would wait for the pass); torch's pinned-memory cache keeps the host block until
    the copy is done. Elsewhere, ``.to``."""
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


class PassTimer:
    """Times work queued on ``device`` without waiting for it: ``start`` and ``stop`` around queuing it, ``seconds``
    once the caller has waited for it anyway (a copy back). On a CPU, wall seconds (the work is done when queued); on
    a GPU, two CUDA events: the device's time from the first to the last, host gaps between included, so the host
    can queue what follows (the verdict's kernels) while the device still runs the pass."""

    def __init__(self, device: torch.device):
        self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) \
            if device.type == "cuda" else None
        self.started = self.elapsed = 0.0

    def start(self) -> None:
        if self.events:
            self.events[0].record()
        self.started = time.perf_counter()

    def stop(self) -> None:
        if self.events:
            self.events[1].record()
        self.elapsed = time.perf_counter() - self.started

    def seconds(self) -> float:
        if not self.events:
            return self.elapsed
        self.events[1].synchronize()
        return self.events[0].elapsed_time(self.events[1]) / 1000


def timed(device: torch.device, fn):
    """Call ``fn()``; return (its result, wall seconds), synchronised with the device."""
    synchronize(device)
    started = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - started


def median_seconds(runs: dict, repeats: int, device: torch.device | str = "cpu") -> dict:
    """Median seconds (``timed``: synchronised with ``device``) of each of ``runs`` ({name: fn}), interleaved
    ``repeats`` times after one warm-up round: the one way every cached table times its candidates."""
    device = torch.device(device)
    times: dict = {name: [] for name in runs}
    for round_index in range(repeats + 1):
        for name, run in runs.items():
            seconds = timed(device, run)[1]
            if round_index:
                times[name].append(seconds)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def output_logits(model: nn.Module, hidden: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor] | None = None
                  ) -> torch.Tensor:
    """LM head on selected rows only: hidden [..., H] -> float logits [..., V] (a planned head pads a lone
    row to its kernel's floor: kernel_plan.row_floor); ``head``: in place of the model's (its weight)."""
    logits = (head or model.get_output_embeddings())(hidden).float()
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits
