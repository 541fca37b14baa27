"""The candidates of one pass as a token trie: mask drafts, an n-gram chain and a corpus chain merged.

The mask drafts fill the static shape of a ``DraftTree`` (node at depth d, rank r takes the
rank-r draft of depth d); each chain hangs below the root, one token per depth. Two
candidates with the same parent and the same token are one node (so a shared prefix is one
path, and duplicate siblings one node): the model verifies each distinct continuation once.
Pure functions, no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .sources import CORPUS, MASK, NGRAM, joint
from .tree import EMPTY_TREE, ROOT, DraftTree, TreeNode

NGRAM_RANK = -1  # rank of a node only a chain (n-gram or corpus) proposed

# Mask groups on nodes only a chain proposed: none (the mask tree's groups only), on each
# chain's last node, or on all its nodes. A group costs ``tree.depth`` rows a pass.
GROUPS_NONE, GROUPS_LAST, GROUPS_ALL = "none", "last", "all"
NGRAM_GROUPS = (GROUPS_NONE, GROUPS_LAST, GROUPS_ALL)


@dataclass(frozen=True)
class PassTrie:
    """One pass's candidates. ``tree``: the shape (parents before children; a node keeps its
    mask rank, NGRAM_RANK when only a chain proposed it; ``has_group`` where a mask group is
    anchored); ``tokens``: [tree.size] candidate ids; ``sources``: [tree.size] who proposed each
    (MASK, NGRAM, CORPUS or their ``joint`` name)."""

    tree: DraftTree
    tokens: tuple[int, ...]
    sources: tuple[str, ...]


def build_trie(masks: DraftTree, mask_tokens: Sequence[Sequence[int]] | None, ngram: Sequence[int] = (),
               ngram_groups: str = GROUPS_NONE, corpus: Sequence[int] = ()) -> PassTrie:
    """Merge the mask drafts, the n-gram chain and the corpus chain into one trie.

    masks: the static mask tree; mask_tokens: [depth][rank] draft ids for it, or None when this
    pass has no mask drafts; ngram, corpus: the chains below the root, depth 1 first (groups on
    either placed by ``ngram_groups``). Mask nodes come first, in ``masks`` order, then the n-gram
    chain's, then the corpus chain's new nodes; with no chain the result is ``masks`` itself.
    """
    if ngram_groups not in NGRAM_GROUPS:
        raise ValueError(f"ngram_groups must be one of {NGRAM_GROUPS}, not {ngram_groups!r}")
    nodes: list[TreeNode] = []
    tokens: list[int] = []
    sources: list[str] = []
    by_edge: dict[tuple[int, int], int] = {}  # (parent node, token) -> node

    def add(parent: int, token: int, depth: int, rank: int, has_group: bool, source: str) -> int:
        index = by_edge.get((parent, token))
        if index is None:
            by_edge[(parent, token)] = index = len(nodes)
            nodes.append(TreeNode(parent, depth, rank, has_group))
            tokens.append(token)
            sources.append(source)
        else:
            node = nodes[index]
            nodes[index] = TreeNode(parent, depth, node.rank, node.has_group or has_group)
            sources[index] = joint(sources[index], source)
        return index

    placed = {ROOT: ROOT}  # mask tree node -> trie node
    for index, node in enumerate(masks.nodes if mask_tokens is not None else ()):
        placed[index] = add(placed[node.parent], int(mask_tokens[node.depth - 1][node.rank]), node.depth,
                            node.rank, node.has_group, MASK)
    for source, chain in ((NGRAM, ngram), (CORPUS, corpus)):
        parent = ROOT
        for depth, token in enumerate(chain, start=1):
            group = ngram_groups == GROUPS_ALL or (ngram_groups == GROUPS_LAST and depth == len(chain))
            parent = add(parent, int(token), depth, NGRAM_RANK, group, source)
    shape = tuple(nodes)
    tree = masks if shape == masks.nodes else trie_shape(shape) if shape else EMPTY_TREE
    return PassTrie(tree, tuple(tokens), tuple(sources))


@lru_cache(maxsize=1024)
def trie_shape(nodes: tuple[TreeNode, ...]) -> DraftTree:
    """The one DraftTree of these nodes: a shape that recurs pass after pass keeps what it computed once (its
    children and groups, and its layout in masks.decode_layout's cache, found by identity)."""
    return DraftTree(nodes)
