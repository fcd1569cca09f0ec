"""Grading workers: one long-lived runner job per admission slot, grading one submission at a time.

The plain path starts one runner job per submission, which pays the
interpreter's start and nbgrader's import (about 3 s) every time. With
workers (the default, ``COURSEHUB_GRADING_WORKER``, ``--worker/--no-worker``),
each slot of the batch holds one runner job running
:mod:`coursehub.grading.sandbox.worker` (same environment, threads, memory
limit and admission slot as a one-shot job: :func:`worker_spec`) and sends
it the same nbgrader command line (:func:`coursehub.grading.autograde.job.autograde_args`)
for one submission after another, through two FIFOs in a private folder of
the course's ``coursehub/`` folder (mode 0700, covered in every kernel's
mount namespace). Every student's cells still run in a fresh, sandboxed
kernel process; what the worker rebuilds between two submissions, and why
a kernel cannot tamper with it, is in :mod:`coursehub.grading.sandbox.worker`.

Limits, as the plain path's:

- wall clock: the batch keeps each submission's ``timeout_s`` itself
  (:meth:`GradingWorker.overdue`); an overdue worker is cancelled (SIGTERM,
  then SIGKILL), only that submission scores 0 ("exceeded its time limit
  of ..."), and the next submission gets a fresh worker;
- memory: the job's cgroup or watchdog holds ``mem_limit`` for the worker
  and its kernel; a kernel the OOM killer ended is reported by the worker
  and scores as the one-shot job's ("exceeded its memory limit of ..."),
  then the worker is replaced;
- a worker that dies (killed, crashed) scores its own submission from the
  job's result, as a one-shot job that died, and is replaced.

Each reply becomes a :class:`WorkerResult` that
:func:`coursehub.grading.autograde.job.finish_grading` turns into the
outcome the one-shot path gives.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursehub.grading.autograde.job import AutogradeLimits, autograde_args, job_log_path
from coursehub.grading.layout import CourseLayout

#: The module every grading worker runs.
WORKER_MODULE = "coursehub.grading.sandbox.worker"
#: The setting choosing workers (true, the default) or one job per submission (false).
WORKER_VAR = "COURSEHUB_GRADING_WORKER"
#: Seconds a worker job may live beyond its submissions' own limits (its runner backstop).
WORKER_SLACK_S = 120.0


def worker_wanted(requested: bool | None, environ: Any = None) -> bool:
    """Return whether to grade with workers: ``requested``, else ``$COURSEHUB_GRADING_WORKER``.

    Raises
    ------
    UsageError
        If the variable is not ``true``/``false`` (``1``/``0``, ``yes``/``no``).
    """
    from coursehub.errors import UsageError

    if requested is not None:
        return requested
    text = (os.environ if environ is None else environ).get(WORKER_VAR, "").strip().lower()
    if text in ("", "1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{WORKER_VAR} must be true or false, got {text!r}")


def worker_allowed(mode: str) -> bool:
    """Return whether a sandbox mode keeps a worker sound: only with a PID namespace per kernel.

    ``root`` and ``userns`` kill every process a kernel left when it ends;
    ``uid`` and ``none`` do not, so a leftover could reach the next
    submission's kernel in the same worker (pure).
    """
    return mode in ("root", "userns")


@dataclass(frozen=True)
class WorkerResult:
    """What :func:`coursehub.grading.autograde.job.finish_grading` reads of a one-shot result."""

    returncode: int
    killed_reason: str | None = None

    @property
    def ok(self) -> bool:
        """Whether nbgrader exited 0."""
        return self.returncode == 0


def worker_spec(
    layout: CourseLayout, folder: Path, limits: AutogradeLimits, index: int, backstop_s: float
) -> Any:
    """Return the runner ``JobSpec`` of one worker (its FIFOs in ``folder``).

    The one-shot job's (:func:`coursehub.grading.autograde.job.grading_spec`):
    environment, ``PYTHONSAFEPATH``, threads, memory limit, working directory;
    its wall clock is ``backstop_s``, the batch keeping each submission's.
    """
    from coursehub.runner.api import make_spec
    from coursehub.sandbox.env import plan_sandbox_env

    # as grading_spec: the course directory must not come first on the import path
    env = {**plan_sandbox_env(os.environ), "PYTHONSAFEPATH": "1"}
    return make_spec(
        WORKER_MODULE,
        ["--requests", str(folder / "requests"), "--replies", str(folder / "replies")],
        module=True,
        env=env,
        inherit_env=False,
        name=f"autograde-worker{index}",
        n_threads=limits.n_threads,
        mem_limit=limits.mem_limit,
        timeout_s=backstop_s,
        cwd=layout.course_dir,
        log_path=layout.reports_dir / "logs" / f"autograde-worker{index}.log",
    )


class GradingWorker:
    """One worker job, its FIFOs and the submission it grades now (None: idle)."""

    def __init__(
        self, layout: CourseLayout, limits: AutogradeLimits, backend: Any, index: int, n: int
    ) -> None:
        self.layout, self.limits = layout, limits
        base = layout.course_dir / "coursehub"
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="worker-", dir=base))  # 0700
        for name in ("requests", "replies"):
            os.mkfifo(self.folder / name, 0o600)
        # read and write ends: opening never blocks, and a dead worker is seen by its job
        self._requests = os.open(self.folder / "requests", os.O_RDWR | os.O_CLOEXEC)
        self._replies = os.open(self.folder / "replies", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self._buffer = b""
        self.student: str | None = None
        self.sent_at = self.running_since = 0.0
        #: Why the batch stopped this worker (its submission's outcome once the job ended).
        self.killed_reason: str | None = None
        backstop = limits.timeout_s * max(1, n) + WORKER_SLACK_S
        try:
            self.job = backend.submit(worker_spec(layout, self.folder, limits, index, backstop))
        except BaseException:
            self.close()
            raise

    def send(self, assignment: str, student: str) -> None:
        """Send one submission's nbgrader command line (the worker grades it next)."""
        from coursehub.grading.sandbox.plan import plan_hidden
        from coursehub.sandbox.account import sandbox_user_name

        args = autograde_args(
            self.layout,
            assignment,
            student,
            plan_hidden(self.layout, os.environ),
            sandbox_user_name(),
        )
        log = job_log_path(self.layout, assignment, student)
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        log.unlink(missing_ok=True)
        line = json.dumps({"student": student, "argv": args, "log": str(log)}) + "\n"
        os.write(self._requests, line.encode())
        self.student, self.sent_at = student, time.monotonic()

    def reply(self) -> dict[str, Any] | None:
        """Return the worker's answer for the current submission once it is there, else None."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._replies, 65536):
                self._buffer += chunk
                if len(chunk) < 65536:
                    break
        if b"\n" not in self._buffer:
            return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.student = None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def overdue(self) -> bool:
        """Whether the current submission has run past its wall-clock limit.

        Counted from when the worker's job runs (admission and the worker's
        start are not the submission's), as the runner counts a job's limit.
        """
        from coursehub.runner.job import JobState

        if self.student is None or self.job.state != JobState.RUNNING:
            return False
        if not self.running_since:
            self.running_since = time.monotonic()
        started = max(self.sent_at, self.running_since)
        return time.monotonic() - started > self.limits.timeout_s

    def finish(self) -> None:
        """Tell the worker no more submissions come (end of file on its requests)."""
        if self._requests >= 0:
            os.close(self._requests)
            self._requests = -1

    def stop(self, reason: str | None = None) -> None:
        """Cancel the worker's job (SIGTERM, then SIGKILL after the runner's grace)."""
        self.killed_reason = self.killed_reason or reason
        self.finish()
        with contextlib.suppress(Exception):
            self.job.cancel()

    def close(self) -> None:
        """Close the FIFOs and remove their folder."""
        self.finish()
        if self._replies >= 0:
            os.close(self._replies)
            self._replies = -1
        shutil.rmtree(self.folder, ignore_errors=True)
