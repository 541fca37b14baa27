"""In one process, greedy AR and BiTA (the `auto` tree of the dot plan) on 8 MT-Bench first turns, 128 new tokens,
alternating prompt by prompt (two rounds, the order flipped in the second): every product of the stack and the LM
head on the native kernel (two float32 FMAs a pair of products) against the dot kernel (one vdpbf16ps), which read
the same packed weights. Needs a plan that took dot for both (AVX512-BF16).

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2vcpu-epyc-avx512/dot-kernel/inproc_dot.py
"""
import statistics

from bita.bench.suites import mt_bench
from bita.decode.autoregressive import ar_steps
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import make_stop
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.costs import quartiles
from bita.plan.tree_plan import plan_tree
from bita.runtime.device import describe_device
from bita.runtime.kernel_plan import DOT, NATIVE
from bita.runtime.native_stack import KERNELS

loaded = load_model("default")
adapter, _ = resolve_adapter(loaded, None)
runtime = loaded.runtime
stack, head = runtime.forward.stack, loaded.model.get_output_embeddings().forward.planned
assert stack.kernel == KERNELS[DOT] and head.path == DOT, runtime.describe()
plan = plan_tree(loaded, adapter, "auto")
print(describe_device(loaded.device), "|", runtime.describe())
print(plan.reason)
decoding = Decoding(runtime, adapter, plan.tree, chains=plan.chains)
prompts = [encode_chat(loaded.tokenizer, list(p.messages)) for p in mt_bench()[:8]]
runs = {"AR": lambda ids: ar_steps(runtime, ids, make_stop(loaded, 128)),
        "BiTA": lambda ids: bita_steps(decoding, ids, make_stop(loaded, 128))}
seen = {(n, k): {"pass": [], "host": [], "tok/s": [], "tokens": []} for n in runs for k in (NATIVE, DOT)}
for round_ in range(2):
    for ids in prompts:
        for kernel in ((NATIVE, DOT) if round_ == 0 else (DOT, NATIVE)):
            stack.kernel, head.path = KERNELS[kernel], kernel
            for name, run in runs.items():
                every = list(run(ids))
                steps = [r for r in every if r.kind != "prefill"]
                s = seen[(name, kernel)]
                s["pass"] += [1e3 * r.pass_seconds for r in steps]
                s["host"] += [1e3 * (r.seconds - r.pass_seconds) for r in steps]
                s["tok/s"].append(sum(len(r.emitted) for r in steps) / sum(r.seconds for r in steps))
                s["tokens"].append([t for r in every for t in r.emitted])
stack.kernel, head.path = KERNELS[DOT], DOT
print("identical both ways:", all(seen[(n, NATIVE)]["tokens"] == seen[(n, DOT)]["tokens"] for n in runs),
      "| BiTA == AR:", seen[("AR", DOT)]["tokens"] == seen[("BiTA", DOT)]["tokens"])


def spread(values):
    return "%.2f (%.2f-%.2f)" % (statistics.median(values), *quartiles(values))


print("| run | kernel | pass + head ms a step | host ms a step | tok/s a prompt |\n|---|---|---:|---:|---:|")
for (name, kernel), s in seen.items():
    print(f"| {name} | {kernel} | {spread(s['pass'])} | {spread(s['host'])} | {spread(s['tok/s'])} |")
for name in runs:
    ratios = [a / b for a, b in zip(seen[(name, DOT)]["tok/s"], seen[(name, NATIVE)]["tok/s"])]
    print(f"{name}: dot / native tok/s per prompt (each pair back to back): {spread(ratios)}")
ratios = {k: [b / a for a, b in zip(seen[("AR", k)]["tok/s"], seen[("BiTA", k)]["tok/s"])] for k in (NATIVE, DOT)}
print("BiTA / AR per prompt:", ", ".join(f"{k} {spread(v)}" for k, v in ratios.items()))
