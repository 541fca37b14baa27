"""A/B of the fast pass: the tree step of an older checkout against this one, interleaved.

    git worktree add /tmp/before 834de23        # the commit before the fast pass
    PYTHONPATH=. .venv/bin/python benchmarks/ab_fast_pass.py /tmp/before 25

Both versions run in one process on the same model, adapter and 300-token context; each
round times one AR pass and one pass of every (version, tree), so drift hits all alike.
Prints a Markdown table of median milliseconds per pass.
"""
import importlib
import importlib.util
import statistics
import sys

import torch
from bita.loading import load_model
from bita.shipped import resolve_adapter
from bita import decoding as new
from bita.autoregressive import ar_steps
from bita.stopping import StopCondition
from bita.masks import decode_layout
from bita.tree import parse_tree_spec

before = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
spec = importlib.util.spec_from_file_location("bita_before", f"{before}/bita/__init__.py",
                                              submodule_search_locations=[f"{before}/bita"])
pkg = importlib.util.module_from_spec(spec)
sys.modules["bita_before"] = pkg
spec.loader.exec_module(pkg)
old = importlib.import_module("bita_before.decoding")
old_adapter_mod = importlib.import_module("bita_before.adapter")
loaded = load_model()
model = loaded.model
adapter, path = resolve_adapter(loaded, None)
old_adapter = old_adapter_mod.BitaAdapter.load(path, model)
g = torch.Generator().manual_seed(0)
prompt = torch.randint(100, 49000, (300,), generator=g).tolist()
specs = ["chain:1", "efficient:3/chain-groups", "chain:3", "efficient:3,2,2/chain-groups", "efficient:5,4,3"]
trees = [parse_tree_spec(s) for s in specs]
states = {}
for s, t in zip(specs, trees):
    states[("old", s)] = old.prefill(model, old_adapter, prompt, t.max_rank)[0]
    states[("new", s)] = new.prefill(model, adapter, prompt, t)[0]
ar = ar_steps(model, prompt, StopCondition(200))
next(ar)
times = {k: [] for k in list(states) + [("ar", "ar")]}
for r in range(rounds + 1):
    times[("ar", "ar")].append(next(ar).seconds)
    for s, t in zip(specs, trees):
        for version, mod, ad, n in (("old", old, old_adapter, 3), ("new", new, adapter, t.depth)):
            st = states[(version, s)]
            st.drafts = mod.Drafts(torch.randint(100, 49000, (n, t.max_rank), generator=g), torch.full((n, t.max_rank), .5))
            _, rec = mod.tree_step(model, ad, st, t, r)
            st.cache.crop(adapter.n_prompt + 300 - st.cache.get_seq_length())
            st.context_length = 300
            times[(version, s)].append(rec.seconds)
med = {k: statistics.median(v[1:]) * 1000 for k, v in times.items()}
print("| tree | rows before | rows after | ms before | ms after | change | x AR before | x AR after |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for s, t in zip(specs, trees):
    b, a = med[("old", s)], med[("new", s)]
    print(f"| `{s}` | {decode_layout(t, 3).rows} | {decode_layout(t, t.depth).rows} | {b:.1f} | {a:.1f} | {100*(a-b)/b:+.0f} % | {b/med[('ar','ar')]:.2f} | {a/med[('ar','ar')]:.2f} |")
print(f"AR pass: {med[('ar','ar')]:.1f} ms; {rounds} rounds, each one pass of every entry, medians")
