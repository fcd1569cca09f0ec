"""One submission's autograde job: its runner spec, its start and its outcome.

:func:`start_grading` checks the submission
(:func:`coursehub.grading.autograde.check_submission`) and submits the job
of :func:`grading_spec` (nbgrader with the sandboxed kernel, the course's
limits) to a runner backend; :func:`finish_grading` turns the job's
``RunResult`` into a :class:`coursehub.grading.autograde.SubmissionOutcome`.
A failed, killed or refused job scores 0 and says why; it never raises for
a student's fault.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError
from coursehub.grading.autograde_core import (
    AUTOGRADE_MODULE,
    HOST_ERROR,
    KERNEL_START_FAILURES,
    AutogradeLimits,
    SubmissionOutcome,
    autograde_args,
    check_submission,
    plan_hidden,
    read_score,
    record_zero,
)
from coursehub.grading.layout import CourseLayout


def timed_out_cells(layout: CourseLayout, assignment: str, student_id: str) -> list[str]:
    """Return the grade ids of autograded cells that nbgrader interrupted (CellTimeoutError)."""
    import nbformat

    folder = layout.course_dir / "autograded" / student_id / assignment
    names = []
    for path in sorted(folder.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if any(o.get("ename") == "CellTimeoutError" for o in errors):
                names.append(cell.metadata.get("nbgrader", {}).get("grade_id", path.stem))
    return names


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
        record_zero(layout, assignment, student_id)
        return zero_outcome(layout, assignment, student_id, "corrupt", problem)
    job_log_path(layout, assignment, student_id).unlink(missing_ok=True)
    try:
        return backend.submit(grading_spec(layout, assignment, student_id, limits))
    except CoursehubError as exc:  # e.g. more threads than this machine's budget
        record_zero(layout, assignment, student_id)
        return zero_outcome(layout, assignment, student_id, "failed", f"not run: {exc}")


def job_log_path(layout: CourseLayout, assignment: str, student_id: str) -> Path:
    """Return the log file of one submission's autograde job."""
    return layout.reports_dir / "logs" / f"autograde-{assignment}-{student_id}.log"


def finish_grading(
    layout: CourseLayout, assignment: str, student_id: str, result: Any
) -> SubmissionOutcome:
    """Return the outcome of a finished job (its ``RunResult``); a failed one scores 0."""
    if result.killed_reason:
        record_zero(layout, assignment, student_id)
        return zero_outcome(
            layout, assignment, student_id, "killed", f"stopped: {result.killed_reason}"
        )
    if not result.ok:
        record_zero(layout, assignment, student_id)
        reason = _last_error(job_log_path(layout, assignment, student_id))
        reason = reason or f"exit status {result.returncode}"
        status = HOST_ERROR if any(k in reason for k in KERNEL_START_FAILURES) else "failed"
        return zero_outcome(layout, assignment, student_id, status, f"nbgrader failed: {reason}")
    score, max_score = read_score(layout, assignment, student_id)
    stamp = submitted_at(layout, assignment, student_id)
    cells = timed_out_cells(layout, assignment, student_id)
    if cells:
        message = (
            f"interrupted after {layout.execute_timeout_s} s in cell(s) {', '.join(cells)} "
            "(infinite loop?); those cells score 0"
        )
        return SubmissionOutcome(student_id, "timeout", score, max_score, message, stamp)
    return SubmissionOutcome(student_id, "graded", score, max_score, "graded", stamp)


def zero_outcome(
    layout: CourseLayout, assignment: str, student_id: str, status: str, message: str
) -> SubmissionOutcome:
    """Return the outcome of a submission that scores 0 (``status``, ``message`` say why)."""
    score, max_score = read_score(layout, assignment, student_id)
    message = f"assignment {assignment}, student {student_id}: {message}"
    stamp = submitted_at(layout, assignment, student_id)
    return SubmissionOutcome(student_id, status, score, max_score, message, stamp)


def _last_error(log_path: Path) -> str:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    flagged = [ln.strip() for ln in lines if "[ERROR]" in ln or "Error" in ln]
    return (flagged[-1] if flagged else "")[:300]
