"""Naive students: plain interpreters with torch's default threads, as a notebook kernel runs.

Each student is ``python -m coursehub.bench.workload`` started with every
thread variable removed from its environment (:func:`plan_naive_env`), so
torch and OpenMP start one thread per host core and libgomp spin-waits at
each barrier; each is moved into its own cgroup with the CPU quota
(:class:`coursehub.resources.cgroups.JobCgroup`) where the machine allows it. All
start at once. The runner is not used: it always sets the thread count.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from coursehub.bench.scenarios import Scenario, ScenarioResult, StudentResult
from coursehub.bench.students import (
    POLL_S,
    WORKLOAD_MODULE,
    BenchSettings,
    plan_workload_args,
    read_report,
)
from coursehub.resources.cgroups import CgroupUnavailableError, JobCgroup
from coursehub.resources.threads import thread_env


def plan_naive_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """Return ``base_env`` without any thread setting, as a notebook kernel would see it.

    Removed: every variable of :func:`coursehub.resources.threads.thread_env`
    (``OMP_NUM_THREADS``... ``OMP_WAIT_POLICY``, ``KMP_BLOCKTIME``), any other
    ``OMP_*``, ``GOMP_*`` or ``KMP_*`` variable, and the runner's bootstrap
    variables (``COURSEHUB_N_THREADS``...). ``base_env`` is not modified.
    """
    strip = set(thread_env(1))
    prefixes = ("OMP_", "GOMP_", "KMP_", "COURSEHUB_N_THREADS", "COURSEHUB_GPU_", "COURSEHUB_CG")
    env = {k: v for k, v in base_env.items() if k not in strip and not k.startswith(prefixes)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


class NaiveStudent:
    """A plain interpreter running the workload in its own quota cgroup (if one can be made)."""

    def __init__(
        self, name: str, argv: list[str], cpu_limit: float, log_path: Path, parent: str
    ) -> None:
        self.log_path = log_path
        self.cgroup: JobCgroup | None = None
        with contextlib.suppress(CgroupUnavailableError):
            self.cgroup = JobCgroup.create(name, cpu_limit, None, parent=parent)
        self.started = time.monotonic()
        try:
            with open(log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    argv,
                    env=plan_naive_env(os.environ),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError:
            if self.cgroup is not None:
                self.cgroup.remove()
            raise
        if self.cgroup is not None:
            self.cgroup.add_pid(self.proc.pid)

    def poll(self, t0: float, timeout_s: float | None) -> StudentResult | None:
        """Return the result once the process has exited (killing it past ``timeout_s``)."""
        pid, status, rusage = os.wait4(self.proc.pid, os.WNOHANG)
        now = time.monotonic()
        if not pid:
            if timeout_s is not None and now - self.started > timeout_s:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
            return None
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        stats = None
        if self.cgroup is not None:
            stats = self.cgroup.stats()
            self.cgroup.remove()
        report = read_report(self.log_path.read_text(errors="replace"))
        return StudentResult(
            returncode=self.proc.returncode,
            wall_s=now - self.started,
            queued_s=0.0,
            end_s=now - t0,
            train_s=report.train_s if report else None,
            cpu_s=report.cpu_s if report else None,
            torch_threads=report.torch_threads if report else None,
            preempted=report.preempted if report else None,
            migrations=report.migrations if report else None,
            waited_s=report.waited_s if report else None,
            process_cpu_s=rusage.ru_utime + rusage.ru_stime,
            nr_throttled=stats.nr_throttled if stats else None,
            throttled_s=stats.throttled_s if stats else None,
            enforcement=f"cgroup v{self.cgroup.plan.version}" if self.cgroup else "none",
        )

    def kill(self) -> None:
        """Stop the process group and remove the cgroup (used when the run is interrupted)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.proc.pid, 0)
        if self.cgroup is not None:
            self.cgroup.remove()


def run_naive(
    scenario: Scenario, data: Path, settings: BenchSettings, work: Path
) -> ScenarioResult:
    """Start the scenario's students at once as naive interpreters; wait for all of them."""
    argv = [sys.executable, "-m", WORKLOAD_MODULE, *plan_workload_args(data, settings)]
    tag = secrets.token_hex(3)
    t0 = time.monotonic()
    students: list[NaiveStudent] = []
    results: dict[int, StudentResult] = {}
    try:
        for i in range(scenario.n_students):
            name = f"naive-{tag}-{i}"
            log = work / f"{name}.log"
            students.append(
                NaiveStudent(name, argv, scenario.cpu_limit, log, settings.cgroup_parent)
            )
        while len(results) < len(students):
            for i, student in enumerate(students):
                if i not in results and (done := student.poll(t0, settings.timeout_s)):
                    results[i] = done
            time.sleep(POLL_S)
    finally:
        for i, student in enumerate(students):
            if i not in results:
                student.kill()
    ordered = tuple(results[i] for i in range(len(students)))
    return ScenarioResult(scenario, ordered, max(r.end_s for r in ordered))
