"""Tree construction and parsing: pure, no model."""

import pytest

from bita.drafts.tree import ROOT, efficient_tree, full_tree, parse_tree_spec
from bita.errors import BitaError


def test_efficient_tree_is_a_chain_with_leaf_siblings():
    tree = efficient_tree([3, 2, 2])
    assert tree.size == 7 and tree.depth == 3 and tree.max_rank == 3
    chain = [i for i, n in enumerate(tree.nodes) if n.rank == 0]
    assert [tree.nodes[i].parent for i in chain] == [ROOT, chain[0], chain[1]]
    for i, node in enumerate(tree.nodes):
        if node.rank > 0:
            assert tree.children[i] == ()  # siblings are leaves
            assert node.parent == (ROOT if node.depth == 1 else chain[node.depth - 2])
    assert tree.group_anchors == (ROOT,) + tuple(range(7))


def test_chain_groups_only_keeps_groups_on_the_top1_chain():
    tree = parse_tree_spec("efficient:3,2/chain-groups")
    assert tree.group_anchors == (ROOT, 0, 3)


def test_full_tree_expands_every_node():
    tree = full_tree([2, 3, 2])
    assert tree.size == 2 + 2 * 3 + 2 * 3 * 2
    assert all(len(tree.children[i]) == 3 for i, n in enumerate(tree.nodes) if n.depth == 1)
    assert all(tree.nodes[tree.nodes[i].parent].depth == n.depth - 1 for i, n in enumerate(tree.nodes) if n.depth > 1)
    assert len(parse_tree_spec("full:2,3,2/chain-groups").group_anchors) == 4


def test_chain_spec_is_top1_per_depth():
    tree = parse_tree_spec("chain:4")
    assert [n.rank for n in tree.nodes] == [0, 0, 0, 0] and tree.depth == 4
    assert tree.ancestors(3) == [0, 1, 2, 3]


@pytest.mark.parametrize("spec", ["", "efficient", "efficient:0", "tree:3", "chain:2,2", "full:a,b", "efficient:99"])
def test_bad_specs_are_refused_clearly(spec):
    with pytest.raises(BitaError, match="tree spec"):
        parse_tree_spec(spec)


@pytest.mark.parametrize("spec", ["full:64,64,64", "efficient:64,64,64,64,64", "full:8,8,8"])
def test_a_tree_too_large_for_a_pass_is_refused_before_it_is_built(spec):
    with pytest.raises(BitaError, match="candidates a pass; at most 256"):
        parse_tree_spec(spec)
