"""Grade the submissions of one assignment side by side, within the runner's admission slots.

:func:`autograde_assignment` is the entry point: it holds the assignment's
autograde lock (:mod:`coursehub.grading.autograde.lock`) and runs the batch.
nbgrader grades one submission after another (nbgrader#174); each job here
is already a fresh interpreter with the course's limits
(:func:`coursehub.grading.autograde.job.grading_spec`), so this module keeps
up to ``parallel`` of them running at once. It is one thread: it starts
jobs, polls them, and turns each finished job into its outcome, so that
the parent's own gradebook reads and writes happen one at a time. The
jobs' nbgrader processes write the gradebook themselves, serialised by
SQLite's database lock
(:func:`coursehub.grading.autograde.gradebook.gradebook_url`).

- ``worker`` (default: ``$COURSEHUB_GRADING_WORKER``, true): each slot is
  one long-lived grading worker taking one submission after another
  (:mod:`coursehub.grading.autograde.pool`,
  :class:`coursehub.grading.autograde.workerbatch.WorkerBatch`), so that
  the interpreter's start and nbgrader's import are paid once per slot;
  False: one job per submission
  (:class:`coursehub.grading.autograde.running.JobBatch`). Same limits,
  same outcomes.
- ``parallel`` (default: all that fit): at most the jobs of the course's
  ``n_threads`` that the runner's CPU budget admits at once
  (:func:`coursehub.grading.autograde.plan.plan_parallel`); the runner's
  FIFO admission slots (:mod:`coursehub.runner.slots`) still decide when
  each one starts, so students' own runner jobs on the same host are counted.
- A job that fails, loops or exceeds its memory ends with its own limit
  and is reported; it holds one slot meanwhile and the others go on.
- After each submission the outcomes file and the progress record
  (:mod:`coursehub.grading.autograde.progress`) are rewritten atomically.
  A new run keeps the outcome of every submission already graded, unless
  it was resubmitted since or ``force`` is set
  (:func:`coursehub.grading.autograde.plan.plan_pending`): an interrupted
  run continues where it stopped. Interrupted (Ctrl-C, SIGTERM), it
  cancels its running jobs and records nothing for them.

- With the Slurm backend (passed in, or ``COURSEHUB_RUNNER_BACKEND=slurm``)
  the batch is one Slurm job array
  (:class:`coursehub.grading.autograde.arraybatch.ArrayBatch`): each task
  grades its share into a gradebook of its own, which this process merges
  into the course's, since SQLite's locks are not to be trusted on network
  file systems (https://www.sqlite.org/lockingv3.html, section 6);
  ``parallel`` is then the array's ``%`` limit of tasks at once (None: no
  limit but Slurm's). The kernels' sandbox is checked by each task on its
  node.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coursehub.grading.autograde.gradebook import ensure_students
from coursehub.grading.autograde.job import AutogradeLimits, submitted_at
from coursehub.grading.autograde.lock import autograde_lock
from coursehub.grading.autograde.outcomes import (
    SubmissionOutcome,
    load_outcomes,
    not_on_roster,
)
from coursehub.grading.autograde.plan import (
    PendingPlan,
    backend_capacity,
    check_parallel,
    plan_autograde,
    plan_parallel,
    plan_pending,
)
from coursehub.grading.autograde.pool import worker_allowed, worker_wanted
from coursehub.grading.autograde.running import JobBatch, ProgressSink
from coursehub.grading.autograde.workerbatch import WorkerBatch
from coursehub.grading.layout import CourseLayout
from coursehub.grading.receipts import restore_receipts
from coursehub.grading.sandbox.plan import check_sandbox

#: Limits of a job when none are given: one thread, no memory cap, the default wall clock.
DEFAULT_LIMITS = AutogradeLimits()


def autograde_assignment(
    layout: CourseLayout,
    assignment: str,
    roster: Iterable[str],
    limits: AutogradeLimits = DEFAULT_LIMITS,
    backend: Any = None,
    *,
    parallel: int | None = None,
    force: bool = False,
    on_progress: ProgressSink | None = None,
    worker: bool | None = None,
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
        Runner backend (default: ``$COURSEHUB_RUNNER_BACKEND``'s, else a new
        :class:`coursehub.runner.local.LocalBackend`); with the Slurm backend
        the batch is one job array
        (:mod:`coursehub.grading.autograde.arraybatch`).
    parallel
        Jobs at once; None: as many as fit
        (:func:`coursehub.grading.autograde.plan.plan_parallel`).
    force
        Grade again the submissions already graded (default: keep their outcome).
    on_progress
        Called with each :class:`coursehub.grading.autograde.progress.AutogradeProgress`.
    worker
        Grade with long-lived workers, one per slot (True), or one job per
        submission (False); None: ``$COURSEHUB_GRADING_WORKER`` (default
        true). Workers are used only with the local backend and a sandbox
        mode with PID namespaces (:mod:`coursehub.grading.autograde.pool`).

    Returns
    -------
    list[SubmissionOutcome]
        Every outcome, sorted by student id.

    Raises
    ------
    AutogradeRunningError
        If an autograde of ``assignment`` is already running (nothing is done).
    UsageError
        If ``parallel`` < 1, or ``$COURSEHUB_GRADING_WORKER`` is not true or false.
    CoursehubError
        As root, if the grading account cannot be created.
    """
    with autograde_lock(layout, assignment):
        return run_batch(
            layout, assignment, roster, limits, backend, parallel, force, on_progress, worker
        )


