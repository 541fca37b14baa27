"""Validated generation streams, BiTA and our AR loop, and draining one into a timed RunResult:
what the CLI, the benchmarks and the app call."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .decode.autoregressive import ar_steps
from .decode.records import StepRecord
from .decode.sampling import GREEDY, Sampling
from .decode.step import Decoding, bita_steps
from .decode.stopping import StopCondition, make_stop
from .drafts.sources import DEFAULT_DRAFTS
from .drafts.tree import DraftTree
from .errors import BitaError
from .model.adapter import BitaAdapter
from .model.loading import LoadedModel
from .plan.tree_plan import DEFAULT_NGRAM_TOKENS, TreePlan, plan_tree
from .runtime.device import timed

MAX_NEW_TOKENS_LIMIT = 8192


@dataclass
class RunResult:
    """One finished generation. ``steps`` is empty for HF generate (it exposes no passes)."""

    method: str  # "bita" | "ar" | "hf" | "hfs" | "pld"
    tokens: list[int]
    text: str
    seconds: float
    finish: str | None
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def forward_passes(self) -> int:
        return len(self.steps) if self.steps else len(self.tokens)

    @property
    def mean_accepted(self) -> float:
        return len(self.tokens) / max(1, self.forward_passes)

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else 0.0

    @property
    def pass_seconds(self) -> float:
        """Of ``seconds``, the model's passes and LM head alone (0 without steps); the rest is host work."""
        return sum(step.pass_seconds for step in self.steps)


def validate_request(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
                     extra_rows: int = 0) -> None:
    """Refuse empty prompts, absurd lengths and requests that would run past the context."""
    if not prompt_ids:
        raise BitaError("the prompt is empty")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1 or max_new_tokens > MAX_NEW_TOKENS_LIMIT:
        raise BitaError(f"max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS_LIMIT}, not {max_new_tokens!r}")
    limit = loaded.context_limit
    if len(prompt_ids) + extra_rows >= limit:
        raise BitaError(f"the prompt has {len(prompt_ids)} tokens; this model's context holds {limit}")
    if len(prompt_ids) + max_new_tokens + extra_rows > limit:
        raise BitaError(f"prompt ({len(prompt_ids)} tokens) plus max_new_tokens ({max_new_tokens}) runs past "
                        f"this model's context of {limit} tokens; ask for at most "
                        f"{limit - len(prompt_ids) - extra_rows} new tokens")


def check_sampling(sampling: Sampling | None) -> Sampling:
    """None means greedy; anything but a Sampling (itself validated when made) is refused."""
    if sampling is None:
        return GREEDY
    if not isinstance(sampling, Sampling):
        raise BitaError(f"sampling must be a bita.Sampling or None (greedy), not {sampling!r}")
    return sampling


def stream_bita(loaded: LoadedModel, adapter: BitaAdapter, prompt_ids: list[int], max_new_tokens: int,
                tree: str | DraftTree | TreePlan, stop_strings: tuple[str, ...] = (),
                record_attention: bool = False, drafts: str = DEFAULT_DRAFTS,
                ngram_tokens: int = DEFAULT_NGRAM_TOKENS, sampling: Sampling | None = None,
                corpus: str | None = None, stop: StopCondition | None = None,
                record_verdicts: bool = False) -> Iterator[StepRecord]:
    """Validated BiTA step stream (AR records when the plan is plain AR); ``sampling``: None
    (greedy) or a Sampling: the tokens sampled AR (``stream_ar``) draws with the same seed and settings;
    ``corpus``: the corpus chain's texts with ``drafts`` all (default: the adapter's training answers);
    ``stop``: when to stop, in place of the model's own (``make_stop`` with ``stop_strings``; bita/hf.py
    stops where HF ``generate`` would); ``record_verdicts``: records carry what the verifier said of each
    token (bita/decode/explain.py; off in runs timed against each other)."""
    sampling = check_sampling(sampling)
    plan = plan_tree(loaded, adapter, tree, drafts, ngram_tokens, sampling=sampling, corpus=corpus)
    if plan.tree is None:
        return stream_ar(loaded, prompt_ids, max_new_tokens, stop_strings, sampling, stop, record_verdicts)
    validate_request(loaded, prompt_ids, max_new_tokens, extra_rows=plan.extra_rows)
    decoding = Decoding(loaded.runtime, adapter, plan.tree, sampling, plan.chains, record_attention=record_attention,
                        record_verdicts=record_verdicts)
    return bita_steps(decoding, prompt_ids, stop or make_stop(loaded, max_new_tokens, stop_strings))


def stream_ar(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
              stop_strings: tuple[str, ...] = (), sampling: Sampling | None = None,
              stop: StopCondition | None = None, record_verdicts: bool = False) -> Iterator[StepRecord]:
    """Validated AR step stream, greedy (``sampling`` None) or sampled; ``stop`` and ``record_verdicts`` as in
    stream_bita."""
    sampling = check_sampling(sampling)
    validate_request(loaded, prompt_ids, max_new_tokens)
    return ar_steps(loaded.runtime, prompt_ids, stop or make_stop(loaded, max_new_tokens, stop_strings), sampling,
                    record_verdicts)


def collect(method: str, loaded: LoadedModel, steps: Iterator[StepRecord]) -> RunResult:
    """Drain a step stream into a RunResult (seconds: wall time of the whole run)."""
    records, seconds = timed(loaded.device, lambda: list(steps))
    tokens = [t for r in records for t in r.emitted]
    return RunResult(method, tokens, loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds,
                     records[-1].finish if records else None, records)
