"""The kernel table of this machine: median ms of each linear path (stock ``F.linear``, a weight
transposed once, oneDNN-packed, native where it builds) for the loaded model's weights at each timed row
count, the layers' linears all in sequence and the LM head alone, and the plan ``--kernels auto`` takes from it.

    PYTHONPATH=. .venv/bin/python benchmarks/kernel_table.py [--model default] [--dtype bfloat16]
"""

import argparse

from bita.model.loading import load_model
from bita.runtime.device import describe_device
from bita.runtime.kernel_plan import (
    DECODE_ROWS,
    MIN_GAIN,
    kernel_times,
    offered_paths,
    plan_from,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    loaded = load_model(args.model, device="cpu", dtype=args.dtype, kernels="stock")
    head = loaded.model.get_output_embeddings()
    layers = [m for m in loaded.model.modules() if type(m).__name__ == "Linear" and m is not head]
    paths = offered_paths(head.weight, None)
    times = kernel_times(layers, head, paths)
    print(f"{loaded.name}, {describe_device(loaded.device)}: {len(layers)} layer linears + the LM head; "
          "median ms of 5 interleaved rounds\n")
    for name in ("layers", "head"):
        print(f"| {name}: rows | " + " | ".join(paths) + " | fastest |\n|---:|" + "---:|" * (len(paths) + 1))
        for rows, row in zip(times["rows"], times[name]):
            print(f"| {rows} | " + " | ".join(f"{1000 * row[p]:.1f}" for p in paths) + f" | {min(row, key=row.get)} |")
        print()
    print(f"plan (the fastest summed over {', '.join(map(str, DECODE_ROWS))} rows; another path replaces stock only "
          f"when {MIN_GAIN:.0%} faster): {plan_from(times).describe()}")


if __name__ == "__main__":
    main()
