"""The runner's interface: a job's spec, its result, and the Backend/Job pair.

One interface, one class per backend (model: submitit ``core/core.py``):
:meth:`Backend.submit` takes a :class:`JobSpec` and returns a :class:`Job`
that can be polled, waited for, cancelled and read. The local backend
(:mod:`coursehub.runner.local`) runs the job on this machine; the Slurm backend
(:mod:`coursehub.runner.slurm`) renders the same spec into an ``sbatch`` script
(same command, same child environment, see :func:`plan_command` and :func:`plan_env`).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.resources import CgroupStats, ResourceSpec, describe_mem, thread_env

#: Receives a job's output text as it arrives (from another thread).
OutputSink = Callable[[str], None]
#: The module every job's interpreter starts with.
BOOTSTRAP_MODULE = "coursehub.runner.bootstrap"
#: Environment variables the bootstrap reads (set by :func:`plan_env`).
N_THREADS_VAR = "COURSEHUB_N_THREADS"
GPU_MEM_FRACTION_VAR = "COURSEHUB_GPU_MEM_FRACTION"
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


@dataclass(frozen=True)
class JobSpec:
    """What to run and with which resources.

    Parameters
    ----------
    target
        Path of a Python script, or a module name when ``module`` is True
        (``coursehub.pendulum.train``).
    args
        Arguments given to the script (its ``sys.argv[1:]``).
    module
        Run ``target`` as ``python -m target``.
    resources
        Threads, CPU quota, memory limit (bytes) and GPUs.
    timeout_s
        Wall-clock limit of the run in seconds (queue time not counted), or None.
    name
        Short name used in the job id and log file name; defaults to the target's.
    cwd
        Working directory of the job; defaults to the caller's.
    env
        Extra environment variables for the job (they win over the caller's
        environment; the thread variables win over them).
    log_path
        Where the output is kept; defaults to ``RUNS_DIR/<job id>.log``.
    inherit_env
        Start from the caller's environment (True) or from ``env`` alone
        (False: autograding passes an allow-listed environment).
    detached
        The job outlives its runner (``coursehub run --no-wait``); its time
        limit still holds. Otherwise the job is stopped when the runner dies.
    """

    target: str
    args: tuple[str, ...] = ()
    module: bool = False
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    timeout_s: float | None = None
    name: str | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    inherit_env: bool = True
    detached: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise UsageError(
                f"timeout must be a positive number of seconds, got {self.timeout_s!r}"
            )

    @property
    def display_name(self) -> str:
        """The job's short name: ``name``, else the script's stem or the module's last part."""
        if self.name:
            return self.name
        return self.target.rsplit(".", 1)[-1] if self.module else Path(self.target).stem


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


class Job(ABC):
    """A submitted job. ``poll`` never blocks; ``wait``/``result`` block until it ends."""

    job_id: str
    log_path: Path

    @property
    @abstractmethod
    def state(self) -> str:
        """``"queued"``, ``"running"`` or ``"done"``."""

    @abstractmethod
    def poll(self) -> RunResult | None:
        """Return the result if the job has ended, else None."""

    @abstractmethod
    def wait(self, timeout_s: float | None = None) -> RunResult:
        """Block until the job ends and return its result.

        Raises
        ------
        TimeoutError
            If ``timeout_s`` passes first (the job keeps running).
        """

    @abstractmethod
    def cancel(self) -> None:
        """Stop the job (queued: withdrawn; running: SIGTERM, then SIGKILL after a grace period)."""

    def result(self) -> RunResult:
        """Block until the job ends and return its result (submitit's name for :meth:`wait`)."""
        return self.wait()

    def done(self) -> bool:
        """True once the job has ended."""
        return self.poll() is not None

    def output(self) -> str:
        """Return the output written so far (stdout and stderr interleaved)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class Backend(ABC):
    """Runs :class:`JobSpec` s somewhere: this machine, Slurm, ..."""

    @abstractmethod
    def validate(self, spec: JobSpec) -> None:
        """Check that ``spec`` can run here, before anything starts.

        Raises
        ------
        UsageError
            Missing script, more threads or GPUs than the backend has, ...
        """

    @abstractmethod
    def submit(self, spec: JobSpec, on_output: OutputSink | None = None) -> Job:
        """Validate ``spec``, start (or queue) the job and return its handle.

        ``on_output`` receives the job's output text as it arrives, from
        another thread (None: the output is only kept in the job's log).
        """


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


def default_runs_dir() -> Path:
    """Return where logs go: :func:`coursehub.settings.runs_dir` of this process."""
    from coursehub.settings import runs_dir

    return runs_dir()
