"""The inspector's sentences: one per verification step, generated from hand-built records."""

from viz_records import decode, generation, ngram_record

from bita.decode.records import StepRecord
from viz.explain import mask_proposals, mask_proposals_table, verification_steps


def test_accepted_steps_then_the_rejected_depth_and_the_bonus():
    steps = verification_steps(generation()[1], decode)
    assert len(steps) == 4
    assert steps[0].startswith("1. After “␣mat” the model's own next token is “.” = the depth-1 candidate (rank 0")
    assert "**accepted**" in steps[0] and "“↵” = the depth-2 candidate" in steps[1]
    assert "candidates were “␣a”: **rejected**, and “&lt;script&gt;” is this pass's bonus" in steps[2]
    assert steps[3].endswith("emitted 3 tokens (2 accepted + the bonus).")


def test_nothing_accepted_lists_every_depth_one_candidate():
    steps = verification_steps(generation()[2], decode)
    assert steps[0] == ("1. After “&lt;script&gt;” the model's own next token is “␣cat”; the depth-1 candidates "
                        "were “␣ok”, “␣hat”, “␣ran”: **rejected**, and “␣cat” is this pass's bonus token.")
    assert steps[1].endswith("emitted 1 token (0 accepted + the bonus).")


def test_a_fully_accepted_tree_ends_below_its_deepest_node():
    steps = verification_steps(generation()[4], decode)
    assert [s.count("**accepted**") for s in steps[:3]] == [1, 1, 1]
    assert "nothing was drafted deeper, so “.” is this pass's bonus token" in steps[3]


def test_n_gram_candidates_are_named_as_such():
    steps = verification_steps(ngram_record(), decode)
    assert "(rank 0, p=0.45, and the context n-gram): **accepted**" in steps[0]
    assert "= the depth-2 candidate (context n-gram): **accepted**" in steps[1]
    assert "candidates were “␣mat”: **rejected**" in steps[2]


def test_prefill_and_plain_ar_passes_get_one_sentence():
    prefill = verification_steps(generation()[0], decode)
    ar = verification_steps(StepRecord(index=3, kind="ar", position=9, root=2, rows=1, bonus=3), decode)
    assert len(prefill) == 1 and "first token of the answer" in prefill[0] and "“␣mat”" in prefill[0]
    assert ar == ["A plain AR pass: after “␣cat” the model's own next token is “␣sat”; nothing was drafted, "
                  "so the pass emits that one token."]


def test_a_sampled_pass_tells_of_the_race_not_argmaxes():
    """generation()[1] read as sampled: the race picked depth 1's first candidate, depth 2's first,
    and at depth 3 the bonus, not its only candidate."""
    record = generation()[1]
    record.sampled = True
    steps = verification_steps(record, decode)
    assert len(steps) == 4 and "model's own next token" not in " ".join(steps)
    assert steps[0].startswith("1. After “␣mat” the race (the model's probabilities against this position's random "
                               "draw) picked the depth-1 candidate “.” (rank 0") and "**accepted**" in steps[0]
    assert steps[2] == ("3. After “↵” the race (the model's probabilities against this position's random draw) "
                        "picked the bonus “&lt;script&gt;”; the candidates “␣a” lost.")
    assert steps[3].endswith("(2 accepted + the bonus), the tokens AR sampling draws with this seed.")
    full = generation()[4]
    full.sampled = True
    assert verification_steps(full, decode)[3] == ("4. After “␣mat” the race (the model's probabilities against this "
                                                   "position's random draw) picked the bonus “.”.")


def test_the_mask_proposals_that_drafted_a_pass_per_depth_with_what_became_of_each():
    previous, record = generation()[:2]
    previous.next_drafts = [[(7, 0.6), (14, 0.2), (15, 0.1), (16, 0.05)], [(8, 0.5), (10, 0.3)], [(11, 0.4)]]
    assert mask_proposals(previous, record) == [
        [(7, 0.6, "accepted"), (14, 0.2, "rejected"), (15, 0.1, "rejected"), (16, 0.05, "not fed")],
        [(8, 0.5, "accepted"), (10, 0.3, "rejected")], [(11, 0.4, "rejected")]]
    table = mask_proposals_table(previous, record, decode).splitlines()
    assert table[0].startswith("The masks of pass 0 proposed this pass's candidates, top 4 per depth")
    assert table[4] == "| 1 | “.” 60 % ✓ | “␣x” 20 % ✗ | “&amp;” 10 % ✗ | “␣ok” 5.0 % – |"
    assert table[6] == "| 3 | “␣a” 40 % ✗ |"
    assert mask_proposals_table(generation()[0], generation()[0], decode) == ""  # a prefill had no mask drafts
    previous.sampled = True  # sampled drafts are raced, and the table says what that means
    assert mask_proposals_table(previous, record, decode).splitlines()[0].startswith(
        "The masks of pass 0 proposed this pass's candidates, 4 per depth, raced: the first is what the race")
