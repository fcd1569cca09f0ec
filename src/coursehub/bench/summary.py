"""From per-student results to the talk's table: slowdown, throttling, makespan, targets.

Definitions (printed under the table by :mod:`coursehub.bench.report`):

* elapsed per student: the training time the workload measures itself
  (``train_s``; interpreter start and ``import torch`` excluded), as a
  student reads it in a notebook; the job's wall time when it printed none.
* slowdown: for each repeat, the median elapsed of the scenario's students /
  the elapsed of the baseline run just before it (one managed student,
  :data:`coursehub.bench.scenarios.BASELINE_MODE`, same ``cpu_limit``; the
  runs are interleaved ``alone, scenario, alone, scenario...``); the table
  gives the median over the repeats and its bootstrap interval
  (:func:`coursehub.bench.stats.summarise_slowdowns`). The 1-student
  managed run is "alone" for every mode: it is the figure the talk's 291 s
  and 80 s stand for. The CPU ratio is the same with CPU time per student.
* makespan: seconds from the first submission to the last exit, queue
  included; ideal makespan = ``max(T1, n_students x n_threads x T1 / CPUs)``
  with ``T1`` the baseline's makespan (one student's whole job alone),
  ``n_threads`` the baseline's threads (CPUs one job uses) and CPUs the CPU
  budget: the same total work in every mode, spread evenly over the CPUs,
  never shorter than one job. With one thread per student this is the
  "total work / CPUs".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

from coursehub.bench.scenarios import Scenario, ScenarioResult, StudentResult
from coursehub.bench.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SEED,
    SPREAD_WARNING,
    Summary,
    check_spread,
    describe_spread,
    summarise_slowdowns,
)

#: The benchmark's targets (measured by the benchmark, not asserted by tests).
MANAGED_MAX_SLOWDOWN = 1.05
NAIVE_MIN_SLOWDOWN = 3.0
NAIVE_TARGET_STUDENTS = 2
OVERCOMMIT_MAX_RATIO = 1.15
#: Baseline elapsed / CPU time above which a one-thread baseline waited for a
#: CPU (used only where the kernel does not show run-queue waits).
BASELINE_MAX_WAIT_RATIO = 1.2
#: Share of its elapsed time the baseline may spend waiting on a run queue:
#: beyond the managed target's 5 %, a 5 % slowdown cannot be told from noise.
BASELINE_MAX_WAIT_FRACTION = 0.05


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
        Median over the repeats of the paired slowdown (module docstring);
        NaN when no run of the scenario finished (see :func:`crashed`).
    throttled_median
        CFS periods throttled per student (median), None without a quota.
    makespan_s, ideal_makespan_s
        Seconds (module docstring).
    failed
        Students that did not finish cleanly (non-zero exit, killed, no result).
    quota_applied
        True when every student ran in a cgroup with the CPU quota.
    summary
        The repeats behind ``slowdown``: per-repeat ratios, bootstrap
        interval, spread of the alone runs, warnings (None: not computed).
    cpu_ratio
        Median over the repeats of CPU time per student / the alone run's
        (None where a run reported no CPU time).
    waited_median_s
        Seconds per student its threads waited on a run queue over the
        training steps (median), None where the kernel does not show it.
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
    summary: Summary | None = None
    cpu_ratio: float | None = None
    waited_median_s: float | None = None

    @property
    def makespan_ratio(self) -> float:
        """``makespan_s / ideal_makespan_s``."""
        return self.makespan_s / self.ideal_makespan_s


@dataclass(frozen=True)
class Target:
    """One of the benchmark's targets checked on one row: what, the figure, and whether it was met.

    ``low``/``high``: the bootstrap interval of ``value`` where there is one;
    ``warnings``: why the figure cannot support a conclusion (noisy machine,
    an interval across the bound, one repeat).
    """

    text: str
    value: float
    met: bool
    low: float | None = None
    high: float | None = None
    warnings: tuple[str, ...] = field(default=())


def student_elapsed(student: StudentResult) -> float:
    """Elapsed time of one student: the workload's training time, else the job's wall time."""
    return student.train_s if student.train_s is not None else student.wall_s


def ideal_makespan(t1_s: float, n_students: int, n_threads: int, cpu_budget: int) -> float:
    """Return ``max(t1_s, n_students * n_threads * t1_s / cpu_budget)`` in seconds."""
    return max(t1_s, n_students * n_threads * t1_s / cpu_budget)


def plan_target(
    mode: str, n_students: int, n_threads: int, cpu_budget: int
) -> tuple[str, float, bool] | None:
    """Return the slowdown target of a scenario ``(text, bound, at_most)``, or None.

    managed slowdown <= :data:`MANAGED_MAX_SLOWDOWN` wherever 2+ students x
    threads fit in the CPUs; naive slowdown >= :data:`NAIVE_MIN_SLOWDOWN` at
    :data:`NAIVE_TARGET_STUDENTS` students.
    """
    if mode == "managed" and n_students > 1 and n_students * n_threads <= cpu_budget:
        return (
            f"managed x{n_students}: slowdown <= {MANAGED_MAX_SLOWDOWN:.2f}",
            MANAGED_MAX_SLOWDOWN,
            True,
        )
    if mode == "naive" and n_students == NAIVE_TARGET_STUDENTS:
        text = f"naive x{n_students}: slowdown >= {NAIVE_MIN_SLOWDOWN:.1f} (the collapse)"
        return text, NAIVE_MIN_SLOWDOWN, False
    return None


def pair_with_baseline(
    results: list[ScenarioResult],
) -> dict[object, list[tuple[ScenarioResult, ScenarioResult]]]:
    """Pair each run with the baseline run just before it (the next one if none came before).

    Returns ``{scenario: [(alone run, run), ...]}`` in run order, scenarios in
    the order they first appear; the baseline is paired with itself.

    Raises
    ------
    ValueError
        If the results hold no baseline (one managed student).
    """
    alone = [i for i, r in enumerate(results) if r.scenario.is_baseline]
    if not alone:
        raise ValueError("the results hold no baseline (one managed student)")
    pairs: dict[object, list[tuple[ScenarioResult, ScenarioResult]]] = {}
    for i, result in enumerate(results):
        before = [j for j in alone if j <= i]
        partner = results[before[-1] if before else alone[0]]
        pairs.setdefault(result.scenario, []).append((partner, result))
    return pairs


def crashed(result: ScenarioResult) -> bool:
    """True when a student of the run exited with an error status (not killed by a signal).

    Such a run has no training time to compare and is left out of the
    slowdowns; a student killed at its time limit (negative status) keeps its
    wall time, a lower bound of how slow it was.
    """
    return any(s.returncode > 0 for s in result.students)


def _median_cpu(result: ScenarioResult) -> float | None:
    cpu = [s.cpu_s for s in result.students if s.cpu_s is not None and s.cpu_s > 0]
    return statistics.median(cpu) if cpu else None


def _slowdown_summary(
    scenario: Scenario,
    runs: list[tuple[ScenarioResult, ScenarioResult]],
    usable: list[tuple[ScenarioResult, ScenarioResult]],
    goal: tuple[str, float, bool] | None,
    confidence: float,
    seed: int,
) -> Summary | None:
    """Return the paired slowdowns of the ``usable`` runs and their warnings; None if none.

    The baseline compares each run with the median of its own runs, and its
    spread is that of those runs.
    """
    if not usable:
        return None
    alone_s = [statistics.median(student_elapsed(s) for s in a.students) for a, _ in usable]
    run_s = [statistics.median(student_elapsed(s) for s in r.students) for _, r in usable]
    if scenario.is_baseline:
        alone_s = [statistics.median(run_s)] * len(run_s)
    summary = summarise_slowdowns(
        alone_s, run_s, goal[1] if goal else None, goal[2] if goal else True, confidence, seed
    )
    notes = list(summary.warnings)
    if scenario.is_baseline:  # its spread is that of its own runs
        summary = replace(summary, baseline=describe_spread(run_s))
        notes += [w for w in [check_spread(summary.baseline)] if w]
    if len(usable) < len(runs):
        notes.append(
            f"{len(runs) - len(usable)} of {len(runs)} runs of {scenario.label} "
            "left out of the slowdown: a student failed"
        )
    return replace(summary, warnings=tuple(notes))


def _cpu_ratio(
    scenario: Scenario, usable: list[tuple[ScenarioResult, ScenarioResult]]
) -> float | None:
    """Return the median ratio of CPU seconds per student, run over alone; None if unknown."""
    cpu_pairs = [(_median_cpu(a), _median_cpu(r)) for a, r in usable]
    cpu_alone = [a for a, r in cpu_pairs if a is not None and r is not None]
    cpu_run = [r for a, r in cpu_pairs if a is not None and r is not None]
    if scenario.is_baseline and cpu_run:
        cpu_alone = [statistics.median(cpu_run)] * len(cpu_run)
    if not cpu_run:
        return None
    return statistics.median(r / a for a, r in zip(cpu_alone, cpu_run, strict=True))


def plan_row(
    runs: list[tuple[ScenarioResult, ScenarioResult]],
    baseline: ScenarioResult,
    cpu_budget: int,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Row:
    """Return the table line of a scenario from its runs, each paired with an alone run.

    ``baseline``: every baseline run merged (:func:`merge_repeats`), for the
    ideal makespan. The baseline's own row compares each alone run with the
    median of them all, so its interval shows how much the alone runs moved.
    """
    merged = merge_repeats([run for _, run in runs])[0]
    scenario, students = merged.scenario, merged.students
    elapsed = [student_elapsed(s) for s in students]
    threads = [s.torch_threads for s in students if s.torch_threads is not None]
    cpu = [s.cpu_s for s in students if s.cpu_s is not None]
    waited = [s.waited_s for s in students if s.waited_s is not None]
    throttled = [s.nr_throttled for s in students if s.nr_throttled is not None]
    slots = baseline.scenario.n_threads or 1
    goal = plan_target(scenario.mode, scenario.n_students, slots, cpu_budget)
    usable = [(a, r) for a, r in runs if not crashed(a) and not crashed(r)]
    summary = _slowdown_summary(scenario, runs, usable, goal, confidence, seed)
    cpu_ratio = _cpu_ratio(scenario, usable)
    return Row(
        mode=scenario.mode,
        n_students=scenario.n_students,
        torch_threads=round(statistics.median(threads)) if threads else None,
        elapsed_median_s=statistics.median(elapsed),
        elapsed_max_s=max(elapsed),
        cpu_median_s=statistics.median(cpu) if cpu else None,
        slowdown=summary.median if summary else math.nan,
        throttled_median=round(statistics.median(throttled)) if throttled else None,
        makespan_s=merged.makespan_s,
        ideal_makespan_s=ideal_makespan(
            baseline.makespan_s, scenario.n_students, slots, cpu_budget
        ),
        failed=sum(1 for s in students if s.returncode != 0 or s.train_s is None),
        quota_applied=all(s.quota_applied for s in students),
        summary=summary,
        cpu_ratio=cpu_ratio,
        waited_median_s=statistics.median(waited) if waited else None,
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


def plan_rows(
    results: list[ScenarioResult],
    cpu_budget: int,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> list[Row]:
    """Return the table: one row per scenario, sorted by mode (as run) then students.

    ``results`` in run order: each run is paired with the baseline run just
    before it (:func:`pair_with_baseline`); medians are taken over every
    student of every repeat, slowdowns over the paired repeats.

    Raises
    ------
    ValueError
        If the baseline scenario (one managed student) is missing.
    """
    pairs = pair_with_baseline(results)
    baseline = merge_repeats([r for r in results if r.scenario.is_baseline])[0]
    modes = list(dict.fromkeys(r.scenario.mode for r in results))
    rows = [plan_row(runs, baseline, cpu_budget, confidence, seed) for runs in pairs.values()]
    return sorted(rows, key=lambda r: (modes.index(r.mode), r.n_students))


def check_targets(rows: list[Row], n_threads: int, cpu_budget: int) -> list[Target]:
    """Return the benchmark's targets that the rows allow to check, each with its figure.

    * managed slowdown <= 1.05 wherever students x threads <= CPUs (2+ students);
    * naive slowdown >= 3 at 2 students;
    * overcommit makespan <= 1.15 x ideal wherever students x threads > CPUs.

    Slowdown targets carry the row's bootstrap interval and its warnings
    (an interval across the bound, one repeat); the spread of the alone runs
    is a warning on the whole run, given by the baseline row.
    """
    targets = []
    for row in rows:
        demand = row.n_students * n_threads
        goal = plan_target(row.mode, row.n_students, n_threads, cpu_budget)
        if goal is not None:
            text, bound, at_most = goal
            met = row.slowdown <= bound if at_most else row.slowdown >= bound
            summary = row.summary
            low, high = (summary.low, summary.high) if summary else (None, None)
            warnings = summary.warnings if summary else ("no run finished: no slowdown",)
            # the alone runs' spread is the whole run's warning (plan_rows' baseline row)
            warnings = tuple(w for w in warnings if not w.startswith(SPREAD_WARNING))
            targets.append(Target(text, row.slowdown, met, low, high, warnings))
        if row.mode == "overcommit" and demand > cpu_budget:
            ratio = row.makespan_ratio
            text = f"overcommit x{row.n_students}: makespan <= {OVERCOMMIT_MAX_RATIO:.2f} x ideal"
            targets.append(Target(text, ratio, ratio <= OVERCOMMIT_MAX_RATIO))
    return targets


def check_baseline(rows: list[Row]) -> str | None:
    """Return a warning when the baseline waited for CPU (other work ran), else None.

    The student alone should never wait for a CPU. Where the kernel shows
    run-queue waits (``/proc/<pid>/task/*/schedstat``), the baseline is
    flagged when they exceed :data:`BASELINE_MAX_WAIT_FRACTION` of its
    elapsed time. Elsewhere only a one-thread baseline is judged, by elapsed
    against CPU time (:data:`BASELINE_MAX_WAIT_RATIO`): with several threads
    that ratio also measures how well the work spreads over them (a small
    LSTM keeps 2 threads about 60 % busy), not contention.
    """
    base = next((r for r in rows if r.mode == "managed" and r.n_students == 1), None)
    if base is None or not base.elapsed_median_s:
        return None
    if base.waited_median_s is not None:
        share = base.waited_median_s / base.elapsed_median_s
        if share <= BASELINE_MAX_WAIT_FRACTION:
            return None
        measured = (
            f"waited on a run queue {base.waited_median_s:.2f} s of "
            f"{base.elapsed_median_s:.1f} s ({share:.0%})"
        )
    else:
        if not base.cpu_median_s or base.torch_threads != 1:
            return None
        if base.elapsed_median_s / base.cpu_median_s <= BASELINE_MAX_WAIT_RATIO:
            return None
        measured = f"elapsed {base.elapsed_median_s:.1f} s, CPU {base.cpu_median_s:.1f} s"
    return (
        f"the baseline waited for CPU ({measured}): other work was running, slowdowns "
        "are unreliable; rerun on a quiet machine, or as root with --cpu-shares 262144 --repeat 5"
    )
