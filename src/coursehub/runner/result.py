"""How a job ended: :class:`RunResult`, and the one-line summary printed after a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coursehub.resources.cgroups import CgroupStats
from coursehub.resources.units import describe_mem


@dataclass(frozen=True)
class RunResult:
    """How a run ended.

    Attributes
    ----------
    job_id
        The job's id (also the stem of its log file).
    returncode
        Exit status; negative ``-N`` when ended by signal N.
    elapsed_s
        Wall-clock seconds from start to end (queue time excluded).
    cpu_s
        User + system CPU seconds of the job and the children it waited for
        (``os.wait4`` rusage).
    n_threads
        Threads the job was given.
    peak_rss_bytes
        Largest resident memory seen: the maximum of the job's own peak
        (rusage ``ru_maxrss``) and of the sampled sum over its process tree.
    gpu_peak_bytes
        Largest GPU memory held by the job's processes (NVML samples), or None
        when the job had no GPU.
    log_path
        The file holding the job's output.
    killed_reason
        Why the runner or the kernel stopped the job, e.g. ``"exceeded its
        memory limit of 2.0 GiB"``; None for a job that ended by itself.
    enforcement
        How limits were enforced: ``"cgroup v1"``, ``"cgroup v2"``,
        ``"systemd"``, or ``"watchdog"`` (no cgroup: memory watched by
        sampling, CPU quota not enforced, only the thread count).
    queued_s
        Seconds spent waiting for admission.
    gpu_indices
        GPUs given to the job (NVML / PCI bus order).
    cgroup
        Counters of the job's cgroup (throttling, memory peak, OOM kills), if any.
    """

    job_id: str
    returncode: int
    elapsed_s: float
    cpu_s: float
    n_threads: int
    peak_rss_bytes: int
    gpu_peak_bytes: int | None
    log_path: Path
    killed_reason: str | None = None
    enforcement: str = "watchdog"
    queued_s: float = 0.0
    gpu_indices: tuple[int, ...] = ()
    cgroup: CgroupStats | None = None

    @property
    def ok(self) -> bool:
        """True when the job exited with status 0."""
        return self.returncode == 0


def render_summary(result: RunResult) -> str:
    """Return the one-line summary printed after a run.

    ``[coursehub] exit 0 | elapsed 12.3 s | CPU 20.1 s | 2 threads | peak RSS 512.0 MiB``,
    with ``| GPU peak 1.2 GiB`` when the job had a GPU; ``killed: <reason>``
    replaces ``exit N`` for a job the runner or the kernel stopped.
    """
    status = f"killed: {result.killed_reason}" if result.killed_reason else _exit_text(result)
    parts = [
        status,
        f"elapsed {result.elapsed_s:.1f} s",
        f"CPU {result.cpu_s:.1f} s",
        f"{result.n_threads} thread{'s' if result.n_threads != 1 else ''}",
        f"peak RSS {describe_mem(result.peak_rss_bytes)}",
    ]
    if result.gpu_peak_bytes is not None:
        parts.append(f"GPU peak {describe_mem(result.gpu_peak_bytes)}")
    return "[coursehub] " + " | ".join(parts)


def _exit_text(result: RunResult) -> str:
    if result.returncode < 0:
        return f"ended by signal {-result.returncode}"
    return f"exit {result.returncode}"
