"""In one process, BiTA greedy on 8 MT-Bench prompts, alternating per prompt: the base commit's host pieces (drafts by
torch.topk over the softmax, every logits row widened in the head) against this checkout's. Runs at 54f3083 only: it
switches Runtime.logits' ``floats`` flag, taken back in d2bba4f.

    PYTHONPATH=. .venv/bin/python inproc_host.py 8   (at 54f3083)"""
import statistics, sys, torch
from bita.bench.suites import mt_bench
from bita.decode import pass_logits as PL
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import make_stop
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.tree_plan import plan_tree
from bita.plan.costs import quartiles
from bita.runtime.runtime import Runtime
new_logits = Runtime.logits
loaded = load_model("default"); adapter, _ = resolve_adapter(loaded, None)
plan = plan_tree(loaded, adapter, "auto"); print(plan.reason)
dec = Decoding(loaded.runtime, adapter, plan.tree, chains=plan.chains)
new_drafts, new_on_device = PL.drafts_from, PL.on_device
def old_drafts(logits, k):
    top = torch.softmax(logits, dim=-1).topk(k, dim=-1)
    return PL.Drafts(top.indices.cpu(), top.values.cpu())
def use(old):
    PL.drafts_from = old_drafts if old else new_drafts
    # the old pass_logits widened every row in the head
    Runtime.logits = (lambda self, hidden, floats=True: new_logits(self, hidden, True)) if old else new_logits
prompts = [encode_chat(loaded.tokenizer, list(p.messages)) for p in mt_bench()[:int(sys.argv[1])]]
seen = {True: {"host": [], "pass": [], "tokens": []}, False: {"host": [], "pass": [], "tokens": []}}
for rnd in range(2):
    for ids in prompts:
        for old in ((True, False) if rnd == 0 else (False, True)):
            use(old)
            recs = [r for r in bita_steps(dec, ids, make_stop(loaded, 128)) if r.kind != "prefill"]
            seen[old]["host"] += [1e3 * (r.seconds - r.pass_seconds) for r in recs]
            seen[old]["pass"] += [1e3 * r.pass_seconds for r in recs]
            seen[old]["tokens"].append([t for r in recs for t in r.emitted])
use(False)
print("same tokens:", seen[True]["tokens"] == seen[False]["tokens"])
for old in (True, False):
    h, p = seen[old]["host"], seen[old]["pass"]
    print("old" if old else "new", "host ms median %.3f (%.3f-%.3f)" % (statistics.median(h), *quartiles(h)),
          "pass ms median %.2f (%.2f-%.2f)" % (statistics.median(p), *quartiles(p)), "steps", len(h))
