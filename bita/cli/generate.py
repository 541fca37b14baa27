"""``python -m bita generate``: one prompt, with BiTA, our AR loop and/or HF generate side by side."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

from ..bench.baselines import run_hf
from ..bench.divergence import divergence
from ..branch import BranchRecord, forced, replay
from ..decode.verify import shared_prefix
from ..errors import BitaError
from ..generate import Request, collect, stream_ar, stream_bita
from ..plan.tree_plan import plan_tree
from ..saved import METHODS, SavedDecoding, read_saved, saved_run
from .arguments import (ADAPTER_HELP, add_draft_arguments, add_model_arguments, add_sampling_arguments,
                        add_weights_argument, load_from, sampling_from)
from .records_json import record_json

MODES = ("bita", "ar", "hf", "both")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``generate``."""
    generate = commands.add_parser("generate", help="generate an answer with BiTA and/or AR")
    generate.add_argument("--prompt", required=True, help="the user message")
    generate.add_argument("--system", help="system prompt (default: the chat template's own)")
    add_model_arguments(generate)
    add_weights_argument(generate)
    generate.add_argument("--adapter", help=ADAPTER_HELP)
    generate.add_argument("--max-new-tokens", type=int, default=128, help="the most new tokens to generate")
    add_draft_arguments(generate)
    generate.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    add_sampling_arguments(generate)
    generate.add_argument("--mode", choices=MODES, default="bita",
                          help="bita: BiTA's answer; ar: our AR loop's (the loaded model's arithmetic); hf: HF "
                               "generate's (transformers' kernels); both: all three, timed, with BiTA's identity "
                               "to our AR loop checked and its agreement with HF generate beside it")
    generate.add_argument("--json", action="store_true",
                          help="print one JSON object: the text, tokens and settings, and every forward pass with "
                               "what the verifier said of each token (top alternatives, runner-up, near ties)")
    generate.add_argument("--save", type=Path, metavar="FILE",
                          help="write the decoding (BiTA's, else our AR loop's) to FILE as JSON: every forward pass "
                               "with its drafts, attention mask and verdicts, and each token's text (bita.show or "
                               "--html plays it back)")
    generate.add_argument("--html", type=Path, metavar="FILE",
                          help="write one self-contained HTML page to FILE that plays the decoding back pass by pass "
                               "(opens from disk, fetches nothing); with --mode both, BiTA's beside our AR loop's, "
                               "in step")
    generate.add_argument("--force", metavar="POSITION:TOKEN",
                          help="what if: after BiTA's answer, force token id TOKEN at its token POSITION (from 0) and "
                               "continue with the same settings; prints the branch and its replay record")
    generate.set_defaults(run=run_generate)
    replayed = commands.add_parser("replay", help="decode a what-if branch again from its replay record (JSON)")
    replayed.add_argument("record", type=Path, help="a replay record, as the app shows it or generate --force prints")
    add_model_arguments(replayed)
    add_weights_argument(replayed)
    replayed.set_defaults(run=run_replay)
    played = commands.add_parser("playback", help="write the playback page of a saved decoding, or of two side by "
                                                  "side (no model needed)")
    played.add_argument("saved", type=Path, help="a saved decoding, as generate --save writes it")
    played.add_argument("beside", type=Path, nargs="?",
                        help="another saved decoding, played beside the first in step, pass for pass")
    played.add_argument("--html", type=Path, required=True, metavar="FILE",
                        help="the page to write: one self-contained HTML file that plays the decoding(s) back")
    played.set_defaults(run=run_playback)


