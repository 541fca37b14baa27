"""Draft token trees as plain data (no model needed); the walk over them is bita/decode/verify.py.

A tree hangs below the *root* (the last emitted token, not yet in the cache). A node at
depth d (1-based) holds the candidate of rank r among the top-k predictions of mask d-1 of
the previous pass's chosen mask group. Nodes that carry a *mask group* get n mask tokens
anchored on them in the next pass, so that whichever node ends up last accepted already has
drafts for the pass after. The root always carries a group.

Shapes of trees (see ``parse_tree_spec``):

- ``efficient:k1,k2,..``  BiTA's efficient tree: a top-1 chain; depth d also has the
  ranks 1..k_d-1 as leaf siblings of the chain node. Groups on every node.
- ``chain:d``             the straightforward chain: top-1 at each of d depths.
- ``full:k1,k2,..``       the fully expanded tree: every node at depth d has k_{d+1} children.
- suffix ``/chain-groups`` keeps mask groups on the root and the top-1 chain only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from ..errors import BitaError

ROOT = -1


class TreeNode(NamedTuple):
    """One draft candidate: ``parent`` is a node index or ROOT (-1). A named tuple: a pass merging chains into
    the tree makes ~20 of them, and hashes and compares them to find its layout (a frozen dataclass's are ~5x
    slower)."""

    parent: int
    depth: int
    rank: int
    has_group: bool


@dataclass(frozen=True)
class DraftTree:
    """Nodes in an order where every parent precedes its children (depth-major)."""

    nodes: tuple[TreeNode, ...]
    spec: str = ""

    @property
    def size(self) -> int:
        return len(self.nodes)

    @cached_property
    def depth(self) -> int:
        return max((node.depth for node in self.nodes), default=0)

    @cached_property
    def max_rank(self) -> int:
        """Number of top-k candidates needed per depth."""
        return 1 + max((node.rank for node in self.nodes), default=0)

    @cached_property
    def children(self) -> dict[int, tuple[int, ...]]:
        """Node index (or ROOT) -> child node indices, in rank order."""
        table: dict[int, list[int]] = {ROOT: []}
        for index, node in enumerate(self.nodes):
            table.setdefault(index, [])
            table[node.parent].append(index)
        return {key: tuple(sorted(value, key=lambda i: self.nodes[i].rank)) for key, value in table.items()}

    @cached_property
    def group_anchors(self) -> tuple[int, ...]:
        """Anchors of the mask groups in row order: ROOT first, then nodes with a group."""
        return (ROOT,) + tuple(i for i, node in enumerate(self.nodes) if node.has_group)

    def ancestors(self, index: int) -> list[int]:
        """Node indices from the depth-1 ancestor down to ``index`` itself (ROOT excluded)."""
        path = []
        while index != ROOT:
            path.append(index)
            index = self.nodes[index].parent
        return path[::-1]


EMPTY_TREE = DraftTree((), "empty")


def efficient_tree(topk_per_depth: list[int], chain_groups_only: bool = False) -> DraftTree:
    """BiTA's efficient tree: top-1 chain, and rank>0 candidates of each depth as leaves."""
    nodes: list[TreeNode] = []
    chain_parent = ROOT
    for depth, k in enumerate(topk_per_depth, start=1):
        chain_index = len(nodes)
        for rank in range(k):
            nodes.append(TreeNode(chain_parent, depth, rank, has_group=rank == 0 or not chain_groups_only))
        chain_parent = chain_index
    return DraftTree(tuple(nodes))


def full_tree(topk_per_depth: list[int], chain_groups_only: bool = False) -> DraftTree:
    """The fully expanded tree: every node of depth d has k_{d+1} children (Medusa-style)."""
    nodes: list[TreeNode] = []
    frontier = [(ROOT, True)]  # (node index, is on the top-1 chain)
    for depth, k in enumerate(topk_per_depth, start=1):
        next_frontier = []
        for parent, parent_on_chain in frontier:
            for rank in range(k):
                on_chain = parent_on_chain and rank == 0
                next_frontier.append((len(nodes), on_chain))
                nodes.append(TreeNode(parent, depth, rank, has_group=on_chain or not chain_groups_only))
        frontier = next_frontier
    return DraftTree(tuple(nodes))


MAX_CANDIDATES = 256  # a tree's candidates a pass (full:3,3,3 has 39; each adds rows a pass pays for)


def candidate_count(kind: str, values: list[int]) -> int:
    """The candidates of the tree spec ``kind:values``: a chain's depth, an efficient tree's K1 + K2 + ..., a full
    tree's K1 + K1 K2 + ... (counted without building it)."""
    if kind == "chain":
        return values[0]
    if kind == "efficient":
        return sum(values)
    return sum(math.prod(values[:depth]) for depth in range(1, len(values) + 1))


def parse_tree_spec(spec: str) -> DraftTree:
    """Parse ``efficient:5,4,3``, ``chain:3``, ``full:3,2,2`` (optionally ``/chain-groups``)."""
    text = spec.strip().lower()
    chain_groups_only = text.endswith("/chain-groups")
    text = text.removesuffix("/chain-groups")
    kind, _, numbers = text.partition(":")
    try:
        values = [int(v) for v in numbers.split(",")] if numbers else []
    except ValueError:
        values = []
    if kind not in ("efficient", "chain", "full") or not values or any(v < 1 or v > 64 for v in values):
        raise BitaError(
            f"invalid tree spec {spec!r}: expected 'efficient:K1,K2,..', 'chain:DEPTH' or "
            "'full:K1,K2,..' with numbers between 1 and 64, optionally followed by '/chain-groups'"
        )
    if kind == "chain" and len(values) != 1:
        raise BitaError(f"invalid tree spec {spec!r}: 'chain' takes one depth, e.g. 'chain:3'")
    candidates = candidate_count(kind, values)
    if candidates > MAX_CANDIDATES:
        raise BitaError(f"invalid tree spec {spec!r}: {candidates} candidates a pass; at most {MAX_CANDIDATES}")
    if kind == "chain":
        tree = efficient_tree([1] * values[0], chain_groups_only)
    elif kind == "efficient":
        tree = efficient_tree(values, chain_groups_only)
    else:
        tree = full_tree(values, chain_groups_only)
    return DraftTree(tree.nodes, spec.strip())
