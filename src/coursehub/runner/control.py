"""``coursehub run status JOB`` and ``coursehub run cancel JOB`` for both backends.

A Slurm job id is a number (``123``, or ``123_4`` in an array); anything else
is a local job id (``20250101-120000-train-1a2b3c``), whose files are in the
runs directory: ``<id>.log`` (output), ``<id>.json`` (result, once ended) and,
for a job started with ``--no-wait``, ``<id>.pid`` (its runner, which cancels
the job on SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.resources.spec import ResourceSpec
from coursehub.runner.job import JobSpec
from coursehub.runner.result import RunResult, render_summary
from coursehub.runner.resultfile import log_path_of, read_result, result_path, slurm_run_id
from coursehub.runner.slurm.allocation import read_usage
from coursehub.runner.slurm.commands import (
    FINAL_STATES,
    job_info,
    parse_slurm_mem,
    sacct_usage,
    scancel,
)
from coursehub.runner.slurm.plan import plan_result, usage_path
from coursehub.settings import runs_dir as default_runs_dir


def is_slurm_job_id(job_id: str) -> bool:
    """True for ``123`` or ``123_4`` (Slurm's job and array ids)."""
    return bool(job_id) and job_id.replace("_", "").isdigit()


def runner_pid(pid_path: Path) -> int | None:
    """Return the pid of a ``--no-wait`` job's runner if it still runs, else None."""
    try:
        pid = int(pid_path.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"coursehub" in cmdline else None


def job_status(job_id: str, runs_dir: Path | None = None) -> str:
    """Return the job's state for people (one or two lines).

    Raises
    ------
    UsageError
        No such job in the runs directory (local) or in Slurm (once Slurm
        has forgotten a job, its result file is read instead).
    coursehub.runner.slurm.commands.SlurmError
        Slurm unreachable.
    """
    runs = runs_dir or default_runs_dir()
    if is_slurm_job_id(job_id):
        info = job_info(job_id)
        result = read_result(result_path(log_path_of(runs, slurm_run_id(job_id))))
        if info is None:
            if result is None:
                raise UsageError(f"no Slurm job {job_id} (unknown to Slurm, no result in {runs})")
            return f"Slurm job {job_id}: ended\n{render_summary(result)}"
        state, reason = info.get("JobState", "?"), info.get("Reason", "None")
        line = f"Slurm job {job_id}: {state}"
        line += f" ({reason})" if reason != "None" else ""
        line += (
            f", on {info['NodeList']}" if info.get("NodeList") not in (None, "", "(null)") else ""
        )
        line += f", output in {info['StdOut']}" if info.get("StdOut") else ""
        if result is None and info.get("JobState") in FINAL_STATES:
            result = summarize_ended_slurm_job(job_id, info, runs)
        return line + (f"\n{render_summary(result)}" if result else "")
    log = log_path_of(runs, job_id)
    result = read_result(result_path(log))
    if result is not None:
        return f"job {job_id}: ended\n{render_summary(result)}"
    if not log.is_file():
        raise UsageError(f"no job {job_id} in {runs}")
    if runner_pid(log.with_suffix(".pid")) is not None:
        return f"job {job_id}: running, output in {log}"
    return f"job {job_id}: no result and no runner (it was stopped abruptly), output in {log}"


def summarize_ended_slurm_job(job_id: str, info: dict[str, str], runs: Path) -> RunResult:
    """Return the result of an ended ``--no-wait`` Slurm job from Slurm and its usage file."""
    log = Path(info.get("StdOut") or log_path_of(runs, slurm_run_id(job_id)))
    usage = read_usage(Path(usage_path(str(log))))
    threads = int(info.get("CPUs/Task") or 1)
    mem = parse_slurm_mem(info.get("MinMemoryNode", ""))
    spec = JobSpec(
        info.get("JobName") or "job",
        resources=ResourceSpec(mem_limit=mem or None, n_threads=threads),
    )
    return plan_result(job_id, spec, log, info, usage, sacct_usage(job_id), None)


def cancel_job(job_id: str, runs_dir: Path | None = None) -> str:
    """Cancel the job; return what was done (one line).

    A Slurm job is ``scancel``-ed; a local ``--no-wait`` job's runner gets
    SIGTERM and stops the job (SIGTERM, then SIGKILL after the grace period)
    and writes its result.

    Raises
    ------
    UsageError
        No such job, or it has already ended.
    """
    runs = runs_dir or default_runs_dir()
    if is_slurm_job_id(job_id):
        info = job_info(job_id)
        if info is None:
            raise UsageError(f"no Slurm job {job_id} to cancel (unknown to Slurm)")
        if info.get("JobState") in FINAL_STATES:
            raise UsageError(f"Slurm job {job_id} has already ended ({info['JobState']})")
        scancel(job_id)
        return f"Slurm job {job_id}: cancelled"
    log = log_path_of(runs, job_id)
    if result_path(log).is_file():
        raise UsageError(f"job {job_id} has already ended")
    pid = runner_pid(log.with_suffix(".pid"))
    if pid is None:
        if not log.is_file():
            raise UsageError(f"no job {job_id} in {runs}")
        raise UsageError(f"job {job_id} has no runner left to cancel it")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    return f"job {job_id}: cancelled"