def run_generate(args: argparse.Namespace) -> dict:
    from ..model.loading import encode_chat
    from ..model.shipped import resolve_adapter
    from ..runtime.device import describe_device

    if not args.prompt.strip():
        raise BitaError("the prompt is empty")
    kept = bool(args.save or args.html)  # what a saved decoding shows is recorded only when one is asked for
    if kept and args.mode == "hf":
        raise BitaError("HF generate exposes no forward passes: --save and --html need --mode bita, ar or both")
    sampling = sampling_from(args)
    loaded = load_from(args)
    prompt_ids = encode_chat(loaded.tokenizer, [{"role": "user", "content": args.prompt}], args.system)
    stops = tuple(args.stop)
    request = Request(prompt_ids, args.max_new_tokens, sampling=sampling, stop_strings=stops,
                      record_attention=kept, record_verdicts=args.json or kept)
    report = {"model": loaded.name, "device": describe_device(loaded.device), "runtime": loaded.runtime.describe(),
              "prompt_tokens": len(prompt_ids)}
    runs, adapter, adapter_name = {}, None, None
    if args.mode in ("bita", "both"):
        adapter, adapter_name = resolve_adapter(loaded, args.adapter)
        plan = plan_tree(loaded, adapter, args.tree, args.drafts, args.ngram_tokens, sampling=sampling,
                         corpus=args.corpus)
        request = replace(request, tree=plan)
        runs["bita"] = collect("bita", loaded, stream_bita(loaded, adapter, request))
        report.update(adapter=adapter_name, drafts=args.drafts, tree=plan.spec, tree_reason=plan.reason)
    if args.mode in ("ar", "both"):
        runs["ar"] = collect("ar", loaded, stream_ar(loaded, request))
    if args.mode in ("hf", "both"):
        with loaded.runtime.stock():
            runs["hf"] = run_hf(loaded, prompt_ids, args.max_new_tokens, stops, sampling=sampling)
    main_run = next(iter(runs.values()))
    report.update(text=main_run.text, new_tokens=len(main_run.tokens), finish=main_run.finish,
                  forward_passes=main_run.forward_passes, mean_accepted=main_run.mean_accepted,
                  **{f"{method}_tokens_per_s": run.tokens_per_s for method, run in runs.items()})
    if not sampling.greedy:
        report.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                      seed=sampling.seed)
    if args.json:  # both our loops recorded verdicts, so their timings compare like for like
        decode = partial(loaded.tokenizer.decode, skip_special_tokens=False)
        report.update(method=main_run.method, max_new_tokens=args.max_new_tokens, sampling=sampling.describe(),
                      tokens=main_run.tokens, passes=[record_json(r, decode) for r in main_run.steps])
    if len(runs) == 3:
        report.update(identity(loaded, prompt_ids, runs, sampling.greedy))
    if kept:  # BiTA's, and our AR loop's beside it on the page
        saved = [saved_run(runs[method], loaded, request, adapter, adapter_name) for method in METHODS
                 if method in runs]
        report.update(write_decoding(saved[0], args.save, args.html, *saved[1:]))
    if args.force:
        if "bita" not in runs:
            raise BitaError("--force branches BiTA's answer: use --mode bita or both")
        record = BranchRecord(prompt_ids, runs["bita"].tokens, *forced(args.force), report["adapter"], args.tree,
                              args.drafts, args.max_new_tokens, sampling.temperature, sampling.top_p, sampling.top_k,
                              None if sampling.greedy else sampling.seed)
        branch = replay(loaded, record)
        report.update(branch_text=branch.text, branch_record=asdict(record))
    return report


def write_decoding(saved: SavedDecoding, json_path: Path | None, html_path: Path | None,
                   beside: SavedDecoding | None = None) -> dict:
    """``saved`` written as JSON to ``json_path`` and as its playback page to ``html_path``, with ``beside`` played
    beside it there (each where given); the report's lines naming the files; BitaError where one cannot be written."""
    written = {}
    if json_path:
        written["saved"] = written_file(json_path, saved.to_json())
    if html_path:
        from viz.playback import playback_html

        written["html"] = written_file(html_path, playback_html(saved, beside))
    return written


def written_file(path: Path, text: str) -> str:
    """``text`` written to ``path``; its name, or BitaError where it cannot be written."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise BitaError(f"cannot write {path}: {error}") from None
    return str(path)


def run_playback(args: argparse.Namespace) -> dict:
    """The playback page of a saved decoding (and of another beside it), each checked as it is read; the report:
    the first one's text, each one's passes, the page."""
    saved = read_saved(args.saved)
    beside = read_saved(args.beside) if args.beside else None
    passes = {"forward_passes": len(saved.steps)} | ({"beside_forward_passes": len(beside.steps)} if beside else {})
    return {"text": saved.text, **passes, **write_decoding(saved, None, args.html, beside)}


def run_replay(args: argparse.Namespace) -> dict:
    """The branch of a replay record, decoded again."""
    try:
        record = BranchRecord.from_json(args.record.read_text())
    except OSError as error:
        raise BitaError(f"cannot read the replay record: {error}") from None
    loaded = load_from(args)
    branch = replay(loaded, record)
    return {"text": branch.text, "model": loaded.name, "position": record.position, "token": record.token,
            "new_tokens": len(branch.tokens), "forward_passes": branch.forward_passes}


def identity(loaded, prompt_ids: list[int], runs: dict, greedy: bool) -> dict:
    """BiTA against our AR loop (same arithmetic: the identity the method claims) and against HF generate
    (transformers' kernels: agreement), with speedups; where greedy BiTA parts from either, the first
    differing token and the reference's top-2 logit gap there (a near tie within rounding, or a bug)."""
    bita = runs["bita"]
    found = {"speedup": bita.tokens_per_s / runs["ar"].tokens_per_s,
             "speedup_vs_hf": bita.tokens_per_s / runs["hf"].tokens_per_s}
    for method, prefix in (("ar", ""), ("hf", "hf_")):
        reference = runs[method].tokens
        found[f"identical_to_{method}"] = bita.tokens == reference
        if bita.tokens == reference:
            continue
        parted = divergence(loaded, prompt_ids, bita.tokens, reference) if greedy else None
        found[f"{prefix}first_difference"] = parted.position if parted else shared_prefix(bita.tokens, reference)
        if parted:  # in fp32 a bug; in bf16/fp16 a near tie when the gap is within rounding
            found.update({f"{prefix}reference_top2_gap": round(parted.gap, 4), f"{prefix}near_tie": parted.near_tie})
    return found
