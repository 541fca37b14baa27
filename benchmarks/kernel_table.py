"""The kernel table of this machine: median ms of each linear path (stock ``F.linear``, a weight
transposed once, oneDNN-packed, native where it builds) on the products the loaded model's forward runs (the
lean forward's fused ones) at each timed row count, as passes run them (padded to the path's row floor, printed
beside it), the layers' products all in sequence and the LM head alone, and the plan ``--kernels auto`` takes.

    PYTHONPATH=. .venv/bin/python benchmarks/kernel_table.py [--model default] [--dtype bfloat16]
"""

import argparse

from bita.model.loading import load_model
from bita.runtime.device import describe_device
from bita.runtime.kernel_plan import (
    DECODE_ROWS,
    MIN_GAIN,
    TIMED_ROWS,
    kernel_times,
    offered_paths,
    plan_from,
    products_of,
)
from bita.runtime.kernels import run_products


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    loaded = load_model(args.model, device="cpu", dtype=args.dtype, kernels="stock")
    head = loaded.model.get_output_embeddings()
    layers = run_products(loaded.model, [m for m in loaded.model.modules()
                                         if type(m).__name__ == "Linear" and m is not head])
    paths = offered_paths(head.weight, None)
    times = kernel_times(layers, products_of([head])[0], paths, TIMED_ROWS, drop=float("inf"))
    print(f"{loaded.name}, {describe_device(loaded.device)}: {len(layers)} layer products + the LM head; "
          "median ms of 5 rounds at each row count, padded to its floor\n")
    for name in ("layers", "head"):
        floors = times["floors"][name]
        print(f"| {name}: rows | " + " | ".join(f"{p} (floor {floors[p]})" for p in paths) + " | fastest |\n|---:|"
              + "---:|" * (len(paths) + 1))
        for rows, row in zip(times["rows"], times[name]):
            print(f"| {rows} | " + " | ".join(f"{1000 * row[p]:.1f}" for p in paths) + f" | {min(row, key=row.get)} |")
        print()
    print(f"plan (the fastest summed over {', '.join(map(str, DECODE_ROWS))} rows; another path replaces stock only "
          f"when {MIN_GAIN:.0%} faster): {plan_from(times).describe()}")


if __name__ == "__main__":
    main()
