"""Draft trees chosen per pass from the drafts' own confidence, within a row budget (EAGLE-2's
idea on BiTA's mask drafts). Pure functions, no model.

A pass's mask drafts give, per depth d, the top-k tokens and their probabilities; ``scores``
[depth][rank] are those probabilities calibrated into the chance that the draft is the true
token given that the true path reached depth d-1 (bita/model/rank_stats.py). A node is a path of
ranks below the root; its estimated chance of being accepted is the product of its ranks' scores
along the path, so the best N nodes by that product always form a tree (a parent scores at least
as high as its child), and a best-first search over a heap finds them.

A pass's rows are ``1 (root) + nodes + groups x group_size``. The root always carries a group;
a group on a node pays when the accepted path is likely to end there (then the next pass has
drafts instead of a draftless one). ``dynamic_tree`` tries every number of groups the budget
allows, places the extra groups where the path most likely ends, and keeps the split with the
highest expected accepted drafts + ``draft_value`` x chance that the next pass is drafted.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from .tree import ROOT, DraftTree, TreeNode


@dataclass(frozen=True)
class Reliability:
    """How often a draft of probability p at depth d was the true token (when the true path reached
    depth d-1): ``rates[d][b]`` for p in bin b, bins ending at ``edges`` (ascending, the last 1.0)."""

    edges: tuple[float, ...]
    rates: tuple[tuple[float, ...], ...]  # [depth][bin]

    def scores(self, probs: Sequence[Sequence[float]]) -> list[list[float]]:
        """probs [depth][rank] -> calibrated chances [depth][rank] (depths past the table use its last)."""
        return [[self.rates[min(depth, len(self.rates) - 1)][min(bisect_left(self.edges, p), len(self.edges) - 1)]
                 for p in row] for depth, row in enumerate(probs)]


@dataclass(frozen=True)
class DynamicShape:
    """What a dynamic tree is made from each pass. ``rows``: the pass's row budget (root, nodes and
    mask groups; an n-gram chain takes its rows out of it); ``depth``: masks per group (the depths
    drafted); ``max_rank``: drafts kept per depth; ``draft_value``: expected extra tokens of a drafted
    pass over a draftless one (how much a group at the path's end is worth)."""

    rows: int
    depth: int
    max_rank: int
    draft_value: float
    reliability: Reliability

    @property
    def spec(self) -> str:
        return f"dynamic:{self.rows}/{self.depth}"


def best_nodes(scores: Sequence[Sequence[float]], count: int) -> list[tuple[int, tuple[int, ...], float]]:
    """The ``count`` rank paths with the highest score products, parents first:
    [(parent index or ROOT, ranks, product)]."""
    chosen: list[tuple[int, tuple[int, ...], float]] = []
    frontier = [(-scores[0][rank], ROOT, (rank,)) for rank in range(len(scores[0]))] if scores else []
    heapq.heapify(frontier)
    while frontier and len(chosen) < count:
        negative, parent, ranks = heapq.heappop(frontier)
        if -negative <= 0:
            break
        index = len(chosen)
        chosen.append((parent, ranks, -negative))
        if len(ranks) < len(scores):
            for rank, score in enumerate(scores[len(ranks)]):
                heapq.heappush(frontier, (negative * score, index, ranks + (rank,)))
    return chosen


def path_ends(nodes: list[tuple[int, tuple[int, ...], float]]) -> tuple[float, list[float]]:
    """Estimated chance that the accepted path ends at the root, and at each node: its own chance
    minus its children's."""
    ends = [product for _, _, product in nodes]
    root_end = 1.0
    for parent, _, product in nodes:
        if parent == ROOT:
            root_end -= product
        else:
            ends[parent] -= product
    return max(root_end, 0.0), [max(end, 0.0) for end in ends]


def dynamic_tree(probs: Sequence[Sequence[float]], shape: DynamicShape,
                 reserved_rows: int = 0) -> tuple[DraftTree, list[float]]:
    """The tree for one pass from its drafts' probabilities [depth][rank] (the first ``shape.depth``
    depths), within ``shape.rows - reserved_rows`` rows (``reserved_rows``: what the pass adds
    besides, an n-gram chain), and each node's estimated chance of being accepted (what chose it).
    The best N nodes for a smaller N are the first N of the best for a larger, so one search
    serves every split between nodes and groups."""
    scores = [row[:shape.max_rank] for row in shape.reliability.scores(probs[:shape.depth])]
    budget = shape.rows - reserved_rows - 1 - shape.depth  # the root and its group
    ranked = best_nodes(scores, max(budget, 0))
    best: tuple[float, list, set[int]] = (-1.0, [], set())
    for extra_groups in range(max(budget, 0) // shape.depth + 1):
        nodes = ranked[:budget - extra_groups * shape.depth]
        if extra_groups > len(nodes):
            break
        root_end, ends = path_ends(nodes)
        grouped = set(sorted(range(len(nodes)), key=lambda i: -ends[i])[:extra_groups])
        value = sum(p for _, _, p in nodes) + shape.draft_value * (root_end + sum(ends[i] for i in grouped))
        if value > best[0] + 1e-12:
            best = (value, nodes, grouped)
    _, nodes, grouped = best
    tree = DraftTree(tuple(TreeNode(parent, len(ranks), ranks[-1], i in grouped)
                           for i, (parent, ranks, _) in enumerate(nodes)), shape.spec)
    return tree, [chance for _, _, chance in nodes]

