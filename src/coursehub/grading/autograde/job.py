"""One submission's autograde job: its limits, its runner spec, its start and its outcome.

:func:`start_grading` checks the submission (:func:`check_submission`) and
submits the job of :func:`grading_spec` (``python -m
coursehub.grading.sandbox.kernel autograde ...``: nbgrader with the
sandboxed kernel, the course's limits) to a runner backend;
:func:`finish_grading` turns the job's ``RunResult`` into a
:class:`coursehub.grading.autograde.outcomes.SubmissionOutcome`. A failed,
killed or refused job scores 0 and says why; it never raises for a
student's fault. :func:`grade_one` does both and waits.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError
from coursehub.grading.autograde.cells import (
    CellRef,
    autograded_notebooks,
    cell_label,
    cell_labels,
    kernel_died_cell,
    lost_points,
    render_lost_points,
    timed_out_cells,
)
from coursehub.grading.autograde.gradebook import gradebook_url, read_score, record_zero
from coursehub.grading.autograde.outcomes import HOST_ERROR, SubmissionOutcome
from coursehub.grading.layout import CourseLayout
from coursehub.grading.limits import SubmissionLimits, check_folder
from coursehub.grading.sandbox.plan import plan_hidden

#: Default wall-clock limit of one submission's autograde job, in seconds.
DEFAULT_JOB_TIMEOUT_S = 600.0
#: The module every autograde job runs: nbgrader with the sandboxed kernel.
AUTOGRADE_MODULE = "coursehub.grading.sandbox.kernel"
#: What nbgrader's log says when the kernel ended before running any cell: the
#: sandbox or the installation, never the student's code (nbclient ``wait_for_ready``).
KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Kernel didn't respond")


@dataclass(frozen=True)
class AutogradeLimits:
    """Resources of one autograde job: threads, memory (bytes, None: none), wall clock (s)."""

    n_threads: int = 1
    mem_limit: int | None = None
    timeout_s: float = DEFAULT_JOB_TIMEOUT_S


def limits_for_profile(profile: Any, timeout_s: float = DEFAULT_JOB_TIMEOUT_S) -> AutogradeLimits:
    """Return the job limits of a course's resource profile (a ``ResourceProfile`` or None)."""
    if profile is None:
        return AutogradeLimits(timeout_s=timeout_s)
    return AutogradeLimits(int(profile.n_threads), int(profile.mem_limit), timeout_s)


def autograde_args(
    layout: CourseLayout,
    assignment: str,
    student_id: str,
    hidden: Iterable[str] = (),
    grader_user: str = "",
) -> list[str]:
    """Return the arguments of ``python -m coursehub.grading.sandbox.kernel`` (nbgrader's) (pure).

    ``hidden`` and ``grader_user`` configure
    :class:`coursehub.grading.sandbox.kernel.SandboxKernelManager`.
    """
    sandbox = [f"--SandboxKernelManager.hidden={folder}" for folder in hidden]
    if grader_user:
        sandbox.append(f"--SandboxKernelManager.grader_user={grader_user}")
    return [
        "autograde",
        assignment,
        f"--student={student_id}",
        f"--course-dir={layout.course_dir}",
        f"--course={layout.course_id}",
        f"--Exchange.root={layout.exchange_root}",
        f"--CourseDirectory.db_url={gradebook_url(layout)}",
        f"--Execute.timeout={int(layout.execute_timeout_s)}",
        # a kernel slow to flush its output after the interrupt must not fail the notebook
        "--Execute.raise_on_iopub_timeout=False",
        "--Autograde.create_student=False",
        "--force",
        *sandbox,
    ]


