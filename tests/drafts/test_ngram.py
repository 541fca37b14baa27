"""The n-gram proposer: longest earlier suffix, most recent occurrence; pure, no model."""

import random

from bita.drafts.ngram import NgramIndex, propose


def scan(history, max_tokens, max_match=3):
    """The proposer's definition, by brute force: longest earlier suffix, most recent occurrence."""
    for n in range(min(max_match, len(history) - 1), 0, -1):
        suffix = history[-n:]
        for end in range(len(history) - 2, n - 2, -1):
            if history[end - n + 1:end + 1] == suffix:
                return history[end + 1:end + 1 + max_tokens]
    return []


def test_longest_suffix_wins_over_a_more_recent_shorter_one():
    history = [5, 6, 7, 8, 9, 1, 7, 2, 3, 6, 7]  # "6 7" occurred at 1-2; "7" alone more recently at 6
    assert propose(history, 4) == [8, 9, 1, 7]
    assert propose(history, 4, max_match=1) == [2, 3, 6, 7]


def test_most_recent_occurrence_and_short_continuations():
    assert propose([1, 2, 3, 1, 2, 4, 1, 2], 3) == [4, 1, 2]  # "1 2" last seen before 4, not before 3
    assert propose([4, 4, 4, 4], 4) == [4]  # the only continuation of the latest "4 4 4" is the root
    assert propose([1, 2, 3], 4) == [] and propose([], 4) == [] and propose([7], 4) == []


def test_incremental_index_equals_the_brute_force_scan():
    rng = random.Random(0)
    for trial in range(30):
        history = [rng.randrange(6) for _ in range(rng.randrange(1, 60))]
        index = NgramIndex()
        for cut in range(len(history)):
            index.extend(history[cut:cut + 1])
            assert index.propose(4) == scan(history[:cut + 1], 4), (trial, cut)
        assert NgramIndex(history).propose(2) == scan(history, 2)
