"""Validated, timed generation runs (BiTA, our AR loop, HF generate) shared by the CLI and the app."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .adapter import BitaAdapter
from .autoregressive import ar_steps, hf_generate
from .autotree import AUTO, auto_tree
from .decoding import bita_steps, device_of, timed
from .errors import BitaError
from .loading import LoadedModel
from .records import StepRecord
from .sampling import GREEDY, Sampling
from .stopping import StopCondition
from .tree import EMPTY_TREE, DraftTree, parse_tree_spec

DEFAULT_TREE = AUTO
MASKS, NGRAM, BOTH = "masks", "ngram", "both"
DRAFTS = (MASKS, NGRAM, BOTH)  # who drafts: the adapter's mask groups, context n-grams, or both in one trie
DEFAULT_DRAFTS = BOTH
DEFAULT_NGRAM_TOKENS = 4
MAX_NGRAM_TOKENS = 16
MAX_NEW_TOKENS_LIMIT = 8192


@dataclass
class RunResult:
    """One finished generation. ``steps`` is empty for HF generate (it exposes no passes)."""

    method: str  # "bita" | "ar" | "hf" | "pld"
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


def resolve_tree(tree: str | DraftTree, adapter: BitaAdapter) -> DraftTree:
    tree = parse_tree_spec(tree) if isinstance(tree, str) else tree
    if tree.depth > adapter.n_masks:
        raise BitaError(f"tree {tree.spec!r} has depth {tree.depth} but the adapter drafts only "
                        f"{adapter.n_masks} tokens per pass")
    return tree


@dataclass(frozen=True)
class TreePlan:
    """What BiTA drafts with. ``tree``: the mask tree (EMPTY_TREE: no mask drafts), or None for
    plain AR passes (nothing drafts); ``ngram_tokens``: length of the n-gram chain added to every
    pass (0: none)."""

    tree: DraftTree | None
    reason: str  # one line for people: what was chosen and why
    ngram_tokens: int = 0

    @property
    def spec(self) -> str:
        if self.tree is None:
            return "ar"
        parts = [self.tree.spec] if self.tree.size else []
        return "+".join(parts + ([f"ngram:{self.ngram_tokens}"] if self.ngram_tokens else []))

    @property
    def extra_rows(self) -> int:
        """How far past the root a pass's positions reach: the deepest candidate, then a mask group."""
        return max(self.tree.depth, self.ngram_tokens) + self.tree.depth + 1


def plan_masks(loaded: LoadedModel, adapter: BitaAdapter, tree: str | DraftTree, drafting: bool = False) -> TreePlan:
    """An explicit tree as given, or for ``auto`` the shape with the highest expected tokens/s
    on this device, or plain AR where none beats it (``drafting``: the best tree even then) or
    the adapter has no acceptance statistics."""
    if tree != AUTO:
        tree = resolve_tree(tree, adapter)
        return TreePlan(tree, f"{tree.spec} (as asked)")
    try:
        choice = auto_tree(loaded, adapter)
    except BitaError as error:
        return TreePlan(None, f"auto: plain AR, since {error}")
    choice = choice.drafting() if drafting else choice
    return TreePlan(choice.tree, choice.describe())


def plan_tree(loaded: LoadedModel, adapter: BitaAdapter, tree: str | DraftTree | TreePlan,
              drafts: str = DEFAULT_DRAFTS, ngram_tokens: int = DEFAULT_NGRAM_TOKENS,
              drafting: bool = False) -> TreePlan:
    """The mask tree (``plan_masks``) and the n-gram chain ``drafts`` asks for.

    ``ngram`` drafts with n-gram chains only (no mask groups; ``tree`` is not used). ``both``
    adds the chain to the mask tree; where ``auto`` finds no mask tree that pays, it drafts
    with the chain alone rather than decoding plain AR: a pass whose n-grams match nothing is
    one row, like an AR pass. The n-gram acceptance is not forecast, so that is not cost-checked.
    """
    if isinstance(tree, TreePlan):
        return tree
    if drafts not in DRAFTS:
        raise BitaError(f"drafts must be one of {', '.join(DRAFTS)}, not {drafts!r}")
    if drafts == MASKS:
        return plan_masks(loaded, adapter, tree, drafting)
    if not isinstance(ngram_tokens, int) or not 1 <= ngram_tokens <= MAX_NGRAM_TOKENS:
        raise BitaError(f"ngram_tokens must be an integer from 1 to {MAX_NGRAM_TOKENS}, not {ngram_tokens!r}")
    chain = f"n-gram chains of up to {ngram_tokens} tokens"
    if drafts == NGRAM:
        unused = "" if tree == AUTO else f"; tree {getattr(tree, 'spec', tree)} not used"
        return TreePlan(EMPTY_TREE, f"ngram:{ngram_tokens}: {chain}, no mask drafts (drafts=ngram){unused}",
                        ngram_tokens)
    masks = plan_masks(loaded, adapter, tree, drafting)
    if masks.tree is None:
        return TreePlan(EMPTY_TREE, f"{masks.reason}; with drafts=both: {chain} alone (their acceptance is "
                                    "not forecast; a pass they do not draft is one row, like AR)", ngram_tokens)
    return TreePlan(masks.tree, f"{masks.reason}, plus {chain} (drafts=both)", ngram_tokens)


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
        raise BitaError(f"sampling must be a bita.sampling.Sampling or None (greedy), not {sampling!r}")
    return sampling


