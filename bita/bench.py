"""Side-by-side benchmark: HF ``generate``, our AR loop and BiTA on the same prompts and model.

Per prompt the methods run one after another, each timed alone, in an order that rotates
from prompt to prompt (so no method always runs on a warmer cache); one short warm-up run of
each comes first. Ratios are of totals: tokens/s = all new tokens / all seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from tqdm import tqdm

from .adapter import BitaAdapter
from .errors import BitaError
from .generation import RunResult, TreePlan, collect, run_hf, stream_ar, stream_bita
from .loading import LoadedModel, encode_chat
from .suites import BenchPrompt

METHODS = ("hf", "ar", "bita")
WARMUP_TOKENS = 8


@dataclass
class PromptResult:
    id: str
    category: str
    prompt_tokens: int
    new_tokens: int  # BiTA's (equal to the reference's when identical)
    forward_passes: int  # BiTA's
    identical: bool  # BiTA's tokens == the reference's (HF generate, else our AR loop)
    seconds: dict[str, float] = field(default_factory=dict)  # method -> wall seconds
    tokens: dict[str, int] = field(default_factory=dict)  # method -> new tokens

    @property
    def mean_accepted(self) -> float:
        return self.new_tokens / max(1, self.forward_passes)


def run_method(method: str, loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan,
               prompt_ids: list[int], max_new_tokens: int) -> RunResult:
    if method == "hf":
        return run_hf(loaded, prompt_ids, max_new_tokens)
    if method == "ar":
        return collect("ar", loaded, stream_ar(loaded, prompt_ids, max_new_tokens))
    return collect("bita", loaded, stream_bita(loaded, adapter, prompt_ids, max_new_tokens, plan))


def check_methods(methods: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [m for m in methods if m not in METHODS]
    if unknown or "bita" not in methods or len(methods) < 2:
        raise BitaError(f"methods must include bita and a baseline, from {', '.join(METHODS)}; got {list(methods)}")
    return tuple(m for m in METHODS if m in methods)


def bench_prompt(loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan, prompt: BenchPrompt,
                 max_new_tokens: int, methods: tuple[str, ...], turn: int) -> PromptResult:
    prompt_ids = encode_chat(loaded.tokenizer, list(prompt.messages))
    order = methods[turn % len(methods):] + methods[: turn % len(methods)]
    try:
        runs = {m: run_method(m, loaded, adapter, plan, prompt_ids, max_new_tokens) for m in order}
    except BitaError as error:
        raise BitaError(f"prompt {prompt.id}: {error}") from None
    bita, reference = runs["bita"], runs[baseline_of(methods)]
    return PromptResult(prompt.id, prompt.category, len(prompt_ids), len(bita.tokens), bita.forward_passes,
                        bita.tokens == reference.tokens,
                        {m: r.seconds for m, r in runs.items()}, {m: len(r.tokens) for m, r in runs.items()})


def baseline_of(methods: tuple[str, ...]) -> str:
    """What BiTA is compared with: HF generate when it ran, else our AR loop."""
    return "hf" if "hf" in methods else "ar"


def summarize(results: list[PromptResult], methods: tuple[str, ...]) -> dict:
    """Totals over ``results``: tau (tokens per BiTA pass), tokens/s per method, speedup."""
    rate = {m: sum(r.tokens[m] for r in results) / max(1e-9, sum(r.seconds[m] for r in results)) for m in methods}
    baseline = baseline_of(methods)
    new_tokens, passes = sum(r.new_tokens for r in results), sum(r.forward_passes for r in results)
    summary = {
        "total": len(results),
        "identical": sum(r.identical for r in results),
        "new_tokens": new_tokens,
        "forward_passes": passes,
        "mean_accepted": new_tokens / max(1, passes),
        "bita_tokens_per_s": rate["bita"],
        "ar_tokens_per_s": rate[baseline],
        "speedup": rate["bita"] / max(1e-9, rate[baseline]),
        "baseline": "hf generate" if baseline == "hf" else "ar loop",
    }
    if "ar" in methods and baseline == "hf":
        summary["ar_loop_tokens_per_s"] = rate["ar"]
    return summary


@dataclass
class BenchReport:
    setup: dict  # model, device, dtype, adapter, drafts, tree, tree_reason, max_new_tokens, methods
    prompts: list[PromptResult]

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self.setup["methods"])

    def summary(self) -> dict:
        return {**summarize(self.prompts, self.methods), "device": self.setup["device"],
                "drafts": self.setup["drafts"], "tree": self.setup["tree"]}

    def by_category(self) -> dict[str, dict]:
        categories = sorted({r.category for r in self.prompts})
        return {c: summarize([r for r in self.prompts if r.category == c], self.methods) for c in categories}

    def to_json(self) -> dict:
        return {"setup": self.setup, "summary": self.summary(), "categories": self.by_category(),
                "prompts": [{**asdict(r), "mean_accepted": r.mean_accepted} for r in self.prompts]}

    def to_markdown(self) -> str:
        setup = self.setup
        lines = [f"Model {setup['model']} on {setup['device']} ({setup['dtype']}), adapter {setup['adapter']}, "
                 f"drafts {setup['drafts']}, tree {setup['tree']}, max {setup['max_new_tokens']} new tokens; "
                 f"speedup = BiTA tok/s / {self.summary()['baseline']} tok/s.", "",
                 f"Tree choice: {setup.get('tree_reason', setup['tree'])}.", "",
                 "| category | prompts | tau | AR tok/s | BiTA tok/s | speedup | identical |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for name, s in [*self.by_category().items(), ("**all**", self.summary())]:
            lines.append(f"| {name} | {s['total']} | {s['mean_accepted']:.2f} | {s['ar_tokens_per_s']:.1f} | "
                         f"{s['bita_tokens_per_s']:.1f} | {s['speedup']:.2f}x | {s['identical']}/{s['total']} |")
        return "\n".join(lines) + "\n"


def run_bench(loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan, prompts: list[BenchPrompt],
              max_new_tokens: int, methods: tuple[str, ...], setup: dict,
              on_result: Callable[[PromptResult], None] | None = None) -> BenchReport:
    """Warm up, then benchmark every prompt with a progress bar showing running tau and speedup."""
    methods = check_methods(methods)
    if not prompts:
        raise BitaError("no prompts to benchmark")
    warm_ids = encode_chat(loaded.tokenizer, list(prompts[0].messages))
    for method in methods:
        run_method(method, loaded, adapter, plan, warm_ids, WARMUP_TOKENS)
    results: list[PromptResult] = []
    bar = tqdm(prompts, desc="bench", unit="prompt")
    for turn, prompt in enumerate(bar):
        results.append(bench_prompt(loaded, adapter, plan, prompt, max_new_tokens, methods, turn))
        running = summarize(results, methods)
        bar.set_postfix(tau=f"{running['mean_accepted']:.2f}", speedup=f"{running['speedup']:.2f}x",
                        identical=f"{running['identical']}/{running['total']}")
        if on_result:
            on_result(results[-1])
    return BenchReport({**setup, "methods": list(methods), "max_new_tokens": max_new_tokens}, results)
