"""Acceptance statistics from hand-made step records, and tree forecasts from them."""

import pytest

from bita.decode.records import StepRecord
from bita.decode.verify import walk_ranks
from bita.drafts.tree import ROOT, parse_tree_spec
from bita.model.rank_stats import MISS
from bita.plan.acceptance import draft_ranks, forecast


def record(emitted, drafts):
    """A pass that emitted ``emitted`` and drafted ``drafts`` (per depth, candidate tokens by rank)."""
    return StepRecord(index=0, kind="tree", position=0, root=0, rows=1, emitted=emitted,
                      next_drafts=[[(token, 0.5) for token in depth] for depth in drafts])


def test_ranks_score_each_pass_against_what_came_after():
    records = [record([10], [[11, 50], [12, 60], [70, 13]]),  # truth after it: 11 12 13
               record([11, 12, 13], [[80, 14], [81, 82], [15, 83]]),  # truth: 14 15 16
               record([14, 15], [[16, 90], [91, 17], [18, 92]]),  # truth: 16 17 (only two known)
               record([16, 17], [])]
    assert draft_ranks(records) == {0: (0, 0, 1), 1: (1, MISS, MISS)}


@pytest.mark.parametrize("spec,expected", [("efficient:2,2,2", 3), ("chain:3", 2), ("full:1,1,2", 3),
                                           ("efficient:1,2", 2), ("full:2,1,2", 3), ("efficient:1,1,1", 2)])
def test_walk_accepts_like_the_verification(spec, expected):
    assert walk_ranks(parse_tree_spec(spec), (0, 0, 1))[0] == expected


def test_walk_stops_at_a_miss_or_a_missing_rank():
    tree = parse_tree_spec("efficient:3,2")
    assert walk_ranks(tree, (MISS, 0)) == (0, ROOT)
    accepted, last = walk_ranks(tree, (2, 0))  # the rank-2 sibling at depth 1 is a leaf
    assert accepted == 1 and tree.nodes[last].rank == 2


def test_forecast_counts_draftless_passes_after_leaves_without_groups():
    ranks = [(0, 0, 0), (1, 0, 0), (MISS, 0, 0), (0, 1, 0)]
    with_groups = forecast(parse_tree_spec("efficient:2,2,1"), ranks)
    assert with_groups.tokens_per_drafted_pass == (4 + 2 + 1 + 3) / 4 and with_groups.draftless_share == 0
    assert with_groups.tokens_per_pass == pytest.approx(2.5)
    chain_groups = forecast(parse_tree_spec("efficient:2,2,1/chain-groups"), ranks)
    assert chain_groups.draftless_share == 0.5  # (1,..) and (0,1,..) end on a sibling leaf
    assert chain_groups.tokens_per_pass == pytest.approx((2.5 + 0.5) / 1.5)
    # throughput: 3 tokens per cycle over one tree pass (0.2 s) and half a draftless pass (0.1 s)
    assert chain_groups.tokens_per_second(0.2, 0.1) == pytest.approx(3.0 / 0.25)
    with pytest.raises(ValueError):
        forecast(parse_tree_spec("chain:2"), [])
