"""Where one pass's time goes: torch.profiler over an AR pass and tree passes on the loaded
model (kernels as given), 300-token random context, the shipped adapter.

    PYTHONPATH=. .venv/bin/python benchmarks/profile_pass.py --kernels auto --passes 20 [--model M]

Prints, per pass kind, the wall time per pass, the operators with the most self CPU time
per pass, and what no operator accounts for (Python and dispatch between the operators).
"""
import argparse
import time

import torch
from ab_passes import Side
from torch.profiler import ProfilerActivity, profile

import bita
from bita.model.loading import load_model
from bita.model.shipped import resolve_adapter
from bita.runtime.kernels import KERNELS


def profiled(run, passes: int) -> tuple[float, list[tuple[str, float, int]]]:
    """Seconds per pass of ``run`` and [(operator, self CPU ms per pass, calls per pass)]."""
    for _ in range(3):
        run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for _ in range(passes):
            run()
        wall = (time.perf_counter() - started) / passes
    ops = [(e.key, e.self_cpu_time_total / 1000 / passes, e.count // passes) for e in prof.key_averages()]
    return wall, sorted(ops, key=lambda op: -op[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="as the CLI's --model (its shipped adapter drafts)")
    parser.add_argument("--kernels", choices=KERNELS, default="auto")
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--trees", nargs="*", default=["efficient:3/chain-groups", "efficient:3,2,2/chain-groups"])
    args = parser.parse_args()
    loaded = load_model(args.model, kernels=args.kernels)
    _, adapter_path = resolve_adapter(loaded, None)
    side = Side("profiled", bita, "auto", loaded, adapter_path, args.trees, torch.Generator().manual_seed(0))
    runs = {"AR pass": side.ar_pass} | {f"`{spec}`": (lambda s=spec: side.tree_pass(s, 1)) for spec in args.trees}
    print(f"{loaded.runtime.describe()}; {args.passes} profiled passes each (profiler overhead included)\n")
    for name, run in runs.items():
        wall, ops = profiled(run, args.passes)
        accounted = sum(ms for _, ms, _ in ops)
        print(f"### {name}: {1000 * wall:.1f} ms per pass; no operator's self time: "
              f"{1000 * wall - accounted:.1f} ms\n")
        print("| operator | self ms per pass | share | calls per pass |\n|---|---:|---:|---:|")
        for key, ms, calls in ops[:args.top]:
            print(f"| `{key}` | {ms:.2f} | {100 * ms / (1000 * wall):.0f} % | {calls} |")
        print()


if __name__ == "__main__":
    main()
