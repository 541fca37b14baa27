"""The per-pass token trie: mask drafts and the n-gram chain merged; pure, no model."""


import pytest

from bita.decode.verify import verify_greedy
from bita.drafts.sources import ALL, BOTH, CORPUS, MASK, NGRAM, joint
from bita.drafts.tree import EMPTY_TREE, ROOT, parse_tree_spec
from bita.drafts.trie import GROUPS_ALL, GROUPS_LAST, GROUPS_NONE, NGRAM_RANK, build_trie

TREE = parse_tree_spec("efficient:3,2,2/chain-groups")  # 0,1,2 at depth 1; 3,4 under 0; 5,6 under 3
DRAFTS = [[10, 11, 12], [20, 21], [30, 31]]  # [depth][rank]


def test_without_a_chain_the_trie_is_the_mask_tree():
    trie = build_trie(TREE, DRAFTS)
    assert trie.tree is TREE and trie.tokens == (10, 11, 12, 20, 21, 30, 31) and set(trie.sources) == {MASK}
    assert build_trie(TREE, None).tree is EMPTY_TREE  # no mask drafts this pass


def test_a_shared_prefix_is_one_path():
    trie = build_trie(TREE, DRAFTS, [10, 20, 99, 98])
    nodes = trie.tree.nodes
    assert trie.tree.size == TREE.size + 2 and trie.tokens[:7] == (10, 11, 12, 20, 21, 30, 31)
    assert trie.sources == (BOTH, MASK, MASK, BOTH, MASK, MASK, MASK, NGRAM, NGRAM)
    assert nodes[7].parent == 3 and nodes[8].parent == 7 and [nodes[7].depth, nodes[8].depth] == [3, 4]
    assert nodes[7].rank == nodes[8].rank == NGRAM_RANK and nodes[3].rank == 0
    assert all(n.parent < i for i, n in enumerate(nodes))  # parents precede children
    assert trie.tree.group_anchors == TREE.group_anchors  # GROUPS_NONE: only the mask tree's groups
    # the chain is one branch of the walk: the model confirming 10, 20, 99, 98 accepts all four
    predicted = [10, 20, 0, 0, 99, 0, 0, 0, 98, 55]
    assert verify_greedy(trie.tree, list(trie.tokens), predicted).accepted == (0, 3, 7, 8)


def test_a_chain_through_a_sibling_leaf_grows_below_it():
    trie = build_trie(TREE, DRAFTS, [11, 40])
    assert trie.sources[1] == BOTH and trie.tree.nodes[-1].parent == 1 and trie.tokens[-1] == 40
    assert not trie.tree.nodes[1].has_group  # a sibling keeps its chain-groups setting


def test_a_chain_off_the_mask_tree_hangs_below_the_root():
    trie = build_trie(TREE, DRAFTS, [50, 51])
    assert [n.parent for n in trie.tree.nodes[-2:]] == [ROOT, 7] and trie.sources[-2:] == (NGRAM, NGRAM)
    only = build_trie(EMPTY_TREE, None, [50, 51, 50])
    assert only.tokens == (50, 51, 50) and [n.parent for n in only.tree.nodes] == [ROOT, 0, 1]


def test_duplicate_siblings_merge_with_their_subtrees():
    tree = parse_tree_spec("full:2,2")  # 0,1 at depth 1; 2,3 under 0; 4,5 under 1
    trie = build_trie(tree, [[10, 10], [20, 21]])  # both depth-1 drafts are 10
    assert trie.tokens == (10, 20, 21) and [n.parent for n in trie.tree.nodes] == [ROOT, 0, 0]


@pytest.mark.parametrize("policy,grouped", [(GROUPS_NONE, [0, 3]), (GROUPS_LAST, [0, 3, 8]),
                                            (GROUPS_ALL, [0, 3, 7, 8])])
def test_groups_on_the_chain_follow_the_policy(policy, grouped):
    """The chain 10 20 99 98 is nodes 0 and 3 (shared with the mask tree's top-1 chain), then 7 and 8."""
    nodes = build_trie(TREE, DRAFTS, [10, 20, 99, 98], policy).tree.nodes
    assert [i for i in (0, 3, 7, 8) if nodes[i].has_group] == grouped
    assert [n.has_group for n in nodes[:TREE.size]] == [n.has_group for n in TREE.nodes]
    assert build_trie(TREE, DRAFTS, [11, 40], policy).tree.nodes[1].has_group == (policy == GROUPS_ALL)
    with pytest.raises(ValueError):
        build_trie(TREE, DRAFTS, [1], "most")


def test_the_corpus_chain_merges_with_the_masks_and_the_ngram_chain():
    """A corpus chain sharing the masks' first token and the n-gram chain's second: each node keeps
    every source that proposed it; a chain that agrees with nothing hangs below the root."""
    trie = build_trie(TREE, DRAFTS, [10, 20, 77], corpus=[10, 20, 77, 66])
    assert trie.sources[:2] == (joint(MASK, NGRAM, CORPUS), MASK) and trie.sources[3] == ALL
    assert trie.sources[7:] == (joint(NGRAM, CORPUS), CORPUS)
    assert trie.tokens[7:] == (77, 66) and trie.tree.nodes[8].parent == 7 and trie.tree.nodes[8].depth == 4
    alone = build_trie(EMPTY_TREE, None, (), corpus=[5, 6])
    assert alone.sources == (CORPUS, CORPUS) and alone.tree.nodes[0].parent == ROOT
    assert joint(CORPUS, MASK) == "mask+corpus" and BOTH == joint(NGRAM, MASK) == "mask+ngram"
