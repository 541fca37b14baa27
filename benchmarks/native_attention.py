"""Row-invariant attention, torch's (exact_attention.py) against native.py's, on the default model's shape (9 query
heads, 3 key/value heads, head dimension 64), one layer, after each of ``--contexts`` cached slots, in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/native_attention.py [--contexts 300 1000] [--dtype bfloat16]
        [--against OTHER.so]

Tree passes: every second row skips the row before it (a sibling), so exact_attention gathers those rows' chunks.
``--against``: a library built from other sources (e.g. the previous native_attention.c, compiled with native.py's
FLAGS beside the other C files into a temporary .so), timed beside this checkout's.

Timed interleaved (each candidate in turn, ``--rounds`` times, each time the median of ``--repeats`` calls), so that
the machine's other load falls on all alike: prints each one's median over the rounds with the spread between the
rounds' quartiles (microseconds a layer), the median of the rounds' ratios to native, and whether they agree within
rounding.
"""
import argparse
import statistics
import time
from pathlib import Path

import torch

from bita.runtime import native
from bita.runtime.exact_attention import exact_attention, exact_layout


def median_us(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return 1e6 * statistics.median(times)


def other_library(path: str):
    """A call like native.attend's on the library at ``path`` (loaded beside this checkout's)."""
    library = native.load_beside(Path(path))

    def attend(query, keys, values, allowed):
        (rows, heads, dim), out = query.shape, torch.empty_like(query)
        suffix = "bf16" if query.dtype == torch.bfloat16 else "f32"
        getattr(library, f"bita_attend_{suffix}")(
            query.data_ptr(), keys.data_ptr(), values.data_ptr(), allowed.data_ptr(), out.data_ptr(), rows, heads,
            keys.shape[0], dim, keys.shape[1], allowed.shape[1], dim ** -0.5, torch.get_num_threads())
        return out
    return attend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--against", help="another build of the native library to time beside this one")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    assert native.unavailable() is None, native.unavailable()
    dtype, generator = getattr(torch, args.dtype), torch.Generator().manual_seed(0)
    candidates = {"exact_attention": None, "native": native.attend}
    if args.against:
        candidates[Path(args.against).name] = other_library(args.against)
    tiles = native.attention_on_tiles(64, dtype)
    print(f"{args.dtype}, {torch.get_num_threads()} threads, native {native.describe()}"
          f"{', attention on AMX tiles' if tiles else ''}\n")
    print("| cached | rows | " + " | ".join(f"{name} us" for name in candidates) + " | "
          + " | ".join(f"{name} / native" for name in candidates if name != "native") + " | largest difference |")
    print("|---:" * (2 + 2 * len(candidates)) + "|")
    for context in args.contexts:
        keys, values = (torch.randn(3, context + 64, 64, generator=generator).to(dtype) for _ in range(2))
        for rows in args.rows:
            allowed = torch.ones(rows, context + rows, dtype=torch.bool).tril(context)
            for row in range(2, rows, 2):
                allowed[row, context + row - 1] = False
            query = torch.randn(rows, 9, 64, generator=generator).to(dtype)
            layout = exact_layout(allowed, rows, 0, 3)
            calls = {name: (lambda attend=attend: attend(query, keys, values, allowed)) if attend else
                     (lambda: exact_attention(query, keys, values, layout)) for name, attend in candidates.items()}
            outputs = {name: call() for name, call in calls.items()}
            times = {name: [] for name in calls}
            for _ in range(args.rounds):
                for name, call in calls.items():
                    times[name].append(median_us(call, args.repeats))
            cells = []
            for name in calls:
                quartiles = statistics.quantiles(times[name], n=4)
                cells.append(f"{statistics.median(times[name]):.0f} ({quartiles[0]:.0f}-{quartiles[2]:.0f})")
            ratios = [f"{statistics.median(a / b for a, b in zip(times[name], times['native'])):.2f}"
                      for name in calls if name != "native"]
            difference = max(float((outputs[name].float() - outputs["exact_attention"].float()).abs().max())
                             for name in calls)
            print(f"| {context} | {rows} | " + " | ".join(cells) + " | " + " | ".join(ratios) + f" | {difference:.2g} |")


if __name__ == "__main__":
    main()
