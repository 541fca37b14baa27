"""Forecasts from a pass sample (static and dynamic trees, n-gram chains) and the auto choice
over them: pure, no model."""

import pytest
from conftest import RAW_PROBABILITIES, tiny_model

from bita.decode.masks import decode_layout
from bita.drafts.dynamic import DynamicShape
from bita.drafts.tree import EMPTY_TREE, parse_tree_spec
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.model.rank_stats import MISS, decode_pass, encode_pass
from bita.plan.acceptance import Forecast, forecast
from bita.plan.autotree import CostTable, choose_tree
from bita.plan.dynamic_plan import ScoredPass, forecast_passes, stored_passes
from bita.plan.tree_plan import resolve_tree

SURE = [[0.9, 0.05, 0.02, 0.01], [0.9, 0.05, 0.02, 0.01], [0.9, 0.05, 0.02, 0.01]]
UNSURE = [[0.4, 0.35, 0.1, 0.05], [0.3, 0.3, 0.2, 0.1], [0.3, 0.3, 0.2, 0.1]]


def scored(ranks, probs=SURE, ngram=(0, 0)):
    return ScoredPass(tuple(ranks), probs, *ngram)


def test_without_chains_the_sample_forecast_is_the_rank_forecast():
    passes = [scored((0, 0, MISS)), scored((1, MISS, MISS)), scored((0, 1, 0)), scored((MISS, 0, 0))]
    for spec in ("chain:3", "efficient:2,2,1", "efficient:3,2,2/chain-groups"):
        tree = parse_tree_spec(spec)
        assert forecast_passes(tree, passes) == forecast(tree, [p.ranks for p in passes])


def test_a_chain_that_is_right_further_wins_and_leaves_the_next_pass_without_masks():
    passes = [scored((0, MISS, MISS), ngram=(4, 3)), scored((0, 0, 0), ngram=(4, 1)), scored((MISS,) * 3)]
    tree = parse_tree_spec("chain:3")
    guess = forecast_passes(tree, passes, ngram_tokens=4)
    assert guess.tokens_per_drafted_pass == pytest.approx((4 + 4 + 1) / 3)
    assert guess.draftless_share == pytest.approx(1 / 3)
    assert guess.rows == pytest.approx(decode_layout(tree, 3).rows + 8 / 3)  # the tree's rows and the chains' tokens
    assert guess.tokens_per_draftless_pass == pytest.approx(1 + 4 / 3)
    assert guess.draftless_repeat == pytest.approx(2 / 3)
    shorter = forecast_passes(parse_tree_spec("chain:3"), passes, ngram_tokens=2)  # chains cut to 2: right 2, 1
    assert shorter.tokens_per_drafted_pass == pytest.approx((3 + 4 + 1) / 3)


def test_the_corpus_chain_is_cut_by_its_gate_and_the_better_chain_is_accepted():
    passes = [ScoredPass((0, MISS, MISS), SURE, 4, 1, corpus=(4, 3, 6)),  # a 6-token match, right 3 deep
              ScoredPass((0, MISS, MISS), SURE, 4, 1, corpus=(4, 0, 2)),  # a weak match, wrong at once
              ScoredPass((0, MISS, MISS), SURE, 4, 1)]  # calibrated without a corpus
    tree = parse_tree_spec("chain:1")
    plain = forecast_passes(tree, passes, ngram_tokens=4)
    gated = forecast_passes(tree, passes, 4, corpus_lengths=(0, 0, 0, 0, 0, 0, 4))  # only matches of 6 or more
    full = forecast_passes(tree, passes, 4, corpus_lengths=(4,))
    assert plain.tokens_per_drafted_pass == pytest.approx(2.0)
    assert gated.tokens_per_drafted_pass == full.tokens_per_drafted_pass == pytest.approx((4 + 2 + 2) / 3)
    assert gated.rows == pytest.approx(plain.rows + 4 / 3) and full.rows == pytest.approx(plain.rows + 8 / 3)
    assert forecast_passes(tree, passes, 4, corpus_lengths=(2,)).tokens_per_drafted_pass == pytest.approx(7 / 3)


