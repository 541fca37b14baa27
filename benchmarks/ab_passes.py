"""A/B of pass costs: two versions of the code and/or two kernel choices, interleaved in one process.

    git worktree add /tmp/before <commit>              # the code before a change (with bita/runtime/)
    PYTHONPATH=. .venv/bin/python benchmarks/ab_passes.py --before /tmp/before --rounds 25
    # same code, transformers' forward and kernels vs the loaded runtime:
    PYTHONPATH=. .venv/bin/python benchmarks/ab_passes.py --kernels-before stock

Both sides run on one loaded model: ``auto``, its runtime (bita/runtime/: the measured kernel plan, the
lean forward where it runs the model); ``stock``, transformers' forward on its own kernels and attention
(inside ``Runtime.stock``); with the shipped adapter and a 300-token random context.
Each round times one AR pass and one pass of every tree for each side, in an order that
alternates from round to round, so machine drift hits both alike; the first round is a warm-up.
Prints a Markdown table: median ms per pass, the spread (25th-75th percentile), the change,
and each side's cost relative to its own AR pass.
"""
import argparse
import contextlib
import importlib
import importlib.util
import statistics
import sys

import torch

from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.model.loading import load_model
from bita.model.shipped import resolve_adapter

CONTEXT = 300


def code_at(directory: str | None):
    """The ``bita`` package of another checkout, imported under another name (None: this one)."""
    if directory is None:
        return importlib.import_module("bita")
    spec = importlib.util.spec_from_file_location("bita_before", f"{directory}/bita/__init__.py",
                                                  submodule_search_locations=[f"{directory}/bita"])
    package = importlib.util.module_from_spec(spec)
    sys.modules["bita_before"] = package
    spec.loader.exec_module(package)
    return package


class Side:
    """One version of the code with one kernel choice: its AR stream and tree states."""

    def __init__(self, name, package, kernels, loaded, adapter_path, specs, generator):
        self.name, self.generator = name, generator
        self.step = importlib.import_module(f"{package.__name__}.decode.step")
        ar = importlib.import_module(f"{package.__name__}.decode.autoregressive")
        adapter_module = importlib.import_module(f"{package.__name__}.model.adapter")
        runtime_module = importlib.import_module(f"{package.__name__}.runtime.runtime")
        forward_module = importlib.import_module(f"{package.__name__}.runtime.transformers_forward")
        self.runtime = loaded.runtime if kernels == "auto" else runtime_module.Runtime(
            loaded.model, forward_module.TransformersForward(loaded.model, exact=False))
        self.stock = kernels == "stock"
        self.adapter = adapter_module.BitaAdapter.load(adapter_path, loaded.model)
        self.prompt = torch.randint(100, 49000, (CONTEXT,), generator=generator).tolist()
        settings = getattr(self.step, "Decoding", None) or self.step.Request  # Request: a checkout before Decoding
        self.decodings = {spec: settings(self.runtime, self.adapter, parse_tree_spec(spec)) for spec in specs}
        with self.running():
            self.states = {spec: self.step.prefill(decoding, self.prompt,
                                                   self.step.new_cache(self.runtime, self.adapter))[0]
                           for spec, decoding in self.decodings.items()}
            self.ar = ar.ar_steps(self.runtime, self.prompt, StopCondition(10_000))
            next(self.ar)

    def running(self):
        return self.runtime.stock() if self.stock else contextlib.nullcontext()

    def ar_pass(self) -> float:
        with self.running():
            return next(self.ar).seconds

    def tree_pass(self, spec: str, index: int) -> float:
        decoding, state = self.decodings[spec], self.states[spec]
        shape = (decoding.tree.depth, decoding.tree.max_rank)
        drafts = importlib.import_module(f"{self.step.__package__}.pass_logits").Drafts(
            torch.randint(100, 49000, shape, generator=self.generator), torch.full(shape, 0.5))
        state.rewind(self.adapter.n_prompt, drafts)
        with self.running():
            _, record = self.step.tree_step(decoding, state, index)
        return record.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="checkout of the code before the change (default: this code)")
    parser.add_argument("--kernels-before", choices=("auto", "stock"), default="auto")
    parser.add_argument("--kernels-after", choices=("auto", "stock"), default="auto")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--trees", nargs="*", default=["chain:1", "efficient:3/chain-groups", "chain:3",
                                                       "efficient:3,2,2/chain-groups"])
    args = parser.parse_args()
    loaded = load_model(kernels="auto")
    _, adapter_path = resolve_adapter(loaded, None)
    generator = torch.Generator().manual_seed(0)
    sides = [Side("before", code_at(args.before), args.kernels_before, loaded, adapter_path, args.trees, generator),
             Side("after", code_at(None), args.kernels_after, loaded, adapter_path, args.trees, generator)]
    times = {(side.name, entry): [] for side in sides for entry in ["ar"] + args.trees}
    for index in range(args.rounds + 1):
        for side in sides if index % 2 else sides[::-1]:
            times[(side.name, "ar")].append(side.ar_pass())
            for spec in args.trees:
                times[(side.name, spec)].append(side.tree_pass(spec, index))
    ms = {key: sorted(1000 * t for t in values[1:]) for key, values in times.items()}

    def cell(key):
        values = ms[key]
        quartiles = statistics.quantiles(values, n=4)
        return statistics.median(values), f"{statistics.median(values):.1f} ({quartiles[0]:.1f}-{quartiles[2]:.1f})"

    print(f"before: {args.before or 'this code'}, kernels {args.kernels_before}; after: this code, kernels "
          f"{args.kernels_after}; {args.rounds} rounds, median ms (25th-75th percentile)\n")
    print("| pass | before | after | change | x AR before | x AR after |")
    print("|---|---:|---:|---:|---:|---:|")
    ar_before, ar_after = statistics.median(ms[("before", "ar")]), statistics.median(ms[("after", "ar")])
    for entry in ["ar"] + args.trees:
        (b, before), (a, after) = cell(("before", entry)), cell(("after", entry))
        label = "AR pass" if entry == "ar" else f"`{entry}`"
        change = 100 * (a - b) / b
        print(f"| {label} | {before} | {after} | {change:+.0f} % | {b / ar_before:.2f} | {a / ar_after:.2f} |")


if __name__ == "__main__":
    main()
