"""benchmarks/exposed_host.py: the stretch from a verdict's read to the next launch, split at the stamps between, and
a short run of the stand-in that leaves nothing patched behind."""

import pytest

from benchmarks.exposed_host import measure, segments, stand_in, walk_as_on_a_gpu
from bita.decode import pass_logits, step
from bita.runtime.padded import PaddedLean


def test_a_step_is_split_at_its_stamps_between_the_read_and_the_replay():
    steps = [{"settle_pass": 0.5, "read": 1.0, "launch_pass": 1.000010, "fill": 1.000050, "replay": 1.000080},
             {"fill": 2.0, "replay": 2.000010},  # a prefill: no read before it
             {"read": 3.0, "fill": 3.000020, "replay": 3.000030}]
    figures = segments(steps)
    assert figures["exposed"] == pytest.approx([80, 30])
    assert figures["read -> launch_pass"] == pytest.approx([10])
    assert figures["fill -> replay"] == pytest.approx([30, 10])
    assert figures["read -> fill"] == pytest.approx([20]) and "settle_pass -> read" not in figures


def test_the_stand_in_measures_each_step_and_puts_back_what_it_patched():
    originals = pass_logits.on_device, step.queue_judgement, step.launch_pass
    with walk_as_on_a_gpu():
        forward, run = stand_in("efficient:2,2", 2)
        figures, operations, names = measure(forward, run, 12)
    assert len(figures["exposed"]) >= 10 and min(figures["exposed"]) > 0
    assert operations and min(operations) > 0 and sum(names.values()) == sum(operations)  # the staging's, the keep's
    assert (pass_logits.on_device, step.queue_judgement, step.launch_pass) == originals
    assert "_run" not in vars(forward) and type(forward) is PaddedLean