def run_batch(
    layout: CourseLayout,
    assignment: str,
    roster: Iterable[str],
    limits: AutogradeLimits,
    backend: Any,
    parallel: int | None,
    force: bool,
    on_progress: ProgressSink | None,
    worker: bool | None = None,
) -> list[SubmissionOutcome]:
    """Grade ``assignment``'s submissions side by side; return every outcome, sorted by student.

    The caller holds the assignment's autograde lock (:func:`autograde_assignment`);
    ``worker`` as there.

    Raises
    ------
    UsageError
        If ``parallel`` < 1 or the worker setting is malformed (nothing has started).
    """
    from coursehub.grading.assignments import open_api
    from coursehub.sandbox.workdir import sweep_job_dirs

    check_parallel(parallel)
    worker_wanted(worker)  # a malformed setting is refused before anything runs
    backend = backend or default_backend()
    if not is_slurm(backend):  # array tasks check it on their node
        check_sandbox(layout)
    plan = plan_autograde(open_api(layout).get_submitted_students(assignment), roster)
    ensure_students(layout, plan.students)
    restore_receipts(layout.course_dir, assignment, plan.students)  # a teacher's fixed folder
    pending = pending_plan(layout, assignment, plan.students, force)
    batch = make_batch(layout, assignment, limits, backend, parallel, worker, on_progress, pending)
    batch.outcomes = [*not_on_roster(layout, plan.not_on_roster), *pending.kept]
    batch.total, batch.skipped = len(plan.students), len(pending.kept)
    batch.queue.extend(pending.to_grade)
    batch.publish("running")
    try:
        batch.run()
    except BaseException:
        batch.cancel()
        batch.publish("interrupted")
        raise
    finally:
        sweep_job_dirs()  # private copies of jobs that ended without removing theirs
    batch.publish("done")
    return sorted(batch.outcomes, key=lambda o: o.student_id)


def pending_plan(
    layout: CourseLayout, assignment: str, students: tuple[str, ...], force: bool
) -> PendingPlan:
    """Return which of ``students`` to grade now and which earlier outcomes stand."""
    previous = {o.student_id: o for o in load_outcomes(layout, assignment)}
    stamps = {s: submitted_at(layout, assignment, s) for s in students}
    autograded = [
        s for s in students if (layout.course_dir / "autograded" / s / assignment).is_dir()
    ]
    return plan_pending(students, previous, stamps, autograded, force)


def make_batch(
    layout: CourseLayout,
    assignment: str,
    limits: AutogradeLimits,
    backend: Any,
    parallel: int | None,
    worker: bool | None,
    on_progress: ProgressSink | None,
    pending: PendingPlan,
) -> JobBatch:
    """Return the batch grading ``pending.to_grade``: a job array, workers or one job each."""
    n_pending = len(pending.to_grade)
    if is_slurm(backend):
        from coursehub.grading.autograde.arraybatch import ArrayBatch

        batch = ArrayBatch(layout, assignment, limits, backend, parallel or n_pending, on_progress)
        batch.worker = worker
        return batch
    workers = plan_parallel(parallel, backend_capacity(backend, limits.n_threads), n_pending)
    kind = WorkerBatch if use_workers(worker, backend) else JobBatch
    return kind(layout, assignment, limits, backend, workers, on_progress)


def default_backend() -> Any:
    """Return the runner backend of ``$COURSEHUB_RUNNER_BACKEND`` (local when unset).

    Raises
    ------
    UsageError
        If the variable names no backend.
    """
    from coursehub.runner.api import make_backend

    return make_backend()


def is_slurm(backend: Any) -> bool:
    """Whether ``backend`` is the runner's Slurm backend (a batch is then a job array)."""
    from coursehub.runner.slurm.backend import SlurmBackend

    return isinstance(backend, SlurmBackend)


def use_workers(requested: bool | None, backend: Any) -> bool:
    """Whether this batch grades with workers (:mod:`coursehub.grading.autograde.pool`).

    Asked for (``requested``, else ``$COURSEHUB_GRADING_WORKER``), the local
    backend (the workers' pipes are on this host) and a sandbox mode with a
    PID namespace per kernel (:func:`coursehub.grading.autograde.pool.worker_allowed`).
    """
    from coursehub.runner.local import LocalBackend
    from coursehub.sandbox.command import sandbox_mode

    if not worker_wanted(requested) or not isinstance(backend, LocalBackend):
        return False
    return worker_allowed(sandbox_mode())
