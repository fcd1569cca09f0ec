"""How many CPUs this process may really use."""

from __future__ import annotations

import os


def affinity_cpus() -> int:
    """Return the number of CPUs in this process's affinity mask (>= 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def effective_cpus() -> float:
    """Return the CPUs this process may use, as a possibly fractional count.

    This first version reads the affinity mask only; the cgroup quota is
    taken into account by :mod:`coursehub.resources.cgroups` when present.
    """
    return float(affinity_cpus())
