"""Threads for a request's passes on a shared machine: one fewer for each core another process keeps busy.

A pass's OpenMP threads meet at the end of every parallel region (a few hundred a pass). Where another process holds
one of two cores, a thread waits for a peer that is not running: on a 2-vCPU AMD EPYC (Zen 4), bf16, an AR pass after
300 tokens took 18.7 ms on 2 threads beside a busy core against 9.6 quiet, and 12.9 ms on 1 thread (12.4 quiet); no
OpenMP wait policy did better on both (passive: 16.1 busy but 16.0 quiet; benchmarks/busy_core.py). So a request
runs on ``threads_for(configured, others)`` threads, ``others`` read from the kernel's counters (``/proc/stat``, less
this process's own CPU time) since the previous reading: no pass is timed for it.

The native kernels give a row the same bits on any thread count (each output's sum is one thread's, in one order:
tests/runtime/test_threads.py), so the count changes a pass's speed, never its tokens; passes on torch's kernels
(transformers' forward) keep the configured count. In a container held by a CPU quota ``/proc/stat`` counts the
host's cores, so there the configured count stays too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from .cpu_quota import read_quota

STAT = Path("/proc/stat")
MAX_AGE_S = 600.0  # a reading older than this says too little of now
_last: tuple[float, float, float] | None = None  # (wall, all cores' busy seconds, this process's CPU seconds)
_configured: int | None = None  # configured_threads()


def threads_for(configured: int, others: float | None) -> int:
    """``configured`` threads less one for each core's worth of work ``others`` (None: unknown) holds; at least 1."""
    if others is None:
        return configured
    return max(1, configured - int(others + 0.5))


def _reading() -> tuple[float, float, float] | None:
    """(wall seconds, busy seconds of all cores, this process's CPU seconds), or None where /proc/stat is not read."""
    try:
        fields = STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    jiffies = [int(value) for value in fields]
    idle = jiffies[3] + (jiffies[4] if len(jiffies) > 4 else 0)  # idle + iowait
    busy = (sum(jiffies[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # user .. steal; guests are counted in user
    return time.monotonic(), busy, time.process_time()


def _others_between(first: tuple[float, float, float], second: tuple[float, float, float]) -> float:
    """Cores' worth of CPU other processes used between two ``_reading``s: all cores' busy seconds less this
    process's, over the wall seconds."""
    return max(0.0, (second[1] - first[1]) - (second[2] - first[2])) / (second[0] - first[0])


def others_busy(quota: bool) -> float | None:
    """Cores' worth of CPU other processes used since the previous call (None: no recent one, or ``quota``: a
    container whose /proc/stat counts the host's cores); takes a reading for the next call."""
    global _last
    now, previous = _reading(), _last
    _last = now
    if now is None or previous is None or quota or now[0] - previous[0] > MAX_AGE_S or now[0] <= previous[0]:
        return None
    return _others_between(previous, now)


def others_now(window_s: float = 0.2) -> float:
    """Cores' worth of CPU other processes use now: two readings ``window_s`` apart (0 where none can be read; the
    host's where a container's /proc/stat counts them)."""
    first = _reading()
    time.sleep(window_s)
    second = _reading()
    return 0.0 if first is None or second is None else _others_between(first, second)


def configured_threads() -> int:
    """The thread count this process runs with when no core is busy elsewhere: torch's at the model's load
    (``set_configured``), else torch's now."""
    return _configured if _configured is not None else torch.get_num_threads()


def set_configured(threads: int | None = None) -> None:
    """Give torch ``threads`` threads (None: as many as it has) and make that the count requests start from and go
    back to (the model's load; the app's ``--threads``)."""
    global _configured
    _configured = threads or torch.get_num_threads()
    torch.set_num_threads(_configured)


@contextmanager
def load_aware(native: bool) -> Iterator[int]:
    """Run the block on ``threads_for`` the configured count of torch's threads where ``native`` (passes on the
    native kernels), the configured count put back after; gives the count it ran on. Elsewhere threads stay."""
    if not native:
        yield torch.get_num_threads()
        return
    configured = configured_threads()
    quota = read_quota()[0]  # None or -1: no quota
    threads = threads_for(configured, others_busy(quota is not None and quota > 0))
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(configured)
        others_busy(False)  # this request's own work is not another's next time
