"""What the lean-forward benchmarks (compile_lean.py, lean_forward.py) share: their arguments, the
default model on the CPU, a seeded generator, and random token embeddings for a cached context."""

import argparse

import torch

from bita.model.loading import LoadedModel, load_model


def lean_benchmark(description: str) -> tuple[argparse.Namespace, LoadedModel, torch.Generator]:
    """(--rounds and --context parsed, the default model, a generator seeded 0)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--context", type=int, default=300)
    return parser.parse_args(), load_model(device="cpu"), torch.Generator().manual_seed(0)


def random_rows(model: torch.nn.Module, count: int, generator: torch.Generator) -> torch.Tensor:
    """[count, H]: the input embeddings of ``count`` random ordinary tokens."""
    return model.get_input_embeddings()(torch.randint(100, 49000, (count,), generator=generator))


def prefill(forward, cache, prompt: torch.Tensor) -> None:
    """Run ``forward(cache, rows, positions, allowed, ordinary)`` (a runtime's forward, bita/runtime/runtime.py)
    causally over ``prompt`` [T, H] into ``cache``."""
    rows = len(prompt)
    with torch.inference_mode():
        forward(cache, prompt, torch.arange(rows), torch.ones(rows, rows, dtype=torch.bool).tril(), rows)
