"""A pass's trie and its layout lookup with TreeNode a frozen dataclass and every merged shape a new DraftTree (as
before) against TreeNode a named tuple and recurring shapes interned (now), in ONE process, alternating: the
efficient:6,5,3 mask tree merged with an n-gram chain of 4, then decode_layout's cached layout and the tree's groups
looked up, as draft_candidates and forward_layout do every pass.

    PYTHONPATH=. .venv/bin/python benchmarks/results/cpu-2vcpu-xeon-6-207/native-stack/trie_ab.py
"""
import statistics
import timeit
from dataclasses import dataclass

from bita.decode.masks import decode_layout
from bita.drafts import trie
from bita.drafts.tree import DraftTree, TreeNode, parse_tree_spec


@dataclass(frozen=True)
class DataclassNode:  # TreeNode as it was
    parent: int
    depth: int
    rank: int
    has_group: bool


named = parse_tree_spec("efficient:6,5,3")
frozen = DraftTree(tuple(DataclassNode(*node) for node in named.nodes))
tokens = [[10 * depth + rank for rank in range(named.max_rank)] for depth in range(named.depth)]


def a_pass(tree: DraftTree) -> None:
    merged = trie.build_trie(tree, tokens, [5, 6, 7, 8]).tree
    decode_layout(merged, 3, 1)
    merged.group_anchors


ways = {"before": (DataclassNode, DraftTree, frozen), "now": (TreeNode, trie.trie_shape, named)}
times = {way: [] for way in ways}
for _ in range(9):
    for way, (node, shape, tree) in ways.items():
        trie.TreeNode, trie.trie_shape = node, shape
        times[way].append(min(timeit.repeat(lambda: a_pass(tree), number=2000, repeat=3)) / 2000 * 1e6)
trie.TreeNode, trie.trie_shape = ways["now"][:2]
ratios = [now / before for before, now in zip(times["before"], times["now"])]
print(f"us a pass: before {statistics.median(times['before']):.1f}, now {statistics.median(times['now']):.1f}; "
      f"now / before per round: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), "
      f"9 rounds")
