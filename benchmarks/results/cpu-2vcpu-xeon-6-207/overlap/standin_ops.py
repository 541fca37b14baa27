"""What a GPU step does on the host, counted on a CPU stand-in: a tiny random llama (tests/conftest.py) on the padded
forward (what a GPU replays as CUDA graphs, run eagerly) with its compute stubbed, the walk queued as on a GPU,
efficient:6,5,3 plus an n-gram chain of 4, the overlapped loop: aten operations a step by phase (TorchDispatchMode;
most are views and host-tensor writes, a GPU launches fewer), and host milliseconds a step (noisy on a shared VM:
compare counts, not times, across commits).

    PYTHONPATH=.:tests .venv/bin/python benchmarks/results/cpu-2vcpu-xeon-6-207/overlap/standin_ops.py
"""
import collections
import functools
import statistics
import time

import torch
from conftest import random_prompts, tiny_model
from torch.utils._python_dispatch import TorchDispatchMode

from bita.decode import pass_logits, step
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.runtime.lean_llama import LeanLlama
from bita.runtime.padded import PaddedLean
from bita.runtime.runtime import Runtime

torch.set_num_threads(1)
pass_logits.on_device = lambda device: True  # the walk queued behind the pass, as on a GPU
pass_logits.one_head_call = lambda device, rows: True
model = tiny_model("llama")
runtime = Runtime(model, PaddedLean(LeanLlama(model), graphs=False))
adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=2)
decoding = Decoding(runtime, adapter, parse_tree_spec("efficient:6,5,3"), chains=Chains(ngram_tokens=4), overlap=True)
prompts = random_prompts(6, seed=1, low=100, high=300)
list(bita_steps(decoding, prompts[0], StopCondition(96)))  # warm-up
runtime.forward._run = lambda buffers, cache: buffers.embeds  # the pass's compute stubbed: the host's work alone


class Phases(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts, self.phase = collections.Counter(), "the loop"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[self.phase] += 1
        return func(*args, **(kwargs or {}))


counter = Phases()


def in_phase(name, function):
    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        outer, counter.phase = counter.phase, name
        try:
            return function(*args, **kwargs)
        finally:
            counter.phase = outer
    return wrapped


def run_all() -> int:
    return sum(1 for prompt in prompts for _ in bita_steps(decoding, prompt, StopCondition(96)))


per_step = []
for _ in range(5):
    started = time.perf_counter()
    steps = run_all()
    per_step.append(1000 * (time.perf_counter() - started) / steps)
for name, label in (("launch_pass", "launch_pass, its own"), ("settle_pass", "settle_pass (before the next pass)"),
                    ("pass_record", "pass_record (behind the next pass)"),
                    ("forward_layout", "forward_layout (before the replay)"),
                    ("pass_logits", "pass_logits (behind the pass)"),
                    ("queue_judgement", "queue_judgement (behind the pass)")):
    setattr(step, name, in_phase(label, getattr(step, name)))
with counter:
    steps = run_all()
print(f"{steps} steps; host ms a step, 5 runs: median {statistics.median(per_step):.3f} "
      f"({min(per_step):.3f}-{max(per_step):.3f})")
print(f"aten operations a step: {sum(counter.counts.values()) / steps:.1f}")
for phase, count in counter.counts.most_common():
    print(f"  {phase}: {count / steps:.1f}")
