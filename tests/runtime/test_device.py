"""Timing work queued on a device (bita/runtime/device.py): on a GPU by CUDA events, read once the work is done."""

import torch

from bita.runtime import device as device_module
from bita.runtime.device import PassTimer, long_tensor


def test_a_cpu_pass_timer_gives_wall_seconds():
    timer = PassTimer(torch.device("cpu"))
    timer.start()
    torch.ones(64, 64) @ torch.ones(64, 64)
    timer.stop()
    assert timer.events is None and 0 < timer.seconds() < 10


def test_a_gpu_pass_timer_reads_its_events_after_waiting_for_the_last(monkeypatch):
    """On a GPU nothing waits at ``stop`` (the verdict's kernels queue behind the pass); ``seconds`` waits for the
    end event, then reads the device's milliseconds between the two. The events are faked here."""
    happened = []

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing
            self.name = "start" if not happened.count("made") else "end"
            happened.append("made")

        def record(self):
            happened.append(f"record {self.name}")

        def synchronize(self):
            happened.append(f"wait {self.name}")

        def elapsed_time(self, end):
            happened.append("read")
            return 2.5

    monkeypatch.setattr(device_module.torch.cuda, "Event", Event)
    timer = PassTimer(torch.device("cuda"))
    timer.start()
    timer.stop()
    assert happened[-2:] == ["record start", "record end"]
    assert timer.seconds() == 0.0025 and happened[-2:] == ["wait end", "read"]


def test_a_long_tensor_holds_the_values_plus_the_offset_as_int64():
    assert long_tensor([3, 0, 7]).dtype == torch.long and long_tensor([3, 0, 7]).tolist() == [3, 0, 7]
    assert long_tensor([3, 0, 7], offset=5).tolist() == [8, 5, 12] and long_tensor([]).shape == (0,)
