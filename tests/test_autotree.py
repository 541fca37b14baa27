"""Tree choice from acceptance statistics and a cost table: pure, no model."""

from collections import Counter

import pytest

from bita.acceptance import MISS
from bita.autotree import CostTable, candidate_trees, choose_tree


def table(ar=0.05, draftless=0.06, points=((8, 0.08), (20, 0.10), (60, 0.20))):
    return CostTable("test", ar, draftless, list(points))


def test_costs_interpolate_by_rows_and_extend_past_the_last_point():
    costs = table()
    assert costs.seconds(8) == pytest.approx(0.08) and costs.seconds(14) == pytest.approx(0.09)
    assert costs.seconds(100) == pytest.approx(0.30)  # slope of the last segment: 0.0025 s a row
    assert costs.seconds(2) == pytest.approx(0.08)  # below the first point: its cost


def test_candidates_cover_chains_efficient_and_full_trees():
    specs = candidate_trees(3, max_topk=3)
    assert {"chain:1", "chain:2", "chain:3", "efficient:3,2,2", "efficient:3,2,2/chain-groups",
            "full:2,2,2/chain-groups"} <= set(specs)
    assert "efficient:2,3" not in specs and "efficient:1,1" not in specs and len(specs) == len(set(specs))


def test_sure_drafts_pick_the_deepest_cheap_tree():
    ranks = Counter({(0, 0, 0): 100})
    choice = choose_tree(ranks, table(), 3)
    assert choice.tree.spec == "chain:3" and choice.tokens_per_second > choice.ar_tokens_per_second
    assert choice.ranking[0][1] == pytest.approx(4.0) and "chain:3" in choice.describe()


def test_second_ranks_favour_siblings():
    ranks = Counter({(1, MISS, MISS): 60, (0, 0, MISS): 40})
    flat = table(points=((4, 0.08), (200, 0.0801)))  # rows nearly free: wide trees cost nothing extra
    assert choose_tree(ranks, flat, 3).tree.max_rank >= 2


def test_when_no_tree_pays_the_choice_is_ar():
    ranks = Counter({(MISS, MISS, MISS): 90, (0, MISS, MISS): 10})
    choice = choose_tree(ranks, table(ar=0.02), 3)
    assert choice.tree is None and choice.tokens_per_second == pytest.approx(50.0)
    assert "no tree pays" in choice.describe()
