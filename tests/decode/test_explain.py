"""What the verifier said of each token: top-k, runner-up, margins, entropy and near ties from given logits,
greedy and sampled; and the verdicts a tiny model's BiTA and AR runs record, one per emitted token."""

import pytest
import torch
from conftest import random_prompts, tiny_model, tree_of

from bita.decode.autoregressive import ar_steps
from bita.decode.explain import TOP_K, Warp, emitting_rows, near_tie, rounding_gap, row_verdicts
from bita.decode.sampling import GREEDY, Sampling, target_probs
from bita.decode.step import Chains, Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.model.adapter import BitaAdapter
from bita.runtime.runtime import runtime_of

# two rows over 8 tokens: row 0 clear-cut (token 3), row 1 a tie within fp32 rounding between tokens 5 and 1
LOGITS = torch.tensor([[0.0, 1.0, 0.5, 4.0, 2.0, -1.0, 0.0, 0.2],
                       [0.1, 20.0, 0.0, 3.0, -2.0, 20.0 - 3e-6, 1.0, 0.0]])


def test_greedy_verdicts_give_the_top_k_of_the_softmax_the_runner_up_and_the_entropy():
    first, second = row_verdicts(LOGITS, [3, 1], [[4, 0], []], GREEDY, torch.float32)
    probs = torch.softmax(LOGITS, -1)
    assert [a.token for a in first.top] == [3, 4, 1, 2, 7] and len(first.top) == TOP_K
    assert first.chosen.token == 3 and first.chosen.prob == pytest.approx(float(probs[0, 3]))
    assert [a.prob for a in first.top] == pytest.approx(probs[0].sort(descending=True).values[:TOP_K].tolist())
    assert all(a.prob == a.raw_prob for a in first.top)  # greedy: one distribution
    assert first.runner_up.token == 4 and first.logit_margin == pytest.approx(2.0)
    assert first.prob_margin == pytest.approx(float(probs[0, 3] - probs[0, 4]))
    assert first.entropy == pytest.approx(float(-(probs[0] * probs[0].log()).sum()), rel=1e-6)
    assert [(a.token, a.prob) for a in first.rejected] == [(4, pytest.approx(float(probs[0, 4]))),
                                                           (0, pytest.approx(float(probs[0, 0])))]
    assert not first.near_tie and second.near_tie and second.runner_up.token == 5 and second.rejected == ()


def test_at_an_exact_tie_the_chosen_token_comes_first_and_the_other_is_the_runner_up():
    """bf16 logits tie exactly (its steps are 0.125 at 20), and argmax and top-k may break the tie differently
    (a real run: argmax took ' (' where top-k put ' -' first): whichever token was chosen comes first."""
    logits = torch.tensor([[0.0, 20.0, 1.0, 20.0, 2.0, 3.0]], dtype=torch.bfloat16)
    for chosen, other in ((1, 3), (3, 1)):
        verdict = row_verdicts(logits, [chosen], [[]], GREEDY, torch.bfloat16)[0]
        assert [a.token for a in verdict.top[:2]] == [chosen, other] and verdict.runner_up.token == other
    assert verdict.logit_margin == 0 and verdict.prob_margin == 0 and verdict.near_tie


def test_near_ties_are_the_benchmarks_rule_in_the_models_dtype():
    """Half a logit apart at a top logit of 20: within bf16 rounding, far outside fp32's."""
    logits = torch.tensor([[20.0, 19.5, 0.0, 0.0, 0.0, 0.0]])
    assert row_verdicts(logits, [0], [[]], GREEDY, torch.bfloat16)[0].near_tie
    assert not row_verdicts(logits, [0], [[]], GREEDY, torch.float32)[0].near_tie
    assert rounding_gap(-20.0, torch.bfloat16) == rounding_gap(20.0, torch.bfloat16) == pytest.approx(4 * 20 / 128)
    assert near_tie(-0.1, 0.2) and near_tie(0.2, 0.2) and not near_tie(0.3, 0.2)


