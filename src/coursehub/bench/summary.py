"""From per-student results to the talk's table: slowdown, throttling, makespan, targets.

Definitions (printed under the table by :mod:`coursehub.bench.report`):

* elapsed per student: the training time the workload measures itself
  (``train_s``; interpreter start and ``import torch`` excluded), as a
  student reads it in a notebook; the job's wall time when it printed none.
* slowdown: median elapsed of a scenario / median elapsed of the baseline,
  one managed student (:data:`coursehub.bench.scenarios.BASELINE_MODE`) with
  the same ``cpu_limit``. The 1-student managed run is "alone" for every
  mode: it is the figure the talk's 291 s and 80 s stand for.
* makespan: seconds from the first submission to the last exit, queue
  included; ideal makespan = ``max(T1, n_students x n_threads x T1 / CPUs)``
  with ``T1`` the baseline's makespan (one student's whole job alone),
  ``n_threads`` the baseline's threads (CPUs one job uses) and CPUs the CPU
  budget: the same total work in every mode, spread evenly over the CPUs,
  never shorter than one job. With one thread per student this is the
  issue's "total work / CPUs".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from coursehub.bench.scenarios import ScenarioResult, StudentResult

#: The issue's targets (measured by the benchmark, not asserted by tests).
MANAGED_MAX_SLOWDOWN = 1.10
NAIVE_MIN_SLOWDOWN = 3.0
NAIVE_TARGET_STUDENTS = 2
OVERCOMMIT_MAX_RATIO = 1.15
#: Baseline elapsed / CPU time above which the baseline waited for a CPU.
BASELINE_MAX_WAIT_RATIO = 1.2


@dataclass(frozen=True)
class Row:
    """One line of the table: a scenario's medians and ratios.

    Attributes
    ----------
    mode, n_students
        The scenario.
    torch_threads
        Threads torch used in each student (median over them), None if unknown.
    elapsed_median_s, elapsed_max_s
        Elapsed per student (module docstring), seconds.
    cpu_median_s
        CPU time per student over the training steps (all threads), seconds.
    slowdown
        ``elapsed_median_s`` / baseline's.
    throttled_median
        CFS periods throttled per student (median), None without a quota.
    makespan_s, ideal_makespan_s
        Seconds (module docstring).
    failed
        Students that did not finish cleanly (non-zero exit, killed, no result).
    quota_applied
        True when every student ran in a cgroup with the CPU quota.
    """

    mode: str
    n_students: int
    torch_threads: int | None
    elapsed_median_s: float
    elapsed_max_s: float
    cpu_median_s: float | None
    slowdown: float
    throttled_median: int | None
    makespan_s: float
    ideal_makespan_s: float
    failed: int
    quota_applied: bool

    @property
    def makespan_ratio(self) -> float:
        """``makespan_s / ideal_makespan_s``."""
        return self.makespan_s / self.ideal_makespan_s


@dataclass(frozen=True)
class Target:
    """One of the issue's targets checked on one row: what, the figure, and whether it was met."""

    text: str
    value: float
    met: bool


def student_elapsed(student: StudentResult) -> float:
    """Elapsed time of one student: the workload's training time, else the job's wall time."""
    return student.train_s if student.train_s is not None else student.wall_s


def ideal_makespan(t1_s: float, n_students: int, n_threads: int, cpu_budget: int) -> float:
    """Return ``max(t1_s, n_students * n_threads * t1_s / cpu_budget)`` in seconds."""
    return max(t1_s, n_students * n_threads * t1_s / cpu_budget)


def plan_row(result: ScenarioResult, baseline: ScenarioResult, cpu_budget: int) -> Row:
    """Return the table line of ``result`` measured against the ``baseline`` scenario."""
    students = result.students
    elapsed = [student_elapsed(s) for s in students]
    base = statistics.median(student_elapsed(s) for s in baseline.students)
    threads = [s.torch_threads for s in students if s.torch_threads is not None]
    cpu = [s.cpu_s for s in students if s.cpu_s is not None]
    throttled = [s.nr_throttled for s in students if s.nr_throttled is not None]
    slots = baseline.scenario.n_threads or 1
    return Row(
        mode=result.scenario.mode,
        n_students=result.scenario.n_students,
        torch_threads=round(statistics.median(threads)) if threads else None,
        elapsed_median_s=statistics.median(elapsed),
        elapsed_max_s=max(elapsed),
        cpu_median_s=statistics.median(cpu) if cpu else None,
        slowdown=statistics.median(elapsed) / base,
        throttled_median=round(statistics.median(throttled)) if throttled else None,
        makespan_s=result.makespan_s,
        ideal_makespan_s=ideal_makespan(
            baseline.makespan_s, result.scenario.n_students, slots, cpu_budget
        ),
        failed=sum(1 for s in students if s.returncode != 0 or s.train_s is None),
        quota_applied=all(s.quota_applied for s in students),
    )


