"""Run the contention benchmark: N simulated students training at once, in each mode.

The plan and its records are in :mod:`coursehub.bench.scenarios`, the table's
figures in :mod:`coursehub.bench.summary`. Here are the parts that act:

* :func:`ensure_dataset` writes the small dataset every student reads;
* :func:`coursehub.bench.naive.run_naive` starts plain interpreters with
  the thread variables stripped, each in its own cgroup with the CPU quota;
* :func:`run_managed` submits the students to the runner
  (:class:`coursehub.runner.local.LocalBackend`) with a private admission
  pool: as large as the demand in ``managed`` mode (nobody waits), the CPU
  budget in ``overcommit`` mode (students queue);
* :func:`run_benchmark` runs the scenarios under a tqdm bar, interleaved
  with the baseline (:func:`plan_order`): ``alone, A, alone, B, ...``, the
  whole list ``repeat`` times, so that each run is measured against an
  alone run made just before it on a machine whose speed drifts.

The harness keeps out of the students' way while they train: the runner
samples their memory once a second (:data:`SAMPLE_S`; their cgroup holds
the limit, and the runner sees a job's exit at once through a pidfd), and
the end of each job is awaited in a blocked thread, not by polling.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursehub.bench.naive import run_naive
from coursehub.bench.scenarios import Scenario, ScenarioResult, StudentResult
from coursehub.bench.students import (
    WORKLOAD_MODULE,
    BenchSettings,
    plan_workload_args,
    read_report,
)
from coursehub.errors import CoursehubError
from coursehub.resources.cgroups import CgroupUnavailableError, job_cgroup_bases
from coursehub.resources.cpus import effective_cpus
from coursehub.resources.threads import thread_env
from coursehub.runner.job import Backend, Job

#: Trajectories of the shared dataset (about 40 for training; ~1 s to make).
N_TRAJECTORIES = 64
#: Seconds between two memory samples of a managed student by the runner. The
#: runner's 0.1 s walks ``/proc`` ten times a second per student (about 3 ms of
#: CPU each on the 2-core build machine): CPU taken from the students
#: themselves when they fill every core.
SAMPLE_S = 1.0


@dataclass
class BenchRun:
    """The results of a run, the machine's load average around it (1, 5, 15 min), notes."""

    results: list[ScenarioResult] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    notes: list[str] = field(default_factory=list)


def plan_order(scenarios: tuple[Scenario, ...], repeat: int) -> list[Scenario]:
    """Return the runs in order: each scenario right after a baseline run, ``repeat`` times.

    ``(alone, A, B)`` twice gives ``alone, A, alone, B, alone, A, alone, B``:
    every run has an alone run just before it to be measured against
    (:func:`coursehub.bench.summary.pair_with_baseline`). With the baseline
    alone, it is run ``repeat`` times.
    """
    baseline = next((s for s in scenarios if s.is_baseline), None)
    others = [s for s in scenarios if s is not baseline]
    if baseline is None:
        return others * repeat
    one_pass = [run for s in others for run in (baseline, s)] or [baseline]
    return one_pass * repeat


def default_cpu_budget() -> int:
    """Return the CPUs this process may use, ``floor(effective_cpus())`` (>= 1)."""
    return max(1, math.floor(effective_cpus()))


def ensure_dataset(path: Path) -> Path:
    """Write the students' shared dataset to ``path`` unless it is there; return ``path``."""
    if not path.exists():
        from coursehub.pendulum.datafile import save_dataset
        from coursehub.pendulum.dataset import generate_dataset

        save_dataset(generate_dataset(N_TRAJECTORIES, seed=0, progress=False), path)
    return path


