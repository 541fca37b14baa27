"""What a request drafts with: the mask tree (explicit, or ``auto``'s choice for this device) and
the n-gram chain, checked against the adapter."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..decode.sampling import Sampling
from ..decode.step import Chains
from ..drafts.corpus import CorpusIndex
from ..drafts.dynamic import DynamicShape
from ..drafts.sources import ALL, DEFAULT_DRAFTS, DRAFT_OPTIONS, MASK, NGRAM
from ..drafts.tree import EMPTY_TREE, DraftTree, parse_tree_spec
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.loading import LoadedModel
from .autotree import AUTO, auto_tree, cost_table
from .corpus_plan import choose_gate
from .corpus_source import adapter_corpus_path, load_corpus
from .dynamic_plan import DYNAMIC, dynamic_shape
from .sampled_forecast import forecasting

DEFAULT_TREE = AUTO
DEFAULT_NGRAM_TOKENS = 4
MAX_NGRAM_TOKENS = 16


def resolve_tree(tree: str | DraftTree | DynamicShape, adapter: BitaAdapter) -> DraftTree | DynamicShape:
    """A tree spec (``dynamic:ROWS[/DEPTH]``: a tree chosen per pass within ROWS rows, its mask groups
    DEPTH deep or as deep as forecasts best) as the tree or shape it names, checked against ``adapter``."""
    if isinstance(tree, str) and tree.strip().lower().startswith(DYNAMIC + ":"):
        rows, _, depth = tree.strip()[len(DYNAMIC) + 1:].partition("/")
        if not (rows.isascii() and rows.isdigit()) or not (depth.isascii() and depth.isdigit() or not depth):
            raise BitaError(f"invalid tree spec {tree!r}: expected 'dynamic:ROWS' or 'dynamic:ROWS/DEPTH', "
                            "e.g. 'dynamic:12'")
        return dynamic_shape(adapter, int(rows), int(depth) if depth else None)
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

    tree: DraftTree | DynamicShape | None
    reason: str  # one line for people: what was chosen and why
    ngram_tokens: int = 0
    ranking: tuple[tuple[str, float, float], ...] = ()  # auto's: (spec, forecast tau, expected tok/s), best first
    ar_tokens_per_second: float | None = None  # auto's expectation for plain AR
    corpus: CorpusIndex | None = None  # the corpus chain's index (drafts=all), else None
    corpus_lengths: tuple[int, ...] = ()  # [match length]: corpus chain tokens a pass drafts (none: no chain)
    corpus_gate: float | None = None  # the calibrated chance its tokens need (corpus_plan.py; None: ungated)

    @property
    def corpus_tokens(self) -> int:
        """The longest corpus chain a pass drafts (0: none)."""
        return max(self.corpus_lengths, default=0)

    @property
    def chains(self) -> Chains:
        """The chains every pass drafts beside the tree (``bita_steps``)."""
        return Chains(self.ngram_tokens, corpus=self.corpus, corpus_tokens=self.corpus_lengths)

    @property
    def spec(self) -> str:
        if self.tree is None:
            return "ar"
        parts = [self.tree.spec] if self.tree != EMPTY_TREE else []
        chains = [f"ngram:{self.ngram_tokens}"] if self.ngram_tokens else []
        gate = f"@{self.corpus_gate:g}" if self.corpus_gate else ""
        return "+".join(parts + chains + ([f"corpus:{self.corpus_tokens}{gate}"] if self.corpus_tokens else []))

    @property
    def extra_rows(self) -> int:
        """How far past the root a pass's positions reach: the deepest candidate, then a mask group."""
        return max(self.tree.depth, self.ngram_tokens, self.corpus_tokens) + self.tree.depth + 1


def corpus_of(adapter: BitaAdapter, tokenizer, corpus: str | None) -> tuple[CorpusIndex, str]:
    """The corpus chain's index: of ``corpus`` (a user's texts), else of the answers the adapter was
    trained on; and where it came from."""
    path = corpus or adapter_corpus_path(adapter.config.training)
    if path is None:
        raise BitaError("drafts=all needs a corpus: this adapter records no training data that exists here; "
                        "pass --corpus FILE (plain text or JSONL)")
    return load_corpus(str(path), tokenizer), str(path)


def plan_masks(loaded: LoadedModel, adapter: BitaAdapter, tree: str | DraftTree, drafting: bool = False,
               sampling: Sampling | None = None, chain_rows: int = 0, forecast: bool = True) -> TreePlan:
    """An explicit tree as given, or for ``auto`` the shape (static or dynamic) with the highest
    expected tokens/s on this device at ``sampling`` (None: greedy) beside chains of up to ``chain_rows``
    candidates, or plain AR where none beats it (``drafting``: the best tree even then) or the adapter has no
    acceptance statistics. ``forecast`` False: a sampling setting whose forecasts are not stored is planned on the
    nearest stored one's (autotree.stored_forecasts)."""
    if tree != AUTO:
        tree = resolve_tree(tree, adapter)
        return TreePlan(tree, f"{tree.spec} (as asked)")
    try:
        choice, note = auto_tree(loaded, adapter, sampling, chain_rows, forecast)
    except BitaError as error:
        return TreePlan(None, f"auto: plain AR, since {error}")
    choice = choice.drafting() if drafting else choice
    setting = "" if sampling is None or sampling.greedy else (
        f" [forecast at temperature {sampling.temperature}, top-p {sampling.top_p}, top-k {sampling.top_k or 'off'}"
        f"{note}]")
    return TreePlan(choice.tree, choice.describe() + setting, ranking=choice.ranking,
                    ar_tokens_per_second=choice.ar_tokens_per_second)


