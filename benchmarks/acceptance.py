"""tau (new tokens per forward pass) of several draft configurations on the same prompts, per
category, next to the tau forecast from the adapter's stored pass sample: BiTA passes only,
untimed, so it may share the CPU with other work. Greedy, or sampled with --temperature (then the
forecast is the sampled one, bita/plan/sampled_forecast.py). Resumable: a configuration already in
the output file is skipped.

    PYTHONPATH=. python benchmarks/acceptance.py --suite mt-bench --output tau.jsonl \\
        "efficient:5,4,3|masks" "efficient:5,4,3|ngram" "efficient:5,4,3|both" "efficient:5,4,3|both|last"

A configuration is ``TREE|DRAFTS[|NGRAM_GROUPS]``: a tree spec (or auto), masks|ngram|both|all,
and where the chains' own nodes carry mask groups (none|last|all; bita/drafts/trie.py).
Accepted drafts are counted by who proposed them (``accepted_by_source``).
Each line also gives the mean and largest rows of a decoding pass (the prefill excluded), and a
digest of every answer's tokens: greedy decoding is lossless, so every configuration's is the same.
"""

import argparse
import hashlib
import json
import statistics
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from bita.bench.suites import load_prompts
from bita.decode.sampling import Sampling
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import make_stop
from bita.drafts.trie import GROUPS_NONE
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.sampled_forecast import forecasting
from bita.plan.tree_plan import plan_tree


def forecast_tau(adapter, plan, sampling: Sampling) -> float | None:
    """What the adapter's pass sample forecasts for this plan at this setting (None for plain AR)."""
    if plan.tree is None:
        return None
    forecaster, passes = forecasting(adapter, sampling)
    guess = forecaster(plan.tree, passes, plan.ngram_tokens)
    return round(guess.tokens_per_pass, 3)


def measure(loaded, adapter, prompts, config: str, max_new_tokens: int, sampling: Sampling) -> dict:
    tree, drafts, groups = (config.split("|") + [GROUPS_NONE])[:3]
    plan = plan_tree(loaded, adapter, tree, drafts, sampling=sampling)
    decoding = Decoding(loaded.runtime, adapter, plan.tree, sampling, replace(plan.chains, ngram_groups=groups))
    tokens, passes, rows, answers, sources = Counter(), Counter(), [], hashlib.sha1(), Counter()
    started = time.perf_counter()
    for prompt in tqdm(prompts, desc=config):
        ids, answer = encode_chat(loaded.tokenizer, list(prompt.messages)), []
        for record in bita_steps(decoding, ids, make_stop(loaded, max_new_tokens)):
            tokens[prompt.category] += len(record.emitted)
            sources.update(s for s in record.emitted_sources() if s is not None)
            passes[prompt.category] += 1
            rows += [record.rows] if record.kind == "tree" else []
            answer += record.emitted
        answers.update(f"{prompt.id}:{answer};".encode())
    return {"config": config, "plan": plan.spec, "prompts": len(prompts), "new_tokens": sum(tokens.values()),
            "forward_passes": sum(passes.values()), "tau": round(sum(tokens.values()) / sum(passes.values()), 3),
            "forecast_tau": forecast_tau(adapter, plan, sampling), "sampling": sampling.describe(),
            "rows_per_pass": round(statistics.mean(rows), 2), "max_rows": max(rows),
            "answers_sha1": answers.hexdigest()[:12], "seconds": round(time.perf_counter() - started),
            "per_category": {c: round(tokens[c] / passes[c], 3) for c in tokens},
            "accepted_by_source": dict(sources)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", help="TREE|DRAFTS[|NGRAM_GROUPS]")
    parser.add_argument("--suite", default="mt-bench")
    parser.add_argument("--per-category", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--output", type=Path, required=True, help="JSON lines, one per configuration")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sampling = Sampling(args.temperature, args.top_p, args.top_k, args.seed)
    done = ({(record := json.loads(line))["config"] + record.get("sampling", "greedy")
             for line in args.output.read_text().splitlines() if line.strip()}
            if args.output.exists() else set())
    loaded = load_model("default", "cpu")
    adapter, _ = resolve_adapter(loaded, None)
    prompts = load_prompts(args.suite, per_category=args.per_category)
    for config in args.configs:
        if config + sampling.describe() in done:
            continue
        result = dict(measure(loaded, adapter, prompts, config, args.max_new_tokens, sampling), suite=args.suite)
        with args.output.open("a") as out:
            out.write(json.dumps(result) + "\n")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
