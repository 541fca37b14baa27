"""The corpus chain's gate: drafted where its calibrated tokens pay for their rows, off where they do
not. Pure, no model."""

import pytest

from bita.drafts.tree import parse_tree_spec
from bita.model.rank_stats import MISS
from bita.plan.autotree import CostTable
from bita.plan.corpus_plan import OFF, choose_gate
from bita.plan.dynamic_plan import ScoredPass, forecast_passes

SURE = [[0.9, 0.05], [0.9, 0.05], [0.9, 0.05]]
RATES = [[0.0] * 4, [0.0] * 4, [0.1, 0.05, 0.0, 0.0], [0.3, 0.2, 0.1, 0.05], [0.9, 0.8, 0.7, 0.6]]
# long matches are right to depth 4; short ones drafted in full are wrong
PASSES = [ScoredPass((0, MISS, MISS), SURE, 0, 0, corpus=(4, 4, 4))] * 3 + [
    ScoredPass((0, MISS, MISS), SURE, 0, 0, corpus=(4, 0, 2))] * 9


def gate_at(row_seconds, drafting=False):
    """chain:1 is 4 rows a pass; the rows past those cost ``row_seconds`` each."""
    costs = CostTable("test", 0.030, [(1, 0.030), (4, 0.030), (50, 0.030 + 46 * row_seconds)])
    return choose_gate(parse_tree_spec("chain:1"), 0, 4, RATES, PASSES, forecast_passes, costs, drafting)


def test_cheap_rows_draft_the_sure_chains_only_and_dear_rows_none():
    cheap = gate_at(0.0005)
    assert cheap.threshold == pytest.approx(0.6) and cheap.lengths == (0, 0, 0, 0, 4)
    assert cheap.tokens_per_second > cheap.off_tokens_per_second
    dear = gate_at(0.05)  # a row costs more than the chains' tokens earn
    assert dear.threshold is OFF and dear.lengths == () and dear.tokens_per_second == dear.off_tokens_per_second
    shown = gate_at(0.05, drafting=True)  # showing the source at work: never off
    assert shown.threshold is not OFF and any(shown.lengths)
    assert "calibrated chance" in cheap.describe() and "would not pay" in dear.describe()
