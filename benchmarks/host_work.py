"""Host work a BiTA step: a tree step's seconds less its pass's (forward and LM head), on the default model with
the shipped adapter and ``--tree auto``, over the first MT-Bench first turns, then where it goes (cProfile,
milliseconds a step of the step's own functions).

    PYTHONPATH=. .venv/bin/python benchmarks/host_work.py [--prompts 6] [--tokens 96] [--device auto] [--model M]
        [--dtype auto] [--prompts-file F.jsonl]   (F: prompts as `bench --prompts` reads them; default MT-Bench)

On a CPU the verification walk runs in Python and the LM head's argmax and the drafts' softmax and top-k run on
the host; on a GPU they run on the device (device_walk.py) and the host waits once a pass. The pass's own time
(``pass_seconds``) holds host work too, before the device runs it (the rows' layout, mask and staging): the
profile's functions inside ``forward_layout`` and ``pass_logits`` show it, and ``synchronize`` the waits.
"""
import argparse
import cProfile
import pstats
import statistics

from bita.bench.suites import load_prompts, mt_bench
from bita.generate import Request, stream_bita
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.tree_plan import plan_tree

STEP_FUNCTIONS = ("tree_step", "forward_layout", "pass_logits", "judge", "drafts_from", "verify_greedy",
                  "walk_on_device", "draft_candidates", "build_trie", "allowed_keys", "tree_record", "keep", "propose",
                  "extend", "take", "decode_layout", "fill", "_bucket_pass", "logits", "synchronize", "tree_tensors",
                  "chosen_tokens", "decided_by_kernel", "decided_by_torch", "attach_attention", "as_lists", "run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--prompts-file", help="JSONL prompts as bench --prompts reads them (default: MT-Bench)")
    args = parser.parse_args()
    loaded = load_model(args.model, device=args.device, dtype=args.dtype)
    adapter, _ = resolve_adapter(loaded, None)
    plan = plan_tree(loaded, adapter, "auto")
    suite = load_prompts(None, args.prompts_file, None, None) if args.prompts_file else mt_bench()
    prompts = [encode_chat(loaded.tokenizer, list(p.messages)) for p in suite[:args.prompts]]

    def run() -> tuple[list[float], list[float]]:
        host, passes = [], []
        for ids in prompts:
            for record in stream_bita(loaded, adapter, Request(ids, args.tokens, plan)):
                if record.kind == "tree":
                    host.append(record.seconds - record.pass_seconds)
                    passes.append(record.pass_seconds)
        return host, passes

    run()  # warm-up
    host, passes = run()
    profile = cProfile.Profile()
    profile.enable()
    profiled, _ = run()
    profile.disable()
    print(f"{loaded.runtime.describe()}\ntree: {plan.reason}\n{len(host)} tree steps: host work median "
          f"{1000 * statistics.median(host):.3f} ms (quartiles {1000 * statistics.quantiles(host)[0]:.3f}-"
          f"{1000 * statistics.quantiles(host)[2]:.3f}), pass median {1000 * statistics.median(passes):.2f} ms; "
          f"where it goes, from a third run under cProfile (host median {1000 * statistics.median(profiled):.3f} ms "
          "there: the profiler adds to it)\n")
    print("| function | calls | ms a step (cumulative) |\n|---|---:|---:|")
    stats = pstats.Stats(profile).stats
    for (file, line, name), (_, calls, _, cumulative, _) in sorted(stats.items(), key=lambda item: -item[1][3]):
        if name in STEP_FUNCTIONS and "bita" in file:
            print(f"| `{file.split('bita/')[-1]}:{line}` {name} | {calls} | {1000 * cumulative / len(profiled):.3f} |")
    print("\n| the most time of its own (any function) | calls | ms a step |\n|---|---:|---:|")
    for (file, line, name), (_, calls, own, _, _) in sorted(stats.items(), key=lambda item: -item[1][2])[:20]:
        print(f"| `{file.split('site-packages/')[-1].split('bita/')[-1]}:{line}` {name} | {calls} | "
              f"{1000 * own / len(profiled):.3f} |")


if __name__ == "__main__":
    main()
