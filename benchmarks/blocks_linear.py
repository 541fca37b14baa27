"""The default model's linears on its GGUF blocks, path against path, interleaved in one process: every fused layer
product and the LM head, each as a pass calls it (bound once, no Python between calls), at each row count, on each
of ``--paths`` (default: every blocks path this machine offers) and "dense" (the same linears de-quantised, on the
path the dense load's kernel plan chose), ``--dtype`` as given (bf16 by default).

    PYTHONPATH=. .venv/bin/python benchmarks/blocks_linear.py [--rows 1 4 9 16] [--rounds 15] [--dtype bfloat16]
        [--paths blocks blocks-q8 dense]

Prints per row count the median ms of the layers' products and of the head with the 25th-75th percentile, and each
path's ratio to its own one-row time (what a tree pass of that many rows costs beside an AR pass).
"""
import argparse
import statistics
import time

import torch
from ar_vs_llamacpp import spread  # this folder is the script's: its median and quartiles in ms

from bita.model.loading import load_model
from bita.runtime import native
from bita.runtime.kernel_plan import BLOCK_PATHS, PlannedLinear, offered_paths, products_of
from bita.runtime.lean_llama import fused_product, fused_groups

DENSE = "dense"


def products(loaded, path: str) -> dict[str, list[PlannedLinear]]:
    """The layers' fused products and the head of ``loaded`` on ``path`` (DENSE: as its plan runs them)."""
    if path == DENSE:
        lean = loaded.runtime.forward
        return {"layers": [part for layer in lean.layers for part in layer if isinstance(part, PlannedLinear)],
                "head": [PlannedLinear(*products_of([loaded.model.lm_head])[0], loaded.runtime.plan.head)]}
    return {"layers": [PlannedLinear(*fused_product(group), path) for group in fused_groups(loaded.model)],
            "head": [PlannedLinear(*products_of([loaded.model.lm_head])[0], path)]}


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 9, 16])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--paths", nargs="+")
    args = parser.parse_args()
    blocks = load_model("default", device="cpu", dtype=args.dtype, weights="blocks")
    dtype = blocks.runtime.forward.dtype
    head_weight = products_of([blocks.model.lm_head])[0][0]
    paths = args.paths or [*(path for path in offered_paths(head_weight.to(dtype)) if path in BLOCK_PATHS), DENSE]
    dense = load_model("default", device="cpu", dtype=args.dtype, weights="dense") if DENSE in paths else None
    print(f"{dtype}, integer dots {native.integer_dots()}; dense: "
          f"{dense.runtime.plan.describe() if dense else 'not timed'}")
    linears = {path: products(dense if path == DENSE else blocks, path) for path in paths}
    one_row: dict[tuple[str, str], float] = {}
    for rows in args.rows:
        calls, times = {}, {}
        for path, named in linears.items():
            calls[path] = {name: [part.bound(torch.randn(rows, part.weight.shape[1]).to(dtype)) for part in parts]
                           for name, parts in named.items()}
            times.update({(path, name): [] for name in named})
        for _ in range(args.rounds):  # interleaved: a slow moment of the machine falls on every path
            for path, named in calls.items():
                for name, bound in named.items():
                    start = time.perf_counter()
                    for call in bound:
                        call()
                    times[path, name].append(time.perf_counter() - start)
        for (path, name), values in times.items():
            median = statistics.median(values)
            one_row.setdefault((path, name), median)
            print(f"{rows:>3} rows  {path:<10} {name:<6} {spread(values)}  {median / one_row[path, name]:.2f}x 1 row")


if __name__ == "__main__":
    main()
