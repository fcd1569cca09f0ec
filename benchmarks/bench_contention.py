"""The talk's collapse and its fix, with the benchmark's targets, in one table.

Scenarios (cpu_limit 1 CPU per student, one cgroup quota each when root):
one managed student (the baseline), naive and managed with 1 and 2
students, and 4 students overcommitted through the runner's admission
control on this machine's CPUs. The same code as
``coursehub bench contention`` (:mod:`coursehub.bench`); prints the table and
whether the three targets were met: managed slowdown <= 1.05 where
students x threads <= CPUs, naive slowdown >= 3 at 2 students, overcommit
makespan <= 1.15 x ideal.

Each scenario is run REPEAT times, each run right after a run of one student
alone (``alone, naive x1, alone, naive x2, alone, managed x2, ...``); a
slowdown is a run over the alone run just before it, and the table gives the
median over the repeats with its 95 % bootstrap interval, the spread of the
alone runs, and a warning where the machine was too noisy to conclude
(:mod:`coursehub.bench.stats`).

Run: ``.venv/bin/python benchmarks/bench_contention.py [STEPS] [REPEAT]``
(default 1000 steps per student, 5 repeats: about 15 minutes on 2 quiet
cores; ``300 3`` for a quick look). As root the students' parent cgroup gets
a CPU weight of ``CPU_SHARES`` (cpu.shares), so that other work on a shared
machine disturbs the measure less; the load average before and after is
printed.
"""

from __future__ import annotations

import sys

from coursehub.bench.contention import default_cpu_budget, run_benchmark
from coursehub.bench.report import render_report
from coursehub.bench.scenarios import check_cpu_limit, plan_scenarios
from coursehub.bench.students import BenchSettings
from coursehub.bench.workload import DEFAULT_STEPS

CPU_LIMIT = 1.0
USERS = (1, 2)
OVERCOMMIT_USERS = 4
TIMEOUT_S = 1800.0
#: The kernel's largest cpu.shares (other processes weigh 1024 each).
CPU_SHARES = 262_144
#: Runs of each scenario (each after its own alone run).
REPEAT = 5


def main() -> None:
    """Run the scenarios and print the report."""
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_STEPS
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else REPEAT
    cpu_budget = default_cpu_budget()
    n_threads = check_cpu_limit(CPU_LIMIT, cpu_budget)
    plan = plan_scenarios(USERS, ("naive", "managed"), CPU_LIMIT, n_threads)
    plan += plan_scenarios((OVERCOMMIT_USERS,), ("overcommit",), CPU_LIMIT, n_threads)[1:]
    settings = BenchSettings(
        tuple(plan),
        steps,
        cpu_budget=cpu_budget,
        timeout_s=TIMEOUT_S,
        cpu_shares=CPU_SHARES,
        repeat=repeat,
    )
    run = run_benchmark(settings)
    text, _, _ = render_report(run, settings, CPU_LIMIT, n_threads)
    print(text)


if __name__ == "__main__":
    main()
