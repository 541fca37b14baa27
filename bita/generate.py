"""What a user asks for (``Request``), validated generation streams for it, BiTA's and our AR loop's, and
draining one into a timed RunResult: what the CLI, the benchmarks and the app call."""

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
from .plan.observed_costs import observed
from .plan.tree_plan import DEFAULT_NGRAM_TOKENS, DEFAULT_TREE, TreePlan, plan_tree
from .runtime.device import timed
from .runtime.threads import load_aware

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


@dataclass(frozen=True)
class Request:
    """What a user asks ``stream_bita`` (or ``stream_ar``) for; ``dataclasses.replace`` varies one field.
    Checked when ``stream_bita`` or ``stream_ar`` is called: ``BitaError`` for an empty prompt, an absurd
    length or setting.

    - ``prompt_ids``: the prompt's token ids (``encode_chat``).
    - ``max_new_tokens``: at most this many new tokens (1 to MAX_NEW_TOKENS_LIMIT, within the context).
    - ``tree``: a tree spec (``auto``: the tree that pays here, bita/plan/tree_plan.py), a DraftTree, or a
      TreePlan (used as planned: ``drafts``, ``ngram_tokens`` and ``corpus`` are then not read).
    - ``drafts``: who drafts, one of DRAFT_OPTIONS (bita/drafts/sources.py).
    - ``ngram_tokens``: the longest n-gram chain (and corpus chain) a pass drafts.
    - ``corpus``: with ``drafts="all"``, a file of texts for the corpus chain (None: the adapter's training
      answers).
    - ``sampling``: a Sampling, or None for greedy; BiTA's sampled tokens are sampled AR's with the same
      seed and settings.
    - ``stop_strings``: texts that end the answer (the token completing one is kept).
    - ``stop``: when to stop, in place of the model's own stop at ``max_new_tokens`` and ``stop_strings``
      (bita/hf.py stops where HF ``generate`` would); a StopCondition counts one run's tokens: one per run.
    - ``record_attention``: records carry each pass's attention mask (``stream_bita`` only).
    - ``record_verdicts``: records carry what the verifier said of each token (bita/decode/explain.py;
      off in runs timed against each other).
    """

    prompt_ids: list[int]
    max_new_tokens: int
    tree: str | DraftTree | TreePlan = DEFAULT_TREE
    drafts: str = DEFAULT_DRAFTS
    ngram_tokens: int = DEFAULT_NGRAM_TOKENS
    corpus: str | None = None
    sampling: Sampling | None = None
    stop_strings: tuple[str, ...] = ()
    stop: StopCondition | None = None
    record_attention: bool = False
    record_verdicts: bool = False


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


def stream_bita(loaded: LoadedModel, adapter: BitaAdapter, request: Request) -> Iterator[StepRecord]:
    """Validated BiTA step stream for ``request`` (AR records, ``stream_ar``'s, when its plan is plain AR):
    the tree planned (``plan_tree``: nothing timed or forecast where the machine profile and stored forecasts have
    what it needs) and validated against ``adapter``, the length against the context."""
    sampling = check_sampling(request.sampling)
    plan = plan_tree(loaded, adapter, request.tree, request.drafts, request.ngram_tokens, sampling=sampling,
                     corpus=request.corpus, forecast=False)
    if plan.tree is None:
        return stream_ar(loaded, request)
    validate_request(loaded, request.prompt_ids, request.max_new_tokens, extra_rows=plan.extra_rows)
    decoding = Decoding(loaded.runtime, adapter, plan.tree, sampling, plan.chains,
                        record_attention=request.record_attention, record_verdicts=request.record_verdicts)
    steps = on_free_cores(loaded, bita_steps(decoding, request.prompt_ids, stop_of(loaded, request)))
    recording = request.record_attention or request.record_verdicts  # host work the pass-cost table does not price
    return steps if recording else observed(loaded, adapter, sampling, steps)


def stream_ar(loaded: LoadedModel, request: Request) -> Iterator[StepRecord]:
    """Validated AR step stream for ``request``, greedy or sampled; it reads no draft setting (``tree``,
    ``drafts``, ``ngram_tokens``, ``corpus``) nor ``record_attention``."""
    sampling = check_sampling(request.sampling)
    validate_request(loaded, request.prompt_ids, request.max_new_tokens)
    return on_free_cores(loaded, ar_steps(loaded.runtime, request.prompt_ids, stop_of(loaded, request), sampling,
                                          request.record_verdicts))


def on_free_cores(loaded: LoadedModel, steps: Iterator[StepRecord]) -> Iterator[StepRecord]:
    """``steps`` run on one thread fewer for each core another process keeps busy (runtime/threads.py: where the
    passes are native, whose rows are the same bits on any thread count), the configured count put back when they
    end or the stream is closed."""
    with load_aware(loaded.runtime.native_passes):
        yield from steps


def stop_of(loaded: LoadedModel, request: Request) -> StopCondition:
    """``request.stop``, else the model's own stop at ``request``'s length and stop strings."""
    return request.stop or make_stop(loaded, request.max_new_tokens, request.stop_strings)


def collect(method: str, loaded: LoadedModel, steps: Iterator[StepRecord]) -> RunResult:
    """Drain a step stream into a RunResult (seconds: wall time of the whole run)."""
    records, seconds = timed(loaded.device, lambda: list(steps))
    tokens = [t for r in records for t in r.emitted]
    return RunResult(method, tokens, loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds,
                     records[-1].finish if records else None, records)
