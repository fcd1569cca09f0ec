"""A batch graded by long-lived workers (:mod:`coursehub.grading.autograde.pool`), one per slot.

:class:`WorkerBatch` is :class:`coursehub.grading.autograde.running.JobBatch`
with its jobs replaced by workers: up to ``workers`` of them, each grading
one submission at a time; the outcomes, the outcomes file, the progress
record and the resumption of an interrupted batch are the batch's own. A
worker whose submission ran past its limit is stopped, one that died or
whose kernel ran out of memory is dropped: only that submission scores 0,
and the next one gets a fresh worker.
"""

from __future__ import annotations

import contextlib
from typing import Any

from coursehub.errors import CoursehubError
from coursehub.grading.autograde.job import (
    check_submission,
    finish_grading,
    job_log_path,
    runner_failure,
    zero_outcome,
)
from coursehub.grading.autograde.outcomes import SubmissionOutcome
from coursehub.grading.autograde.pool import GradingWorker, WorkerResult
from coursehub.grading.autograde.running import CANCEL_WAIT_S, JobBatch
from coursehub.resources.units import describe_duration, describe_mem


class WorkerBatch(JobBatch):
    """The running workers of one autograde (``running``: student -> worker grading it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool: list[GradingWorker | None] = [None] * self.workers
        self.started = 0

    def run(self) -> None:
        """Grade every submission, then let the workers end (end of file) and clean up."""
        try:
            super().run()
        finally:
            self.close_all(wait_s=CANCEL_WAIT_S)

    def fill(self) -> None:
        """Give each idle slot the next submission (one not run gets its outcome at once)."""
        for index, worker in enumerate(self.pool):
            while self.queue and (worker is None or worker.student is None):
                student = self.queue.popleft()
                problem = check_submission(self.layout, self.assignment, student)
                if problem:
                    layout, assignment = self.layout, self.assignment
                    self.add(zero_outcome(layout, assignment, student, "corrupt", problem))
                    continue
                if worker is None or worker.killed_reason is not None:
                    worker = self.new_worker(index, student)
                    if worker is None:
                        continue
                worker.send(self.assignment, student)
                self.running[student] = worker
                self.publish("running")
            if not self.queue and worker is not None and worker.student is None:
                worker.finish()  # nothing more for it: it ends at end of file

    def new_worker(self, index: int, student: str) -> GradingWorker | None:
        """Start a worker in slot ``index``; None if the runner refuses it (``student`` scored)."""
        self.retire(index)
        try:
            worker = GradingWorker(
                self.layout, self.limits, self.backend, self.started, len(self.queue) + 1
            )
        except CoursehubError as exc:  # e.g. more threads than this machine's budget
            message = f"not run: {exc}"
            self.add(zero_outcome(self.layout, self.assignment, student, "failed", message))
            return None
        self.started += 1
        self.pool[index] = worker
        return worker

    def collect_finished(self) -> int:
        """Turn every answer, death or overrun into its submission's outcome; return how many."""
        count = 0
        for index, worker in enumerate(self.pool):
            if worker is None:
                continue
            student = worker.student
            outcome, retire = self.check(worker)
            if outcome is not None and student is not None:
                self.running.pop(student, None)
                self.add(outcome)
                count += 1
            if retire:
                self.retire(index)
        return count

    def check(self, worker: GradingWorker) -> tuple[SubmissionOutcome | None, bool]:
        """Return (the outcome of the worker's submission if it has one, whether to drop it)."""
        student = worker.student
        if student is not None and worker.killed_reason is None:
            answer = worker.reply()
            if answer is not None:
                result = self.answer_result(answer)
                done = finish_grading(self.layout, self.assignment, student, result)
                return done, bool(answer.get("oom"))
        try:
            ended = worker.job.poll()
        except Exception as exc:  # the runner's supervisor failed: report, go on
            if student is None:
                return None, True
            return runner_failure(self.layout, self.assignment, student, exc), True
        if ended is not None:
            if student is None:
                return None, True
            answer = worker.reply() if worker.killed_reason is None else None
            if answer is not None:  # it answered, then ended
                result = self.answer_result(answer)
                return finish_grading(self.layout, self.assignment, student, result), True
            return self.ended_outcome(worker, student, ended), True
        if worker.killed_reason is None and worker.overdue():
            limit = describe_duration(self.limits.timeout_s)
            worker.stop(f"exceeded its time limit of {limit}")
        return None, False

    def answer_result(self, answer: dict[str, Any]) -> WorkerResult:
        """Return the one-shot result a worker's answer stands for (pure but for the limits)."""
        code = int(answer.get("returncode", 1))
        reason = None
        if answer.get("oom") and code != 0 and self.limits.mem_limit is not None:
            reason = f"exceeded its memory limit of {describe_mem(self.limits.mem_limit)}"
        return WorkerResult(code, reason)

    def ended_outcome(self, worker: GradingWorker, student: str, ended: Any) -> SubmissionOutcome:
        """Return the outcome of a submission whose worker ended before answering."""
        if worker.killed_reason is not None:
            ended = WorkerResult(ended.returncode, worker.killed_reason)
        else:  # what the worker said before it died is the job's log, as a one-shot job's
            log = job_log_path(self.layout, self.assignment, student)
            if not log.is_file() or not log.stat().st_size:
                with contextlib.suppress(OSError):
                    log.write_bytes(worker.job.log_path.read_bytes()[-20000:])
        return finish_grading(self.layout, self.assignment, student, ended)

    def retire(self, index: int) -> None:
        """Drop the worker of slot ``index``: stopped if still running, its FIFOs removed."""
        worker = self.pool[index]
        if worker is None:
            return
        self.pool[index] = None
        with contextlib.suppress(Exception):
            if worker.job.poll() is None:
                worker.stop()
        worker.close()

    def close_all(self, wait_s: float) -> None:
        """End every worker (end of file), wait up to ``wait_s`` each, stop what is left."""
        for worker in self.pool:
            if worker is not None:
                worker.finish()
        for index, worker in enumerate(self.pool):
            if worker is not None:
                with contextlib.suppress(Exception):
                    worker.job.wait(wait_s)
                self.retire(index)

    def cancel(self) -> None:
        """Stop every worker and wait for them (their submissions' outcomes are not recorded)."""
        for worker in self.pool:
            if worker is not None:
                worker.stop()
        self.close_all(wait_s=CANCEL_WAIT_S)
        self.running.clear()
