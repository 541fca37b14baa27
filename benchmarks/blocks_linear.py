"""The default model's linears on its GGUF blocks against the same linears de-quantised, interleaved in one process:
every fused layer product and the LM head, each as a pass calls it (bound once, no Python between calls), at each
row count, on the paths each load's kernel plan chose (``--dtype`` as given: bf16 by default).

    PYTHONPATH=. .venv/bin/python benchmarks/blocks_linear.py [--rows 1 4 8 16] [--rounds 15] [--dtype bfloat16]

Prints per row count the median ms of the layers' products and of the head with the 25th-75th percentile.
"""
import argparse
import time

import torch
from ar_vs_llamacpp import spread  # this folder is the script's: its median and quartiles in ms

from bita.model.loading import load_model
from bita.runtime.kernel_plan import PlannedLinear


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    loads = {weights: load_model("default", device="cpu", dtype=args.dtype, weights=weights)
             for weights in ("dense", "blocks")}
    for weights, loaded in loads.items():
        print(f"{weights}: {loaded.runtime.plan.describe()}")
    for rows in args.rows:
        calls, times = {}, {}
        for weights, loaded in loads.items():
            lean, head = loaded.runtime.forward, loaded.model.lm_head
            products = [part for layer in lean.layers for part in layer if isinstance(part, PlannedLinear)]
            inputs = {part.weight.shape[1]: torch.randn(rows, part.weight.shape[1]).to(lean.dtype)
                      for part in products}
            hidden = torch.randn(rows, lean.norm.shape[0]).to(lean.dtype)
            calls[weights] = {"layers": [part.bound(inputs[part.weight.shape[1]]) for part in products],
                              "head": [lambda head=head, hidden=hidden: head(hidden)]}
            times.update({(weights, name): [] for name in ("layers", "head")})
        for _ in range(args.rounds):  # interleaved: a slow moment of the machine falls on both
            for weights, named in calls.items():
                for name, bound in named.items():
                    start = time.perf_counter()
                    for call in bound:
                        call()
                    times[weights, name].append(time.perf_counter() - start)
        for (weights, name), values in times.items():
            print(f"{rows:>3} rows  {weights:<6} {name:<6} {spread(values)}")


if __name__ == "__main__":
    main()
