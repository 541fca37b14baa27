"""A pass of the lean forward with its decoder stack in one native call (native_stack.c) against the same pass with
the layers' native kernels called one by one from Python (``LeanLlama.run_layers``), in one process, the two ways
alternating pass by pass (this VM's speed moves 1.5x between processes): the default model (or ``--model``) as
``load_model`` loads it here, after ``--context`` cached tokens, at each of ``--rows`` (a tree pass: every second
row skips the row before it, a sibling); each pass's hidden states checked bitwise equal both ways. Median ms a
pass (25th-75th percentile) and the per-round ratio.

``--against OLD.so``: instead, the pass in one call on another build of the native library (e.g. one compiled from
an earlier commit's C files with native.py's FLAGS) against this checkout's, to time a kernel change; their hidden
states may differ in rounding (the largest difference is shown).

``--kernel K``: instead, the pass in one call with its products on kernel K against the plan's kernel, where the two
read the same packed weights (native and dot: native_linear.c's tiles), e.g. ``--kernel native`` where the plan took
dot.

    PYTHONPATH=. .venv/bin/python benchmarks/native_stack.py [--rows 1,2,4,8,16,32,64] [--rounds 15] [--context 300]
        [--against OLD.so | --kernel native]
"""

import argparse
import statistics
import time
from pathlib import Path

import torch

from bita.model.loading import load_model
from bita.plan.costs import quartiles
from bita.runtime import native
from bita.runtime.device import describe_device
from bita.runtime.kernel_plan import DOT, NATIVE
from bita.runtime.native_stack import KERNELS


def spread(values: list[float]) -> str:
    low, high = quartiles(values)
    return f"{statistics.median(values):.2f} ({low:.2f}-{high:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--rows", default="1,2,4,8,16,32,64")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--against", help="another build of the native library, its stack timed beside this one's")
    parser.add_argument("--kernel", choices=(NATIVE, DOT), help="the products on this kernel, beside the plan's")
    args = parser.parse_args()
    loaded = load_model(args.model) if args.model else load_model()
    runtime = loaded.runtime
    lean, stack = runtime.forward, getattr(runtime.forward, "stack", None)
    print(f"{describe_device(runtime.device)}, {runtime.dtype}, {torch.get_num_threads()} threads; "
          f"{runtime.forward.describe()}; plan {runtime.plan.describe() if runtime.plan else 'none'}")
    if stack is None or not lean.native:
        print("no native stack here: a product is not on a native kernel's path (native, dot, AMX), or attention is "
              "not native")
        return
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 20000, (args.context + 64,), generator=generator)
    cache = lean.new_cache(rows=args.context + 64)
    with torch.inference_mode():
        embeds = runtime.embeddings(ids)
        lean.forward(cache, embeds[:args.context], torch.arange(args.context),
                     torch.ones(args.context, args.context, dtype=torch.bool).tril(), args.context)

    ours, planned = native._library, stack.kernel
    library = native.load_beside(Path(args.against)) if args.against else None
    kernel = KERNELS[args.kernel] if args.kernel else None
    if kernel is not None and {kernel, planned} - {KERNELS[NATIVE], KERNELS[DOT]}:
        print(f"--kernel {args.kernel} reads native_linear.c's tiles; this plan's products are on another kernel")
        return
    beside = library is not None or kernel is not None  # one call beside one call, not beside Python calls
    names = (f"one call on {Path(args.against).name}" if library else f"one call on {args.kernel}" if beside
             else "Python calls", "one call")

    def one_pass(rows: int, allowed: torch.Tensor, second: bool) -> tuple[torch.Tensor, float]:
        lean.stack = stack if second or beside else None
        native._library = library if library and not second else ours
        stack.kernel = kernel if kernel is not None and not second else planned
        cache.length = args.context
        started = time.perf_counter()
        with torch.inference_mode():
            hidden = lean.forward(cache, embeds[args.context:args.context + rows],
                                  torch.arange(args.context, args.context + rows), allowed, rows)
        return hidden, 1e3 * (time.perf_counter() - started)

    print(f"| rows | {names[0]}, ms | {names[1]}, ms | {names[1]} / {names[0]}, per round | "
          f"{'largest difference' if beside else 'bitwise equal'} |")
    print("|---:|---:|---:|---:|---|")
    for rows in map(int, args.rows.split(",")):
        allowed = torch.ones(rows, args.context + rows, dtype=torch.bool)
        allowed[:, args.context:] = torch.ones(rows, rows, dtype=torch.bool).tril()
        for row in range(2, rows, 2):
            allowed[row, args.context + row - 1] = False
        first, second = one_pass(rows, allowed, False)[0], one_pass(rows, allowed, True)[0]
        agree = f"{(first.float() - second.float()).abs().max().item():.3g}" if beside else torch.equal(first, second)
        times = {False: [], True: []}
        for _ in range(args.rounds):
            for way in (False, True):
                times[way].append(one_pass(rows, allowed, way)[1])
        ratios = [b / a for a, b in zip(times[False], times[True])]
        print(f"| {rows} | {spread(times[False])} | {spread(times[True])} | {spread(ratios)} | {agree} |", flush=True)
    lean.stack, native._library, stack.kernel = stack, ours, planned


if __name__ == "__main__":
    main()
