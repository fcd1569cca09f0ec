"""How many CPUs this process may really use: affinity, CFS quota and cpuset.

A quota is invisible to ``os.cpu_count()`` and to the affinity mask
(``sched_getaffinity(2)``): CFS bandwidth control throttles a group's
runtime without changing the CPUs it may run on (Linux
Documentation/scheduler/sched-bwc.rst), so it is read from the process's own cgroup and
from each ancestor, the smallest one winning (a parent's quota caps its
children). loky/joblib read only the root paths (joblib/loky#634); a process
in a nested cgroup (a JupyterHub user's scope) would see no limit there.
"""

from __future__ import annotations

import os
from pathlib import Path

from coursehub.resources.cgroupfs import (
    CGROUP_ROOT,
    PROC_CGROUP,
    CgroupMount,
    locate_controller,
    read_value,
)


def affinity_cpus() -> int:
    """Return the number of CPUs in this process's affinity mask (>= 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_cpu_max(text: str) -> float | None:
    """Return the CPUs allowed by a v2 ``cpu.max`` line (``"50000 100000"`` -> 0.5).

    Returns None for ``"max ..."`` (no quota) or unreadable text.
    """
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    period = fields[1] if len(fields) > 1 else "100000"
    return parse_cfs_quota(fields[0], period)


def parse_cfs_quota(quota_us: str, period_us: str) -> float | None:
    """Return ``quota_us / period_us`` in CPUs (v1 ``cpu.cfs_quota_us``), None for -1 (no quota)."""
    try:
        quota, period = int(quota_us), int(period_us)
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def parse_cpu_list(text: str) -> int:
    """Return the number of CPUs in a kernel CPU list (``"0-3,8"`` -> 5; ``""`` -> 0)."""
    count = 0
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def quota_cpus(mount: CgroupMount) -> float | None:
    """Return the smallest CFS quota, in CPUs, over the own cgroup and its ancestors."""
    limits = []
    for directory in mount.ancestor_dirs():
        if mount.version == 2:
            text = read_value(directory / "cpu.max")
            limit = parse_cpu_max(text) if text else None
        else:
            quota = read_value(directory / "cpu.cfs_quota_us")
            period = read_value(directory / "cpu.cfs_period_us")
            limit = parse_cfs_quota(quota, period) if quota and period else None
        if limit is not None:
            limits.append(limit)
    return min(limits, default=None)


def cpuset_cpus(mount: CgroupMount) -> int | None:
    """Return the number of CPUs in the own cgroup's effective cpuset, None if unknown."""
    names = (
        ("cpuset.cpus.effective", "cpuset.cpus")
        if mount.version == 2
        else (
            "cpuset.effective_cpus",
            "cpuset.cpus",
        )
    )
    for directory in mount.ancestor_dirs():
        for name in names:
            text = read_value(directory / name)
            if text:
                return parse_cpu_list(text)
    return None


def cgroup_cpu_limit(
    cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
) -> float | None:
    """Return the CPUs allowed by this process's cgroups (quota and cpuset), None if unlimited."""
    limits: list[float] = []
    cpu = locate_controller("cpu", cgroup_root, proc_cgroup)
    if cpu is not None and (quota := quota_cpus(cpu)) is not None:
        limits.append(quota)
    cpuset = locate_controller("cpuset", cgroup_root, proc_cgroup)
    if cpuset is not None and (count := cpuset_cpus(cpuset)):
        limits.append(float(count))
    return min(limits, default=None)


def effective_cpus(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float:
    """Return the CPUs this process may really use, possibly fractional (e.g. 0.5).

    The minimum of the affinity mask, the CFS quota of the process's own
    cgroup and of every ancestor (v1 ``cpu.cfs_quota_us / cpu.cfs_period_us``,
    v2 ``cpu.max``) and the cpuset.

    Parameters
    ----------
    cgroup_root
        Where the cgroup filesystems are mounted (``/sys/fs/cgroup``).
    proc_cgroup
        The process's cgroup list (``/proc/self/cgroup``).

    Returns
    -------
    float
        CPUs, > 0.
    """
    limit = cgroup_cpu_limit(cgroup_root, proc_cgroup)
    cpus = float(affinity_cpus())
    return cpus if limit is None else min(cpus, limit)
