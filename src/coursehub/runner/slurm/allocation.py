"""The first process of a Slurm batch job: run the job, keep its exact time limit, measure it.

``python -m coursehub.runner.slurm.allocation --usage PATH [--timeout S] [--grace S] [--gpus]
[--gpu-mem BYTES] -- CMD...``

Rendered into the batch script by :func:`coursehub.runner.slurm.plan.render_batch_script`.
It starts ``CMD`` (the bootstrap and the user's script) in its own process
group, with the output going where Slurm sends the job's (``--output``), and

- stops it after ``--timeout`` seconds (SIGTERM to the group, SIGKILL after
  ``--grace``): Slurm's own ``--time`` counts whole minutes and is checked
  every 30 s (slurm.conf(5), "OverTimeLimit"; slurmctld's PERIODIC_TIMEOUT),
  so the runner's limit in seconds is kept here, with Slurm's limit rounded up
  behind it;
- passes a SIGTERM from ``scancel`` on to the group, and records "cancelled";
- samples the tree's resident memory and, with ``--gpus``, its GPU memory
  (:class:`coursehub.runner.monitor.TreeMonitor`), and reaps it with
  ``os.wait4`` (CPU seconds, peak RSS);
- with ``--gpu-mem``, the job's GPU memory budget (the course profile's
  ``gpu_mem_limit``, or ``coursehub run --gpu-mem``): tells the frameworks
  their part of the GPUs Slurm gave it, which only the node knows
  (:func:`coursehub.runner.gpumem.plan_framework_env`, from NVML's total
  memory of the job's GPUs), and stops the group, as the local runner
  does, once the sampled NVML figure passes the budget
  (:func:`coursehub.runner.gpumem.gpu_budget_reason`, at most one 0.1-s
  sample late);
- writes the usage as JSON to ``--usage`` (``returncode``, ``elapsed_s``,
  ``cpu_s``, ``peak_rss_bytes``, ``gpu_peak_bytes``, ``killed_reason``), the
  job's own figures where Slurm's accounting (``sacct``) is not there;
- exits with the command's status (128 + N for signal N).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.resources.units import describe_duration
from coursehub.runner.monitor import TreeMonitor
from coursehub.runner.processgroup import kill_group


def visible_gpu_total(inventory: Sequence[Any], visible: str | None) -> int | None:
    """Return the smallest total memory (bytes) of the job's GPUs, None when none is known.

    ``inventory``: :func:`coursehub.resources.gpus.gpu_inventory`'s
    ``GpuInfo`` list; ``visible``: ``CUDA_VISIBLE_DEVICES`` as Slurm sets it
    for the job (indices or UUIDs; None or empty: every GPU of the inventory).
    """
    wanted = [part.strip() for part in (visible or "").split(",") if part.strip()]
    gpus = [
        gpu for gpu in inventory if not wanted or str(gpu.index) in wanted or gpu.uuid in wanted
    ]
    return min((gpu.mem_total_bytes for gpu in gpus), default=None)


def supervise(
    command: Sequence[str],
    timeout_s: float | None,
    grace_s: float,
    watch_gpus: bool,
    gpu_mem_limit: int | None = None,
    nvml: Any | None = None,
) -> dict[str, Any]:
    """Run ``command`` to its end under the time limit; return its usage (see the module doc).

    ``gpu_mem_limit``: the job's GPU memory budget in bytes (with
    ``watch_gpus``), or None; ``nvml``: a ``pynvml`` stand-in (tests).
    """
    from coursehub.resources.gpus import gpu_inventory
    from coursehub.runner.gpumem import gpu_budget_reason, plan_framework_env

    cancelled: list[bool] = []
    budget = gpu_mem_limit if watch_gpus else None
    env = dict(os.environ)
    monitor_nvml = nvml
    if budget is not None:
        from coursehub.resources.gpus import load_nvml

        monitor_nvml = nvml if nvml is not None else load_nvml()
        inventory = gpu_inventory(monitor_nvml) if monitor_nvml is not None else []
        total = visible_gpu_total(inventory, os.environ.get("CUDA_VISIBLE_DEVICES"))
        env.update(plan_framework_env(budget, total))
    proc = subprocess.Popen(list(command), start_new_session=True, env=env)

    def on_term(signum: int, frame: Any) -> None:
        cancelled.append(True)
        kill_group(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    started = time.monotonic()
    monitor = TreeMonitor(proc.pid, watch_gpus=watch_gpus, nvml=monitor_nvml)
    reason: str | None = None
    term_at: float | None = None
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        monitor.sample()
        now = time.monotonic()
        over = gpu_budget_reason(monitor.gpu_bytes, monitor.gpu_peak_bytes or 0, budget)
        if reason is None and over:
            reason, term_at = over, now
            kill_group(proc.pid, signal.SIGTERM)
        elif reason is None and cancelled:
            reason, term_at = "cancelled", now
        elif reason is None and timeout_s and now - started > timeout_s:
            reason = f"exceeded its time limit of {describe_duration(timeout_s)}"
            term_at = now
            kill_group(proc.pid, signal.SIGTERM)
        if term_at is not None and now - term_at > grace_s:
            kill_group(proc.pid, signal.SIGKILL)
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
    if reason is None and cancelled:  # the job's processes got scancel's SIGTERM too
        reason = "cancelled"
    kill_group(proc.pid, signal.SIGKILL)  # what is left of its group
    monitor.close()
    if monitor_nvml is not None and nvml is None:  # started here for the budget
        with contextlib.suppress(Exception):
            monitor_nvml.nvmlShutdown()
    return {
        "returncode": proc.returncode,
        "elapsed_s": elapsed,
        "cpu_s": rusage.ru_utime + rusage.ru_stime,
        "peak_rss_bytes": max(rusage.ru_maxrss * 1024, monitor.peak_rss_bytes),
        "gpu_peak_bytes": monitor.gpu_peak_bytes,
        "killed_reason": reason,
    }


def write_usage(path: Path, usage: dict[str, Any]) -> None:
    """Write the job's usage (:func:`supervise`'s figures) as JSON, atomically, owner-only."""
    write_atomically(path, json.dumps(usage) + "\n", mode=0o600)


def read_usage(path: Path) -> dict[str, Any] | None:
    """Return the usage a job wrote at its end, or None (no file yet, or not JSON)."""
    try:
        usage: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return usage


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, supervise the command, write the usage; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m coursehub.runner.slurm.allocation")
    parser.add_argument("--usage", required=True, type=Path)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--gpus", action="store_true")
    parser.add_argument("--gpu-mem", type=int, default=None, help="GPU memory budget, bytes")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    usage = supervise(command, args.timeout, args.grace, args.gpus, args.gpu_mem)
    write_usage(args.usage, usage)
    code = int(usage["returncode"])
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
