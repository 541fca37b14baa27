"""A/B of one AR pass and one tree step: the code before the runtime (a checkout whose decode loops take the
model, e.g. 9a87fe4) against this checkout's (they take the runtime), interleaved in one process, each side
on its own loaded model (SmolLM2, shipped adapter, a 300-token random context, random drafts).

    git worktree add /tmp/before 9a87fe4
    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/results/cpu-2vcpu-epyc-avx512/runtime-refactor/ab_step.py \\
        --before /tmp/before --dtype auto --rounds 60

A record of that change's measurement (the old API it drives is gone from this tree), not a tool to keep.
"""
import argparse
import importlib
import statistics

import torch
from ab_passes import code_at

from bita.decode.stopping import StopCondition

SPECS = ["chain:1", "efficient:3,2,2/chain-groups"]


def side(package, dtype: str, prompt: list[int], before: bool) -> dict:
    """The AR stream, a state per tree and a tree-step function of one version of the code."""
    loaded = package.load_model(dtype=dtype)
    adapter, _ = package.resolve_adapter(loaded, None)
    step = importlib.import_module(f"{package.__name__}.decode.step")
    ar = importlib.import_module(f"{package.__name__}.decode.autoregressive")
    trees = {spec: package.parse_tree_spec(spec) for spec in SPECS}
    if before:
        states = {s: step.prefill(loaded.model, adapter, prompt, t)[0] for s, t in trees.items()}
        stream, drafts = ar.ar_steps(loaded.model, prompt, StopCondition(10_000)), step.Drafts

        def run(spec, state, index):
            return step.tree_step(loaded.model, adapter, state, trees[spec], index)
    else:
        requests = {s: step.Request(loaded.runtime, adapter, t) for s, t in trees.items()}
        states = {s: step.prefill(r, prompt, step.new_cache(loaded.runtime, adapter))[0] for s, r in requests.items()}
        stream = ar.ar_steps(loaded.runtime, prompt, StopCondition(10_000))
        drafts = importlib.import_module(f"{package.__name__}.decode.pass_logits").Drafts

        def run(spec, state, index):
            return step.tree_step(requests[spec], state, index)
    next(stream)
    return {"adapter": adapter, "trees": trees, "states": states, "ar": stream, "drafts": drafts, "run": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(100, 49000, (300,), generator=generator).tolist()
    sides = {"old": side(code_at(args.before), args.dtype, prompt, before=True),
             "new": side(code_at(None), args.dtype, prompt, before=False)}
    times = {(name, entry): [] for name in sides for entry in ["ar"] + SPECS}
    for index in range(args.rounds + 1):
        for name in (["old", "new"] if index % 2 else ["new", "old"]):
            one = sides[name]
            record = next(one["ar"])
            seconds = {"ar": record.seconds}
            for spec in SPECS:
                tree = one["trees"][spec]
                shape = (tree.depth, tree.max_rank)
                one["states"][spec].rewind(one["adapter"].n_prompt, one["drafts"](
                    torch.randint(100, 49000, shape, generator=generator), torch.full(shape, 0.5)))
                seconds[spec] = one["run"](spec, one["states"][spec], index)[1].seconds
            if index:
                for entry, value in seconds.items():
                    times[(name, entry)].append(1000 * value)
    print(f"dtype {args.dtype}, {args.rounds} interleaved rounds, median ms (25th-75th)")
    for entry in ["ar"] + SPECS:
        cells = []
        for name in ("old", "new"):
            values = times[(name, entry)]
            quartiles = statistics.quantiles(values, n=4)
            cells.append(f"{name} {statistics.median(values):.2f} ({quartiles[0]:.2f}-{quartiles[2]:.2f})")
        ratio = statistics.median(times[("new", entry)]) / statistics.median(times[("old", entry)])
        print(f"{entry:32s} " + "  ".join(cells) + f"  new/old {ratio:.3f}")


if __name__ == "__main__":
    main()
