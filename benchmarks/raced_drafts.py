"""Sampled BiTA with raced drafts (bita/decode/mask_drafts.py) against the same tree with the masks' most probable
drafts, and our AR loop, in one process, alternating prompt by prompt (the order turned each prompt): tau, the mask
drafts accepted, tok/s per prompt and their ratios (25th-75th percentile), and whether every run emitted our AR
loop's tokens. The most probable drafts are had by giving the passes no vectors to race with (``step.ahead_of``).

    PYTHONPATH=. .venv/bin/python benchmarks/raced_drafts.py [--prompts 16] [--tokens 128] [--temperature 0.7]
        [--top-p 0.95] [--top-k 0] [--seed 0] [--tree auto] [--drafts both]
"""

import argparse

from benchmarks.host_work import spread
from bita.bench.suites import mt_bench
from bita.decode import step
from bita.decode.autoregressive import ar_steps
from bita.decode.records import ACCEPTED
from bita.decode.sampling import Sampling
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import make_stop
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.tree_plan import plan_tree
from bita.runtime.device import describe_device

RUNS = ("our AR loop", "BiTA, most probable drafts", "BiTA, raced drafts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tree", default="auto")
    parser.add_argument("--drafts", default="both")
    args = parser.parse_args()
    sampling = Sampling(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)
    loaded = load_model("default")
    adapter, _ = resolve_adapter(loaded, None)
    plan = plan_tree(loaded, adapter, args.tree, drafts=args.drafts, sampling=sampling)
    decoding = Decoding(loaded.runtime, adapter, plan.tree, sampling=sampling, chains=plan.chains)
    raced_ahead = step.ahead_of

    def bita(ids: list[int], raced: bool):
        step.ahead_of = raced_ahead if raced else (lambda noise, first: None)
        try:
            yield from bita_steps(decoding, ids, make_stop(loaded, args.tokens))
        finally:
            step.ahead_of = raced_ahead
    runs = dict(zip(RUNS, (lambda ids: ar_steps(loaded.runtime, ids, make_stop(loaded, args.tokens), sampling),
                           lambda ids: bita(ids, False), lambda ids: bita(ids, True))))
    prompts = [encode_chat(loaded.tokenizer, list(p.messages)) for p in mt_bench()[:args.prompts]]
    list(runs[RUNS[2]](prompts[0]))  # warm-up
    seen = {name: {"tok/s": [], "tokens": [], "passes": 0, "emitted": 0, "mask": 0} for name in RUNS}
    for index, ids in enumerate(prompts):
        for name in (RUNS if index % 2 == 0 else RUNS[::-1]):
            records = list(runs[name](ids))
            steps = [r for r in records if r.kind != "prefill"]
            figures = seen[name]
            figures["tok/s"].append(sum(len(r.emitted) for r in steps) / sum(r.seconds for r in steps))
            figures["tokens"].append([t for r in records for t in r.emitted])
            figures["passes"] += len(steps)
            figures["emitted"] += sum(len(r.emitted) for r in steps)
            figures["mask"] += sum(1 for r in steps for n in r.nodes if n.status == ACCEPTED and n.rank >= 0)
    print(f"{describe_device(loaded.device)}\n{loaded.runtime.describe()}\ntree: {plan.reason}\n{sampling.describe()}; "
          f"{len(prompts)} MT-Bench first turns, {args.tokens} new tokens\n")
    print("| run | tau | mask drafts accepted | tok/s a prompt | identical to our AR loop |\n|---|---:|---:|---:|---:|")
    for name, figures in seen.items():
        same = sum(ours == theirs for ours, theirs in zip(figures["tokens"], seen[RUNS[0]]["tokens"]))
        print(f"| {name} | {figures['emitted'] / figures['passes']:.3f} | {figures['mask']} | "
              f"{spread(figures['tok/s'])} | {same}/{len(prompts)} |")
    for a, b in ((RUNS[2], RUNS[1]), (RUNS[1], RUNS[0]), (RUNS[2], RUNS[0])):
        print(f"\n{a} / {b}, tok/s per prompt: "
              f"{spread([x / y for x, y in zip(seen[a]['tok/s'], seen[b]['tok/s'])])}", end="")
    print()


if __name__ == "__main__":
    main()