def merge_repeats(results: list[ScenarioResult]) -> list[ScenarioResult]:
    """Merge the repeats of each scenario: all their students, the median makespan.

    Scenarios keep the order in which they first appear.
    """
    groups: dict[object, list[ScenarioResult]] = {}
    for result in results:
        groups.setdefault(result.scenario, []).append(result)
    return [
        ScenarioResult(
            runs[0].scenario,
            tuple(s for run in runs for s in run.students),
            statistics.median(run.makespan_s for run in runs),
        )
        for runs in groups.values()
    ]


def plan_rows(results: list[ScenarioResult], cpu_budget: int) -> list[Row]:
    """Return the table: one row per scenario, sorted by mode (as run) then students.

    Repeats of a scenario are merged first (:func:`merge_repeats`): medians
    are taken over every student of every repeat.

    Raises
    ------
    ValueError
        If the baseline scenario (one managed student) is missing.
    """
    results = merge_repeats(results)
    baseline = next((r for r in results if r.scenario.is_baseline), None)
    if baseline is None:
        raise ValueError("the results hold no baseline (one managed student)")
    modes = list(dict.fromkeys(r.scenario.mode for r in results))
    ordered = sorted(results, key=lambda r: (modes.index(r.scenario.mode), r.scenario.n_students))
    return [plan_row(r, baseline, cpu_budget) for r in ordered]


def check_targets(rows: list[Row], n_threads: int, cpu_budget: int) -> list[Target]:
    """Return the issue's targets that the rows allow to check, each with its figure.

    * managed slowdown <= 1.10 wherever students x threads <= CPUs (2+ students);
    * naive slowdown >= 3 at 2 students;
    * overcommit makespan <= 1.15 x ideal wherever students x threads > CPUs.
    """
    targets = []
    for row in rows:
        demand = row.n_students * n_threads
        if row.mode == "managed" and row.n_students > 1 and demand <= cpu_budget:
            text = f"managed x{row.n_students}: slowdown <= {MANAGED_MAX_SLOWDOWN:.2f}"
            targets.append(Target(text, row.slowdown, row.slowdown <= MANAGED_MAX_SLOWDOWN))
        if row.mode == "naive" and row.n_students == NAIVE_TARGET_STUDENTS:
            text = f"naive x{row.n_students}: slowdown >= {NAIVE_MIN_SLOWDOWN:.1f} (the collapse)"
            targets.append(Target(text, row.slowdown, row.slowdown >= NAIVE_MIN_SLOWDOWN))
        if row.mode == "overcommit" and demand > cpu_budget:
            ratio = row.makespan_ratio
            text = f"overcommit x{row.n_students}: makespan <= {OVERCOMMIT_MAX_RATIO:.2f} x ideal"
            targets.append(Target(text, ratio, ratio <= OVERCOMMIT_MAX_RATIO))
    return targets


def check_baseline(rows: list[Row]) -> str | None:
    """Return a warning when the baseline waited for CPU (other work ran), else None.

    One student alone with one thread per CPU of its quota should run all
    the time: elapsed ~ CPU time. When elapsed exceeds CPU time by more than
    :data:`BASELINE_MAX_WAIT_RATIO`, other processes took the CPUs and every
    slowdown measured against this baseline is unreliable.
    """
    base = next((r for r in rows if r.mode == "managed" and r.n_students == 1), None)
    if base is None or not base.cpu_median_s or not base.torch_threads:
        return None
    ratio = base.elapsed_median_s / (base.cpu_median_s / base.torch_threads)
    if ratio <= BASELINE_MAX_WAIT_RATIO:
        return None
    return (
        f"warning: the baseline waited for CPU (elapsed {base.elapsed_median_s:.1f} s, CPU "
        f"{base.cpu_median_s:.1f} s): other work was running, slowdowns are unreliable; "
        "rerun on a quiet machine, or as root with --cpu-shares 262144 --repeat 3"
    )
