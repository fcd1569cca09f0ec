"""What every simulated student of the contention benchmark shares, naive or managed.

The settings of a run (:class:`BenchSettings`), the workload's command line
(:func:`plan_workload_args`) and the reading of its report
(:func:`read_report`). Used by :mod:`coursehub.bench.naive` (plain
interpreters) and :mod:`coursehub.bench.contention` (the runner, and the
benchmark itself), so that neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coursehub.bench.scenarios import Scenario
from coursehub.bench.workload import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_STEPS,
    WorkloadReport,
    parse_workload_output,
)
from coursehub.errors import CoursehubError

#: The module every student runs (``python -m``).
WORKLOAD_MODULE = "coursehub.bench.workload"
#: Seconds between two polls of a naive student's exit.
POLL_S = 0.02
#: Default parent cgroup of the benchmark's students.
BENCH_CGROUP = "coursehub-bench"


@dataclass(frozen=True)
class BenchSettings:
    """Everything a benchmark run needs.

    Attributes
    ----------
    scenarios
        What to run, in order (the baseline first).
    steps, batch_size
        Workload size per student.
    cpu_budget
        CPUs of the machine for admission and for the ideal makespan.
    timeout_s
        Time limit of each student's job, seconds (None: none).
    device
        ``"cpu"``, or ``"cuda"`` for the GPU check.
    cgroup_parent
        Cgroup holding every student's cgroup, naive and managed alike.
    cpu_shares
        Weight of ``cgroup_parent`` against the machine's other processes
        (v1 ``cpu.shares``, 2..262144; v2 ``cpu.weight`` scaled to 1..10000),
        or None for the kernel's default (1024 / 100). A high weight keeps
        other work on a shared machine from disturbing the measure.
    repeat
        Times the whole list of scenarios is run, each scenario right after
        a run of the baseline (:func:`plan_order`).
    seed
        Seed of the bootstrap intervals (:mod:`coursehub.bench.stats`).
    backend
        Where managed and overcommitted students run: ``"local"`` (the
        runner's slot pool admits them) or ``"slurm"`` (batch jobs of the
        runner's Slurm backend: Slurm admits them by cores; naive students
        stay plain local interpreters).
    gpu_mem_limit
        GPU memory budget of each student's job on a GPU, bytes (None: an
        equal share of the GPU, :mod:`coursehub.runner.gpumem`).
    """

    scenarios: tuple[Scenario, ...]
    steps: int = DEFAULT_STEPS
    batch_size: int = DEFAULT_BATCH_SIZE
    cpu_budget: int = 1
    timeout_s: float | None = None
    device: str = "cpu"
    cgroup_parent: str = BENCH_CGROUP
    cpu_shares: int | None = None
    repeat: int = 1
    seed: int = 0
    backend: str = "local"
    gpu_mem_limit: int | None = None


def plan_workload_args(data: Path, settings: BenchSettings) -> list[str]:
    """Return the workload's arguments for these settings."""
    return [
        "--data",
        str(data),
        "--steps",
        str(settings.steps),
        "--batch-size",
        str(settings.batch_size),
        "--device",
        settings.device,
    ]


def read_report(text: str) -> WorkloadReport | None:
    """Return the workload's report from its output, None if it printed none."""
    try:
        return parse_workload_output(text)
    except CoursehubError:
        return None
