"""Side-by-side benchmark: BiTA against HF ``generate``, our AR loop and HF prompt lookup decoding.

Methods: ``hf``, HF ``generate`` on the stock kernels (what a user runs today); ``ar``, our AR
loop on the loaded model's runtime (its measured kernel plan and forward where they apply: the fair comparison);
``arf``, our AR loop at its fastest shapes where the runtime's row-invariant passes cost an AR pass speed (a
GPU: runtime.py ``fastest``; left out with one line elsewhere, where it would be ``ar`` again);
``pld``, HF ``generate`` with prompt lookup decoding on the stock kernels (a draft-free peer,
``PLD_TOKENS`` proposed tokens a pass); ``hfc``, BiTA inside HF ``generate`` (``custom_generate``,
bita/hf.py) on the loaded model's kernels: what ``generate`` adds; ``llamacpp``, llama.cpp decoding the same
weights in the same precision where llama-cpp-python is installed (llamacpp.py; left out with one line where
it cannot run); ``bita`` on the loaded model's kernels.

Per prompt the methods run one after another, each timed alone, in an order that rotates
from prompt to prompt (so no method always runs on a warmer cache); a warm-up run of each comes first,
on the longest prompt at the full length, so every cache buffer a timed run takes is already as large as it
needs and its CUDA graphs recorded (a GPU's first BiTA request otherwise records them again in its timed run:
benchmarks/results/h200/2026-11-28-gpu-check). Ratios are of totals: tokens/s = all new tokens / all seconds.

Sampled (a ``Sampling`` with temperature > 0), every method and prompt starts from the same
seed, and identity is checked as for greedy: BiTA races each position against the vector our AR
loop draws there (bita/decode/verify.py), so it emits our AR loop's tokens; HF ``generate`` draws
the same numbers on the CPU, HF prompt lookup draws differently.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from tqdm import tqdm

from ..decode.sampling import GREEDY, Sampling
from ..errors import BitaError
from ..generate import Request, RunResult, collect, stream_ar, stream_bita
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel, encode_chat
from ..plan.tree_plan import TreePlan
from .baselines import float32_twin, run_custom_generate, run_hf
from .divergence import Divergence, divergence
from .llamacpp import absent_because, run_llamacpp
from .suites import BenchPrompt

METHODS = ("hf", "hf32", "hfs", "ar", "arf", "pld", "hfc", "llamacpp", "bita")
BASELINES = METHODS[:-1]
LABELS = {"hf": "HF generate", "hf32": "HF generate fp32", "hfs": "HF generate, static cache", "ar": "our AR loop",
          "arf": "our AR loop, fastest shapes",
          "pld": "HF prompt lookup", "hfc": "BiTA in HF generate", "llamacpp": "llama.cpp", "bita": "BiTA"}
# Proposed tokens per prompt-lookup pass. HF's own default is 10; on a 2-core CPU with stock
# kernels an 11-row pass costs ~2x a 1-row one, so the peer gets the length that suits it here.
PLD_TOKENS = 4
logger = logging.getLogger(__name__)


@dataclass
class PromptResult:
    id: str
    category: str
    prompt_tokens: int
    new_tokens: int  # BiTA's (equal to the reference's when identical)
    forward_passes: int  # BiTA's
    identical: bool | None  # BiTA's tokens == the reference's (see reference_of); None only in reports from
    #                         before sampled runs were checked
    seconds: dict[str, float] = field(default_factory=dict)  # method -> wall seconds
    pass_seconds: dict[str, float] = field(default_factory=dict)  # method with steps -> its passes' seconds
    passes: dict[str, int] = field(default_factory=dict)  # method with steps -> its forward passes
    tokens: dict[str, int] = field(default_factory=dict)  # method -> new tokens
    same_as_bita: dict[str, bool] = field(default_factory=dict)  # baseline -> its tokens equal BiTA's
    accepted_by_source: dict[str, int] = field(default_factory=dict)  # BiTA's accepted drafts by who proposed them
    divergence: dict | None = None  # greedy and not identical: where BiTA parts from the reference (divergence.py)
    divergence_fp32: dict | None = None  # greedy, hf32 ran and differs: where BiTA parts from HF generate in fp32

    @property
    def mean_accepted(self) -> float:
        return self.new_tokens / max(1, self.forward_passes)


def run_method(method: str, loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan,
               prompt_ids: list[int], max_new_tokens: int, sampling: Sampling = GREEDY) -> RunResult:
    if method == "hf32":
        return run_hf(float32_twin(loaded), prompt_ids, max_new_tokens, sampling=sampling)
    if method in ("hf", "hfs", "pld"):
        lookup = PLD_TOKENS if method == "pld" else None
        with loaded.runtime.stock():
            return run_hf(loaded, prompt_ids, max_new_tokens, prompt_lookup_tokens=lookup, sampling=sampling,
                          static_cache=method == "hfs")
    if method == "hfc":
        return run_custom_generate(loaded, adapter, plan, prompt_ids, max_new_tokens, sampling)
    if method == "llamacpp":
        return run_llamacpp(loaded, prompt_ids, max_new_tokens, sampling)
    request = Request(prompt_ids, max_new_tokens, plan, sampling=sampling)
    if method in ("ar", "arf"):
        runner = replace(loaded, runtime=loaded.runtime.fastest()) if method == "arf" else loaded
        return collect(method, runner, stream_ar(runner, request))
    return collect("bita", loaded, stream_bita(loaded, adapter, request))


def runnable(methods: tuple[str, ...], loaded: LoadedModel) -> tuple[str, ...]:
    """``methods`` without llama.cpp where it cannot run ``loaded`` here, and without ``arf`` where it would
    run ``ar`` again (the runtime is at its fastest shapes), saying why in one line each."""
    absent = {"llamacpp": absent_because(loaded) if "llamacpp" in methods else None,
              "arf": "our AR loop runs at its fastest shapes already" if loaded.runtime.fastest() is loaded.runtime
              else None}
    for method, why in absent.items():
        if method in methods and why:
            logger.warning("the bench runs without %s: %s", LABELS[method], why)
    return tuple(m for m in methods if not absent.get(m))


def check_methods(methods: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [m for m in methods if m not in METHODS]
    if unknown or "bita" not in methods or len(methods) < 2:
        raise BitaError(f"methods must include bita and a baseline, from {', '.join(METHODS)}; got {list(methods)}")
    return tuple(m for m in METHODS if m in methods)


def bench_prompt(loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan, prompt: BenchPrompt,
                 max_new_tokens: int, methods: tuple[str, ...], turn: int,
                 sampling: Sampling = GREEDY) -> PromptResult:
    prompt_ids = encode_chat(loaded.tokenizer, list(prompt.messages))
    order = methods[turn % len(methods):] + methods[: turn % len(methods)]
    try:
        runs = {m: run_method(m, loaded, adapter, plan, prompt_ids, max_new_tokens, sampling) for m in order}
    except BitaError as error:
        raise BitaError(f"prompt {prompt.id}: {error}") from None
    bita = runs["bita"]
    same = {m: runs[m].tokens == bita.tokens for m in methods if m != "bita"}
    sources = Counter(s for record in bita.steps for s in record.emitted_sources() if s is not None)
    parted = (divergence(loaded, prompt_ids, bita.tokens, runs[reference_of(methods)].tokens)
              if sampling.greedy else None)
    # against fp32: the fp32 pass's top-2 gap, judged against the rounding of the loaded dtype
    parted_fp32 = (divergence(float32_twin(loaded), prompt_ids, bita.tokens, runs["hf32"].tokens,
                              rounding_dtype=loaded.model.dtype) if sampling.greedy and "hf32" in runs else None)
    return PromptResult(prompt.id, prompt.category, len(prompt_ids), len(bita.tokens), bita.forward_passes,
                        same.get(reference_of(methods)), {m: r.seconds for m, r in runs.items()},
                        {m: r.pass_seconds for m, r in runs.items() if r.steps},
                        {m: r.forward_passes for m, r in runs.items() if r.steps},
                        {m: len(r.tokens) for m, r in runs.items()}, same, dict(sources), _as_dict(parted),
                        _as_dict(parted_fp32))


def _as_dict(parted: Divergence | None) -> dict | None:
    return {**asdict(parted), "near_tie": parted.near_tie} if parted else None


def reference_of(methods: tuple[str, ...]) -> str:
    """Whose tokens BiTA must equal: our AR loop (same model, same kernels: the lossless
    property) when it ran, else HF generate, else prompt lookup."""
    return next(m for m in ("ar", "hf", "hfs", "pld") if m in methods)


def headline_of(methods: tuple[str, ...]) -> str:
    """The baseline of the headline speedup: HF generate when it ran (what users run today)."""
    return next(m for m in BASELINES if m in methods)


def spread(ratios: list[float]) -> tuple[float, float]:
    """25th and 75th percentile of ``ratios`` (the one value twice for a single prompt)."""
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    quartiles = statistics.quantiles(ratios, n=4)
    return quartiles[0], quartiles[2]


def tokens_per_s(results: list[PromptResult], method: str) -> float:
    """All new tokens of ``method`` over ``results`` / all its seconds."""
    return sum(r.tokens[method] for r in results) / max(1e-9, sum(r.seconds[method] for r in results))


def ms_per_step(results: list[PromptResult], method: str) -> dict[str, float] | None:
    """``method``'s mean milliseconds a step over ``results``: its pass and LM head (``pass``), and the rest of
    its wall time (``host``: drafts, tree, verification walk, cache compaction, stopping, Python); None for a
    method without steps (HF generate, llama.cpp) or from a report before steps were timed."""
    timed = [r for r in results if method in r.passes]
    passes = sum(r.passes[method] for r in timed)
    if not timed or not passes:
        return None
    pass_seconds = sum(r.pass_seconds[method] for r in timed)
    return {"pass": 1000 * pass_seconds / passes, "host": 1000 * (sum(r.seconds[method] for r in timed)
                                                               - pass_seconds) / passes}


def summarize(results: list[PromptResult], methods: tuple[str, ...]) -> dict:
    """Totals over ``results``: tau (tokens per BiTA pass), tokens/s per method, BiTA's speedup
    over each baseline (ratio of totals) with its spread over prompts (25th-75th percentile of
    the per-prompt ratios), and how many prompts each baseline's tokens equal BiTA's (None
    and {} when sampled: no identity is checked)."""
    rate = {m: tokens_per_s(results, m) for m in methods}
    baselines = [m for m in BASELINES if m in methods]
    new_tokens, passes = sum(r.new_tokens for r in results), sum(r.forward_passes for r in results)
    sampled = any(r.identical is None for r in results)
    return {
        "total": len(results),
        "identical": None if sampled else sum(r.identical for r in results),
        "reference": LABELS[reference_of(methods)],
        "same_as_bita": {} if sampled else {m: sum(r.same_as_bita[m] for r in results) for m in baselines},
        "new_tokens": new_tokens,
        "forward_passes": passes,
        "mean_accepted": new_tokens / max(1, passes),
        "accepted_by_source": dict(sum((Counter(r.accepted_by_source) for r in results), Counter())),
        "tokens_per_s": rate,
        "speedup_vs": {m: rate["bita"] / max(1e-9, rate[m]) for m in baselines},
        "speedup_spread": {m: spread([tokens_per_s([r], "bita") / max(1e-9, tokens_per_s([r], m)) for r in results])
                           for m in baselines},
        "ms_per_step": {m: step for m in methods if (step := ms_per_step(results, m)) is not None},
        "speedup": rate["bita"] / max(1e-9, rate[headline_of(methods)]),
        "baseline": LABELS[headline_of(methods)],
    }


@dataclass
class BenchReport:
    setup: dict  # model, device, dtype, exact, runtime (described), runtime_key, adapter, drafts, tree, tree_reason,
    #              suite, max_new_tokens, methods, sampling (temperature, top_p, top_k, seed; temperature 0: greedy)
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
        setup, summary = self.setup, self.summary()
        baselines = [m for m in BASELINES if m in self.methods]
        checked = summary["identical"] is not None
        runtime = setup.get("runtime", f"kernels {setup.get('kernels')}")  # reports before the runtime: its kernels
        lines = [f"Model {setup['model']} on {setup['device']} ({setup['dtype']}; {runtime}), "
                 f"adapter {setup['adapter']}, drafts {setup['drafts']}, tree {setup['tree']}, "
                 f"max {setup['max_new_tokens']} new tokens. "
                 f"HF generate and prompt lookup ({PLD_TOKENS} tokens a pass) run on the stock kernels, our AR "
                 "loop and BiTA on the loaded model's; vs X = BiTA tok/s / X tok/s over all tokens (25th-75th "
                 "percentile of the per-prompt ratios).", "",
                 f"Tree choice: {setup.get('tree_reason', setup['tree'])}.", "",
                 "| category | prompts | tau | " + " | ".join(f"{LABELS[m]} tok/s" for m in self.methods)
                 + " | " + " | ".join(f"vs {LABELS[m]}" for m in baselines)
                 + (f" | identical to {summary['reference']} |" if checked else " |"),
                 "|---|" + "---:|" * (2 + checked + len(self.methods) + len(baselines))]
        for name, s in [*self.by_category().items(), ("**all**", summary)]:
            lines.append(f"| {name} | {s['total']} | {s['mean_accepted']:.2f} | "
                         + " | ".join(f"{s['tokens_per_s'][m]:.1f}" for m in self.methods) + " | "
                         + " | ".join(f"{s['speedup_vs'][m]:.2f}x ({s['speedup_spread'][m][0]:.2f}-"
                                      f"{s['speedup_spread'][m][1]:.2f})" for m in baselines)
                         + (f" | {s['identical']}/{s['total']} |" if checked else " |"))
        sources = ", ".join(f"{name} {count}" for name, count in sorted(summary["accepted_by_source"].items(),
                                                                        key=lambda item: -item[1]))
        steps = "; ".join(f"{LABELS[m]} {step['pass']:.2f} + {step['host']:.2f}"
                          for m, step in summary.get("ms_per_step", {}).items())
        return "\n".join([*lines, "", self.identity_note(summary), "",
                          f"Accepted drafts by who proposed them: {sources or 'none'}."]
                          + ([f"Milliseconds a step, pass and LM head + host work: {steps}."] if steps else [])) + "\n"

    def identity_note(self, summary: dict) -> str:
        if summary["identical"] is None:
            return (f"Sampled ({Sampling(**self.setup['sampling']).describe()}; every method and prompt starts from "
                    "this seed), in a report from before sampled runs were checked: no identity.")
        same = ", ".join(f"{LABELS[m]} {n}/{summary['total']}" for m, n in summary["same_as_bita"].items())
        parted = [r.divergence for r in self.prompts if r.divergence]
        note = f"Prompts whose tokens equal BiTA's: {same}."
        if self.setup.get("sampling", {}).get("temperature", 0):
            note = (f"Sampled ({Sampling(**self.setup['sampling']).describe()}; every method and prompt starts from "
                    "this seed): BiTA races each position against the vector our AR loop draws there, so it emits "
                    "our AR loop's tokens; HF generate draws the same numbers on the CPU, HF prompt lookup draws "
                    "differently. " + note)
        if not self.setup.get("exact", self.setup.get("dtype", "torch.float32") == "torch.float32"):
            note += (f" Identity is not guaranteed here ({self.setup['dtype']} or k-bit weights: tree and AR passes "
                     "round differently; fp32 is the lossless mode).")
        if parted:
            note += self.parted_note(parted, summary["reference"], "its")
        parted_fp32 = [r.divergence_fp32 for r in self.prompts if r.divergence_fp32]
        if parted_fp32:
            note += self.parted_note(parted_fp32, LABELS["hf32"],
                                     f"the fp32 pass's (rounding of {self.setup['dtype']})")
        return note

    @staticmethod
    def parted_note(parted: list[dict], reference: str, whose: str) -> str:
        ties = sum(d["near_tie"] for d in parted)
        return (f" {len(parted)} differ from {reference}; at the first difference {whose} top-2 logit gap was within "
                f"rounding (a near tie) for {ties}: "
                + ", ".join(f"token {d['position']} gap {d['gap']:.3g}" for d in parted[:8]) + ".")


def run_bench(loaded: LoadedModel, adapter: BitaAdapter, plan: TreePlan, prompts: list[BenchPrompt],
              max_new_tokens: int, methods: tuple[str, ...], setup: dict,
              on_result: Callable[[BenchReport], None] | None = None, sampling: Sampling = GREEDY) -> BenchReport:
    """Warm up, then benchmark every prompt with a progress bar showing running tau and speedup;
    greedy, or every run sampled with ``sampling`` (each from a fresh generator seeded alike). ``on_result``
    receives the report so far after every prompt (a run cut short keeps what it measured)."""
    methods = check_methods(runnable(methods, loaded))
    if not prompts:
        raise BitaError("no prompts to benchmark")
    warm_ids = max((encode_chat(loaded.tokenizer, list(p.messages)) for p in prompts), key=len)
    for method in methods:
        run_method(method, loaded, adapter, plan, warm_ids, max_new_tokens, sampling)
    setup = {**setup, "methods": list(methods), "max_new_tokens": max_new_tokens, "sampling": asdict(sampling)}
    results: list[PromptResult] = []
    bar = tqdm(prompts, desc="bench", unit="prompt")
    for turn, prompt in enumerate(bar):
        results.append(bench_prompt(loaded, adapter, plan, prompt, max_new_tokens, methods, turn, sampling))
        running = summarize(results, methods)
        identity = {} if running["identical"] is None else {"identical": f"{running['identical']}/{running['total']}"}
        bar.set_postfix(tau=f"{running['mean_accepted']:.2f}", speedup=f"{running['speedup']:.2f}x", **identity)
        if on_result:
            on_result(BenchReport(setup, list(results)))
    return BenchReport(setup, results)
