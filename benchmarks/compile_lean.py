"""Does ``torch.compile`` pay on the lean forward here? Inductor against the eager lean forward,
interleaved in one process, over a 300-token cached context.

    PYTHONPATH=. .venv/bin/python benchmarks/compile_lean.py [--rounds 15]

The compiled side is a second LeanLlama over the same weights with every linear on stock
``F.linear`` (the oneDNN-packed op the kernel plan picks does not trace), compiled with the row
count dynamic; the eager side runs the machine's kernel plan, as decoding does. Prints the first
compile's seconds per row count, the largest difference of their hidden states, and the median
ms of the decoder stack (no LM head) per row count.
"""

import statistics
import time

import torch
from lean_setup import lean_benchmark, prefill, random_rows

from bita.runtime.lean_llama import LeanLlama

ROWS = (1, 2, 4, 8, 16)


def main() -> None:
    args, loaded, generator = lean_benchmark(__doc__)
    model = loaded.model
    eager = loaded.runtime.forward
    assert isinstance(eager, LeanLlama), "the lean forward does not run this model on this device"
    compiled = torch.compile(LeanLlama(model).forward, dynamic=True)  # no plan: every linear on stock F.linear
    cache = eager.new_cache()
    prefill(eager.forward, cache, random_rows(model, args.context, generator))

    def one_pass(forward, rows: int) -> tuple[torch.Tensor, float]:
        with torch.inference_mode():
            x = random_rows(model, rows, generator)
            allowed = torch.ones(rows, args.context + rows, dtype=torch.bool).tril(args.context)
            started = time.perf_counter()
            hidden = forward(cache, x, torch.arange(args.context, args.context + rows), allowed, rows)
            seconds = time.perf_counter() - started
        cache.crop(-rows)
        return hidden, seconds

    print(f"{loaded.name}, {loaded.runtime.describe()}; {args.context}-token context\n")
    for rows in ROWS:
        _, first = one_pass(compiled, rows)
        state = generator.get_state()
        ours, _ = one_pass(compiled, rows)
        generator.set_state(state)
        theirs, _ = one_pass(eager.forward, rows)
        print(f"{rows} rows: first compiled call {first:.1f} s; largest hidden-state difference "
              f"{(ours - theirs).abs().max().item():.1e}")
    print("\n| rows | eager lean (kernel plan) ms | compiled lean (stock linears) ms | compiled / eager |")
    print("|---:|---:|---:|---:|")
    for rows in ROWS:
        times = {"eager": [], "compiled": []}
        for _ in range(args.rounds):
            times["eager"].append(1000 * one_pass(eager.forward, rows)[1])
            times["compiled"].append(1000 * one_pass(compiled, rows)[1])
        eager_ms, compiled_ms = statistics.median(times["eager"]), statistics.median(times["compiled"])
        print(f"| {rows} | {eager_ms:.1f} | {compiled_ms:.1f} | {compiled_ms / eager_ms:.2f} |")


if __name__ == "__main__":
    main()
