"""How much of a pass the LM head is: the decoder stack and the head timed apart for R rows after a
cached context, on transformers' path (how a model without the lean forward decodes).

    PYTHONPATH=. .venv/bin/python benchmarks/head_share.py --model gemma-3-270m-q4_k_m.gguf --kernels stock

Prints per row count the median ms of the stack (R rows through the decoder over a DynamicCache,
cropped back after each run), of the head on those R rows, and the head's share of the pass.
"""

import argparse
import statistics
import time

import torch
from transformers import DynamicCache

from bita.model.loading import load_model
from bita.runtime.device import describe_device, output_logits
from bita.runtime.kernels import KERNELS


def median_ms(run, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--kernels", choices=KERNELS, default="stock")
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--rows", type=int, nargs="*", default=[1, 4, 8, 16])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    loaded = load_model(args.model, "cpu", kernels=args.kernels)
    model, generator = loaded.model, torch.Generator().manual_seed(0)
    vocab, hidden = model.get_output_embeddings().weight.shape
    cache = DynamicCache()
    model.base_model(input_ids=torch.randint(0, vocab, (1, args.context), generator=generator), past_key_values=cache,
                     use_cache=True)
    print(f"{loaded.name} on {describe_device(loaded.device)}, {loaded.runtime.describe()}; vocabulary {vocab}, "
          f"hidden {hidden}; context {args.context}\n")
    print("| rows | decoder stack ms | LM head ms | head share |\n|---:|---:|---:|---:|")
    for rows in args.rows:
        ids = torch.randint(0, vocab, (1, rows), generator=generator)
        positions = torch.arange(args.context, args.context + rows)[None]

        def stack(ids=ids, positions=positions, rows=rows):
            out = model.base_model(input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True)
            cache.crop(-rows)
            return out.last_hidden_state[0]

        states = stack()
        stack_ms = median_ms(stack, args.repeats)
        head_ms = median_ms(lambda states=states: output_logits(model, states), args.repeats)
        print(f"| {rows} | {stack_ms:.1f} | {head_ms:.1f} | {100 * head_ms / (stack_ms + head_ms):.0f} % |")


if __name__ == "__main__":
    main()
