"""The device kernels one padded pass launches, a layer, by way (padded.py's PassWays): what a CUDA graph of the
pass replays, one launch each, counted by running the pass eagerly.

    PYTHONPATH=. python benchmarks/gpu/pass_kernels.py [--rows 1 64] [--layers 4]

A random Llama of the default model's widths (SmolLM2-135M: hidden 576, 9 query heads, 3 key/value heads, head 64,
MLP 1536) in bf16. Counted on a GPU: the CUDA kernels torch's profiler sees (cuBLAS's and SDPA's own kernels
included); on a CPU: torch's operations that compute (a TorchDispatchMode; views and allocations launch nothing)
and Triton launches, with the Triton kernels under Triton's interpreter. "a layer" is the difference between
models of two depths over their difference, so the first and last layers' extra work (the input norm, the final
norm) and a pass's own (the attention's order table) count in "a pass besides".
"""
from __future__ import annotations

import argparse
import collections
import os

import torch
from torch.utils._python_dispatch import TorchDispatchMode

if not torch.cuda.is_available():  # before anything imports triton
    os.environ.setdefault("TRITON_INTERPRET", "1")
from invariance_parts import random_llama  # noqa: E402 (this folder, on sys.path as the script's own)

from bita.runtime import logical_attention, triton_layer, triton_linear  # noqa: E402
from bita.runtime.lean_llama import LeanLlama  # noqa: E402
from bita.runtime.padded import FASTEST, FIXED_TILES, TRITON_LAYERS, PaddedLean, one_shape  # noqa: E402

NO_KERNEL = {"empty", "empty_strided", "detach", "lift_fresh", "alias", "_to_copy_noop", "set_", "resize_"}


class Launches(TorchDispatchMode):
    """Counts torch's operations that launch a kernel (by name) and each Triton kernel's launches while active;
    what a Triton kernel does inside its launch (the interpreter's copies) is not counted."""

    def __init__(self):
        super().__init__()
        self.counts, self.inside_triton = collections.Counter(), False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not (self.inside_triton or func.is_view or name in NO_KERNEL):
            self.counts[f"torch {name}"] += 1
        return func(*args, **(kwargs or {}))

    def count_triton(self) -> None:
        """Count the launches of every Triton kernel the padded passes run."""
        for module in (triton_layer, triton_linear, logical_attention):
            for name, kernel in vars(module).items():
                if name.startswith("_") and hasattr(kernel, "run"):
                    kernel.run = self.counted(name, kernel.run)

    def counted(self, name, run):
        def launch(*args, **kwargs):
            self.counts[f"triton {name}"] += 1
            self.inside_triton = True
            try:
                return run(*args, **kwargs)
            finally:
                self.inside_triton = False
        return launch


@torch.inference_mode()
def pass_launches(counter: Launches, way, layers: int, rows: int, device: str) -> collections.Counter:
    """Kernels of one eager padded pass of ``rows`` rows after a 40-token context, on a model of ``layers``."""
    model = random_llama(layers, device).to(torch.bfloat16)
    forward = PaddedLean(LeanLlama(model), way, graphs=False)
    for layer in forward.layers:  # a GPU's linears take their rows as they come (a CPU's kernel plan may pad them)
        for part in layer:
            if hasattr(part, "floor"):
                part.floor = 1
    cache = forward.new_cache()
    embed = model.get_input_embeddings()
    context = embed(torch.arange(40, device=device))
    forward.forward(cache, context, torch.arange(40), torch.ones(40, 40, dtype=torch.bool).tril(), 40)
    embeds = embed(torch.arange(rows, device=device))
    allowed = torch.ones(rows, 40 + rows, dtype=torch.bool).tril(40)
    buffers = forward._buffers(cache, forward.buckets[0] if way.invariant_rows else rows)
    buffers.fill(cache.length, embeds, torch.arange(40, 40 + rows), allowed)
    if device == "cuda":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
            forward._run(buffers, cache)
            torch.cuda.synchronize()
        return collections.Counter(event.name[:48] for event in profile.events()
                                   if event.device_type == torch.autograd.DeviceType.CUDA)
    counter.counts.clear()
    with counter:
        forward._run(buffers, cache)
    return collections.Counter(counter.counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    counter = Launches()
    counter.count_triton()
    ways = {"fastest, torch ops": FASTEST, "fastest, Triton layer kernels": TRITON_LAYERS,
            "one shape (64 rows)": one_shape(64), "fixed tiles": FIXED_TILES}
    print("| way | rows | kernels a layer | a pass besides | kernels a layer, by kind |\n|---|---|---|---|---|")
    for name, way in ways.items():
        for rows in args.rows:
            shallow, deep = (pass_launches(counter, way, depth, rows, device)
                             for depth in (args.layers, 2 * args.layers))
            layer = {kind: (deep[kind] - shallow[kind]) / args.layers for kind in deep}
            per_layer = sum(layer.values())
            besides = sum(shallow.values()) - per_layer * args.layers
            kinds = ", ".join(f"{kind} {count:g}" for kind, count in sorted(layer.items()) if count)
            print(f"| {name} | {rows} | {per_layer:g} | {besides:g} | {kinds} |", flush=True)


if __name__ == "__main__":
    main()
