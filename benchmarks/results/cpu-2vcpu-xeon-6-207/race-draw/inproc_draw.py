"""In one process, sampled (T 0.7, top-p 0.95, seed 0) AR and BiTA on 8 MT-Bench first turns, 128 new tokens, alternating
prompt by prompt: race vectors by exponential_ (race_draw.draws_as_torch() forced False) against race_draw.py's."""
import statistics, torch
from bita.bench.suites import mt_bench
from bita.decode import race_draw
from bita.decode.autoregressive import ar_steps
from bita.decode.sampling import Sampling
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import make_stop
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.costs import quartiles
from bita.plan.tree_plan import plan_tree
from bita.runtime.device import describe_device
loaded = load_model("default"); adapter, _ = resolve_adapter(loaded, None)
sampling = Sampling(0.7, 0.95, 0, 0)
plan = plan_tree(loaded, adapter, "auto", sampling=sampling)
print(describe_device(loaded.device)); print(plan.reason)
dec = Decoding(loaded.runtime, adapter, plan.tree, sampling, chains=plan.chains)
fast = race_draw.draws_as_torch
prompts = [encode_chat(loaded.tokenizer, list(p.messages)) for p in mt_bench()[:8]]
runs = {"AR": lambda ids: ar_steps(loaded.runtime, ids, make_stop(loaded, 128), sampling),
        "BiTA": lambda ids: bita_steps(dec, ids, make_stop(loaded, 128))}
seen = {(n, w): {"host": [], "tok/s": [], "tokens": []} for n in runs for w in ("exponential_", "race_draw")}
for rnd in range(2):
    for ids in prompts:
        for way in (("exponential_", "race_draw") if rnd == 0 else ("race_draw", "exponential_")):
            race_draw.draws_as_torch = fast if way == "race_draw" else (lambda: False)
            for name, run in runs.items():
                every = list(run(ids))
                recs = [r for r in every if r.kind != "prefill"]
                s = seen[(name, way)]
                s["host"] += [1e3 * (r.seconds - r.pass_seconds) for r in recs]
                s["tok/s"].append(sum(len(r.emitted) for r in recs) / sum(r.seconds for r in recs))
                s["tokens"].append([t for r in every for t in r.emitted])
race_draw.draws_as_torch = fast
print("identical:", all(seen[(n, "exponential_")]["tokens"] == seen[(n, "race_draw")]["tokens"] for n in runs),
      "BiTA == AR:", seen[("AR", "race_draw")]["tokens"] == seen[("BiTA", "race_draw")]["tokens"])
def spread(v): return "%.3f (%.3f-%.3f)" % (statistics.median(v), *quartiles(v))
print("| run | draw | host ms a step | tok/s a prompt |\n|---|---|---:|---:|")
for (name, way), s in seen.items():
    print(f"| {name} | {way} | {spread(s['host'])} | {spread(s['tok/s'])} |")
for name in runs:
    r = [a / b for a, b in zip(seen[(name, "race_draw")]["tok/s"], seen[(name, "exponential_")]["tok/s"])]
    print(f"{name}: race_draw / exponential_ tok/s per prompt (each pair ran back to back): {spread(r)}")
