"""What-if branches on the real default model: a replay record's round trip, its checks (a position past the
answer, a token id the tokenizer lacks), and a replayed branch equal to plain greedy decoding of its context."""

import pytest

from bita.branch import BranchRecord, check_branch, forced, replay
from bita.errors import BitaError
from bita.generate import Request, collect, stream_ar
from bita.model.loading import encode_chat

ADAPTER = "SmolLM2-135M-Instruct-bita"


def record_of(prompt_ids: list[int], answer: list[int], position: int, token: int, **sampling) -> BranchRecord:
    return BranchRecord(prompt_ids, answer, position, token, ADAPTER, "efficient:3/chain-groups", "both", 12,
                        **sampling)


def test_a_record_round_trips_through_json_and_bad_ones_are_refused():
    record = record_of([1, 2, 3], [7, 8, 9], 1, 42, temperature=0.7, top_p=0.9, top_k=0, seed=5)
    assert BranchRecord.from_json(record.to_json()) == record
    assert record.context == [1, 2, 3, 7, 42] and record.sampling.seed == 5
    with pytest.raises(BitaError, match="not a branch record"):
        BranchRecord.from_json('{"position": 1}')
    assert forced(" 3:17") == (3, 17)
    with pytest.raises(BitaError, match="POSITION:TOKEN"):
        forced("3:fruit")


def test_a_position_past_the_answer_and_an_unknown_token_are_refused():
    check_branch(record_of([1], [7, 8, 9], 2, 99), vocabulary=100)
    with pytest.raises(BitaError, match="it has 3 tokens, positions 0 to 2"):
        check_branch(record_of([1], [7, 8, 9], 3, 5), vocabulary=100)
    with pytest.raises(BitaError, match="token id 100 is not in this tokenizer's vocabulary"):
        check_branch(record_of([1], [7, 8, 9], 0, 100), vocabulary=100)


def test_a_replayed_branch_is_greedy_decoding_of_its_context(default_model):
    """Force the runner-up at token 2 of an answer: BiTA's branch is our AR loop's answer to prompt + the
    answer's first two tokens + the forced one (lossless), and a bad record fails before any decoding."""
    prompt_ids = encode_chat(default_model.tokenizer, [{"role": "user", "content": "Name three fruits."}])
    answer = collect("ar", default_model, stream_ar(default_model, Request(prompt_ids, 6, record_verdicts=True)))
    runner_up = answer.steps[2].verdicts[0].runner_up.token
    record = record_of(prompt_ids, answer.tokens, 2, runner_up)
    branch = replay(default_model, record)
    expected = collect("ar", default_model, stream_ar(default_model, Request(record.context, 12)))
    assert branch.tokens == expected.tokens and branch.tokens and record.context[-1] == runner_up
    with pytest.raises(BitaError, match="not in the answer"):
        replay(default_model, record_of(prompt_ids, answer.tokens, 6, runner_up))