def test_the_chain_alone_is_a_one_row_pass_plus_its_tokens():
    guess = forecast_passes(EMPTY_TREE, [scored((0, 0, 0), ngram=(4, 2)), scored((0, 0, 0), ngram=(0, 0))], 4)
    assert guess.tokens_per_pass == pytest.approx(2.0) and guess.rows == pytest.approx(1 + 2)


def test_dynamic_trees_keep_their_row_budget_and_adapt_to_the_drafts():
    shape = DynamicShape(10, 3, 4, 1.0, RAW_PROBABILITIES)
    sure = forecast_passes(shape, [scored((0, 0, 0))] * 3)
    unsure = forecast_passes(shape, [scored((1, 0, MISS), UNSURE)] * 3)
    assert sure.rows == unsure.rows == 10 and sure.tokens_per_pass == pytest.approx(4.0)
    assert unsure.tokens_per_drafted_pass >= 2.0  # the rank-1 depth-1 draft is in its tree (chain:3's misses it)
    assert forecast_passes(parse_tree_spec("chain:3"), [scored((1, 0, MISS), UNSURE)]).tokens_per_pass == 1.0


def test_auto_chooses_among_given_forecasts_by_tokens_per_second():
    costs = CostTable("test", 0.05, [(1, 0.05), (10, 0.06), (30, 0.15)])
    passes = [scored((0, 0, 0))] * 4
    dynamic = DynamicShape(10, 3, 4, 1.0, RAW_PROBABILITIES)
    wide = parse_tree_spec("full:3,3,2")  # 1 + 33 + 34*3 rows: accepts as much, costs far more
    choice = choose_tree(None, costs, 3, forecasts=[(wide, forecast_passes(wide, passes)),
                                                    (dynamic, forecast_passes(dynamic, passes))])
    assert choice.tree is dynamic and choice.ranking[0][0] == "dynamic:10/3"
    assert choice.tokens_per_second == pytest.approx(4 / 0.06)


def test_the_long_run_mixes_drafted_and_draftless_passes():
    guess = Forecast("x", tokens_per_drafted_pass=3.0, draftless_share=0.5, rows=10, draftless_rows=4,
                     tokens_per_draftless_pass=2.0, draftless_repeat=0.5)
    assert guess.shares() == pytest.approx((0.5, 0.5)) and guess.tokens_per_pass == pytest.approx(2.5)
    assert guess.tokens_per_second(0.1, 0.05) == pytest.approx(2.5 / 0.075)
    plain = Forecast("y", 3.0, 0.5, 10, 4)  # draftless passes emit one token and are followed by a drafted one
    assert plain.tokens_per_pass == pytest.approx((3.0 + 0.5) / 1.5)


def test_a_stored_pass_reads_back_and_a_corrupted_sample_is_refused():
    line = encode_pass([0, -1, 2], [[546, 91], [382, 166], [213, 93]], [4, 2])
    assert decode_pass(line) == ((0, -1, 2), [[0.546, 0.091], [0.382, 0.166], [0.213, 0.093]], 4, 2, None)
    assert encode_pass([0], [[546]], [4, 2, 0, 0, -1]) == "0|546|4,2"  # no corpus: the n-gram chain's alone
    assert decode_pass(encode_pass([0], [[546]], [4, 2, 3, 1, 7]))[2:] == (4, 2, (3, 1, 7))

    class Config:
        acceptance = {"pass_sample": [line, "0,0|garbage"]}

    class Adapter:
        config = Config()

    with pytest.raises(BitaError, match="corrupted"):
        stored_passes(Adapter())


@pytest.mark.parametrize("spec,message", [("dynamic:100000", "at most 512 rows"),
                                          ("dynamic:²", "expected 'dynamic:ROWS'"),
                                          ("dynamic:12/³", "expected 'dynamic:ROWS'")])
def test_a_dynamic_tree_of_absurd_rows_or_of_other_digits_is_refused_in_one_line(spec, message):
    adapter = BitaAdapter.create(tiny_model("llama"), prompt_tokens=4, mask_tokens=3, seed=1)
    with pytest.raises(BitaError, match=message):
        resolve_tree(spec, adapter)
