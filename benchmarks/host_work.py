"""Host work a BiTA step, and what overlapping passes hides of it: on the default model with the shipped adapter and
``--tree auto``, over the first MT-Bench first turns, greedy, each prompt run in turn by our AR loop, by BiTA with its
passes in turn and by BiTA overlapped (``Decoding.overlap``: pass k + 1 launched before pass k's record is built, the
default on a GPU), then where a step's time goes (cProfile of the overlapped runs, milliseconds a step) and, on a GPU,
how long the device waits for the host a step (torch's profiler: the gaps of ``IDLE_GAP_US`` or more between device
work, the host work a step exposes; shorter gaps are the launches inside a CUDA graph).

    PYTHONPATH=. .venv/bin/python benchmarks/host_work.py [--prompts 6] [--tokens 96] [--device auto] [--model M]
        [--dtype auto] [--prompts-file F.jsonl]   (F: prompts as `bench --prompts` reads them; default MT-Bench)

A step's seconds (``StepRecord.seconds``) are the time its caller waited for it; its pass's (``pass_seconds``) the
device's time from the pass's launch to its LM head (on a GPU, host gaps while building it included). In turn, a
step's host work is the difference, all of it on the critical path; overlapped, the record's share runs while the
device runs the next pass. On a CPU both schedules do the same work in the same time (nothing runs behind the host):
there the comparison checks the bookkeeping, on a GPU it measures the overlap. Ratios are per prompt, with the
25th-75th percentile.
"""

import argparse
import cProfile
import pstats
import statistics
import time
from dataclasses import replace

from bita.bench.suites import load_prompts, mt_bench
from bita.decode.autoregressive import ar_steps
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import make_stop
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.costs import quartiles
from bita.plan.tree_plan import plan_tree
from bita.runtime.device import describe_device, synchronize

IDLE_GAP_US = 20  # a gap between device work this long or longer waits for the host

STEP_FUNCTIONS = ("launch_pass", "settle_pass", "pass_record", "forward_layout", "pass_logits", "queue_judgement",
                  "read", "walk_on_host", "queue_walk", "drafts_from", "verify_greedy", "draft_candidates",
                  "build_trie", "allowed_keys", "tree_record", "keep", "propose", "extend", "take", "decode_layout",
                  "fill", "_bucket_pass", "logits", "synchronize", "tree_tensors", "chosen_tokens",
                  "decided_by_kernel", "decided_by_torch", "attach_attention", "as_lists", "run", "to_device")
SCHEDULES = ("in turn", "overlapped")


def spread(values: list[float]) -> str:
    """'median (25th-75th percentile)'."""
    low, high = quartiles(values)
    return f"{statistics.median(values):.3f} ({low:.3f}-{high:.3f})"


def idle_gaps(spans: list[tuple[float, float]], shortest: float = IDLE_GAP_US) -> list[float]:
    """The gaps (us) of at least ``shortest`` between device work given as (start, end) spans in us, in any order and
    overlapping (concurrent kernels, copies beside kernels)."""
    gaps, reached = [], None
    for start, end in sorted(spans):
        if reached is not None and start - reached >= shortest:
            gaps.append(start - reached)
        reached = end if reached is None else max(reached, end)
    return gaps


