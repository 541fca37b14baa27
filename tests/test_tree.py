"""Tree construction, parsing and the verification walk: pure, no model."""

import pytest

from bita.errors import BitaError
from bita.tree import ROOT, efficient_tree, full_tree, parse_tree_spec, verify_greedy


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


def test_verify_accepts_chain_then_bonus():
    tree = efficient_tree([2, 2])  # nodes: 0 (d1 r0), 1 (d1 r1), 2 (d2 r0), 3 (d2 r1)
    candidates = [10, 11, 20, 21]
    # root predicts 10, node 0 predicts 20, node 2 predicts 30 (bonus)
    verdict = verify_greedy(tree, candidates, [10, 20, 99, 30, 99])
    assert verdict.accepted == (0, 2) and verdict.bonus == 30 and verdict.last == 2


def test_verify_sibling_match_stops_at_the_sibling():
    tree = efficient_tree([2, 2])
    verdict = verify_greedy(tree, [10, 11, 20, 21], [11, 99, 42, 99, 99])
    assert verdict.accepted == (1,) and verdict.bonus == 42 and verdict.last == 1


def test_verify_rejects_everything_and_emits_the_ar_token():
    tree = efficient_tree([2, 2])
    verdict = verify_greedy(tree, [10, 11, 20, 21], [7, 0, 0, 0, 0])
    assert verdict.accepted == () and verdict.bonus == 7 and verdict.last == ROOT


def test_verify_walks_any_branch_of_a_full_tree():
    tree = full_tree([2, 2])  # 0,1 at depth 1; 2,3 children of 0; 4,5 children of 1
    candidates = [10, 11, 20, 21, 20, 21]
    verdict = verify_greedy(tree, candidates, [11, 0, 21, 0, 0, 0, 5])
    assert verdict.accepted == (1, 5) and verdict.bonus == 5
