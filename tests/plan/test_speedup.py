"""Where the speed comes from: expected speedup as tau x AR pass / step, and an answer's point from its records."""

import pytest
from viz_records import generation

from bita.plan.speedup import answer_point, expected_speedup, speedup_grid


def test_speedup_is_tau_times_the_ar_pass_over_the_step():
    assert expected_speedup(2.0, 0.030, 0.025) == pytest.approx(2 * 25 / 30)
    assert speedup_grid([1.0, 3.0], [0.02, 0.04], 0.02) == [[1.0, 3.0], [0.5, 1.5]]


def test_an_answers_point_takes_its_tree_passes_only():
    records = generation()  # a prefill, then tree passes emitting 3, 1, 2 and 2 tokens
    for seconds, record in zip((0.5, 0.03, 0.02, 0.03, 0.04), records):
        record.seconds = seconds
    point = answer_point(records, ar_seconds=0.025, raced=1.3)
    assert point.tau == pytest.approx(8 / 4) and point.step_seconds == pytest.approx(0.03)
    assert point.expected == pytest.approx(2 * 25 / 30) and point.raced == 1.3
    assert answer_point(records[:1], 0.025) is None
