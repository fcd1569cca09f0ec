"""What a usage record may claim: counters a unit could physically reach on the host.

A record's counters are cumulative since its unit started, so each is
bounded by the unit's wall time (``at`` minus the unit's start, at most
:data:`MAX_WALL_S`) and the
host's size: CPU-seconds by wall time times the host's CPUs (or the
record's own ``cpu_limit`` when it gives one), GPU-seconds by wall time
times the host's GPUs, peak memory by the host's memory, peak GPU memory by
the GPUs' memory (:func:`bounds_problem`, for records a user wrote). Every
record's times must be possible: not in the future by more than
:data:`CLOCK_SKEW_S`, not before its unit's start (:func:`time_problem`).
Both are pure; :func:`host_limits` reads this host.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from coursehub.meter.records import UsageRecord
from coursehub.resources.cpus import affinity_cpus
from coursehub.resources.gpus import gpu_inventory

#: Seconds a record's time may lie ahead of the ingesting host's clock (clock skew).
CLOCK_SKEW_S = 120.0
#: Seconds added to a unit's wall time in the CPU and GPU bounds: a unit's start
#: is stamped a moment after its processes may start counting.
WALL_SLACK_S = 2.0
#: Longest wall time of a unit a user's records may claim (31 days): without it a
#: record "started in 1970" could claim decades of CPU-seconds on one day.
MAX_WALL_S = 31 * 86400.0
#: Peak memory of one GPU when the ingesting host cannot tell (no NVML there), in bytes.
GPU_MEM_FALLBACK_BYTES = 256 * 2**30


@dataclass(frozen=True)
class HostLimits:
    """The size of the host the units ran on.

    Attributes
    ----------
    cpus
        CPUs of the host (> 0).
    mem_bytes
        Memory of the host, in bytes (> 0).
    gpus
        GPUs of the host (0: none, so no GPU-seconds).
    gpu_mem_bytes
        Memory of all its GPUs together, in bytes (0: unknown, then
        :data:`GPU_MEM_FALLBACK_BYTES` per GPU).
    """

    cpus: float
    mem_bytes: int
    gpus: int = 0
    gpu_mem_bytes: int = 0

    @property
    def gpu_mem_bound(self) -> int:
        """The largest peak GPU memory a unit may claim, in bytes."""
        return self.gpu_mem_bytes or self.gpus * GPU_MEM_FALLBACK_BYTES


def host_limits(
    cpus: float | None = None,
    mem_bytes: int | None = None,
    gpus: int | None = None,
    gpu_mem_bytes: int | None = None,
) -> HostLimits:
    """Return this host's limits; a value given replaces what is read here.

    CPUs from the affinity mask, memory from ``sysconf`` (physical pages
    times the page size), GPUs and their memory from NVML (none without it).
    """
    inventory = gpu_inventory() if gpus is None or gpu_mem_bytes is None else []
    if mem_bytes is None:
        mem_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if gpu_mem_bytes is None:
        gpu_mem_bytes = sum(g.mem_total_bytes for g in inventory)
    return HostLimits(
        cpus=float(cpus if cpus is not None else affinity_cpus()),
        mem_bytes=int(mem_bytes),
        gpus=int(gpus if gpus is not None else len(inventory)),
        gpu_mem_bytes=int(gpu_mem_bytes),
    )


def time_problem(record: UsageRecord, now: float, started_at: float | None = None) -> str | None:
    """Return why ``record``'s times cannot be, or None: the checks every record passes.

    Parameters
    ----------
    record
        The record (its numbers are already finite and not negative:
        :func:`coursehub.meter.records.parse_record`).
    now
        Unix time of the check, in seconds.
    started_at
        When the unit started, in Unix seconds, as first recorded (default:
        the record's own ``started_at``).

    Returns
    -------
    str or None
        One line: a time in the future beyond :data:`CLOCK_SKEW_S`, or a
        record before its unit's start.
    """
    numbers = (record.at, record.started_at, record.cpu_s, record.gpu_s, record.cpu_limit)
    if not all(math.isfinite(x) and x >= 0 for x in numbers):
        return "counters and times must be finite and not negative"
    if record.mem_peak_bytes < 0 or record.gpu_peak_bytes < 0:
        return "memory peaks must not be negative"
    if max(record.at, record.started_at) > now + CLOCK_SKEW_S:
        return f"time {max(record.at, record.started_at):.0f} lies in the future (now {now:.0f})"
    start = record.started_at if started_at is None else started_at
    if record.started_at > record.at or start > record.at:
        return "the record comes before its unit's start"
    return None


def bounds_problem(
    record: UsageRecord,
    limits: HostLimits,
    now: float,
    started_at: float | None = None,
) -> str | None:
    """Return why ``record`` claims more than its unit could have used, or None when it fits.

    Parameters
    ----------
    record
        The record (its numbers are already finite and not negative:
        :func:`coursehub.meter.records.parse_record`).
    limits
        The host's size.
    now
        Unix time of the check, in seconds.
    started_at
        When the unit started, in Unix seconds, as first recorded (default:
        the record's own ``started_at``): a later record cannot move its
        unit's start back to claim more.

    Returns
    -------
    str or None
        One line naming the counter and its bound (or the time, :func:`time_problem`).
    """
    problem = time_problem(record, now, started_at)
    if problem is not None:
        return problem
    start = record.started_at if started_at is None else started_at
    if record.at - start > MAX_WALL_S:
        days = (record.at - start) / 86400
        return f"a unit of {days:.0f} days, more than {MAX_WALL_S / 86400:.0f}"
    wall = record.at - start + WALL_SLACK_S
    cpus = min(limits.cpus, record.cpu_limit) if record.cpu_limit > 0 else limits.cpus
    if record.cpu_s > wall * cpus:
        return f"cpu_s {record.cpu_s:g} is more than {wall:g} s of wall time x {cpus:g} CPUs"
    if record.gpu_s > wall * limits.gpus:
        return f"gpu_s {record.gpu_s:g} is more than {wall:g} s of wall time x {limits.gpus} GPUs"
    if record.mem_peak_bytes > limits.mem_bytes:
        return f"mem_peak_bytes {record.mem_peak_bytes} is more than the host's {limits.mem_bytes}"
    if record.gpu_peak_bytes > limits.gpu_mem_bound:
        return (
            f"gpu_peak_bytes {record.gpu_peak_bytes} is more than the GPUs' "
            f"{limits.gpu_mem_bound} bytes"
        )
    return None
