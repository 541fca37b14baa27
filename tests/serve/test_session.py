"""A session's conversation names its answers (an index or the what-if branch) and makes a branch's replay
record from the inspected answer, refusing one while any answer streams; a saved decoding opened from a file shows
as a conversation of its own, to view, not to branch."""

import pytest
from saved_records import tiny_decoding
from viz_records import generation

from bita.decode.sampling import Sampling
from bita.errors import BitaError
from bita.plan.tree_plan import TreePlan
from bita.saved import saved_run
from bita.serve.session import BRANCH, Conversation, Settings, Turn

SETTINGS = Settings(None, TreePlan(None, "ar"), 24, Sampling(0.8, 0.9, 40, seed=3), "shipped", "auto", "both")


def conversation() -> Conversation:
    answer = Turn([1, 2, 3], generation(), SETTINGS)  # emits 6 | 7 8 9 | 2 | 3 8 | 4 5
    return Conversation([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "..."}], [answer])


def test_a_branch_record_carries_the_answer_the_forced_token_and_the_settings_by_name():
    chat = conversation()
    record = chat.branch_record(-1, "2:11")
    assert (record.prompt_ids, record.answer_ids, record.position, record.token) == ([1, 2, 3], chat.turns[0].tokens,
                                                                                      2, 11)
    assert (record.adapter, record.tree, record.drafts, record.max_new_tokens) == ("shipped", "auto", "both", 24)
    assert (record.temperature, record.top_p, record.top_k, record.seed) == (0.8, 0.9, 40, 3)
    assert record.context == [1, 2, 3, 6, 7, 11]


def test_answers_by_name_and_the_branch_among_them():
    chat = conversation()
    assert chat.has(0) and chat.has(-1) and not chat.has(1) and not chat.has(BRANCH)
    chat.branch = Turn([1, 2, 3, 6, 7, 11], settings=SETTINGS)
    assert chat.has(BRANCH) and chat.answer(BRANCH) is chat.branch and chat.answer(-1) is chat.turns[0]
    assert (chat.label(-1), chat.label(0), chat.label(BRANCH)) == ("answer 1", "answer 1", "the what-if branch")


def test_a_branch_is_refused_while_an_answer_streams_without_an_answer_or_with_a_bad_choice():
    chat = conversation()
    chat.turns[0].streaming = True
    with pytest.raises(BitaError, match="an answer is still streaming"):
        chat.branch_record(0, "2:11")
    with pytest.raises(BitaError, match="send a message first"):
        Conversation().branch_record(-1, "2:11")
    with pytest.raises(BitaError, match="POSITION:TOKEN"):
        conversation().branch_record(0, "two:11")


def test_a_saved_decoding_opens_as_a_conversation_to_view_not_to_branch():
    loaded, adapter, request, run = tiny_decoding()
    saved = saved_run(run, loaded, request, adapter, "random-adapter")
    chat = Conversation.of_saved(saved, "the prompt")
    shown = chat.shown(saved.decode)
    assert chat.opened and not conversation().opened
    assert [m["role"] for m in shown] == ["user", "assistant"] and shown[0]["content"] == "the prompt"
    assert shown[1]["content"].count('class="bita-tok bita-turn-0 ') == len(saved.tokens)
    assert chat.answer(-1).tokens == saved.tokens and chat.answer(-1).context(2) == saved.context(2)
    with pytest.raises(BitaError, match="opened from a file is there to view"):
        chat.branch_record(-1, "2:11")
