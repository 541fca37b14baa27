"""The host work a GPU step exposes, measured on any machine: the time from a pass's verdict reaching the host to the
next pass's launch, when the device has nothing to run (issue 56's "host work exposed per step", at most 0.2 ms).

A random SmolLM2-shaped llama (``invariance_parts.random_llama``, 2 layers) runs the padded forward (what a GPU replays
as CUDA graphs) with its compute stubbed, so the host's work is all there is; the walk is queued as on a GPU; the
overlapped loop (``Decoding.overlap``) with ``--tree`` plus an n-gram chain, greedy. Each step is stamped where the
verdict's read returns and where the next pass's compute would start (``PaddedLean._run``); the segments between are
named by further stamps (settling, the chains' look-ups, the candidates, the layout, staging), medians in us a step.
The aten operations between read and replay are counted too, by name, in a run of their own: torch's work on
tensors, GPU launches among them, but also views and the C++ steps of each ``.numpy()`` (detach, resolve_conj,
resolve_neg and a ``to``), and none of numpy's own work. Times move 1.5x between processes on a shared VM: compare
two ways in one process, alternating (``measure`` is reusable for that:
benchmarks/results/cpu-2vcpu-xeon-6-207/exposed-host/token_rows_ab.py). On a GPU machine this is its host CPU;
elsewhere this CPU, which is slower or faster than a GPU's host: name it with the figures. Only the segments' order
of size carries over; torch's launches cost more on a GPU than a CPU's ops.

    PYTHONPATH=. .venv/bin/python benchmarks/exposed_host.py [--steps 400] [--tree efficient:6,5,3] [--ngram 4]
"""

import argparse
import collections
import contextlib
import functools
import statistics
import time
from collections.abc import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.gpu.invariance_parts import random_llama
from bita.decode import pass_logits, step
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.plan.costs import quartiles
from bita.runtime import padded
from bita.runtime.device import describe_device
from bita.runtime.lean_llama import LeanLlama
from bita.runtime.padded import PaddedLean
from bita.runtime.runtime import Runtime

# (module, function): each call's start is stamped with the function's name, in the order a step calls them
STAMPED = ((step, "settle_pass"), (step, "launch_pass"), (step, "draft_candidates"), (step, "forward_layout"),
           (padded.PassBuffers, "fill"))


class Stamps(TorchDispatchMode):
    """Per step, the perf_counter times at which the stamped points were reached (the last time each), and, while
    active as a dispatch mode, the aten operations from the verdict's read to the replay (a count that does not
    depend on the machine's speed)."""

    def __init__(self):
        super().__init__()
        self.steps: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self.operations: list[int] = []
        self.names: collections.Counter = collections.Counter()  # the counted operations by name
        self.counting: int | None = None  # the operations since the read, None outside the exposed part

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counting is not None:
            self.counting += 1
            self.names[str(func)] += 1
        return func(*args, **(kwargs or {}))

    def mark(self, name: str) -> None:
        self.current[name] = time.perf_counter()
        if name == "read":
            self.counting = 0

    def end_step(self) -> None:
        self.steps.append(self.current)
        self.current = {}
        if self.counting is not None:
            self.operations.append(self.counting)
        self.counting = None


def stamped(stamps: Stamps, name: str, function):
    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        stamps.mark(name)
        return function(*args, **kwargs)
    return wrapped


def segments(steps: list[dict[str, float]]) -> dict[str, list[float]]:
    """Each step's us from the verdict read ("read") to the replay ("replay"), split at the stamps between in the order
    reached: {"segment name": [us a step], "exposed": [...]}."""
    out = collections.defaultdict(list)
    for points in steps:
        if "read" not in points or "replay" not in points or points["replay"] < points["read"]:
            continue
        ordered = sorted((t, name) for name, t in points.items() if points["read"] <= t <= points["replay"])
        for (start, first), (end, second) in zip(ordered, ordered[1:]):
            out[f"{first} -> {second}"].append(1e6 * (end - start))
        out["exposed"].append(1e6 * (points["replay"] - points["read"]))
    return out


