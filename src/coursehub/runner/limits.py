"""A local job's limits: how they are made, and why the kernel or the job's watchdog ended it.

:func:`confine` picks the strongest confinement this machine allows:
``systemd-run --scope`` where systemd is PID 1 and we are root, else a job
cgroup (:class:`coursehub.resources.cgroups.JobCgroup`, v1 or v2) where the cgroup
filesystem is writable, else none (the runner's memory watchdog samples the
job's tree instead: ``"watchdog"``). After the job's end,
:func:`kernel_kill_reason` and :func:`plan_backstop_reason` say why a job the
runner did not stop itself was stopped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from coursehub.resources.cgroups import (
    CgroupStats,
    CgroupUnavailableError,
    JobCgroup,
    systemd_available,
    systemd_run_command,
    systemd_scope_result,
)
from coursehub.resources.spec import ResourceSpec
from coursehub.resources.units import describe_duration, describe_mem
from coursehub.runner.jobenv import CGROUP_PROCS_VAR


def confine(
    job_id: str,
    argv: list[str],
    env: dict[str, str],
    resources: ResourceSpec,
    cgroup_parent: str,
    note: Callable[[str], None],
) -> tuple[list[str], str, str | None, JobCgroup | None]:
    """Return (command, enforcement, systemd unit, job cgroup) for a job to be confined.

    The command is ``argv`` itself, or wrapped in ``systemd-run --scope``
    (unit ``coursehub-<job id>.scope``); enforcement is ``"systemd"``,
    ``"cgroup v1"``, ``"cgroup v2"`` or ``"watchdog"``. A job cgroup made here
    (CPU quota ``resources.cpus``, memory limit ``resources.mem_limit`` in
    bytes, under ``cgroup_parent``) is named in ``env`` (the bootstrap joins
    it) and must be removed by the caller. ``note`` receives the line saying
    why no cgroup could be made.
    """
    if os.geteuid() == 0 and systemd_available():
        unit = f"coursehub-{job_id}.scope"
        command = systemd_run_command(argv, unit, resources.cpus, resources.mem_limit)
        return command, "systemd", unit, None
    try:
        cgroup = JobCgroup.create(job_id, resources.cpus, resources.mem_limit, parent=cgroup_parent)
    except CgroupUnavailableError as exc:
        note(f"limits not enforced by cgroups ({exc}); memory watched by sampling")
        return argv, "watchdog", None, None
    env[CGROUP_PROCS_VAR] = os.pathsep.join(str(p) for p in cgroup.procs_files)
    return argv, f"cgroup v{cgroup.plan.version}", None, cgroup


def kernel_kill_reason(
    returncode: int, mem_limit: int | None, stats: CgroupStats | None, unit: str | None
) -> str | None:
    """Return the memory-kill reason when the kernel's OOM killer ended the job, else None.

    ``unit``: the job's systemd scope (its result says ``oom-kill``), else
    ``stats``: its cgroup's counters (an OOM kill, or a limit hit and SIGKILL
    where the kernel counts no kills); ``mem_limit`` in bytes.
    """
    if returncode == 0 or mem_limit is None:
        return None
    oom = False
    if unit is not None:
        oom = systemd_scope_result(unit) == "oom-kill"
    elif stats is not None:
        oom_kills, hits = stats.oom_kills, stats.mem_limit_hits
        oom = bool(oom_kills) or (oom_kills is None and hits > 0 and returncode == -9)
    return f"exceeded its memory limit of {describe_mem(mem_limit)}" if oom else None


def plan_backstop_reason(returncode: int, elapsed_s: float, timeout_s: float | None) -> str | None:
    """Return why a job the runner did not stop itself was stopped, or None (pure).

    A job ended by SIGTERM or SIGKILL after its time limit (``elapsed_s`` and
    ``timeout_s`` in seconds) while the runner was stopped, frozen or blocked
    was stopped by its watchdog, which keeps the limit (see
    :mod:`coursehub.runner.watchdog`).
    """
    if not timeout_s or elapsed_s < timeout_s:
        return None
    if returncode not in (-signal.SIGTERM, -signal.SIGKILL):
        return None
    return f"exceeded its time limit of {describe_duration(timeout_s)} (stopped by its watchdog)"
