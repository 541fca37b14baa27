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
from .stopping import StopCondition
from .tree import DraftTree, parse_tree_spec

DEFAULT_TREE = AUTO
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
    """The tree BiTA decodes with; ``tree`` None means plain AR passes (no tree pays here)."""

    tree: DraftTree | None
    reason: str  # one line for people: what was chosen and why

    @property
    def spec(self) -> str:
        return self.tree.spec if self.tree else "ar"


def plan_tree(loaded: LoadedModel, adapter: BitaAdapter, tree: str | DraftTree | TreePlan) -> TreePlan:
    """An explicit tree as given, or for ``auto`` the shape with the highest expected tokens/s
    on this device, or plain AR where none beats it or the adapter has no acceptance statistics."""
    if isinstance(tree, TreePlan):
        return tree
    if tree != AUTO:
        tree = resolve_tree(tree, adapter)
        return TreePlan(tree, f"{tree.spec} (as asked)")
    try:
        choice = auto_tree(loaded, adapter)
    except BitaError as error:
        return TreePlan(None, f"auto: plain AR, since {error}")
    return TreePlan(choice.tree, choice.describe())


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


def make_stop(loaded: LoadedModel, max_new_tokens: int, stop_strings: tuple[str, ...] = ()) -> StopCondition:
    return StopCondition(max_new_tokens, loaded.eos_token_ids, stop_strings, loaded.tokenizer)


def stream_bita(loaded: LoadedModel, adapter: BitaAdapter, prompt_ids: list[int], max_new_tokens: int,
                tree: str | DraftTree | TreePlan, stop_strings: tuple[str, ...] = (),
                record_attention: bool = False) -> Iterator[StepRecord]:
    """Validated BiTA step stream (AR records when the plan is plain AR). The mask rows reach
    ``2 * depth`` positions past the root."""
    plan = plan_tree(loaded, adapter, tree)
    if plan.tree is None:
        return stream_ar(loaded, prompt_ids, max_new_tokens, stop_strings)
    validate_request(loaded, prompt_ids, max_new_tokens, extra_rows=2 * plan.tree.depth + 1)
    stop = make_stop(loaded, max_new_tokens, stop_strings)
    return bita_steps(loaded.model, adapter, prompt_ids, plan.tree, stop, record_attention)


def stream_ar(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
              stop_strings: tuple[str, ...] = ()) -> Iterator[StepRecord]:
    validate_request(loaded, prompt_ids, max_new_tokens)
    return ar_steps(loaded.model, prompt_ids, make_stop(loaded, max_new_tokens, stop_strings))


def collect(method: str, loaded: LoadedModel, steps: Iterator[StepRecord]) -> RunResult:
    """Drain a step stream into a RunResult (seconds: wall time of the whole run)."""
    records, seconds = timed(device_of(loaded.model), lambda: list(steps))
    tokens = [t for r in records for t in r.emitted]
    return RunResult(method, tokens, loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds,
                     records[-1].finish if records else None, records)


def run_hf(loaded: LoadedModel, prompt_ids: list[int], max_new_tokens: int,
           stop_strings: tuple[str, ...] = (), prompt_lookup_tokens: int | None = None) -> RunResult:
    """HF ``generate`` (the reference baseline; with ``prompt_lookup_tokens``, HF prompt lookup
    decoding, method "pld"), cut at stop strings like the other loops."""
    validate_request(loaded, prompt_ids, max_new_tokens)
    generated, seconds = timed(device_of(loaded.model), lambda: hf_generate(
        loaded.model, prompt_ids, max_new_tokens, loaded.eos_token_ids, prompt_lookup_tokens))
    tokens, finish = make_stop(loaded, max_new_tokens, stop_strings).take(generated)
    return RunResult("pld" if prompt_lookup_tokens else "hf", tokens,
                     loaded.tokenizer.decode(tokens, skip_special_tokens=True), seconds, finish)
