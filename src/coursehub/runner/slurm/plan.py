"""The Slurm backend's pure parts: the batch script, and what Slurm's answers mean.

:func:`render_batch_script` and :func:`render_sbatch_args` turn a
:class:`coursehub.runner.job.JobSpec` into the batch script that
:class:`coursehub.runner.slurm.backend.SlurmBackend` submits (golden-tested);
:func:`plan_never_starts`, :func:`plan_killed_reason` and :func:`plan_result`
read a job's end from ``scontrol``, ``sacct`` and the job's own usage file
(:mod:`coursehub.runner.slurm.allocation`). No function here runs a command.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError
from coursehub.resources.units import describe_duration, describe_mem
from coursehub.runner.job import JobSpec
from coursehub.runner.jobenv import plan_command, plan_env
from coursehub.runner.result import RunResult
from coursehub.runner.slurm.commands import parse_exit_code, parse_slurm_duration

#: Variables giving the Slurm backend's defaults (a course's profile sets them in its servers).
PARTITION_VAR, ACCOUNT_VAR, QOS_VAR = (
    "COURSEHUB_SLURM_PARTITION",
    "COURSEHUB_SLURM_ACCOUNT",
    "COURSEHUB_SLURM_QOS",
)
#: The job's usage file name next to its output: ``slurm-<id>.usage.json``.
USAGE_SUFFIX = ".usage.json"
#: The module the batch script runs first (:mod:`coursehub.runner.slurm.allocation`).
#: A batch script rendered before it was named so must be rendered again.
ALLOCATION_MODULE = "coursehub.runner.slurm.allocation"


def usage_path(output: str) -> str:
    """Return the job's usage file for its output file (``x.log`` -> ``x.usage.json``).

    Slurm's ``%j`` in ``output`` is kept (the batch script expands it).
    """
    return output.removesuffix(".log") + USAGE_SUFFIX


@dataclasses.dataclass(frozen=True)
class SlurmPlacement:
    """Where a job goes: partition, account and QOS (None: the cluster's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SlurmPlacement:
        """Read ``COURSEHUB_SLURM_PARTITION``, ``_ACCOUNT``, ``_QOS`` (blank: default)."""
        return cls(*(env.get(var) or None for var in (PARTITION_VAR, ACCOUNT_VAR, QOS_VAR)))


def time_limit_minutes(timeout_s: float, grace_s: float) -> int:
    """Return Slurm's ``--time`` in whole minutes: the runner's limit and grace, rounded up.

    The exact limit in seconds is kept inside the job (:mod:`coursehub.runner.slurm.allocation`);
    Slurm's coarser limit (minutes, sbatch(1) ``--time``) stays behind it.
    """
    return max(1, math.ceil((timeout_s + grace_s) / 60))


def render_sbatch_args(
    spec: JobSpec, placement: SlurmPlacement, output: str, grace_s: float = 5.0
) -> list[str]:
    """Return the sbatch options of ``spec`` (sbatch(1) names), in a fixed order.

    ``--cpus-per-task`` is the thread count (one task, one node), ``--mem`` the
    memory limit in MiB (Slurm's ``M`` is 1024**2 bytes), ``--gres=gpu:N``
    the GPUs, ``--time`` :func:`time_limit_minutes`, ``--export=ALL`` (or
    ``NONE`` when the job must not inherit the caller's environment).
    """
    res = spec.resources
    args = [
        f"--job-name={spec.display_name}",
        f"--output={output}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={res.threads}",
    ]
    if res.mem_limit is not None:
        args.append(f"--mem={math.ceil(res.mem_limit / 1024**2)}M")
    if res.gpus:
        args.append(f"--gres=gpu:{res.gpus}")
    if spec.timeout_s:
        args.append(f"--time={time_limit_minutes(spec.timeout_s, grace_s)}")
    for name, value in dataclasses.asdict(placement).items():
        if value:
            args.append(f"--{name}={value}")
    if spec.cwd:
        args.append(f"--chdir={spec.cwd}")
    args.append("--export=ALL" if spec.inherit_env else "--export=NONE")
    return args


def render_batch_script(
    spec: JobSpec,
    placement: SlurmPlacement,
    output: str,
    usage: str,
    python: str = sys.executable,
    grace_s: float = 5.0,
) -> str:
    """Return the batch script of ``spec`` (pure: same input, same text).

    ``output`` and ``usage`` may contain Slurm's ``%j`` (the job id); in the
    usage path it becomes ``$SLURM_JOB_ID``. The environment is
    :func:`plan_env` without the caller's variables (``--export`` brings those);
    ``CUDA_VISIBLE_DEVICES`` is left to Slurm when GPUs are requested (it sets
    it to the GPUs it allocated), and set empty otherwise.
    """
    env = plan_env(spec, {})
    if spec.resources.gpus:
        del env["CUDA_VISIBLE_DEVICES"]
    lines = ["#!/bin/bash", f"# coursehub runner job {spec.display_name}"]
    lines += [
        f"#SBATCH {render_sbatch_line(arg)}"
        for arg in render_sbatch_args(spec, placement, output, grace_s)
    ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    wrapper = [python, "-m", ALLOCATION_MODULE, "--usage"]
    options = ["--grace", f"{grace_s:g}"]
    if spec.timeout_s:
        options = ["--timeout", f"{spec.timeout_s:g}", *options]
    if spec.resources.gpus:
        options.append("--gpus")
        if spec.resources.gpu_mem_limit:  # told to the frameworks and kept on the node
            options += ["--gpu-mem", str(spec.resources.gpu_mem_limit)]
    usage_word = '"${SLURM_JOB_ID}"'.join(shlex.quote(part) for part in usage.split("%j"))
    command = " ".join(shlex.quote(word) for word in plan_command(spec, python))
    lines.append(
        "exec "
        + " ".join(shlex.quote(word) for word in wrapper)
        + f" {usage_word} "
        + " ".join(options)
        + f" -- {command}"
    )
    return "\n".join(lines) + "\n"


def render_sbatch_line(arg: str) -> str:
    """Return ``--opt=value`` for a ``#SBATCH`` line, the value in double quotes if it has spaces.

    Raises
    ------
    UsageError
        A value with a newline, a double quote or a backslash, which no ``#SBATCH`` line can hold.
    """
    option, _, value = arg.partition("=")
    if any(c in value for c in '\n\r"\\'):
        raise UsageError(f"{option} cannot contain a newline, quote or backslash: {value!r}")
    return f'{option}="{value}"' if any(c.isspace() for c in value) else arg


def describe_request(spec: JobSpec) -> str:
    """Return the request for people: ``"2 CPUs, 4.0 GiB, 1 GPU"``."""
    res = spec.resources
    parts = [f"{res.threads} CPU{'s' if res.threads != 1 else ''}"]
    if res.mem_limit is not None:
        parts.append(describe_mem(res.mem_limit))
    if res.gpus:
        parts.append(f"{res.gpus} GPU{'s' if res.gpus != 1 else ''}")
    return ", ".join(parts)


#: Pending reasons that no amount of waiting removes (squeue(1), "JOB REASON CODES");
#: any ``...PerJobLimit`` of a QOS or association is one too.
NEVER_STARTS = frozenset(
    {
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "PartitionDown",
        "PartitionInactive",
        "BadConstraints",
        "InvalidAccount",
        "InvalidQOS",
        "AccountNotAllowed",
        "QOSUsageThreshold",
    }
)


def plan_never_starts(
    job_id: str, reason: str, spec: JobSpec, info: Mapping[str, str]
) -> str | None:
    """Return why a pending job can never start (its reason names a permanent cause), or None."""
    if reason not in NEVER_STARTS and not reason.endswith("PerJobLimit"):
        return None
    where = f"partition {info['Partition']!r}" if info.get("Partition") else "its partition"
    if reason in ("PartitionConfig", "PartitionNodeLimit", "BadConstraints"):
        cause = f"no node of {where} is large enough for it ({describe_request(spec)})"
    elif reason == "PartitionTimeLimit":
        cause = f"its time limit is longer than {where} allows"
    elif reason in ("PartitionDown", "PartitionInactive"):
        cause = f"{where} is down"
    else:
        cause = "its account or QOS does not allow it"
    return f"Slurm job {job_id} can never start: {cause} ({reason}); it was cancelled"


def plan_killed_reason(job_id: str, state: str, spec: JobSpec) -> str | None:
    """Return why Slurm ended the job (naming it and Slurm's state), or None for a normal end."""
    if state in ("COMPLETED", "FAILED", ""):
        return None
    if state == "OUT_OF_MEMORY":
        limit = spec.resources.mem_limit
        what = f"its memory limit of {describe_mem(limit)}" if limit else "its memory"
        return f"Slurm job {job_id} exceeded {what} (OUT_OF_MEMORY)"
    if state == "TIMEOUT":
        of = f" of {describe_duration(spec.timeout_s)}" if spec.timeout_s else ""
        return f"Slurm job {job_id} exceeded its time limit{of} (TIMEOUT)"
    if state == "NODE_FAIL":
        return f"Slurm job {job_id} was lost: its node failed (NODE_FAIL)"
    if state == "CANCELLED":
        return f"Slurm job {job_id} was cancelled (CANCELLED)"
    return f"Slurm job {job_id} ended by Slurm ({state})"


def plan_result(
    job_id: str,
    spec: JobSpec,
    log_path: Path,
    info: Mapping[str, str],
    usage: Mapping[str, Any] | None,
    accounting: Mapping[str, Any] | None,
    sstat_peak: int | None,
    queued_s: float = 0.0,
) -> RunResult:
    """Return the job's :class:`RunResult` from what Slurm and the job said (pure).

    Elapsed and CPU seconds: Slurm's accounting (``sacct``) where kept, else the
    job's own usage file, else ``scontrol``'s RunTime (CPU unknown: 0). Peak
    RSS: the largest of the three sources. GPU peak: the job's own (NVML).
    The reason: the job's own (exact time limit, cancel), else Slurm's state;
    a job Slurm killed never reports exit 0.
    """
    usage = usage or {}
    accounting = accounting or {}
    state = info.get("JobState", "").split()[0] if info.get("JobState") else ""
    code, sig = parse_exit_code(info.get("ExitCode", ""))
    returncode = int(usage["returncode"]) if "returncode" in usage else (-sig if sig else code)
    reason = usage.get("killed_reason")
    slurm_reason = plan_killed_reason(job_id, state, spec)
    if state in ("OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL") or (slurm_reason and not reason):
        reason = slurm_reason
    elif reason:
        reason = f"Slurm job {job_id} {reason}"
    if reason and returncode == 0:
        returncode = 1
    run_time = parse_slurm_duration(info.get("RunTime", "")) or 0.0
    elapsed = accounting.get("elapsed_s") or usage.get("elapsed_s") or run_time
    cpu = accounting.get("cpu_s") or usage.get("cpu_s") or 0.0
    peaks = [accounting.get("peak_rss_bytes"), usage.get("peak_rss_bytes"), sstat_peak]
    return RunResult(
        job_id=job_id,
        returncode=returncode,
        elapsed_s=float(elapsed),
        cpu_s=float(cpu),
        n_threads=spec.resources.threads,
        peak_rss_bytes=max((int(p) for p in peaks if p), default=0),
        gpu_peak_bytes=usage.get("gpu_peak_bytes") if spec.resources.gpus else None,
        log_path=log_path,
        killed_reason=reason,
        enforcement="slurm",
        queued_s=queued_s,
    )
