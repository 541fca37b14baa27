"""Dynamic trees from hand-made draft probabilities: best nodes by path product, the row budget,
groups where the path is likely to end."""

import pytest

from bita.decode.masks import decode_layout, layout_rows
from bita.drafts.dynamic import DynamicShape, Reliability, best_nodes, dynamic_tree, path_ends
from bita.drafts.tree import ROOT, DraftTree

IDENTITY = Reliability((0.25, 0.5, 0.75, 1.0), ((0.25, 0.5, 0.75, 1.0),))  # a draft of p < 0.25 scores 0.25, ...


def shape(rows: int, depth: int = 3, draft_value: float = 1.0) -> DynamicShape:
    exact = Reliability(tuple(i / 100 for i in range(1, 101)), (tuple(i / 100 for i in range(1, 101)),))
    return DynamicShape(rows, depth, 4, draft_value, exact)


def test_reliability_maps_probabilities_through_its_bins_per_depth():
    table = Reliability((0.5, 1.0), ((0.1, 0.6), (0.2, 0.9)))
    assert table.scores([[0.7, 0.3], [0.5, 0.51], [0.9]]) == [[0.6, 0.1], [0.2, 0.9], [0.9]]
    assert IDENTITY.scores([[0.2, 0.6, 1.0]]) == [[0.25, 0.75, 1.0]]


def test_best_nodes_are_the_highest_path_products_parents_first():
    scores = [[0.6, 0.25], [0.5, 0.4], [0.9, 0.05]]
    nodes = best_nodes(scores, 4)
    assert [ranks for _, ranks, _ in nodes] == [(0,), (0, 0), (0, 0, 0), (1,)]  # 0.6, 0.3, 0.27, 0.25
    assert [parent for parent, _, _ in nodes] == [ROOT, 0, 1, ROOT]
    assert nodes[2][2] == pytest.approx(0.6 * 0.5 * 0.9)
    assert len(best_nodes(scores, 100)) == 2 + 4 + 8  # every path, when the budget allows


def test_path_ends_subtract_the_children():
    root_end, ends = path_ends([(ROOT, (0,), 0.6), (0, (0, 0), 0.3), (ROOT, (1,), 0.3)])
    assert root_end == pytest.approx(0.1) and ends == pytest.approx([0.3, 0.3, 0.3])


@pytest.mark.parametrize("rows", [5, 6, 8, 12, 16, 24])
def test_the_tree_fills_the_row_budget_and_no_more(rows):
    probs = [[0.5, 0.2, 0.1, 0.05], [0.4, 0.3, 0.1, 0.05], [0.3, 0.3, 0.2, 0.1]]
    tree, chances = dynamic_tree(probs, shape(rows))
    assert decode_layout(tree, 3).rows == layout_rows(tree, 3) == rows
    assert len(chances) == tree.size and all(0 < c <= 1 for c in chances)
    for index, node in enumerate(tree.nodes):  # parents first, depths consistent, a child no likelier than its parent
        assert node.parent < index and node.depth == (1 if node.parent == ROOT else tree.nodes[node.parent].depth + 1)
        assert node.parent == ROOT or chances[index] <= chances[node.parent]


def test_a_confident_pass_goes_deep_and_an_unsure_one_wide():
    confident, _ = dynamic_tree([[0.95, 0.02, 0.01, 0.01], [0.9, 0.05, 0.02, 0.01], [0.9, 0.05, 0.02, 0.01]], shape(8))
    unsure, _ = dynamic_tree([[0.3, 0.25, 0.2, 0.15], [0.3, 0.25, 0.2, 0.1], [0.3, 0.2, 0.2, 0.1]],
                             shape(8, draft_value=0.2))
    assert confident.depth == 3 and sum(n.depth == 1 for n in confident.nodes) == 1
    assert unsure.depth < 3 and sum(n.depth == 1 for n in unsure.nodes) >= 3


def test_groups_go_where_the_path_most_likely_ends_when_drafts_are_worth_it():
    probs = [[0.9, 0.05, 0.02, 0.01], [0.2, 0.1, 0.05, 0.01], [0.1, 0.1, 0.05, 0.01]]
    worth_it, _ = dynamic_tree(probs, shape(12, draft_value=3.0))
    worthless, _ = dynamic_tree(probs, shape(12, draft_value=0.0))
    assert worth_it.nodes[0].has_group  # node (0,): p 0.9, its children unlikely: the likeliest end
    assert not any(n.has_group for n in worthless.nodes) and worthless.size == 12 - 1 - 3


def test_too_small_a_budget_drafts_nothing():
    assert dynamic_tree([[0.9]], shape(4)) == (DraftTree((), "dynamic:4/3"), [])
