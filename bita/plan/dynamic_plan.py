"""Dynamic trees and n-gram chains for an adapter: the shape (row budget, calibrated reliability,
the worth of a drafted pass) read from its stored statistics, and forecasts from its stored
sample of whole passes.

``forecast_passes`` replays the adapter's sample of held-out passes (bita/model/rank_stats.py):
each pass's mask tree (a dynamic shape's tree built from the pass's drafts' probabilities, as
decoding builds it) is walked with the pass's true ranks; where the pass's n-gram chain was right
further than the mask path, the chain's end is where the path ends (a node with no mask group, so
the next pass drafts no masks). The trie of a pass holds both, so its accepted path is the longer.
A draftless pass has the root's group and the chain: it emits the chain's right tokens + 1, and
is followed by another where the chain was right at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..decode.masks import layout_rows
from ..drafts.corpus import gated_tokens
from ..drafts.dynamic import DynamicShape, Reliability, dynamic_tree
from ..drafts.tree import EMPTY_TREE, DraftTree
from ..errors import BitaError
from ..model.adapter import BitaAdapter
from ..model.rank_stats import SAMPLE_RANKS, decode_pass
from ..model.target_stats import TargetDepth, decode_target
from .acceptance import Forecast, walk_outcome

MAX_DYNAMIC_ROWS = 512  # rows a dynamic tree's pass may ask for (the largest trees worth a pass are far smaller)
DYNAMIC = "dynamic"  # tree specs "dynamic:ROWS[/DEPTH]"
DYNAMIC_ROWS = (6, 8, 10, 12, 16, 20, 24)  # budgets ``auto`` considers
# What a drafted pass is worth over a draftless one, in tokens: about its accepted drafts, 0.7-1.3
# with the shipped adapter; the trees barely change between 0.5 and 1.5 (forecast tau within 2 %).
DRAFT_VALUE = 1.0
OUTDATED = "this adapter's statistics predate dynamic trees: run 'python -m bita calibrate --adapter DIR'"


@dataclass(frozen=True)
class ScoredPass:
    """One held-out pass: the true tokens' draft ranks per depth, the drafts' probabilities
    [depth][rank], the n-gram chain's outcome (tokens proposed, how many right), where stored the
    target's distribution per depth (``targets``: what sampled forecasts need) and the corpus chain's
    outcome (``corpus``: tokens proposed, how many right, the match's length)."""

    ranks: tuple[int, ...]
    probs: list[list[float]]
    ngram_proposed: int
    ngram_right: int
    targets: list[TargetDepth] | None = None
    corpus: tuple[int, int, int] | None = None

    def chains(self, ngram_tokens: int, corpus_lengths: Sequence[int] = ()) -> tuple[int, int]:
        """(tokens the chains add, how many the better chain has right) with n-gram chains of up to
        ``ngram_tokens`` and corpus chains of up to ``corpus_lengths[match length]`` (none: no corpus
        chain; where the pass has no corpus outcome, none either)."""
        proposed = min(self.ngram_proposed, ngram_tokens)
        right = min(self.ngram_right, proposed)
        if corpus_lengths and self.corpus is not None:
            found, found_right, match = self.corpus
            found = min(found, gated_tokens(corpus_lengths, match))
            proposed, right = proposed + found, max(right, min(found_right, found))
        return proposed, right


@dataclass(frozen=True)
class PassOutcome:
    """What one pass of a tree is expected to do (exact numbers under greedy decoding)."""

    tokens: float  # emitted: accepted drafts + the bonus
    groupless: float  # chance that its path ends on a node (not the root) with no mask group
    chain_tokens: float  # of a draftless pass in its place (the chain alone): tokens accepted,
    chain_hit: float  # and the chance it accepts any


def stored_reliability(adapter: BitaAdapter) -> Reliability:
    """The adapter's calibrated draft reliability (rank_stats.reliability_rates)."""
    record = (adapter.config.acceptance or {}).get("reliability")
    if not record:
        raise BitaError(OUTDATED)
    return Reliability(tuple(record["edges"]), tuple(tuple(rates) for rates in record["rates"]))


def stored_passes(adapter: BitaAdapter) -> list[ScoredPass]:
    """The adapter's sample of whole scored passes, the first with their targets where stored."""
    return decode_passes(adapter.config.acceptance or {})


def decode_passes(record: dict) -> list[ScoredPass]:
    """The passes of a stored record's ``pass_sample``, with ``target_sample``'s targets where stored."""
    if not record.get("pass_sample"):
        raise BitaError(OUTDATED)
    targets = record.get("target_sample", [])
    try:
        return [ScoredPass(*ngram, decode_target(targets[i]) if i < len(targets) else None, corpus)
                for i, (*ngram, corpus) in enumerate(map(decode_pass, record["pass_sample"]))]
    except (ValueError, TypeError, AttributeError):
        raise BitaError("this adapter's pass sample is corrupted: "
                        "run 'python -m bita calibrate --adapter DIR'") from None


def greedy_outcome(masks: DraftTree, scored: ScoredPass, proposed: int, right: int) -> PassOutcome:
    """Greedy decoding: the longer of the mask path and the chain's right tokens is accepted."""
    accepted, groupless = walk_outcome(masks, scored.ranks)
    return PassOutcome(max(accepted, right) + 1, float(right > accepted or groupless), right, float(right > 0))


Outcome = Callable[[DraftTree, ScoredPass, int, int], PassOutcome]


def forecast_passes(tree: DraftTree | DynamicShape, passes: list[ScoredPass], ngram_tokens: int = 0,
                    outcome: Outcome = greedy_outcome, corpus_lengths: Sequence[int] = ()) -> Forecast:
    """What ``tree`` (static or dynamic) plus n-gram chains of up to ``ngram_tokens`` and corpus chains
    gated by ``corpus_lengths`` (``ScoredPass.chains``) would accept on ``passes``, each pass's
    ``outcome`` given its mask tree and the chains' tokens proposed and the better one's right (greedy by
    default; sampled_forecast.py under sampling). Rows count a chain's tokens in full (where it shares
    a prefix with the mask tree or the other chain it takes fewer)."""
    if not passes:
        raise ValueError("forecast needs at least one pass")
    outcomes, rows, chains = [], 0, 0
    for scored in passes:
        proposed, right = scored.chains(ngram_tokens, corpus_lengths)
        masks = dynamic_tree(scored.probs, tree, proposed)[0] if isinstance(tree, DynamicShape) else tree
        outcomes.append(outcome(masks, scored, proposed, right))
        rows, chains = rows + layout_rows(masks, tree.depth) + proposed, chains + proposed
    count = len(passes)
    mean = lambda field: sum(getattr(o, field) for o in outcomes) / count  # noqa: E731
    named = (f"+ngram:{ngram_tokens}" if ngram_tokens else "") + ("+corpus" if corpus_lengths else "")
    return Forecast(tree.spec + named, mean("tokens"),
                    mean("groupless") if tree.depth else 0.0, rows / count,
                    layout_rows(EMPTY_TREE, tree.depth) + chains / count, 1 + mean("chain_tokens"), mean("chain_hit"))


def dynamic_shapes(adapter: BitaAdapter, rows: int, depth: int | None = None) -> list[DynamicShape]:
    """The ``rows``-row dynamic shapes for ``adapter`` with mask groups of ``depth`` masks (the depths
    drafted), or of every depth its masks allow and the budget fits."""
    if depth is not None and not 1 <= depth <= adapter.n_masks:
        raise BitaError(f"a dynamic tree's depth must be from 1 to the adapter's {adapter.n_masks} masks, not {depth}")
    depths = [depth] if depth else range(1, adapter.n_masks + 1)
    if not isinstance(rows, int) or rows < 2 + min(depths):
        raise BitaError(f"a dynamic tree needs at least {2 + min(depths)} rows (the root, its mask group of "
                        f"{min(depths)} and one candidate), not {rows}")
    if rows > MAX_DYNAMIC_ROWS:
        raise BitaError(f"a dynamic tree takes at most {MAX_DYNAMIC_ROWS} rows a pass, not {rows}")
    reliability = stored_reliability(adapter)
    return [DynamicShape(rows, d, SAMPLE_RANKS, DRAFT_VALUE, reliability) for d in depths if rows >= 2 + d]


def best_forecast(shapes: list[DynamicShape], passes: list[ScoredPass],
                  forecaster: Callable[[DynamicShape, list[ScoredPass]], Forecast] = forecast_passes,
                  ) -> tuple[DynamicShape, Forecast]:
    """The shape with the highest forecast tau on ``passes`` (by ``forecaster``), with its forecast: a
    deep group drafts further but costs its rows on every node that carries one."""
    return max(((shape, forecaster(shape, passes)) for shape in shapes), key=lambda pair: pair[1].tokens_per_pass)


def dynamic_shape(adapter: BitaAdapter, rows: int, depth: int | None = None) -> DynamicShape:
    """A ``rows``-row dynamic shape for ``adapter``: of ``depth``, or with ``depth`` None of the depth
    forecast best on the adapter's pass sample (``best_forecast``)."""
    shapes = dynamic_shapes(adapter, rows, depth)
    return shapes[0] if len(shapes) == 1 else best_forecast(shapes, stored_passes(adapter))[0]