def plan_tree(loaded: LoadedModel, adapter: BitaAdapter, tree: str | DraftTree | TreePlan,
              drafts: str = DEFAULT_DRAFTS, ngram_tokens: int = DEFAULT_NGRAM_TOKENS,
              drafting: bool = False, sampling: Sampling | None = None, corpus: str | None = None,
              forecast: bool = True) -> TreePlan:
    """The mask tree (``plan_masks``, for ``auto`` forecast at ``sampling``; None: greedy) and the
    chains ``drafts`` asks for: ``all`` adds to ``both`` a corpus chain of up to as many tokens as the
    n-gram chain, from ``corpus`` or the adapter's training answers (``corpus_of``), gated by its
    calibrated chance where that pays (``corpus_gate``; a user's corpus is gated by the statistics of
    the adapter's own, the only ones calibration has).

    ``ngram`` drafts with n-gram chains only (no mask groups; ``tree`` is not used). ``both``
    adds the chain to the mask tree, which ``auto`` prices with the chains' rows where passes run at row buckets (a
    tree that fits a bucket alone may not beside them) and forecasts from the masks alone: the chain's
    forecast (``dynamic_plan.forecast_passes`` with ``ngram_tokens``) runs high on the self-generated
    calibration data, whose answers repeat themselves more than real ones (measured on MT-Bench,
    docs/speed.md), and picked the chain alone where masks + chain measured better. Where no tree pays it drafts with
    the chain alone rather than decoding plain AR: a pass whose n-grams match nothing is one row. ``forecast`` False
    (a request's path): nothing is forecast where stored forecasts can stand in (``plan_masks``).
    """
    if isinstance(tree, TreePlan):
        return tree
    if drafts not in DRAFT_OPTIONS:
        raise BitaError(f"drafts must be one of {', '.join(DRAFT_OPTIONS)}, not {drafts!r}")
    source = DRAFT_OPTIONS[drafts]
    if source == MASK:
        return plan_masks(loaded, adapter, tree, drafting, sampling, forecast=forecast)
    if not isinstance(ngram_tokens, int) or not 1 <= ngram_tokens <= MAX_NGRAM_TOKENS:
        raise BitaError(f"ngram_tokens must be an integer from 1 to {MAX_NGRAM_TOKENS}, not {ngram_tokens!r}")
    chain = f"n-gram chains of up to {ngram_tokens} tokens"
    if source == NGRAM:
        unused = "" if tree == AUTO else f"; tree {getattr(tree, 'spec', tree)} not used"
        return TreePlan(EMPTY_TREE, f"ngram:{ngram_tokens}: {chain}, no mask drafts (drafts=ngram){unused}",
                        ngram_tokens)
    chain_rows = ngram_tokens * (2 if source == ALL else 1)  # the chains' candidates, at most
    masks = plan_masks(loaded, adapter, tree, drafting, sampling, chain_rows, forecast)  # forecast without them: above
    drafted = masks.tree if masks.tree is not None else EMPTY_TREE
    extra = {}
    if source == ALL:
        index, path = corpus_of(adapter, loaded.tokenizer, corpus)
        lengths, gate, how = corpus_gate(loaded, adapter, drafted, ngram_tokens, sampling, drafting)
        chain += f" and corpus chains of up to {ngram_tokens} tokens from {path}: {how}"
        extra = dict(corpus=index if any(lengths) else None, corpus_lengths=lengths, corpus_gate=gate)
    if masks.tree is None:
        return replace(masks, tree=EMPTY_TREE, ngram_tokens=ngram_tokens, **extra,
                       reason=f"{masks.reason}; with drafts={drafts}: {chain} alone (a pass they do not draft is "
                              "one row, like AR)")
    return replace(masks, reason=f"{masks.reason}, plus {chain} (drafts={drafts})", ngram_tokens=ngram_tokens,
                   **extra)


def corpus_gate(loaded: LoadedModel, adapter: BitaAdapter, tree: DraftTree | DynamicShape, ngram_tokens: int,
                sampling: Sampling | None, drafting: bool) -> tuple[tuple[int, ...], float | None, str]:
    """The corpus chain's tokens per match length beside ``tree`` and n-gram chains of ``ngram_tokens``
    (corpus_plan.choose_gate, chains of up to ``ngram_tokens``), its threshold (None: ungated, or OFF) and
    one line saying why; ungated (every chain in full) where the adapter's statistics lack the corpus's."""
    rates = ((adapter.config.acceptance or {}).get("corpus") or {}).get("rates")
    if not rates:
        return (ngram_tokens,), None, ("every chain in full: this adapter's statistics predate the corpus chain's "
                                       "(run 'python -m bita calibrate --adapter DIR' to gate it)")
    try:
        forecaster, passes = forecasting(adapter, sampling)
    except BitaError as error:
        return (ngram_tokens,), None, f"every chain in full ({error})"
    gate = choose_gate(tree, ngram_tokens, ngram_tokens, rates, passes, forecaster, cost_table(loaded, adapter),
                       drafting)
    return gate.lengths, gate.threshold, gate.describe()
