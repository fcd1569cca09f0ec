"""The contention benchmark's plan and results: modes, scenarios, per-student measures.

Pure code only (no process is started here): parsing the command line's
lists, planning the scenarios, and the records the runs fill in.

Modes (after M. Buffat, "JupyterHub pour l'enseignement de l'IA", JCAD 2024,
which measured 291 s -> 46,129 s; thread counts: OpenMP API specification
``OMP_NUM_THREADS`` and ``OMP_WAIT_POLICY``, PyTorch docs "CPU threading and
TorchScript inference"):

``naive``
    Each student is a plain interpreter with every thread variable removed
    from its environment, as a notebook kernel starts: torch and OpenMP start
    one thread per host core and libgomp spin-waits at each barrier
    (``OMP_WAIT_POLICY`` unset). All students start at once.
``managed``
    Each student goes through the runner with ``n_threads = floor(cpu_limit)``
    (thread variables, ``OMP_WAIT_POLICY=PASSIVE``, ``torch.set_num_threads``
    in the bootstrap). Admission never holds one back: all start at once.
``overcommit``
    As ``managed``, but the runner's admission control holds the running
    threads to the CPU budget: students queue and run as slots free up.

In every mode each student has its own cgroup with the CFS quota
``cpu.cfs_quota_us = cpu_limit x cpu.cfs_period_us`` where the machine allows
it (root and a writable cgroup filesystem), as SystemdSpawner's
``cpu_limit`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from coursehub.errors import UsageError

MODES: tuple[str, ...] = ("naive", "managed", "overcommit")
#: The scenario every slowdown is measured against: one managed student.
BASELINE_MODE = "managed"


@dataclass(frozen=True)
class Scenario:
    """One run of the benchmark: ``n_students`` students at once in one mode.

    Attributes
    ----------
    mode
        One of :data:`MODES`.
    n_students
        Students started together (>= 1).
    cpu_limit
        CPU quota of each student's cgroup, in CPUs.
    n_threads
        Threads given to each student (``floor(cpu_limit)``), or None in
        ``naive`` mode (torch's default: one per host core).
    """

    mode: str
    n_students: int
    cpu_limit: float
    n_threads: int | None

    @property
    def label(self) -> str:
        """Short name, e.g. ``"naive x2"``."""
        return f"{self.mode} x{self.n_students}"

    @property
    def is_baseline(self) -> bool:
        """True for the one-student managed run, the reference of every slowdown."""
        return self.mode == BASELINE_MODE and self.n_students == 1


@dataclass(frozen=True)
class StudentResult:
    """What one student's job did.

    Attributes
    ----------
    returncode
        Exit status of the job (negative: ended by that signal).
    wall_s
        Seconds from the job's start to its exit (queue excluded).
    queued_s
        Seconds waiting for admission (``overcommit``; 0 otherwise).
    end_s
        Seconds from the start of the scenario to the job's exit.
    train_s, cpu_s, torch_threads
        The workload's own figures (training steps only), or None if it
        printed no result (failed, killed at the time limit).
    process_cpu_s
        CPU seconds of the whole process (``os.wait4`` rusage).
    nr_throttled, throttled_s
        CFS periods throttled and time throttled (cgroup ``cpu.stat``), or
        None where no cgroup was made.
    enforcement
        ``"cgroup v1"``, ``"cgroup v2"``, ``"systemd"`` or ``"none"`` (no quota applied).
    gpu_peak_bytes
        Largest GPU memory held by the job's processes (NVML), None without GPU.
    preempted, migrations
        Involuntary context switches and CPU migrations of the workload over
        its training steps (:class:`coursehub.bench.workload.WorkloadReport`),
        None if unknown.
    waited_s
        Seconds the workload's threads waited on a run queue over its
        training steps (the same report), None if unknown.
    """

    returncode: int
    wall_s: float
    queued_s: float
    end_s: float
    train_s: float | None
    cpu_s: float | None
    torch_threads: int | None
    process_cpu_s: float
    nr_throttled: int | None
    throttled_s: float | None
    enforcement: str
    gpu_peak_bytes: int | None = None
    preempted: int | None = None
    migrations: int | None = None
    waited_s: float | None = None

    @property
    def quota_applied(self) -> bool:
        """True when a cgroup held the job to its CPU quota."""
        return self.enforcement not in ("none", "watchdog")


@dataclass(frozen=True)
class ScenarioResult:
    """A scenario and its students' results; ``makespan_s``: first start to last exit, seconds."""

    scenario: Scenario
    students: tuple[StudentResult, ...]
    makespan_s: float


def parse_users(text: str) -> tuple[int, ...]:
    """Return the student counts of ``--users`` (``"1,2,4"`` -> ``(1, 2, 4)``), sorted, unique.

    Raises
    ------
    UsageError
        If an entry is not an integer >= 1 or the list is empty.
    """
    counts = set()
    for part in text.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise UsageError(
                f"--users must be a comma-separated list of integers >= 1, got {part.strip()!r} "
                f"in {text!r}"
            )
        counts.add(value)
    return tuple(sorted(counts))


def parse_modes(text: str) -> tuple[str, ...]:
    """Return the modes of ``--modes`` in the order given, without repeats.

    Raises
    ------
    UsageError
        On an unknown mode or an empty list.
    """
    modes: list[str] = []
    for part in text.split(","):
        mode = part.strip()
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r} in --modes: choose among {', '.join(MODES)}")
        if mode not in modes:
            modes.append(mode)
    return tuple(modes)


def check_cpu_limit(cpu_limit: float, cpu_budget: int) -> int:
    """Return the threads per student, ``floor(cpu_limit)`` (>= 1), for a valid ``cpu_limit``.

    Raises
    ------
    UsageError
        If ``cpu_limit`` is not a positive finite number, or its thread
        count is above the CPU budget (the runner could never admit it).
    """
    if not math.isfinite(cpu_limit) or cpu_limit <= 0:
        raise UsageError(f"--cpu-limit must be a positive number of CPUs, got {cpu_limit:g}")
    n_threads = max(1, math.floor(cpu_limit))
    if n_threads > cpu_budget:
        raise UsageError(
            f"--cpu-limit {cpu_limit:g} gives {n_threads} threads per student, more than the "
            f"CPU budget of {cpu_budget}"
        )
    return n_threads


def plan_scenarios(
    users: tuple[int, ...], modes: tuple[str, ...], cpu_limit: float, n_threads: int
) -> list[Scenario]:
    """Return the scenarios to run: the baseline first, then each mode for each student count.

    The baseline (one managed student) is always run, once, even when
    ``managed`` or 1 is not asked for: every slowdown is measured against it.
    """
    baseline = Scenario(BASELINE_MODE, 1, cpu_limit, n_threads)
    planned = [baseline]
    for mode in modes:
        for n_students in users:
            threads = None if mode == "naive" else n_threads
            scenario = Scenario(mode, n_students, cpu_limit, threads)
            if scenario != baseline:
                planned.append(scenario)
    return planned
