"""Read what a cgroup used: CPU-seconds, memory now and at its peak (cgroup v1 and v2).

Sources (Linux ``Documentation/admin-guide/cgroup-v1/cpuacct.rst``,
``cgroup-v1/memory.rst`` and ``cgroup-v2.rst``):

* v1: ``cpuacct.usage`` (nanoseconds of CPU used by the group's tasks),
  ``memory.usage_in_bytes`` and ``memory.max_usage_in_bytes``;
* v2: ``usage_usec`` in ``cpu.stat``, ``memory.current`` and ``memory.peak``
  (kernel >= 5.19; before that the sampled maximum of ``memory.current``).

On v1 the ``cpu`` and ``cpuacct`` controllers may be mounted apart (``/sys/fs/
cgroup/cpu`` and ``/sys/fs/cgroup/cpuacct``); then a job cgroup made with only
``cpu`` and ``memory`` has no CPU counter, and :func:`add_cpuacct` adds a
``cpuacct`` directory of the same name for the pids to join.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from coursehub.resources.cgroupfs import CGROUP_ROOT, PROC_CGROUP, locate_controller, read_value
from coursehub.resources.cgroups import JobCgroupPlan


@dataclass(frozen=True)
class CgroupUsage:
    """One reading of a cgroup's counters.

    Attributes
    ----------
    cpu_s
        CPU-seconds used by the group since it was made (user + system), or
        None where no CPU counter is readable.
    mem_bytes
        Memory charged now, in bytes (None if unreadable).
    mem_peak_bytes
        Largest memory charged since the group was made, in bytes (None if the
        kernel does not keep it).
    """

    cpu_s: float | None
    mem_bytes: int | None
    mem_peak_bytes: int | None


def parse_int(text: str | None) -> int | None:
    """Return ``int(text)``, or None for None, ``"max"`` or anything not a number."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse_cpu_stat_usec(text: str | None) -> int | None:
    """Return ``usage_usec`` from the text of a v2 ``cpu.stat`` file (None if absent)."""
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return parse_int(value.strip())
    return None


def read_cgroup_usage(version: int, dirs: tuple[Path, ...]) -> CgroupUsage:
    """Read the CPU and memory counters of the cgroup whose directories are ``dirs``.

    Parameters
    ----------
    version
        1 or 2.
    dirs
        The group's directories (one per v1 controller, one on v2); a counter
        is read from the first directory that has its file.

    Returns
    -------
    CgroupUsage
        Fields are None where a counter is not there (the group is gone).
    """

    def first(name: str) -> str | None:
        for directory in dirs:
            value = read_value(directory / name)
            if value is not None:
                return value
        return None

    if version == 1:
        usage_ns = parse_int(first("cpuacct.usage"))
        return CgroupUsage(
            cpu_s=None if usage_ns is None else usage_ns / 1e9,
            mem_bytes=parse_int(first("memory.usage_in_bytes")),
            mem_peak_bytes=parse_int(first("memory.max_usage_in_bytes")),
        )
    usage_us = parse_cpu_stat_usec(first("cpu.stat"))
    return CgroupUsage(
        cpu_s=None if usage_us is None else usage_us / 1e6,
        mem_bytes=parse_int(first("memory.current")),
        mem_peak_bytes=parse_int(first("memory.peak")),
    )


def add_cpuacct(
    plan: JobCgroupPlan, cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
) -> JobCgroupPlan:
    """Return ``plan`` with a ``cpuacct`` directory added where v1 has no CPU counter in it.

    The directory has the same path below the cpuacct hierarchy as the plan's
    ``cpu`` directory below the cpu hierarchy; pids written to every
    directory of the plan (``JobCgroup.add_pid``, the spawner's pre-exec) join
    it, and ``JobCgroup.remove`` removes it; it comes third, after the ``cpu``
    and ``memory`` directories of
    :func:`coursehub.resources.cgroups.plan_job_cgroup`. On v2, or where
    ``cpu`` and ``cpuacct`` share a hierarchy, ``plan`` is returned unchanged.

    Raises
    ------
    OSError
        If the directory cannot be made.
    """
    if plan.version != 1 or any((d / "cpuacct.usage").exists() for d in plan.job_dirs):
        return plan
    cpu = locate_controller("cpu", cgroup_root, proc_cgroup)
    acct = locate_controller("cpuacct", cgroup_root, proc_cgroup)
    if cpu is None or acct is None or cpu.mount == acct.mount:
        return plan
    cpu_dir = next((d for d in plan.job_dirs if d.is_relative_to(cpu.mount)), None)
    if cpu_dir is None:
        return plan
    base = acct.own_dir() if os.access(acct.own_dir(), os.W_OK) else acct.mount
    rel = cpu_dir.relative_to(cpu.mount)
    own = Path(cpu.path.strip("/"))
    if own.parts and rel.parts[: len(own.parts)] == own.parts:
        rel = rel.relative_to(own)
    directory = base / rel
    directory.mkdir(parents=True, exist_ok=True)
    dirs = plan.job_dirs  # after cpu and memory, before any other (the spawner's devices)
    return dataclasses.replace(plan, job_dirs=(*dirs[:2], directory, *dirs[2:]))