def check_submission(layout: CourseLayout, assignment: str, student_id: str) -> str | None:
    """Return why the submission cannot be graded, or None when it can.

    Refused: a submission over the limits of :mod:`coursehub.grading.limits`
    (size, number of files), a notebook that is not valid, and any entry
    that is not a plain file or folder. nbgrader copies the submitted files into ``autograded/``
    *as the grader* (``shutil.copy`` follows links), so a symbolic link to
    the gradebook, to a classmate's notebook or to ``/etc/shadow`` would be
    read with the grader's rights and handed to the student's code.
    coursehub's collect drops links; this also covers submissions put in
    ``submitted/`` another way (nbgrader's own collect, by hand).
    """
    import nbformat

    folder = layout.course_dir / "submitted" / student_id / assignment
    over = check_folder(folder, SubmissionLimits())
    if over:  # before nbgrader's walk, quadratic in the number of files (nbgrader#874)
        return f"the submission {over}: not graded"
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in (*dirnames, *filenames):
            mode = os.lstat(os.path.join(dirpath, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a plain file"
                return f"{name} is {kind}: not graded"
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as exc:  # JSON, schema or encoding errors alike
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"{path.name} is not a valid notebook ({first[:200]})"
    return None


def submitted_at(layout: CourseLayout, assignment: str, student_id: str) -> str:
    """Return the text of the submission's nbgrader ``timestamp.txt`` ("" if it has none)."""
    path = layout.course_dir / "submitted" / student_id / assignment / "timestamp.txt"
    try:
        return path.read_text("utf-8", errors="replace").strip()[:100]
    except OSError:
        return ""


def grading_spec(
    layout: CourseLayout, assignment: str, student_id: str, limits: AutogradeLimits
) -> Any:
    """Return the runner ``JobSpec`` grading one submission: nbgrader, sandboxed, the limits.

    Raises
    ------
    UsageError
        On out-of-range limits.
    """
    from coursehub.runner.api import make_spec
    from coursehub.sandbox.account import sandbox_user_name
    from coursehub.sandbox.env import plan_sandbox_env

    args = autograde_args(
        layout, assignment, student_id, plan_hidden(layout, os.environ), sandbox_user_name()
    )
    # the job runs in the course directory, which the team may write to: Python must not
    # put it first on the import path (PYTHONSAFEPATH, Python 3.11's -P), or a module the
    # team left there (jupyter_client.py...) would run in this trusted process
    env = {**plan_sandbox_env(os.environ), "PYTHONSAFEPATH": "1"}
    return make_spec(
        AUTOGRADE_MODULE,
        args,
        module=True,
        env=env,
        inherit_env=False,
        name=f"autograde-{student_id}",
        n_threads=limits.n_threads,
        mem_limit=limits.mem_limit,
        timeout_s=limits.timeout_s,
        cwd=layout.course_dir,
        log_path=job_log_path(layout, assignment, student_id),
    )


def start_grading(
    layout: CourseLayout,
    assignment: str,
    student_id: str,
    limits: AutogradeLimits,
    backend: Any,
) -> Any:
    """Start the runner job grading one submission on ``backend``; return its ``Job``.

    Returns a :class:`SubmissionOutcome` instead when the submission is not
    run: an unsafe or unreadable notebook (``corrupt``), or a job the
    runner refuses (``failed``, e.g. more threads than the host's budget).
    """
    problem = check_submission(layout, assignment, student_id)
    if problem:
        return zero_outcome(layout, assignment, student_id, "corrupt", problem)
    job_log_path(layout, assignment, student_id).unlink(missing_ok=True)
    try:
        return backend.submit(grading_spec(layout, assignment, student_id, limits))
    except CoursehubError as exc:  # e.g. more threads than this machine's budget
        return zero_outcome(layout, assignment, student_id, "failed", f"not run: {exc}")


def job_log_path(layout: CourseLayout, assignment: str, student_id: str) -> Path:
    """Return the log file of one submission's autograde job."""
    return layout.reports_dir / "logs" / f"autograde-{assignment}-{student_id}.log"


def finish_grading(
    layout: CourseLayout, assignment: str, student_id: str, result: Any
) -> SubmissionOutcome:
    """Return the outcome of a finished job (its ``RunResult``); a failed one scores 0."""
    if result.killed_reason:
        return zero_outcome(
            layout, assignment, student_id, "killed", f"stopped: {result.killed_reason}"
        )
    if not result.ok:
        return failed_outcome(layout, assignment, student_id, result.returncode)
    score, max_score = read_score(layout, assignment, student_id)
    stamp = submitted_at(layout, assignment, student_id)
    cells = timed_out_cells(layout, assignment, student_id)
    changed = describe_cell_changes(layout, assignment, student_id)
    if cells:
        message = timeout_message(layout, assignment, student_id, cells) + changed
        return SubmissionOutcome(student_id, "timeout", score, max_score, message, stamp)
    return SubmissionOutcome(student_id, "graded", score, max_score, "graded" + changed, stamp)


def describe_cell_changes(layout: CourseLayout, assignment: str, student_id: str) -> str:
    """Return ``""`` or the outcome's note on the source's cells the student deleted or edited.

    See :mod:`coursehub.grading.autograde.integrity` (nbgrader#1682).
    """
    from coursehub.grading.autograde.integrity import cell_changes, render_cell_changes

    several = len(autograded_notebooks(layout, assignment, student_id)) > 1
    return render_cell_changes(cell_changes(layout, assignment, student_id), several)


def failed_outcome(
    layout: CourseLayout, assignment: str, student_id: str, returncode: int | None
) -> SubmissionOutcome:
    """Return the outcome of a job where nbgrader failed (its ungraded cells score 0).

    When the kernel died in a cell, the message names it
    (:func:`coursehub.grading.autograde.cells.kernel_died_cell`) and gives the
    gradebook's score: notebooks graded before it keep theirs.
    """
    log_path = job_log_path(layout, assignment, student_id)
    died = kernel_died_cell(log_path.read_text(errors="replace") if log_path.is_file() else "")
    if died is not None:
        submitted = layout.course_dir / "submitted" / student_id / assignment
        several = len(list(submitted.glob("*.ipynb"))) > 1
        reason = (
            f"the kernel died in {cell_label(died, several)}: it exited, crashed or ran out "
            "of memory, and grading stopped there"
        )
    else:
        reason = _last_error(log_path) or f"exit status {returncode}"
    status = HOST_ERROR if any(k in reason for k in KERNEL_START_FAILURES) else "failed"
    outcome = zero_outcome(layout, assignment, student_id, status, f"nbgrader failed: {reason}")
    if died is None:
        return outcome
    # the other notebooks were graded: the score is the gradebook's, not always 0
    score = f"{outcome.score or 0:g}/{outcome.max_score:g}"
    return replace(outcome, message=f"{outcome.message}; score {score}")


def timeout_message(
    layout: CourseLayout, assignment: str, student_id: str, cells: list[CellRef]
) -> str:
    """Return the message of a submission with interrupted ``cells``: which, and the points lost.

    ``interrupted after 10 s (infinite loop?) in your cell 3 (not graded); no points
    lost`` (cells named by :func:`coursehub.grading.autograde.cells.cell_label`, the
    points lost read from the gradebook).
    """
    several = len(autograded_notebooks(layout, assignment, student_id)) > 1
    lost = render_lost_points(lost_points(layout, assignment, student_id), several)
    return (
        f"interrupted after {layout.execute_timeout_s:g} s (infinite loop?) "
        f"in {cell_labels(cells, several)}; {lost}"
    )


def runner_failure(
    layout: CourseLayout, assignment: str, student_id: str, exc: Exception
) -> SubmissionOutcome:
    """Return the ``error`` outcome of a job whose runner failed (``exc``); it scores 0."""
    outcome = zero_outcome(layout, assignment, student_id, HOST_ERROR, f"runner error: {exc}")
    return replace(outcome, message=outcome.message[:500])


def zero_outcome(
    layout: CourseLayout, assignment: str, student_id: str, status: str, message: str
) -> SubmissionOutcome:
    """Record the submission in the gradebook with 0 for its ungraded cells; return its outcome.

    ``status`` and ``message`` say why it scores 0.
    """
    record_zero(layout, assignment, student_id)
    score, max_score = read_score(layout, assignment, student_id)
    message = f"assignment {assignment}, student {student_id}: {message}"
    stamp = submitted_at(layout, assignment, student_id)
    return SubmissionOutcome(student_id, status, score, max_score, message, stamp)


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
    from coursehub.runner.local import LocalBackend

    started = start_grading(layout, assignment, student_id, limits, backend or LocalBackend())
    if isinstance(started, SubmissionOutcome):
        return started
    return finish_grading(layout, assignment, student_id, started.wait())


def _last_error(log_path: Path) -> str:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    flagged = [ln.strip() for ln in lines if "[ERROR]" in ln or "Error" in ln]
    return (flagged[-1] if flagged else "")[:300]
