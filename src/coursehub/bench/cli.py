"""``coursehub bench contention`` (CPU) and ``coursehub bench gpu``: students training at once.

``coursehub bench gpu [--users 1,5,10] [--steps N] [--gpu-mem 1.3G] [--json FILE]`` is
:mod:`coursehub.bench.gpushare`.

``coursehub bench contention --users 1,2,4 --cpu-limit 1 --modes naive,managed,overcommit
[--steps N] [--repeat 5] [--seed 0] [--json FILE] [--plot PNG]`` runs each
scenario (see :mod:`coursehub.bench.scenarios` for the modes) ``--repeat``
times, each run right after one student alone, prints the talk's table with
the median slowdowns, their bootstrap intervals and the benchmark's targets
(:mod:`coursehub.bench.stats`: a warning when the machine was too noisy to
conclude), and writes the JSON document and the plot. Bad input
gives one ``coursehub: error: ...`` line and exit status 2, before anything
starts. Only argparse is imported at module level.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from coursehub.bench.workload import DEFAULT_BATCH_SIZE, DEFAULT_STEPS
from coursehub.errors import UsageError

DEFAULT_USERS = "1,2,4"
DEFAULT_MODES = "naive,managed,overcommit"
#: Time limit of one student's job (a naive run can collapse by orders of magnitude).
DEFAULT_TIMEOUT = "30m"
#: Repeats of each scenario: the fewest for a bootstrap interval of the median
#: that is narrower than the range of the runs.
DEFAULT_REPEAT = "5"


def register(subparsers: Any) -> None:
    """Add ``coursehub bench`` and its ``contention`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser("bench", help="benchmarks: multi-user CPU and GPU sharing")
    commands = parser.add_subparsers(dest="bench_command", metavar="COMMAND", required=True)
    sub = commands.add_parser(
        "contention",
        help="students training at once: naive threads vs the runner",
        description="Simulated students train the pendulum LSTM at once, each with a CPU "
        "quota: naive threads, managed by the runner, or overcommitted through its admission "
        "control. Prints the talk's table; writes JSON and a plot.",
    )
    add_arguments(sub)
    sub.set_defaults(func=run_contention)
    gpu = commands.add_parser(
        "gpu",
        help="1, 5, 10 students training on one GPU through the runner",
        description="Students train the pendulum LSTM at once on GPU 0 through the runner, "
        "each with a GPU memory budget: time per student against alone, GPU memory per job, "
        "memory back after each exit; and the naive case, kernels that stay alive. Refuses "
        "with one line where there is no GPU.",
    )
    add_gpu_arguments(gpu)
    gpu.set_defaults(func=run_gpu)


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``coursehub bench gpu`` (read as text, checked later)."""
    add = parser.add_argument
    add("--users", default="1,5,10", help="students at once, e.g. 1,5,10 (the first: alone)")
    add("--steps", default=None, metavar="N", help=f"minibatch steps per student ({DEFAULT_STEPS})")
    add("--gpu-mem", default="1.3G", metavar="SIZE", help="GPU memory budget of each job (1.3G)")
    add("--timeout", default=DEFAULT_TIMEOUT, metavar="DURATION", help="time limit of each job")
    add("--no-naive", action="store_true", help="skip the naive case (kernels kept alive)")
    add("--json", type=Path, metavar="FILE", help="write every figure as JSON")
    add("--work-dir", type=Path, metavar="DIR", help="keep dataset and logs here (default: temp)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``coursehub bench contention`` (read as text, checked later)."""
    add = parser.add_argument
    add("--users", default=DEFAULT_USERS, help=f"students at once, e.g. {DEFAULT_USERS}")
    add("--cpu-limit", default="1", metavar="CPUS", help="CPU quota of each student (1)")
    add("--modes", default=DEFAULT_MODES, help=f"among {DEFAULT_MODES} (all)")
    add("--workload", default="pendulum", choices=("pendulum",), help="training job (pendulum)")
    add("--steps", default=None, metavar="N", help=f"minibatch steps per student ({DEFAULT_STEPS})")
    add("--batch-size", default=None, metavar="N", help=f"windows per step ({DEFAULT_BATCH_SIZE})")
    budget_help = "CPUs for admission and the ideal makespan (default: this process's CPUs)"
    add("--cpu-budget", default=None, metavar="N", help=budget_help)
    timeout_help = f"time limit of each student's job ({DEFAULT_TIMEOUT})"
    add("--timeout", default=DEFAULT_TIMEOUT, metavar="DURATION", help=timeout_help)
    shares_help = "CPU weight of the students' cgroup vs other processes (cpu.shares; 1024)"
    add("--cpu-shares", default=None, metavar="N", help=shares_help)
    repeat_help = f"run each scenario N times, interleaved with runs alone ({DEFAULT_REPEAT})"
    add("--repeat", default=DEFAULT_REPEAT, metavar="N", help=repeat_help)
    add("--seed", default="0", metavar="N", help="seed of the bootstrap intervals (0)")
    add("--json", type=Path, metavar="FILE", help="write every figure as JSON")
    add("--plot", type=Path, metavar="PNG", help="plot elapsed per student vs students")
    add("--work-dir", type=Path, metavar="DIR", help="keep dataset and logs here (default: temp)")
    add("--no-gpu", action="store_true", help="skip the GPU check even with a GPU")
    backend_help = "where managed/overcommit students run: local (default) or slurm (batch jobs)"
    add("--backend", default="local", choices=("local", "slurm"), help=backend_help)
    add("--no-progress", action="store_true", help="no progress bar")


def parse_int(text: str, option: str) -> int:
    """Return ``text`` as an integer >= 1, or raise UsageError naming ``option``."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"{option} must be an integer >= 1, got {text!r}")
    return value


def parse_seed(text: str) -> int:
    """Return ``--seed`` as an integer >= 0, or raise UsageError."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"--seed must be an integer >= 0, got {text!r}")
    return value


def parse_cpu_limit(text: str) -> float:
    """Return ``--cpu-limit`` as a float; UsageError if it is not a number."""
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--cpu-limit must be a number of CPUs, got {text!r}") from None


def check_output(path: Path | None, option: str) -> None:
    """Raise UsageError now if ``path``'s folder exists but cannot be written."""
    if path is None:
        return
    folder = path.parent if str(path.parent) else Path(".")
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise UsageError(f"{option} {path}: folder {existing} is not writable")


def plan_settings(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """Return ``(BenchSettings, settings for the JSON)`` from the options, all checked.

    Raises
    ------
    UsageError
        On any bad option, naming it.
    """
    from coursehub.bench import contention, scenarios, students
    from coursehub.resources.units import parse_duration

    users = scenarios.parse_users(args.users)
    modes = scenarios.parse_modes(args.modes)
    cpu_limit = parse_cpu_limit(args.cpu_limit)
    budget = parse_int(args.cpu_budget, "--cpu-budget") if args.cpu_budget else None
    budget = budget or contention.default_cpu_budget()
    n_threads = scenarios.check_cpu_limit(cpu_limit, budget)
    steps = parse_int(args.steps, "--steps") if args.steps else DEFAULT_STEPS
    batch = parse_int(args.batch_size, "--batch-size") if args.batch_size else DEFAULT_BATCH_SIZE
    timeout_s = parse_duration(args.timeout)
    shares = parse_int(args.cpu_shares, "--cpu-shares") if args.cpu_shares else None
    repeat = parse_int(args.repeat, "--repeat")
    seed = parse_seed(args.seed)
    check_output(args.json, "--json")
    check_output(args.plot, "--plot")
    plan = scenarios.plan_scenarios(users, modes, cpu_limit, n_threads)
    settings = students.BenchSettings(
        tuple(plan),
        steps,
        batch,
        budget,
        timeout_s,
        cpu_shares=shares,
        repeat=repeat,
        seed=seed,
        backend=args.backend,
    )
    described = {
        "workload": args.workload,
        "users": list(users),
        "modes": list(modes),
        "cpu_limit": cpu_limit,
        "n_threads": n_threads,
        "cpu_budget": budget,
        "steps": steps,
        "batch_size": batch,
        "timeout_s": timeout_s,
        "cpu_shares": shares,
        "repeat": repeat,
        "order": "interleaved: alone, scenario, alone, scenario...",
        "seed": seed,
        "backend": args.backend,
        "root": os.geteuid() == 0,
        "host_cpus": os.cpu_count(),
    }
    return settings, described


def run_contention(args: argparse.Namespace) -> int:
    """Carry out ``coursehub bench contention``; return 0 (1 if a student failed)."""
    from coursehub.bench import contention, report

    settings, described = plan_settings(args)
    if os.geteuid() != 0:
        print("not root: no CPU quota can be applied; students share the CPUs freely")
    with contention.work_directory(args.work_dir) as work:
        run = contention.run_benchmark(settings, work, progress=not args.no_progress)
        gpu_text, gpu_doc = gpu_check(args, settings, described, work)
    cpu_limit, n_threads = described["cpu_limit"], described["n_threads"]
    text, rows, targets = report.render_report(run, settings, cpu_limit, n_threads)
    print(text)
    print(gpu_text)
    described.update(
        load_before=list(run.load_before), load_after=list(run.load_after), notes=run.notes
    )
    if args.json:
        document = report.render_document(described, run.results, rows, targets, gpu_doc)
        report.write_json(document, args.json)
    if args.plot:
        title = (
            f"pendulum LSTM, {settings.steps} steps per student; cpu_limit "
            f"{cpu_limit:g} per student; {settings.cpu_budget} CPUs"
        )
        report.save_plot(rows, args.plot, title)
    return 1 if any(r.failed for r in rows) else 0


def run_gpu(args: argparse.Namespace) -> int:
    """Carry out ``coursehub bench gpu``; return 0 (1 if a student failed).

    Raises
    ------
    CoursehubError
        Bad options (naming them), or no GPU here (one line; nothing runs).
    """
    import dataclasses
    import json

    from coursehub.bench import contention, gpushare, scenarios, students
    from coursehub.resources.units import parse_duration, parse_optional_mem

    users = list(scenarios.parse_users(args.users))
    steps = parse_int(args.steps, "--steps") if args.steps else DEFAULT_STEPS
    budget = parse_optional_mem(args.gpu_mem, "--gpu-mem")
    check_output(args.json, "--json")
    settings = students.BenchSettings(
        (),
        steps,
        DEFAULT_BATCH_SIZE,
        max(users),
        parse_duration(args.timeout),
        device="cuda",
        gpu_mem_limit=budget,
    )
    with contention.work_directory(args.work_dir) as work:
        gpu, rows, kernels = gpushare.run_gpu_bench(users, settings, work, not args.no_naive)
    print(gpushare.render_gpu_bench(gpu, rows, kernels))
    if args.json:
        document = {
            "gpu": dataclasses.asdict(gpu),
            "steps": steps,
            "gpu_mem_limit": budget,
            "rows": [dataclasses.asdict(row) for row in rows],
            "naive": [dataclasses.asdict(row) for row in kernels],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 1 if any(row.failed for row in rows) else 0


def gpu_check(
    args: argparse.Namespace, settings: Any, described: dict[str, Any], work: Path
) -> tuple[str, dict[str, Any]]:
    """Run the GPU check where there is a CUDA GPU; return its text and its JSON part."""
    import dataclasses

    from coursehub.bench import gpu
    from coursehub.resources.gpus import gpu_inventory

    inventory = [] if args.no_gpu else gpu_inventory()
    has_cuda = bool(inventory) and gpu.torch_has_cuda()
    n_students = max(described["users"])
    plan, message = gpu.plan_gpu_check(inventory, has_cuda, n_students, not args.no_gpu)
    if plan is None:
        return message, {"gpu": {"skipped": message}}
    data = work / "pendulum-bench.npz"
    check = gpu.run_gpu_check(plan, data, settings, described["cpu_limit"], work)
    return f"{message}\n{gpu.render_gpu_check(check)}", {"gpu": dataclasses.asdict(check)}