def plan_cpu_weight(version: int, cpu_shares: int) -> tuple[str, str]:
    """Return ``(file, value)`` giving a cgroup the CPU weight ``cpu_shares`` (v1 units).

    v1 writes ``cpu.shares`` (clamped to 2..262144, the kernel's range);
    v2 writes ``cpu.weight`` = ``1 + (shares - 2) * 9999 / 262142``, the
    conversion of the OCI runtimes (runc ``ConvertCPUSharesToCgroupV2Value``).
    """
    shares = min(262_144, max(2, cpu_shares))
    if version == 1:
        return "cpu.shares", str(shares)
    return "cpu.weight", str(1 + (shares - 2) * 9999 // 262_142)


@contextlib.contextmanager
def weighted_cgroup(parent: str, cpu_shares: int | None) -> Iterator[str | None]:
    """Hold the students' parent cgroup with a CPU weight for the whole run; yield a note.

    The parent gets an empty child, ``hold``, for as long as the block runs:
    a job cgroup removes its parent when it is the last one out, and a new
    parent would come back with the default weight. Yields None when done
    (or when no weight was asked), else a line saying why the weight could
    not be set (not root, no writable cgroup filesystem). Both directories
    are removed afterwards when empty.
    """
    if cpu_shares is None:
        yield None
        return
    try:
        version, cpu_base, _ = job_cgroup_bases()
        name, value = plan_cpu_weight(version, cpu_shares)
        directory = cpu_base / parent
        (directory / "hold").mkdir(parents=True, exist_ok=True)
        if version == 2:
            (cpu_base / "cgroup.subtree_control").write_text("+cpu")
        (directory / name).write_text(value)
    except (CgroupUnavailableError, OSError) as exc:
        yield f"CPU weight of the benchmark not set: {exc}"
        return
    try:
        yield None
    finally:
        for empty in (directory / "hold", directory):
            with contextlib.suppress(OSError):
                empty.rmdir()


def warm_up(data: Path, settings: BenchSettings) -> None:
    """Run the workload once for one step (one thread): warms the file cache, checks it works.

    Without it the first scenario (the baseline) would pay alone for reading
    torch from a cold disk cache.

    Raises
    ------
    CoursehubError
        If the workload fails; its last output lines are in the message.
    """
    args = plan_workload_args(data, dataclasses.replace(settings, steps=1))
    env = {**os.environ, **thread_env(1)}
    done = subprocess.run(
        [sys.executable, "-m", WORKLOAD_MODULE, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or read_report(done.stdout) is None:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise CoursehubError(f"the training workload fails before any scenario: {tail}")


@contextlib.contextmanager
def work_directory(path: Path | None) -> Iterator[Path]:
    """Yield ``path`` (created), or a temporary directory removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="coursehub-bench-") as tmp:
        yield Path(tmp)


def run_managed(
    scenario: Scenario,
    data: Path,
    settings: BenchSettings,
    work: Path,
    on_exit: Callable[[int], None] | None = None,
) -> ScenarioResult:
    """Submit the scenario's students to the runner at once; wait for all of them.

    ``managed`` (and the GPU check): the admission pool has room for every
    student's threads; ``overcommit``: it has ``settings.cpu_budget`` CPUs,
    so students queue. With ``settings.device == "cuda"`` each student gets
    one slot of GPU 0, which takes them all. ``on_exit`` is called with a
    student's index as soon as its job is seen to have ended (from the
    thread that waits for that job, one call at a time).
    """
    from coursehub.runner.api import submit

    n_threads = scenario.n_threads or 1
    demand = scenario.n_students * n_threads
    budget = settings.cpu_budget if scenario.mode == "overcommit" else max(demand, n_threads)
    tag = secrets.token_hex(3)
    gpus = 1 if settings.device == "cuda" else 0
    options: dict[str, Any] = {
        "module": True,
        "n_threads": n_threads,
        "cpu_limit": scenario.cpu_limit,
        "gpus": gpus,
        "gpu_mem_limit": settings.gpu_mem_limit if gpus else None,
        "timeout_s": settings.timeout_s,
    }
    backend = _bench_backend(scenario, settings, work, budget, gpus, tag)
    t0 = time.monotonic()
    jobs: list[Job] = []
    ends: dict[int, float] = {}
    waiters: list[threading.Thread] = []
    one_at_a_time = threading.Lock()  # on_exit runs as each job ends, never two at once

    def await_end(i: int, job: Job) -> None:  # blocked, not polling: no CPU taken
        with contextlib.suppress(Exception):  # its error is raised by _student_of
            job.wait()
        with one_at_a_time:
            ends[i] = time.monotonic() - t0
            if on_exit is not None:
                on_exit(i)

    try:
        for i in range(scenario.n_students):
            name = f"{scenario.mode}-{tag}-{i}"
            args = plan_workload_args(data, settings)
            jobs.append(submit(WORKLOAD_MODULE, args, backend=backend, name=name, **options))
            waiters.append(threading.Thread(target=await_end, args=(i, jobs[-1]), daemon=True))
            waiters[-1].start()
        for waiter in waiters:
            waiter.join()
    finally:
        for i, job in enumerate(jobs):
            if i not in ends:
                job.cancel()
                job.wait()
    students = tuple(_student_of(job, ends[i]) for i, job in enumerate(jobs))
    return ScenarioResult(scenario, students, max(ends.values()))


def _bench_backend(
    scenario: Scenario, settings: BenchSettings, work: Path, budget: int, gpus: int, tag: str
) -> Backend:
    """Return the runner backend of a managed scenario, its runs kept under ``work``.

    Slurm (it admits by whole cores, ``--cpus-per-task``), or local jobs
    admitted by a slot pool of ``budget`` CPUs and ``gpus`` GPUs (their
    memory from NVML, no reserve: the benchmark owns the GPU).
    """
    from coursehub.resources.gpus import gpu_inventory
    from coursehub.runner.local import LocalBackend
    from coursehub.runner.slots import SlotPool
    from coursehub.runner.slurm.backend import SlurmBackend

    if settings.backend == "slurm":  # Slurm admits by whole cores (--cpus-per-task)
        return SlurmBackend(runs_dir=work / "runs", poll_s=0.5)
    totals = [gpu.mem_total_bytes for gpu in gpu_inventory()][:gpus] if gpus else []
    pool = SlotPool(work / f"slots-{tag}", budget, gpus, max(1, scenario.n_students), 0.02, totals)
    return LocalBackend(
        runs_dir=work / "runs",
        slots=pool,
        sample_s=SAMPLE_S,
        cgroup_parent=settings.cgroup_parent,
    )


def _student_of(job: Job, end_s: float) -> StudentResult:
    result = job.result()
    report = read_report(job.output())
    stats = result.cgroup
    return StudentResult(
        returncode=result.returncode,
        wall_s=result.elapsed_s,
        queued_s=result.queued_s,
        end_s=end_s,
        train_s=report.train_s if report else None,
        cpu_s=report.cpu_s if report else None,
        torch_threads=report.torch_threads if report else None,
        preempted=report.preempted if report else None,
        migrations=report.migrations if report else None,
        waited_s=report.waited_s if report else None,
        process_cpu_s=result.cpu_s,
        nr_throttled=stats.nr_throttled if stats else None,
        throttled_s=stats.throttled_s if stats else None,
        enforcement="none" if result.enforcement == "watchdog" else result.enforcement,
        gpu_peak_bytes=result.gpu_peak_bytes,
    )


def run_scenario(
    scenario: Scenario, data: Path, settings: BenchSettings, work: Path
) -> ScenarioResult:
    """Run one scenario in its mode."""
    runner = run_naive if scenario.mode == "naive" else run_managed
    return runner(scenario, data, settings, work)


def run_benchmark(
    settings: BenchSettings,
    work_dir: Path | None = None,
    progress: bool = True,
    on_result: Callable[[ScenarioResult], None] | None = None,
) -> BenchRun:
    """Run the scenarios interleaved with the baseline, ``repeat`` times; return results and load.

    Parameters
    ----------
    settings
        Scenarios and workload size.
    work_dir
        Where the dataset, logs and slot files go (default: a temporary
        directory, removed at the end).
    progress
        Show a tqdm bar over the scenarios (on stderr).
    on_result
        Called with each scenario's result as soon as it is known.
    """
    from tqdm import tqdm

    run = BenchRun(load_before=os.getloadavg())
    weighted = weighted_cgroup(settings.cgroup_parent, settings.cpu_shares)
    with work_directory(work_dir) as work, weighted as note:
        run.notes += [note] if note else []
        data = ensure_dataset(work / "pendulum-bench.npz")
        warm_up(data, settings)
        planned = plan_order(settings.scenarios, settings.repeat)
        bar = tqdm(planned, desc="scenarios", unit="scenario", disable=not progress)
        for scenario in bar:
            bar.set_postfix_str(scenario.label)
            result = run_scenario(scenario, data, settings, work)
            run.results.append(result)
            if on_result is not None:
                on_result(result)
    run.load_after = os.getloadavg()
    return run
