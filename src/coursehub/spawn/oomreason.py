"""Why a process of a server was stopped for memory, in words for the student (pure).

Shared by the single-user servers (:mod:`coursehub.spawn.oomnotice`: a kernel
killed, the message in its cell) and the hub process
(:mod:`coursehub.spawn.cgroupspawner`: the whole server killed, the message on
the hub's pages); imports neither Jupyter Server nor JupyterHub.
"""

from __future__ import annotations

import signal
from typing import Any

from coursehub.resources.cgroupfs import MemoryState
from coursehub.resources.cgroups import CgroupStats
from coursehub.resources.units import describe_mem

__all__ = [
    "OOM_ENAME",
    "cgroup_memory_state",
    "killed_by_oom",
    "oom_error_content",
    "server_oom_reason",
]

#: ``ename`` of the error shown in the cell.
OOM_ENAME = "MemoryLimitExceeded"
#: What a student can do, after the reason.
ADVICE = (
    "free memory (del large variables, shut down kernels you do not use), "
    "work on smaller data (a sample, chunks, float32 instead of float64), "
    "or ask the course's teaching team for a larger memory limit"
)


def killed_by_oom(returncode: int | None, seen: int, state: MemoryState) -> bool:
    """Return True if a process that exited with ``returncode`` was stopped by the OOM killer.

    Parameters
    ----------
    returncode
        The exit status as ``subprocess.Popen.returncode`` gives it (``-9``:
        SIGKILL, the OOM killer's signal, ``mm/oom_kill.c``).
    seen
        The cgroup's ``oom_kill`` counter (else ``limit_hits``) when last looked at.
    state
        The cgroup's counters now.
    """
    count = state.oom_kills if state.oom_kills is not None else state.limit_hits
    return returncode == -signal.SIGKILL and count is not None and count > seen


def _sizes(state: MemoryState) -> tuple[str, str]:
    limit = describe_mem(state.limit_bytes) if state.limit_bytes else "unknown"
    peak = describe_mem(state.peak_bytes) if state.peak_bytes else "unknown"
    return limit, peak


def oom_error_content(state: MemoryState) -> dict[str, Any]:
    """Return the content of the iopub ``error`` message shown in the cell (Jupyter protocol).

    ``{"ename", "evalue", "traceback"}``: the limit and peak in binary units
    (:func:`coursehub.resources.units.describe_mem`), "unknown" where unreadable.
    """
    limit, peak = _sizes(state)
    evalue = (
        f"the kernel was stopped because this server went past its memory limit "
        f"of {limit} (the course's limit; peak reached: {peak})"
    )
    traceback = [
        f"{OOM_ENAME}: {evalue}.",
        "The kernel restarts: its variables are lost; run the cells you need again.",
        "What to do: free memory (del large variables, shut down kernels you do not use),",
        "work on smaller data (a sample, chunks, float32 instead of float64),",
        "or ask the course's teaching team for a larger memory limit.",
    ]
    return {"ename": OOM_ENAME, "evalue": evalue, "traceback": traceback}


def server_oom_reason(status: int | None, state: MemoryState) -> str | None:
    """Return the hub page's one line when a whole server was OOM-killed, else None.

    ``status`` is the spawner's ``poll()`` answer (``-9``: SIGKILL); ``state``
    the server cgroup's counters, read before the cgroup is removed (a fresh
    cgroup per server start, so any ``oom_kill`` is this server's).
    """
    if not killed_by_oom(status, 0, state):
        return None
    limit, peak = _sizes(state)
    return (
        f"Your server was stopped because it went past the course's memory limit of {limit} "
        f"(peak reached: {peak}); before starting it again: {ADVICE}."
    )


def cgroup_memory_state(stats: CgroupStats, mem_limit: int | None) -> MemoryState:
    """Return a server cgroup's :class:`MemoryState` from its counters (``mem_limit``: bytes)."""
    return MemoryState(
        mem_limit or None, stats.mem_peak_bytes, stats.oom_kills, stats.mem_limit_hits
    )