def device_idle(runs: dict, prompts: list, device) -> None:
    """On a GPU: each run's device idle time a step, from torch's profiler over one pass of every prompt."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if device.type != "cuda":
        print("\nDevice idle a step: measured on a GPU only (a CPU's passes run on the host)")
        return
    print(f"\nDevice idle a step (gaps of {IDLE_GAP_US} us or more between device work, torch's profiler; in turn the "
          "record's host work is among them, overlapped it should not be)\n")
    print("| run | steps | ms idle a step | gaps a step | median gap, us (25th-75th) |\n|---|---:|---:|---:|---:|")
    for name, run in runs.items():
        with profile(activities=[ProfilerActivity.CUDA]) as trace:
            steps = sum(1 for ids in prompts for record in run(ids) if record.kind != "prefill")
            torch.cuda.synchronize()
        gaps = idle_gaps([(event.time_range.start, event.time_range.end) for event in trace.events()
                          if event.device_type == torch.autograd.DeviceType.CUDA])
        low, high = quartiles(gaps) if gaps else (0.0, 0.0)
        print(f"| {name} | {steps} | {sum(gaps) / 1000 / steps:.3f} | {len(gaps) / steps:.2f} | "
              f"{statistics.median(gaps) if gaps else 0:.0f} ({low:.0f}-{high:.0f}) |")


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
    decoding = Decoding(loaded.runtime, adapter, plan.tree, chains=plan.chains)
    runs = {"AR": lambda ids: ar_steps(loaded.runtime, ids, make_stop(loaded, args.tokens))}
    runs |= {f"BiTA {name}": (lambda ids, overlap=overlap: bita_steps(replace(decoding, overlap=overlap), ids,
                                                                        make_stop(loaded, args.tokens)))
             for name, overlap in zip(SCHEDULES, (False, True))}

    def measure(profile: cProfile.Profile | None = None) -> dict[str, dict[str, list[float]]]:
        seen = {name: {"tok/s": [], "step": [], "pass": [], "wall": []} for name in runs}
        for ids in prompts:
            for name, run in runs.items():
                profiling = profile is not None and "overlapped" in name
                if profiling:
                    profile.enable()
                synchronize(loaded.device)
                started = time.perf_counter()
                records = [r for r in run(ids) if r.kind != "prefill"]
                synchronize(loaded.device)
                wall = time.perf_counter() - started
                if profiling:
                    profile.disable()
                seconds = sum(r.seconds for r in records)
                seen[name]["tok/s"].append(sum(len(r.emitted) for r in records) / seconds)
                seen[name]["wall"].append(wall)
                seen[name]["step"] += [1000 * r.seconds for r in records]
                seen[name]["pass"] += [1000 * r.pass_seconds for r in records]
        return seen

    measure()  # warm-up
    seen = measure()
    print(f"{describe_device(loaded.device)}\n{loaded.runtime.describe()}\ntree: {plan.reason}\n"
          f"{len(prompts)} prompts, {args.tokens} new tokens, greedy; medians (25th-75th percentile)\n")
    print("| run | tok/s per prompt | ms a step | ms its pass | ms a step less its pass |\n|---|---:|---:|---:|---:|")
    for name, figures in seen.items():
        host = [step - passed for step, passed in zip(figures["step"], figures["pass"])]
        print(f"| {name} | {spread(figures['tok/s'])} | {spread(figures['step'])} | {spread(figures['pass'])} "
              f"| {spread(host)} |")
    for name in runs:
        if name != "AR":
            ratios = [ours / theirs for ours, theirs in zip(seen[name]["tok/s"], seen["AR"]["tok/s"])]
            print(f"\n{name} / our AR loop, tok/s per prompt: {spread(ratios)}", end="")
    ratios = [ours / theirs for ours, theirs in zip(seen["BiTA overlapped"]["tok/s"], seen["BiTA in turn"]["tok/s"])]
    walls = [a / b for a, b in zip(seen["BiTA in turn"]["wall"], seen["BiTA overlapped"]["wall"])]
    print(f"\nBiTA overlapped / in turn, tok/s per prompt: {spread(ratios)}; from the runs' own wall clocks "
          f"(the caller's work included): {spread(walls)}\n")
    profile = cProfile.Profile()
    profiled = measure(profile)["BiTA overlapped"]["step"]
    print(f"Where an overlapped step's time goes, from a third run under cProfile (the profiler adds to it: a step "
          f"{statistics.median(profiled):.3f} ms there)\n")
    print("| function | calls | ms a step (cumulative) |\n|---|---:|---:|")
    stats = pstats.Stats(profile).stats
    for (file, line, name), (_, calls, _, cumulative, _) in sorted(stats.items(), key=lambda item: -item[1][3]):
        if name in STEP_FUNCTIONS and "bita" in file:
            print(f"| `{file.split('bita/')[-1]}:{line}` {name} | {calls} | {1000 * cumulative / len(profiled):.3f} |")
    print("\n| the most time of its own (any function) | calls | ms a step |\n|---|---:|---:|")
    for (file, line, name), (_, calls, own, _, _) in sorted(stats.items(), key=lambda item: -item[1][2])[:20]:
        print(f"| `{file.split('site-packages/')[-1].split('bita/')[-1]}:{line}` {name} | {calls} | "
              f"{1000 * own / len(profiled):.3f} |")
    device_idle(runs, prompts, loaded.device)


if __name__ == "__main__":
    main()
