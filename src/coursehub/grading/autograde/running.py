"""The running part of a batch: its jobs, its outcomes so far and its progress record.

:class:`JobBatch` keeps up to ``workers`` runner jobs running, one per
submission (:func:`coursehub.grading.autograde.job.start_grading`), and
turns each finished one into its outcome;
:class:`coursehub.grading.autograde.workerbatch.WorkerBatch` does the same
with long-lived grading workers. The entry point is
:func:`coursehub.grading.autograde.batch.autograde_assignment`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from coursehub.grading.autograde.job import (
    AutogradeLimits,
    finish_grading,
    runner_failure,
    start_grading,
)
from coursehub.grading.autograde.outcomes import SubmissionOutcome, save_outcomes
from coursehub.grading.autograde.progress import (
    AutogradeFailure,
    AutogradeProgress,
    estimate_time_left,
    write_progress,
)
from coursehub.grading.layout import CourseLayout

#: Seconds between two looks at the running jobs.
POLL_S = 0.1
#: Seconds to wait for a cancelled job to end when the run is interrupted.
CANCEL_WAIT_S = 30.0

ProgressSink = Callable[[AutogradeProgress], None]


class JobBatch:
    """The running jobs of one autograde, its outcomes so far and its progress record."""

    def __init__(
        self,
        layout: CourseLayout,
        assignment: str,
        limits: AutogradeLimits,
        backend: Any,
        workers: int,
        on_progress: ProgressSink | None,
    ) -> None:
        self.layout, self.assignment, self.limits = layout, assignment, limits
        self.backend, self.workers, self.on_progress = backend, workers, on_progress
        self.queue: deque[str] = deque()
        self.running: dict[str, Any] = {}
        self.outcomes: list[SubmissionOutcome] = []
        self.total = self.skipped = self.done_here = 0
        self.started_at = time.time()

    def run(self) -> None:
        """Keep ``workers`` jobs running until every submission has its outcome."""
        while self.queue or self.running:
            self.fill()
            finished = self.collect_finished()
            if not finished:
                time.sleep(POLL_S)

    def fill(self) -> None:
        """Start jobs until ``workers`` run (a submission not run gets its outcome at once)."""
        while self.queue and len(self.running) < self.workers:
            student = self.queue.popleft()
            started = start_grading(
                self.layout, self.assignment, student, self.limits, self.backend
            )
            if isinstance(started, SubmissionOutcome):
                self.add(started)
            else:
                self.running[student] = started
                self.publish("running")

    def collect_finished(self) -> int:
        """Turn every finished job into its outcome; return how many finished."""
        count = 0
        for student, job in list(self.running.items()):
            try:
                result = job.poll()
            except Exception as exc:  # the runner's supervisor failed: report, go on
                del self.running[student]
                self.add(runner_failure(self.layout, self.assignment, student, exc))
                count += 1
                continue
            if result is not None:
                del self.running[student]
                self.add(finish_grading(self.layout, self.assignment, student, result))
                count += 1
        return count

    def add(self, outcome: SubmissionOutcome) -> None:
        """Record one outcome: outcomes file and progress record, both rewritten atomically."""
        self.outcomes.append(outcome)
        self.done_here += 1
        save_outcomes(self.layout, self.assignment, sorted(self.outcomes, key=_student))
        self.publish("running")

    def cancel(self) -> None:
        """Stop the running jobs and wait for them (their outcomes are not recorded)."""
        for job in self.running.values():
            with contextlib.suppress(Exception):
                job.cancel()
        for job in self.running.values():
            with contextlib.suppress(Exception):
                job.wait(CANCEL_WAIT_S)
        self.running.clear()

    def progress(self, state: str) -> AutogradeProgress:
        """Return the progress record now."""
        graded = sum(1 for o in self.outcomes if o.status != "not-on-roster")
        failures = tuple(
            AutogradeFailure(o.student_id, o.status, o.message)
            for o in sorted(self.outcomes, key=_student)
            if o.status != "graded"
        )
        now = time.time()
        left = estimate_time_left(now - self.started_at, self.done_here, self.total - graded)
        return AutogradeProgress(
            course_id=self.layout.course_id,
            assignment=self.assignment,
            state=state,
            graded=graded,
            total=self.total,
            skipped=self.skipped,
            failures=failures,
            running_now=tuple(sorted(self.running)),
            parallel=self.workers,
            started_at=self.started_at,
            updated_at=now,
            estimated_s_left=left if state == "running" else None,
            pid=os.getpid(),
        )

    def publish(self, state: str) -> None:
        """Write the progress record and pass it to ``on_progress``."""
        progress = self.progress(state)
        write_progress(self.layout, progress)
        if self.on_progress is not None:
            self.on_progress(progress)


def _student(outcome: SubmissionOutcome) -> str:
    return outcome.student_id
