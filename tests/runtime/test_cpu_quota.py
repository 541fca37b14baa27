"""Torch's thread count from the container's CPU quota: cgroup v2, v1, none."""

import os

import pytest

from bita.runtime.cpu_quota import container_cpus, cpus_from_quota, read_quota


@pytest.mark.parametrize("quota,period,available,cpus", [
    (200000, 100000, 16, 2),  # a 2-vCPU Space on a 16-core host
    (150000, 100000, 16, 2),  # 1.5 CPUs: rounded up
    (50000, 100000, 16, 1),  # half a CPU: still one thread
    (800000, 100000, 4, 4),  # a quota above the CPUs this process may use
    (None, 100000, 6, 6),  # cgroup v2 "max": no quota
    (-1, 100000, 6, 6),  # cgroup v1's -1: no quota
    (None, None, 0, 1),  # nothing known: one thread, never zero
])
def test_cpus_from_quota(quota, period, available, cpus):
    assert cpus_from_quota(quota, period, available) == cpus


def test_cgroup_v2_is_read_first(tmp_path):
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("400000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert read_quota(tmp_path) == (200000, 100000)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert read_quota(tmp_path) == (None, 100000)


@pytest.mark.parametrize("folder", ["cpu", "cpu,cpuacct"])
def test_cgroup_v1(tmp_path, folder):
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / folder / "cpu.cfs_period_us").write_text("100000\n")
    assert read_quota(tmp_path) == (300000, 100000)
    assert container_cpus(tmp_path) == min(3, len(os.sched_getaffinity(0)))


def test_no_cgroup_means_the_affinity(tmp_path):
    assert read_quota(tmp_path) == (None, None)
    assert container_cpus(tmp_path) == len(os.sched_getaffinity(0))