def make_stop(loaded: LoadedModel, max_new_tokens: int, stop_strings: tuple[str, ...] = ()) -> StopCondition:
    return StopCondition(max_new_tokens, loaded.eos_token_ids, stop_strings, loaded.tokenizer)


def stream_bita(loaded: LoadedModel, adapter: BitaAdapter, prompt_ids: list[int], max_new_tokens: int,
                tree: str | DraftTree | TreePlan, stop_strings: tuple[str, ...] = (),
                record_attention: bool = False, drafts: str = DEFAULT_DRAFTS,
                ngram_tokens: int = DEFAULT_NGRAM_TOKENS, sampling: Sampling | None = None) -> Iterator[StepRecord]:
    """Validated BiTA step stream (AR records when the plan is plain AR); ``sampling``: None
    (greedy) or a Sampling, drawn from the exact AR distribution with its own seeded generator."""
    sampling = check_sampling(sampling)
    plan = plan_tree(loaded, adapter, tree, drafts, ngram_tokens)
    if plan.tree is None:
        return stream_ar(loaded, prompt_ids, max_new_tokens, stop_strings, sampling)
    validate_request(loaded, prompt_ids, max_new_tokens, extra_rows=plan.extra_rows)
    stop = make_stop(loaded, max_new_tokens, stop_strings)
    return bita_steps(loaded.model, adapter, prompt_ids, plan.tree, stop, record_attention, plan.ngram_tokens,
                      sampling=sampling)


def stream_ar(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
              stop_strings: tuple[str, ...] = (), sampling: Sampling | None = None) -> Iterator[StepRecord]:
    """Validated AR step stream, greedy (``sampling`` None) or sampled."""
    sampling = check_sampling(sampling)
    validate_request(loaded, prompt_ids, max_new_tokens)
    return ar_steps(loaded.model, prompt_ids, make_stop(loaded, max_new_tokens, stop_strings), sampling)


def collect(method: str, loaded: LoadedModel, steps: Iterator[StepRecord]) -> RunResult:
    """Drain a step stream into a RunResult (seconds: wall time of the whole run)."""
    records, seconds = timed(device_of(loaded.model), lambda: list(steps))
    tokens = [t for r in records for t in r.emitted]
    return RunResult(method, tokens, loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds,
                     records[-1].finish if records else None, records)


def run_hf(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
           stop_strings: tuple[str, ...] = (), prompt_lookup_tokens: int | None = None,
           sampling: Sampling | None = None) -> RunResult:
    """HF ``generate`` (the reference baseline; with ``prompt_lookup_tokens``, HF prompt lookup
    decoding, method "pld"), greedy or sampled (seeding torch's global generators, see
    ``hf_generate``), cut at stop strings like the other loops."""
    sampling = check_sampling(sampling)
    validate_request(loaded, prompt_ids, max_new_tokens)
    generated, seconds = timed(device_of(loaded.model), lambda: hf_generate(
        loaded.model, prompt_ids, max_new_tokens, loaded.eos_token_ids, prompt_lookup_tokens, sampling))
    tokens, finish = make_stop(loaded, max_new_tokens, stop_strings).take(generated)
    return RunResult("pld" if prompt_lookup_tokens else "hf", tokens,
                     loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds, finish)
