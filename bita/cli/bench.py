"""``python -m bita bench | pass-cost``: BiTA against the baselines on a prompt suite, and the cost
of one pass per tree shape. These two draw figures (viz) on request."""

from __future__ import annotations

import argparse
import json
import logging

from ..errors import BitaError
from ..plan.tree_plan import plan_tree
from .arguments import (ADAPTER_HELP, add_draft_arguments, add_model_arguments, add_sampling_arguments,
                        add_weights_argument, load_from, sampling_from)

logger = logging.getLogger(__name__)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``bench`` and ``pass-cost``."""
    bench = commands.add_parser("bench", help="BiTA vs HF generate, our AR loop and HF prompt lookup on a prompt suite")
    add_model_arguments(bench)
    add_weights_argument(bench)
    bench.add_argument("--suite", default="mt-bench", help="mt-bench (first turns), humaneval, long-context "
                       "(summarise 450-1100-word texts) or all (mt-bench and humaneval)")
    bench.add_argument("--prompts", help="JSONL: one {prompt | messages, id?, category?} per line (replaces --suite)")
    bench.add_argument("--limit", type=int, help="first N prompts (of each suite for 'all')")
    bench.add_argument("--per-category", type=int, help="first N prompts of each category")
    bench.add_argument("--max-new-tokens", type=int, default=128)
    bench.add_argument("--adapter", help=ADAPTER_HELP)
    add_draft_arguments(bench)
    add_sampling_arguments(bench)
    bench.add_argument("--methods", default="hf,ar,pld,bita", help="comma list from hf (HF generate, stock kernels), "
                       "hf32 (HF generate in float32, a float32 copy where the model is not: agreement and "
                       "speed against what a CPU user runs by default), hfs (HF generate with a static cache, "
                       "which it compiles on a GPU), ar (our AR loop, "
                       "loaded kernels), arf (our AR loop at its fastest shapes, where row-invariant passes "
                       "cost it speed: a GPU), pld (HF prompt lookup, stock kernels), hfc (BiTA inside HF generate: "
                       "custom_generate), llamacpp (llama.cpp on the same weights and precision, where "
                       "llama-cpp-python is installed), bita; bita and a baseline")
    bench.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    bench.add_argument("--json-out", help="write the full report (every prompt, every method) as JSON here")
    bench.add_argument("--markdown", help="write the tables as Markdown here")
    bench.add_argument("--html", help="write Plotly figures here: speedup per category, tau histogram, and "
                                      "cost per pass against tree size (measured after the bench)")
    bench.set_defaults(run=run_bench)
    cost = commands.add_parser("pass-cost", help="measure the wall time of one pass for each tree shape")
    add_model_arguments(cost)
    add_weights_argument(cost)
    cost.add_argument("--adapter", help=ADAPTER_HELP)
    cost.add_argument("--trees", nargs="*", help="tree specs (default: a range of shapes)")
    cost.add_argument("--context", type=int, default=300, help="cached context length")
    cost.add_argument("--repeats", type=int, default=10, help="timed passes per tree shape (the median is kept)")
    cost.add_argument("--json", action="store_true", help="print one JSON object")
    cost.add_argument("--html", help="write a Plotly figure of cost per pass against rows here")
    cost.set_defaults(run=run_pass_cost)


def run_bench(args: argparse.Namespace) -> dict:
    from pathlib import Path

    from ..bench.report import check_methods
    from ..bench.report import run_bench as bench
    from ..bench.suites import load_prompts
    from ..model.shipped import resolve_adapter
    from ..runtime.device import describe_device

    methods = check_methods(tuple(m.strip() for m in args.methods.split(",") if m.strip()))
    sampling = sampling_from(args)
    prompts = load_prompts(args.suite, args.prompts, args.limit, args.per_category)
    loaded = load_from(args)
    adapter, adapter_name = resolve_adapter(loaded, args.adapter)
    plan = plan_tree(loaded, adapter, args.tree, args.drafts, args.ngram_tokens, sampling=sampling,
                     corpus=args.corpus)
    logger.info("tree: %s", plan.reason)
    setup = {"model": loaded.name, "device": describe_device(loaded.device), "dtype": str(loaded.model.dtype),
             "exact": loaded.exact, "runtime": loaded.runtime.describe(), "runtime_key": loaded.runtime.key,
             "adapter": adapter_name, "drafts": args.drafts,
             "tree": plan.spec, "tree_reason": plan.reason, "suite": args.prompts or args.suite}
    def write(report) -> None:  # after every prompt: a run cut short keeps what it measured
        for path, text in ((args.json_out, lambda: json.dumps(report.to_json(), indent=1)),
                           (args.markdown, report.to_markdown)):
            if path:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(text())

    report = bench(loaded, adapter, plan, prompts, args.max_new_tokens, methods, setup, on_result=write,
                   sampling=sampling)
    data, markdown = report.to_json(), report.to_markdown()
    if args.html:
        from viz.bench import pass_cost_figure, speedup_by_category, tau_histogram, write_html

        from ..plan.costs import COST_TREES, measure_pass_costs

        costs = measure_pass_costs(loaded, adapter, COST_TREES, repeats=6)
        write_html([speedup_by_category(data), tau_histogram(data),
                    pass_cost_figure(costs[1:], ar_seconds=costs[0]["seconds"])], args.html)
    return {**report.summary(), "text": markdown}


def run_pass_cost(args: argparse.Namespace) -> dict:
    from ..model.shipped import resolve_adapter
    from ..plan.costs import COST_TREES, measure_pass_costs

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
