"""The side-by-side race: alternation, per-lane timing and the speedup, with hand-made records."""

import time

import pytest

from bita.decode.records import StepRecord
from bita.decode.sampling import Sampling
from bita.plan.tree_plan import TreePlan
from bita.serve.race import Lane, drafted, race, speedup
from bita.serve.reports import race_table, status_line


def passes(kind: str, emitted: list[list[int]], seconds: float, log: list[str]):
    for index, tokens in enumerate(emitted):
        log.append(f"{kind}{index}")
        yield StepRecord(index=index, kind=kind, position=index, root=0, rows=1, emitted=tokens, seconds=seconds,
                         finish="length" if index == len(emitted) - 1 else None)


def test_lanes_alternate_one_pass_each_and_time_only_their_own_passes():
    log: list[str] = []
    ar = passes("ar", [[1], [2], [3], [4]], 0.05, log)
    bita = passes("tree", [[1, 2], [3, 4]], 0.08, log)
    rounds = list(race(("AR", ar), ("BiTA", bita)))
    assert log == ["ar0", "tree0", "ar1", "tree1", "ar2", "ar3"]  # BiTA finished after its second pass
    ar_lane, bita_lane = rounds[-1]
    assert ar_lane.tokens == bita_lane.tokens == [1, 2, 3, 4] and ar_lane.finished and bita_lane.finished
    assert (ar_lane.passes, bita_lane.passes) == (4, 2)
    assert ar_lane.tokens_per_s == pytest.approx(4 / 0.2) and bita_lane.tokens_per_s == pytest.approx(4 / 0.16)
    assert speedup(bita_lane, ar_lane) == pytest.approx(1.25)
    assert drafted(bita_lane) and not drafted(ar_lane)


def test_a_pass_still_running_after_its_record_is_charged_to_its_own_lane():
    """An overlapping decoder hands a record over while its next pass runs: the race waits for the device before
    the other lane's turn and adds the wait to the lane that launched the pass."""
    log: list[str] = []
    running = {"lane": None}

    def overlapping(kind, emitted):
        for record in passes(kind, emitted, 0.01, log):
            running["lane"] = kind if record.finish is None else None  # its next pass is queued
            yield record

    def drain():
        if running["lane"] == "tree":
            time.sleep(0.05)  # what the device still had to run
        running["lane"] = None

    ar = passes("ar", [[1], [2]], 0.01, log)
    ar_lane, bita_lane = list(race(("AR", ar), ("BiTA", overlapping("tree", [[1, 2]] * 3)), drain))[-1]
    assert bita_lane.drained >= 0.1 and ar_lane.drained < 0.05  # two records handed over with a pass running
    assert bita_lane.seconds == pytest.approx(0.03 + bita_lane.drained)


def test_an_empty_stream_finishes_at_once_and_speedup_waits_for_timed_passes():
    rounds = list(race(("AR", iter(())), ("BiTA", passes("tree", [[7]], 0.1, []))))
    ar_lane, bita_lane = rounds[-1]
    assert ar_lane.finished and ar_lane.passes == 0 and bita_lane.tokens == [7]
    assert speedup(bita_lane, ar_lane) == 0.0


def test_a_race_says_whether_both_lanes_gave_the_same_text():
    sampling, plan = Sampling(0.8, seed=11), TreePlan(None, "plain AR")

    def table(ar_tokens, bita_tokens, finished=True):
        return race_table(Lane("AR", tokens=ar_tokens, finished=finished), Lane("BiTA", tokens=bita_tokens,
                                                                                 finished=finished), plan, sampling, "cpu")

    assert "both lanes drew the same text" in table([1, 2, 3], [1, 2, 3])
    assert "the same tokens so far" in table([1, 2], [1, 2, 3], finished=False)
    assert "part at token 2" in table([1, 2, 3], [1, 5, 3])
    greedy = race_table(Lane("AR", tokens=[1, 2], finished=True), Lane("BiTA", tokens=[1, 2], finished=True), plan,
                        Sampling(), "cpu")
    assert "one seed" not in greedy and "(both lanes gave the same text)" in greedy
    assert "(the lanes' texts part at token 2)" in race_table(Lane("AR", tokens=[1, 2], finished=True),
                                                             Lane("BiTA", tokens=[1, 3], finished=True), plan,
                                                             Sampling(), "cpu")
    assert "Seed 11 in Settings draws this answer again" in status_line([], plan, sampling, "cpu")
    assert "Seed" not in status_line([], plan, Sampling(), "cpu")
