"""Old (94bd72a) and new LeanLlama.forward on the same loaded model and cache, alternating, one process: the CPU
runs only the layer loop's restructuring of issue 56 (the native path's operations are the same).

    BITA_CACHE=/tmp/cache-x PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2vcpu-xeon-6-207/fused-layer/inproc_ab.py
"""
import importlib.util, subprocess, statistics, time, sys, torch
src = subprocess.run(["git", "-C", "/work/main", "show", "94bd72a:bita/runtime/lean_llama.py"], capture_output=True, text=True).stdout
spec = importlib.util.spec_from_loader("bita.runtime.lean_old", loader=None)
old_mod = importlib.util.module_from_spec(spec); old_mod.__package__ = "bita.runtime"
exec(compile(src, "lean_old.py", "exec"), old_mod.__dict__)
from bita.model.loading import load_model
loaded = load_model("default", device="cpu", dtype="auto")
new = loaded.runtime.forward
print(loaded.runtime.describe(), type(new).__name__)
old = old_mod.LeanLlama.__new__(old_mod.LeanLlama); old.__dict__ = new.__dict__
emb = loaded.model.get_input_embeddings()
cache = new.new_cache()
ctx = 300
with torch.inference_mode():
    new.forward(cache, emb(torch.arange(ctx) + 100), torch.arange(ctx), torch.ones(ctx, ctx, dtype=torch.bool).tril(), ctx)
    e = emb(torch.tensor([42])); pos = torch.tensor([ctx]); allowed = torch.ones(1, ctx + 1, dtype=torch.bool)
    outs = {}
    times = {"old": [], "new": []}
    for rep in range(160):
        for name, f in (("old", lambda: old_mod.LeanLlama.forward(old, cache, e, pos, allowed, 1)), ("new", lambda: type(new).forward(new, cache, e, pos, allowed, 1))) if rep % 2 else (("new", lambda: type(new).forward(new, cache, e, pos, allowed, 1)), ("old", lambda: old_mod.LeanLlama.forward(old, cache, e, pos, allowed, 1))):
            t = time.perf_counter(); out = f(); times[name].append(1000 * (time.perf_counter() - t))
            cache.crop(-1); outs[name] = out
    print("same hidden:", torch.equal(outs["old"], outs["new"]))
    for name, v in times.items():
        v = v[10:]
        print(name, f"median {statistics.median(v):.2f} ms, quartiles {statistics.quantiles(v, n=4)[0]:.2f}-{statistics.quantiles(v, n=4)[2]:.2f}")
    ratio = [a / b for a, b in zip(times["new"][10:], times["old"][10:])]
    print(f"new/old per pair: median {statistics.median(ratio):.3f} ({statistics.quantiles(ratio, n=4)[0]:.3f}-{statistics.quantiles(ratio, n=4)[2]:.3f})")
