"""How many CPUs this container may use: torch's thread count for the app.

A container held to 2 CPUs by its CPU quota (a 2-vCPU Space) can still see every core of its
host, and torch starts one intra-op thread per core it sees: the threads then wait on each other
and on the quota, and every pass slows down. The quota is in the cgroup's ``cpu.max`` (cgroup v2:
"QUOTA PERIOD" or "max PERIOD") or ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (v1; -1: none).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
V1_FOLDERS = ("cpu", "cpu,cpuacct")


def cpus_from_quota(quota_us: int | None, period_us: int | None, available: int) -> int:
    """``available`` CPUs, capped by a quota of ``quota_us`` per ``period_us`` microseconds rounded up
    (no quota: None or a value below 1); at least 1."""
    if quota_us is None or period_us is None or quota_us < 1 or period_us < 1:
        return max(1, available)
    return max(1, min(available, math.ceil(quota_us / period_us)))


def read_quota(root: Path = CGROUP) -> tuple[int | None, int | None]:
    """(quota, period) in microseconds from the cgroup under ``root``, v2 first; (None, None) where
    none is set or none can be read."""
    v2 = root / "cpu.max"
    if v2.is_file():
        quota, period = v2.read_text().split()[:2]
        return (None if quota == "max" else int(quota)), int(period)
    for folder in V1_FOLDERS:
        quota_file, period_file = root / folder / "cpu.cfs_quota_us", root / folder / "cpu.cfs_period_us"
        if quota_file.is_file() and period_file.is_file():
            return int(quota_file.read_text()), int(period_file.read_text())
    return None, None


def container_cpus(root: Path = CGROUP) -> int:
    """The CPUs this process may run on (its affinity), capped by the container's CPU quota."""
    return cpus_from_quota(*read_quota(root), len(os.sched_getaffinity(0)))