def test_sampled_verdicts_read_the_warped_distribution_and_keep_the_raw_one_beside_it():
    """A draw of an unlikely token (6, outside the top 5 after top-k 3 cut it to 0): its probability and the
    runner-up (the likeliest, token 3), a negative margin, and the raw softmax beside the warped one."""
    sampling = Sampling(temperature=0.5, top_k=3, seed=0)
    noise = torch.linspace(0.5, 2.0, LOGITS.shape[1])
    verdict = row_verdicts(LOGITS[:1], [6], [[4]], sampling, torch.float32, [noise])[0]
    warped, raw = target_probs(LOGITS[:1], sampling)[0], torch.softmax(LOGITS[0], -1)
    assert verdict.chosen.token == 6 and verdict.chosen.prob == 0.0 and verdict.chosen.raw_prob > 0
    assert verdict.runner_up.token == 3 and verdict.logit_margin == pytest.approx(-4.0)
    assert [a.prob for a in verdict.top] == pytest.approx(warped[[3, 4, 1, 2, 7]].tolist())
    assert [a.raw_prob for a in verdict.top] == pytest.approx(raw[[3, 4, 1, 2, 7]].tolist())
    assert verdict.rejected[0].prob == pytest.approx(float(warped[4]))
    assert verdict.entropy == pytest.approx(float(torch.special.entr(warped).sum()), rel=1e-6)
    tempered = torch.softmax(LOGITS[0] / 0.5, -1)  # the warp: top-k 3 kept tokens 3, 4, 1
    assert verdict.warp == Warp(0.5, 3, 1.0, 3, pytest.approx(float(tempered[[3, 4, 1]].sum())))
    assert [a.tempered for a in verdict.top] == pytest.approx(tempered[[3, 4, 1, 2, 7]].tolist())
    assert [a.noise for a in verdict.top] == pytest.approx(noise[[3, 4, 1, 2, 7]].tolist())
    assert verdict.chosen.noise == pytest.approx(float(noise[6]))


def test_the_rows_that_chose_a_passes_tokens_and_the_drafts_each_turned_down():
    """efficient:3,2,1: nodes 0, 1, 2 at depth 1; 3, 4 under 0; 5 under 3. Accepting 0 then 3: the root's
    row turned down 1 and 2, node 0's row turned down 4, node 3's row (the bonus's) turned down 5."""
    tree = parse_tree_spec("efficient:3,2,1")
    assert emitting_rows(tree, (0, 3)) == ([0, 1, 4], [[1, 2], [4], [5]])
    assert emitting_rows(tree, ()) == ([0], [[0, 1, 2]])


@pytest.mark.parametrize("sampling", [GREEDY, Sampling(temperature=0.8, top_p=0.9, seed=3)])
def test_a_tiny_models_records_carry_one_verdict_per_emitted_token(sampling, one_thread):
    """BiTA (a tree with siblings, so drafts are turned down) and our AR loop: one verdict per emitted token,
    the chosen token the emitted one, greedy the top-1 of its row; the drafts the last row turned down are
    the pass's rejected alternatives; without the flag, none."""
    model = tiny_model("llama")
    runtime, adapter = runtime_of(model), BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=1)
    for prompt in random_prompts(3, seed=5):
        decoding = Decoding(runtime, adapter, tree_of("efficient:3,2,2"), sampling, Chains(ngram_tokens=3),
                            record_verdicts=True)
        records = list(bita_steps(decoding, prompt, StopCondition(20)))
        records += list(ar_steps(runtime, prompt, StopCondition(5), sampling, record_verdicts=True))
        for record in records:
            assert [v.chosen.token for v in record.verdicts] == record.emitted
            if sampling.greedy:
                assert all(v.top[0].token == v.chosen.token and v.logit_margin >= 0 for v in record.verdicts)
            if len(record.emitted) == len(record.accepted) + 1:
                assert [a.token for a in record.verdicts[-1].rejected] == [n.token for n in
                                                                           record.rejected_alternatives()]
        assert any(v.rejected for r in records for v in r.verdicts)
    plain = bita_steps(Decoding(runtime, adapter, tree_of("efficient:3,2,2")), random_prompts(1, seed=5)[0],
                       StopCondition(8))
    assert all(r.verdicts == [] for r in plain)
