"""How a sampled token was drawn: the warp's steps and the race, from a verdict recorded over given logits and
race draws, and from a tiny model's sampled BiTA run (every drawn token the race's winner, every rejected draft
a loser)."""

import pytest
import torch
from conftest import random_prompts, tiny_model, tree_of
from viz_records import SAMPLED_LOGITS, sampled_record

from bita.decode.explain import row_verdicts
from bita.decode.records import StepRecord
from bita.decode.sampled_choice import sampled_choice
from bita.decode.sampling import GREEDY, Sampling, race_winner, target_probs
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.model.adapter import BitaAdapter
from bita.runtime.runtime import runtime_of

LOGITS = torch.tensor(SAMPLED_LOGITS)
SAMPLING = Sampling(temperature=0.7, top_k=4, top_p=0.9, seed=0)


def sampled(chosen: int, drafts: list[int], accepted: list[int], noise: torch.Tensor) -> StepRecord:
    return sampled_record(chosen, drafts, accepted, noise, SAMPLING)


def test_the_warp_step_by_step_and_a_rejected_draft_with_its_race_numbers():
    noise = torch.linspace(0.4, 2.2, LOGITS.shape[1])
    probs = target_probs(LOGITS, SAMPLING)[0]
    winner = race_winner(probs, noise)
    loser = 4 if winner != 4 else 8
    choice = sampled_choice(sampled(winner, [loser, 5], [], noise), 0)
    tempered = torch.softmax(LOGITS[0] / 0.7, -1)
    kept = probs > 0
    assert choice.warp.kept == int(kept.sum()) <= 4
    assert choice.warp.kept_mass == pytest.approx(float(tempered[kept].sum()))
    assert [t.token for t in choice.tokens[:5]] == LOGITS[0].argsort(descending=True)[:5].tolist()
    assert all(t.tempered == pytest.approx(float(tempered[t.token])) for t in choice.tokens)
    assert all(t.kept == bool(kept[t.token]) for t in choice.tokens)
    assert choice.drawn.token == winner and choice.drawn.score == pytest.approx(float((probs / noise).max()))
    (first, cut) = choice.drafts
    assert first.draft.token == loser and not first.accepted and first.draft.score < choice.drawn.score
    assert cut.draft.token == 5 and not cut.draft.kept and cut.draft.score == 0  # top-k cut it: it cannot win
    assert 5 in [t.token for t in choice.tokens]  # a draft outside the top tokens is shown too


def test_an_accepted_draft_is_the_winner_and_greedy_has_no_sampled_choice():
    noise = torch.ones(LOGITS.shape[1])
    record = sampled(3, [8], [3], noise)  # token 3 was the accepted depth-1 draft, 8 its sibling
    choice = sampled_choice(record, 0)
    assert [(j.draft.token, j.accepted) for j in choice.drafts] == [(3, True), (8, False)]
    record.verdicts = row_verdicts(LOGITS, [3], [[8]], GREEDY, torch.float32)
    with pytest.raises(ValueError, match="no sampled verdict"):
        sampled_choice(record, 0)


def test_a_tiny_models_sampled_tokens_won_their_race_and_its_rejected_drafts_lost(one_thread):
    model = tiny_model("llama")
    runtime, adapter = runtime_of(model), BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=1)
    sampling = Sampling(temperature=1.5, top_k=50, top_p=0.95, seed=4)
    for prompt in random_prompts(3, seed=8):
        decoding = Decoding(runtime, adapter, tree_of("efficient:3,2,2"), sampling, record_verdicts=True)
        for record in bita_steps(decoding, prompt, StopCondition(16)):
            for slot in range(len(record.emitted)):
                choice = sampled_choice(record, slot)
                assert choice.drawn.kept and all(t.score <= choice.drawn.score for t in choice.tokens)
                assert all(j.accepted == (j.draft.token == choice.drawn.token) for j in choice.drafts)
                assert 1 <= choice.warp.kept <= 50 and 0 < choice.warp.kept_mass <= 1 + 1e-6
