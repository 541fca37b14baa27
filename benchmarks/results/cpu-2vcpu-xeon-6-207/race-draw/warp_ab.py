"""A sampled row's warp (target_probs) with the base commit's scalar helpers and stack (torch operations) against
this checkout's numpy scalars and lone-row view: 120 real rows of sampled MT-Bench answers, six rounds alternating in
one process; the probabilities checked bitwise equal. Median us a row.

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2vcpu-xeon-6-207/race-draw/warp_ab.py
"""
import torch, time, statistics
import bita.decode.sampling as S
from bita.decode.sampling import Sampling, target_probs
from bita.bench.suites import mt_bench
from bita.model.loading import encode_chat, load_model
from bita.decode.autoregressive import ar_steps
from bita.decode.stopping import make_stop
import bita.decode.autoregressive as A
loaded = load_model("default")
rows = []
orig = A.next_token
A.next_token = lambda logits, s, n, p=0: rows.append(logits.clone()) or orig(logits, s, n, p)
for p in mt_bench()[:3]:
    list(ar_steps(loaded.runtime, encode_chat(loaded.tokenizer, list(p.messages)), make_stop(loaded, 40), Sampling(0.7, 0.95, 0, 0)))
A.next_token = orig
s = Sampling(0.7, 0.95, 0, 0)
new = (S.top_p_threshold, S.at_least, S.warped_scores)
def old_threshold(top_p): return torch.tensor(1 - top_p, dtype=torch.float32).item()
def old_at_least(row, value):
    below = torch.nextafter(torch.tensor(value, dtype=torch.float32), torch.tensor(-float("inf"))).item()
    return torch.nn.functional.threshold(row, below, -float("inf"))
def old_warped(logits, sampling):
    scores = logits.float()
    if sampling.temperature != 1.0: scores = scores / float(sampling.temperature)
    if scores.device.type == "cpu" and (sampling.top_k or sampling.top_p < 1.0):
        return torch.stack([S.cut_row(row, sampling) for row in scores])
    return S.cut_sorted(scores, sampling)
def use(old):
    S.top_p_threshold, S.at_least, S.warped_scores = (old_threshold, old_at_least, old_warped) if old else new
t = {True: [], False: []}
for rnd in range(6):
    for old in ((True, False) if rnd % 2 else (False, True)):
        use(old)
        outs = []
        for r in rows:
            t0 = time.perf_counter(); outs.append(target_probs(r[None], s)); t[old].append(time.perf_counter() - t0)
        if old: ref = outs
        else: mine = outs
print(len(rows), "rows; equal:", all(torch.equal(a, b) for a, b in zip(ref, mine)))
for old in (True, False): print("old" if old else "new", "us per row median %.0f" % (statistics.median(t[old]) * 1e6))
