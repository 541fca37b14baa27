"""How much of a pass is transformers' modeling code: a lean Llama-family forward over the same
weights, timed against transformers' own, interleaved in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/lean_forward.py [--rounds 15] [--context 300]

The lean forward is bita/runtime/lean_llama.py (QKV and gate/up fused once, RMSNorm and rotary
written out, a StaticKV written in place, token rows by exact attention, each linear on the path of the
machine's kernel plan); transformers' side is the same model's own forward over a ``DynamicCache``
cropped back after each pass, on the same kernel plan and our attention
(bita/runtime/transformers_forward.py). Both run R rows after a cached ``--context``-token prompt under a
tree-like mask (causal, a third of the earlier new rows hidden), and both apply the LM head to every row.
A third side runs the lean forward at fixed shapes, as a CUDA graph would replay it
(bita/runtime/padded.py, eagerly here): rows padded to the row bucket, attention over the whole cache
buffer. First the logits are compared with transformers'; then the median ms per pass of each, with the
spread.
"""

import statistics
import time

import torch
from lean_setup import lean_benchmark, prefill, random_rows

from bita.runtime.device import describe_device, output_logits
from bita.runtime.lean_llama import LeanLlama
from bita.runtime.padded import PaddedLean
from bita.runtime.transformers_forward import TransformersForward

ROWS = (1, 2, 4, 8, 16)


def tree_mask(rows: int, context: int, generator: torch.Generator) -> torch.Tensor:
    """[rows, context + rows] bool: the context, then causal new rows with a third of the earlier ones hidden."""
    new = (torch.rand(rows, rows, generator=generator) > 1 / 3).tril() | torch.eye(rows, dtype=torch.bool)
    return torch.cat([torch.ones(rows, context, dtype=torch.bool), new], 1)


def main() -> None:
    args, loaded, generator = lean_benchmark(__doc__)
    model = loaded.model
    lean = loaded.runtime.forward
    assert isinstance(lean, LeanLlama), "the lean forward does not run this model on this device"
    forwards = {"transformers + DynamicCache": TransformersForward(model, exact=True), "lean + static KV": lean,
                "lean, padded to the row bucket": PaddedLean(lean, graphs=False)}
    sides = {name: (forward.new_cache(), forward.forward) for name, forward in forwards.items()}
    prompt = random_rows(model, args.context, generator)
    for cache, forward in sides.values():
        prefill(forward, cache, prompt)

    def one_pass(side, rows, allowed):
        cache, forward = sides[side]
        with torch.inference_mode():
            logits = output_logits(model, forward(cache, rows, torch.arange(args.context, args.context + len(rows)),
                                                  allowed, len(rows)))
        cache.crop(-len(rows))
        return logits

    print(f"{loaded.name}, {describe_device(loaded.device)}, {loaded.runtime.describe()}; "
          f"{args.context}-token context, "
          f"{args.rounds} interleaved rounds after one warm-up, median ms (25th-75th percentile)\n")
    names = list(sides)
    print(f"| rows | {' | '.join(names)} | lean / transformers | padded / lean | max logit difference |")
    print("|---:|" + "---:|" * (len(names) + 3))
    for count in ROWS:
        rows = random_rows(model, count, generator)
        allowed = tree_mask(count, args.context, generator)
        reference = one_pass(names[0], rows, allowed)
        difference = max((one_pass(name, rows, allowed) - reference).abs().max().item() for name in names[1:])
        times = {name: [] for name in names}
        for round_index in range(args.rounds + 1):
            for name in names:
                started = time.perf_counter()
                one_pass(name, rows, allowed)
                if round_index:
                    times[name].append(1000 * (time.perf_counter() - started))
        cells = []
        for name in names:
            quartiles = statistics.quantiles(times[name], n=4)
            cells.append(f"{statistics.median(times[name]):.1f} ({quartiles[0]:.1f}-{quartiles[2]:.1f})")
        median = {name: statistics.median(times[name]) for name in names}
        print(f"| {count} | {' | '.join(cells)} | {median[names[1]] / median[names[0]]:.2f} | "
              f"{median[names[2]] / median[names[1]]:.2f} | {difference:.1e} |")


if __name__ == "__main__":
    main()
