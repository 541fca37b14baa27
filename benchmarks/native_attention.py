"""Row-invariant attention, torch's (exact_attention.py) against native.py's, on the default model's shape (9 query
heads, 3 key/value heads, head dimension 64), one layer, after ``--context`` cached slots, in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/native_attention.py [--context 300] [--dtype bfloat16]

Tree passes: every second row skips the row before it (a sibling), so exact_attention gathers those rows' chunks.
Prints the median microseconds of each at 1, 8, 16 and 32 rows, and whether they agree within rounding.
"""
import argparse

import torch
from head_share import median_ms

from bita.runtime import native
from bita.runtime.exact_attention import exact_attention, exact_layout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    args = parser.parse_args()
    assert native.unavailable() is None, native.unavailable()
    dtype, generator = getattr(torch, args.dtype), torch.Generator().manual_seed(0)
    keys, values = (torch.randn(3, args.context + 64, 64, generator=generator).to(dtype) for _ in range(2))
    print(f"{args.dtype}, {args.context} cached, {torch.get_num_threads()} threads, native {native.describe()}\n")
    print("| rows | exact_attention us | native us | native / exact | largest difference |\n|---:|---:|---:|---:|---:|")
    for rows in (1, 8, 16, 32):
        allowed = torch.ones(rows, args.context + rows, dtype=torch.bool).tril(args.context)
        for row in range(2, rows, 2):
            allowed[row, args.context + row - 1] = False
        query = torch.randn(rows, 9, 64, generator=generator).to(dtype)
        layout = exact_layout(allowed, rows, 0, 3)
        ours, theirs = native.attend(query, keys, values, allowed), exact_attention(query, keys, values, layout)
        exact_us = 1000 * median_ms(lambda: exact_attention(query, keys, values, layout), 200)  # noqa: B023
        native_us = 1000 * median_ms(lambda: native.attend(query, keys, values, allowed), 200)  # noqa: B023
        print(f"| {rows} | {exact_us:.0f} | {native_us:.0f} | {native_us / exact_us:.2f} | "
              f"{float((ours.float() - theirs.float()).abs().max()):.2g} |")


if __name__ == "__main__":
    main()
