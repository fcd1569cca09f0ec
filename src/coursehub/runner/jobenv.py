"""The job's command and environment, the same on every backend (pure).

The local backend starts :func:`plan_command` with :func:`plan_env` (and
:func:`plan_watchdog_env`); the Slurm backend renders the same command and
environment into its batch script
(:func:`coursehub.runner.slurm.plan.render_batch_script`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from coursehub.resources.threads import thread_env
from coursehub.runner.gpumem import GPU_MEM_FRACTION_VAR, plan_framework_env
from coursehub.runner.job import JobSpec
from coursehub.runner.mps import plan_mps_env

#: The module every job's interpreter starts with.
BOOTSTRAP_MODULE = "coursehub.runner.bootstrap"
#: Environment variables the bootstrap reads (set by :func:`plan_env`).
N_THREADS_VAR = "COURSEHUB_N_THREADS"
CGROUP_PROCS_VAR = "COURSEHUB_CGROUP_PROCS"
#: Variables of the bootstrap's watchdog (set by the local backend, see
#: :mod:`coursehub.runner.bootstrap`): the read end of the runner's lifeline
#: pipe, what to do when the runner dies, the time limit, the grace period,
#: the slot descriptors.
PARENT_FD_VAR = "COURSEHUB_PARENT_FD"
ORPHAN_VAR = "COURSEHUB_ORPHAN"
TIMEOUT_VAR = "COURSEHUB_TIMEOUT_S"
GRACE_VAR = "COURSEHUB_GRACE_S"
SLOT_FDS_VAR = "COURSEHUB_SLOT_FDS"
#: Every variable the runner sets for one job only: never inherited by a nested job.
JOB_ONLY_VARS = (
    GPU_MEM_FRACTION_VAR,
    CGROUP_PROCS_VAR,
    PARENT_FD_VAR,
    ORPHAN_VAR,
    TIMEOUT_VAR,
    GRACE_VAR,
    SLOT_FDS_VAR,
)


def plan_command(spec: JobSpec, python: str = sys.executable) -> list[str]:
    """Return the job's command: a fresh interpreter running the bootstrap, then the target."""
    target = ["-m", spec.target] if spec.module else [spec.target]
    return [python, "-m", BOOTSTRAP_MODULE, *target, *spec.args]


def plan_env(
    spec: JobSpec,
    base_env: Mapping[str, str],
    gpu_indices: tuple[int, ...] = (),
    gpu_mem_fraction: float | None = None,
) -> dict[str, str]:
    """Return the job's full environment; ``base_env`` is not modified.

    ``{**base_env, **spec.env, **thread_env(n)}`` (``base_env`` left out when
    ``spec.inherit_env`` is False; :data:`JOB_ONLY_VARS` never inherited), then
    ``CUDA_VISIBLE_DEVICES`` (the given GPUs, or ``""`` so that CUDA sees
    none), ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (so that CUDA numbers devices in PCI
    bus order, as NVML and ``nvidia-smi`` do: CUDA C Programming Guide, "CUDA
    Environment Variables"; NVML API Reference), ``PYTHONUNBUFFERED=1``
    (live output), and the bootstrap's ``COURSEHUB_N_THREADS`` and
    ``COURSEHUB_GPU_MEM_FRACTION``.
    """
    n_threads = spec.resources.threads
    base = {k: v for k, v in base_env.items() if k not in JOB_ONLY_VARS}
    env = {**(base if spec.inherit_env else {}), **spec.env, **thread_env(n_threads)}
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_indices)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["PYTHONUNBUFFERED"] = "1"
    env[N_THREADS_VAR] = str(n_threads)
    for name in JOB_ONLY_VARS:
        env.pop(name, None)
    if gpu_indices and gpu_mem_fraction is not None:
        env[GPU_MEM_FRACTION_VAR] = f"{gpu_mem_fraction:.4f}"
    return env


def plan_gpu_env(
    budget_bytes: int | None, total_bytes: int | None, gpu_jobs: int, environ: Mapping[str, str]
) -> dict[str, str]:
    """Return the GPU variables of a job holding a GPU: its frameworks' budget and MPS's.

    :func:`coursehub.runner.gpumem.plan_framework_env` (``budget_bytes`` of
    ``total_bytes``), then, when ``environ`` turns MPS on and the driver
    offers it, :func:`coursehub.runner.mps.plan_mps_env`.
    """
    return {**plan_framework_env(budget_bytes, total_bytes), **plan_mps_env(environ, gpu_jobs)}


def plan_watchdog_env(
    spec: JobSpec, grace_s: float, lifeline_fd: int, slot_fds: list[int]
) -> dict[str, str]:
    """Return the variables of the bootstrap's watchdog for ``spec`` (pure).

    ``COURSEHUB_PARENT_FD`` (the lifeline's read end), ``COURSEHUB_ORPHAN``
    (``keep`` for a detached job, else ``kill``), ``COURSEHUB_TIMEOUT_S`` (when
    the job has a time limit), ``COURSEHUB_GRACE_S`` and ``COURSEHUB_SLOT_FDS``.
    """
    env = {
        PARENT_FD_VAR: str(lifeline_fd),
        ORPHAN_VAR: "keep" if spec.detached else "kill",
        GRACE_VAR: f"{grace_s:g}",
        SLOT_FDS_VAR: ",".join(str(fd) for fd in slot_fds),
    }
    if spec.timeout_s:
        env[TIMEOUT_VAR] = f"{spec.timeout_s:g}"
    return env
