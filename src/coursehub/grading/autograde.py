"""Autograde every collected submission, each in its own runner job with the course's limits.

One job per submission: ``python -m coursehub.grading.sandbox_kernel autograde
ASSIGNMENT --student S --course-dir DIR`` (nbgrader, with the student's kernel
sandboxed: :mod:`coursehub.sandbox`) through
:func:`coursehub.runner.api.run`, with the environment of
:func:`coursehub.sandbox.env.plan_sandbox_env` (no token, no catalog URL), the course
profile's ``n_threads`` and ``mem_limit`` and a wall-clock ``timeout_s``
(nbgrader itself puts no memory cap on the kernel, nbgrader#1429). Two
limits stop a student's runaway code:

- ``c.Execute.timeout`` (per cell): nbgrader interrupts the cell, records a
  ``CellTimeoutError`` and grades the rest; the loop scores 0;
- the runner's ``timeout_s`` and ``mem_limit`` (whole job): the job and its
  kernel are killed; the submission is recorded with a score of 0.

Either way the outcome says what happened, and the other submissions are
graded. Submissions from people not on the roster and notebooks that cannot
be read are reported and not run. The outcomes are kept as JSON in
``<course_dir>/coursehub/autograde-<assignment>.json``. One autograde of an
assignment runs at a time (:mod:`coursehub.grading.autograde_lock`).

Submissions are graded side by side (:mod:`coursehub.grading.autograde_batch`),
as many at once as the runner's admission slots hold jobs of the course's
``n_threads``. Gradebook writes are serialised by SQLite's own database
lock: each job's nbgrader writes the gradebook itself, in its short
transactions, through :func:`gradebook_url`, whose ``timeout`` makes a
writer wait for the lock instead of failing with "database is locked"
after pysqlite's default 5 s (Python ``sqlite3.connect(timeout=5.0)``;
SQLAlchemy's pysqlite dialect takes ``?timeout=`` from the URL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from coursehub.grading.autograde_core import (
    AUTOGRADE_MODULE,
    DEFAULT_JOB_TIMEOUT_S,
    GRADEBOOK_BUSY_TIMEOUT_S,
    AutogradeLimits,
    AutogradePlan,
    SubmissionOutcome,
    autograde_args,
    check_submission,
    ensure_students,
    gradebook_url,
    limits_for_profile,
    load_outcomes,
    not_on_roster,
    plan_autograde,
    plan_hidden,
    plan_hidden_paths,
    read_score,
    record_zero,
    render_outcomes,
    save_outcomes,
)
from coursehub.grading.layout import CourseLayout

if TYPE_CHECKING:
    from coursehub.grading.autograde_progress import AutogradeProgress

__all__ = [
    "AUTOGRADE_MODULE",
    "DEFAULT_JOB_TIMEOUT_S",
    "GRADEBOOK_BUSY_TIMEOUT_S",
    "AutogradeLimits",
    "AutogradePlan",
    "SubmissionOutcome",
    "autograde_args",
    "autograde_assignment",
    "check_submission",
    "ensure_students",
    "grade_one",
    "gradebook_url",
    "limits_for_profile",
    "load_outcomes",
    "not_on_roster",
    "plan_autograde",
    "plan_hidden",
    "plan_hidden_paths",
    "read_score",
    "record_zero",
    "render_outcomes",
    "save_outcomes",
]

#: Limits of a job when none are given: one thread, no memory cap, the default wall clock.
DEFAULT_LIMITS = AutogradeLimits()


def grade_one(
    layout: CourseLayout,
    assignment: str,
    student_id: str,
    limits: AutogradeLimits,
    backend: Any = None,
) -> SubmissionOutcome:
    """Autograde one collected submission in a runner job and wait; return its outcome (never
    raises for a student's fault: timeouts, memory, corrupt notebooks and nbgrader errors are
    outcomes)."""
    from coursehub.grading.autograde_job import finish_grading, start_grading
    from coursehub.runner.local import LocalBackend

    started = start_grading(layout, assignment, student_id, limits, backend or LocalBackend())
    if isinstance(started, SubmissionOutcome):
        return started
    return finish_grading(layout, assignment, student_id, started.wait())


def autograde_assignment(
    layout: CourseLayout,
    assignment: str,
    roster: Iterable[str],
    limits: AutogradeLimits = DEFAULT_LIMITS,
    backend: Any = None,
    *,
    parallel: int | None = None,
    force: bool = False,
    on_progress: Callable[[AutogradeProgress], None] | None = None,
) -> list[SubmissionOutcome]:
    """Autograde the collected submissions of ``assignment``, side by side; save the outcomes.

    Parameters
    ----------
    roster
        Student ids on the course's roster; other submitters are reported
        (``not-on-roster``) and not graded.
    limits
        Threads, memory and wall clock of each job.
    backend
        Runner backend (default: a new :class:`coursehub.runner.local.LocalBackend`).
    parallel
        Jobs at once; None: as many as fit
        (:func:`coursehub.grading.autograde_batch.plan_parallel`).
    force
        Grade again the submissions already graded (default: keep their outcome).
    on_progress
        Called with each :class:`coursehub.grading.autograde_progress.AutogradeProgress`.

    Raises
    ------
    AutogradeRunningError
        If an autograde of ``assignment`` is already running (nothing is done).
    UsageError
        If ``parallel`` < 1.
    CoursehubError
        As root, if the grading account cannot be created.
    """
    from coursehub.grading.autograde_batch import run_batch
    from coursehub.grading.autograde_lock import autograde_lock

    with autograde_lock(layout, assignment):
        return run_batch(layout, assignment, roster, limits, backend, parallel, force, on_progress)