@contextlib.contextmanager
def walk_as_on_a_gpu() -> Iterator[None]:
    """The verdict's walk queued behind the pass and the head in one call, as on a GPU, put back after."""
    saved = pass_logits.on_device, pass_logits.one_head_call
    pass_logits.on_device = lambda device: True
    pass_logits.one_head_call = lambda device, rows: True
    try:
        yield
    finally:
        pass_logits.on_device, pass_logits.one_head_call = saved


def stand_in(tree: str, ngram: int) -> tuple[PaddedLean, Callable[[int], None]]:
    """The stand-in's forward and a run of ``bita_steps`` to a given number of new tokens (warmed up, compute still
    real: ``measure`` stubs it); inside ``walk_as_on_a_gpu``."""
    model = random_llama(2, "cpu")
    forward = PaddedLean(LeanLlama(model), graphs=False)
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=2)
    decoding = Decoding(Runtime(model, forward), adapter, parse_tree_spec(tree), chains=Chains(ngram_tokens=ngram),
                        overlap=True)
    generator = torch.Generator().manual_seed(1)
    phrase = torch.randint(0, 2048, (12,), generator=generator).tolist()
    prompt = (phrase * 20)[:200]  # repeats, so the n-gram chain finds matches

    def run(stop_at: int) -> None:
        list(bita_steps(decoding, prompt, StopCondition(stop_at)))
    run(64)
    return forward, run


@contextlib.contextmanager
def stamping(forward: PaddedLean, stamps: Stamps) -> Iterator[None]:
    """The stand-in's compute stubbed and the STAMPED points, the verdict's read and the replay stamped, put back
    after."""
    patched = [(owner, name, getattr(owner, name)) for owner, name in STAMPED + ((step, "queue_judgement"),)]
    read = step.queue_judgement

    def stub(buffers, cache):  # the pass's input rows as its hidden states: whatever the staging, the same flow
        stamps.mark("replay")
        stamps.end_step()
        return buffers.inputs(forward.lean.input_embeddings.weight)

    def queue_judgement(*args, **kwargs):
        judgement = read(*args, **kwargs)

        def judged():
            outcome = judgement()
            stamps.mark("read")
            return outcome
        return judged
    forward._run = stub
    for owner, name in STAMPED:
        setattr(owner, name, stamped(stamps, name, getattr(owner, name)))
    step.queue_judgement = queue_judgement
    try:
        yield
    finally:
        del forward._run
        for owner, name, function in patched:
            setattr(owner, name, function)


def measure(forward: PaddedLean, run: Callable[[int], None], steps: int
            ) -> tuple[dict[str, list[float]], list[int], collections.Counter]:
    """``segments`` of at least ``steps`` stubbed passes (prefills among them), and the aten operations from read to
    replay of each step of a further run, and their names, counted over that run."""
    stamps = Stamps()
    with stamping(forward, stamps):
        while len(stamps.steps) < steps:
            run(min(256, steps))
        timed_steps = stamps.steps
        stamps.steps, stamps.operations = [], []
        with stamps:  # counted apart: the dispatch mode slows every operation
            run(min(256, steps))
    return segments(timed_steps), stamps.operations, stamps.names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--tree", default="efficient:6,5,3")
    parser.add_argument("--ngram", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with walk_as_on_a_gpu():
        figures, operations, names = measure(*stand_in(args.tree, args.ngram), args.steps)
    print(f"{describe_device(torch.device('cpu'))}; {args.tree} + n-gram:{args.ngram}, overlapped, compute stubbed; "
          f"{len(figures['exposed'])} steps")
    print(f"aten operations from the read to the replay: median {statistics.median(operations)} "
          f"({min(operations)}-{max(operations)}), {len(operations)} steps; a step: " +
          ", ".join(f"{name} {count / len(operations):.1f}" for name, count in names.most_common()))
    print("us a step: median (25th-75th percentile)")
    for name, values in sorted(figures.items(), key=lambda item: -statistics.median(item[1])):
        low, high = quartiles(values)
        print(f"  {name}: {statistics.median(values):.1f} ({low:.1f}-{high:.1f}), {len(values)} steps")


if __name__ == "__main__":
    main()
