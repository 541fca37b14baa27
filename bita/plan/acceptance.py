"""Acceptance statistics: where the true next tokens fall among BiTA's drafts, and what any
draft tree would accept and earn given that. Pure functions over step records; no model.

Greedy BiTA output equals AR output, so a finished run is its own ground truth: the drafts a
pass makes for the next pass are scored against the tokens that were really emitted after it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..decode.masks import layout_rows
from ..decode.records import StepRecord
from ..decode.verify import walk_ranks
from ..drafts.tree import EMPTY_TREE, ROOT, DraftTree
from ..model.rank_stats import MISS


def draft_ranks(records: list[StepRecord]) -> dict[int, tuple[int, ...]]:
    """Record index -> per depth d, the rank of the true token among that depth's drafted
    candidates (or MISS), for every pass that drafted and whose future is known."""
    output = [token for record in records for token in record.emitted]
    ranks, produced = {}, 0
    for index, record in enumerate(records):
        produced += len(record.emitted)
        truth = output[produced: produced + len(record.next_drafts)]
        if not record.next_drafts or len(truth) < len(record.next_drafts):
            continue
        ranks[index] = tuple(next((rank for rank, (token, _) in enumerate(candidates) if token == true), MISS)
                             for candidates, true in zip(record.next_drafts, truth))
    return ranks


@dataclass(frozen=True)
class Forecast:
    """What a tree would do on passes with these ranks: a chain of two kinds of pass.

    A drafted pass has mask drafts; it emits ``tokens_per_drafted_pass`` (accepted drafts + the
    bonus) and, with chance ``draftless_share``, ends on a node that carries no mask group, so the
    next pass is draftless: only the root's group (and any n-gram chain), emitting
    ``tokens_per_draftless_pass``, followed by another draftless pass with chance
    ``draftless_repeat`` (its chain was accepted: it ends on the chain, which carries no group).
    ``rows``, ``draftless_rows``: mean rows of each kind (what their cost is looked up by).
    """

    tree: str
    tokens_per_drafted_pass: float
    draftless_share: float
    rows: float
    draftless_rows: float
    tokens_per_draftless_pass: float = 1.0
    draftless_repeat: float = 0.0

    def shares(self) -> tuple[float, float]:
        """Long-run shares of drafted and draftless passes."""
        leave = 1.0 - self.draftless_repeat
        return leave / (leave + self.draftless_share), self.draftless_share / (leave + self.draftless_share)

    @property
    def tokens_per_pass(self) -> float:
        """Long-run mean over drafted and draftless passes (tau)."""
        drafted, draftless = self.shares()
        return drafted * self.tokens_per_drafted_pass + draftless * self.tokens_per_draftless_pass

    def tokens_per_second(self, tree_seconds: float, draftless_seconds: float) -> float:
        """Expected throughput given the measured cost of a tree pass and of a draftless pass."""
        drafted, draftless = self.shares()
        return self.tokens_per_pass / (drafted * tree_seconds + draftless * draftless_seconds)


def walk_outcome(tree: DraftTree, ranks: tuple[int, ...]) -> tuple[int, bool]:
    """(accepted drafts, whether the accepted path ends on a node that carries no mask group) when the
    true tokens have draft ranks ``ranks``."""
    accepted, last = walk_ranks(tree, ranks)
    return accepted, last != ROOT and not tree.nodes[last].has_group


def forecast(tree: DraftTree, ranks: Mapping[tuple[int, ...], int] | list[tuple[int, ...]]) -> Forecast:
    """Expected acceptance of ``tree`` over sampled passes: a list of rank tuples, or a mapping
    from rank tuple to how many passes had it (must be non-empty)."""
    counts = ranks if isinstance(ranks, Mapping) else Counter(ranks)
    total = sum(counts.values())
    if not total:
        raise ValueError("forecast needs at least one pass of draft ranks")
    tokens = draftless = 0
    for rank, count in counts.items():
        accepted, groupless = walk_outcome(tree, rank)
        tokens += (accepted + 1) * count
        draftless += count * groupless
    return Forecast(tree.spec, tokens / total, draftless / total, layout_rows(tree, tree.depth),
                    layout_rows(EMPTY_TREE, tree.depth))
