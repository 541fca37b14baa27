"""Our AR pass against llama.cpp's time a token, at the same depth, on the same weights and threads, interleaved
in one process: the engine comparison of issue 46 (llama-cpp-python installed: pip install ".[llamacpp]").

    PYTHONPATH=. .venv/bin/python benchmarks/ar_vs_llamacpp.py [--context 300] [--rounds 15] [--dtype auto]
        [--weights auto|dense|blocks]

With ``--weights blocks`` (or ``auto`` where the plan takes the blocks) ours reads the GGUF's blocks and llama.cpp
runs the file as shipped (the default model's Q4_1); with ``dense`` both run the de-quantised weights in the dtype.

Each round times ``--tokens`` one-token steps of each after a ``--context``-token prompt: ours, a 1-row pass on the
loaded runtime and its LM head (the cache cropped back after each); llama.cpp's, one ``eval`` of one token (its
decode and logits; the KV cache cut back after each). Prints the medians in ms with the 25th-75th percentile,
and their ratio.
"""
import argparse
import statistics
import time

import torch

from bita.bench.llamacpp import absent_because, llama_for
from bita.model.loading import load_model


def spread(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4)
    return f"{1000 * statistics.median(values):.2f} ms ({1000 * quartiles[0]:.2f}-{1000 * quartiles[2]:.2f})"


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--weights", default="auto", choices=("auto", "dense", "blocks"))
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tokens", type=int, default=10)
    args = parser.parse_args()
    loaded = load_model(args.model, device="cpu", dtype=args.dtype, weights=args.weights)
    why = absent_because(loaded)
    assert why is None, why
    runtime, llama = loaded.runtime, llama_for(loaded)
    tokens = (torch.arange(args.context + 1) * 7919 % 40000 + 100).tolist()
    cache = runtime.new_cache(rows=args.context + 1)
    embed = runtime.model.get_input_embeddings()
    runtime.run(cache, embed(torch.tensor(tokens[:-1])), torch.arange(args.context),
                torch.ones(args.context, args.context, dtype=torch.bool).tril())
    llama.reset()
    llama.eval(tokens[:-1])
    step_embeds, position = embed(torch.tensor(tokens[-1:])), torch.tensor([args.context])
    allowed = torch.ones(1, args.context + 1, dtype=torch.bool)

    def ours() -> None:
        runtime.logits(runtime.run(cache, step_embeds, position, allowed))
        cache.crop(-1)

    def theirs() -> None:
        llama.eval(tokens[-1:])
        llama.n_tokens -= 1
        llama._ctx.kv_cache_seq_rm(0, args.context, -1)

    times: dict[str, list[float]] = {"ours": [], "llama.cpp": []}
    for round_index in range(args.rounds + 1):
        for name, step in (("ours", ours), ("llama.cpp", theirs))[::1 if round_index % 2 else -1]:
            started = time.perf_counter()
            for _ in range(args.tokens):
                step()
            if round_index:
                times[name].append((time.perf_counter() - started) / args.tokens)
    runtime.release(cache)
    print(f"{loaded.name}, {runtime.describe()}\nllama.cpp {llama.model_path}, {torch.get_num_threads()} threads; "
          f"a token after {args.context}, median of {args.rounds} rounds of {args.tokens} tokens (25th-75th):")
    for name, values in times.items():
        print(f"  {name}: {spread(values)}")
    ratio = statistics.median(times["ours"]) / statistics.median(times["llama.cpp"])
    print(f"  ours / llama.cpp: {ratio:.2f}x")


if __name__ == "__main__":
    main()
