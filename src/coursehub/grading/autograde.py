"""Autograde every collected submission, each in its own runner job with the course's limits.

One job per submission: ``python -m coursehub.grading.sandbox_kernel autograde
ASSIGNMENT --student S --course-dir DIR`` (nbgrader, with the student's kernel
sandboxed: :mod:`coursehub.grading.sandbox`) through
:func:`coursehub.runner.api.run`, with the environment of
:func:`coursehub.grading.sandbox.plan_sandbox_env` (no token, no catalog URL), the course
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
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.errors import CoursehubError
from coursehub.grading.layout import CourseLayout

#: Default wall-clock limit of one submission's autograde job, in seconds.
DEFAULT_JOB_TIMEOUT_S = 600.0


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


@dataclass(frozen=True)
class AutogradePlan:
    """Students whose submission is graded, and submitters who are not on the roster."""

    students: tuple[str, ...]
    not_on_roster: tuple[str, ...]


def plan_autograde(submitted: Iterable[str], roster: Iterable[str]) -> AutogradePlan:
    """Split collected submissions into roster students and strangers, each sorted (pure)."""
    submitted, roster = set(submitted), set(roster)
    return AutogradePlan(tuple(sorted(submitted & roster)), tuple(sorted(submitted - roster)))


#: The module every autograde job runs: nbgrader with the sandboxed kernel.
AUTOGRADE_MODULE = "coursehub.grading.sandbox_kernel"


def plan_hidden(layout: CourseLayout, environ: Mapping[str, str]) -> list[str]:
    """Return the folders the student's kernel must not see (pure).

    The parent of every course directory (sources, releases, submissions,
    gradebooks), the exchange, the runner's slots and the catalog's data
    folder (:func:`coursehub.catalog.db.data_dir`).
    """
    return plan_hidden_paths(layout.course_dir, layout.exchange_root, environ)


def plan_hidden_paths(
    course_dir: str | Path, exchange_root: str | Path, environ: Mapping[str, str]
) -> list[str]:
    """Return the folders of :func:`plan_hidden` for a course directory and exchange (pure)."""
    from coursehub.catalog.db import data_dir
    from coursehub.runner.slots import DEFAULT_SLOTS_DIR

    slots = environ.get("COURSEHUB_SLOTS_DIR") or str(DEFAULT_SLOTS_DIR)
    folders = [Path(course_dir).parent, Path(exchange_root), Path(slots), data_dir(environ)]
    return sorted({str(folder) for folder in folders})


def autograde_args(
    layout: CourseLayout,
    assignment: str,
    student_id: str,
    hidden: Iterable[str] = (),
    grader_user: str = "",
) -> list[str]:
    """Return the arguments of ``python -m coursehub.grading.sandbox_kernel`` (nbgrader's) (pure).

    ``hidden`` and ``grader_user`` configure
    :class:`coursehub.grading.sandbox_kernel.SandboxKernelManager`.
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
        f"--Execute.timeout={int(layout.execute_timeout_s)}",
        # a kernel slow to flush its output after the interrupt must not fail the notebook
        "--Execute.raise_on_iopub_timeout=False",
        "--Autograde.create_student=False",
        "--force",
        *sandbox,
    ]


@dataclass(frozen=True)
class SubmissionOutcome:
    """How grading one submission went.

    ``status``: ``graded``, ``timeout`` (a cell was interrupted by
    ``Execute.timeout``; graded, that cell scores 0), ``killed`` (the runner
    stopped the job: score 0), ``failed`` (nbgrader failed: score 0),
    ``corrupt`` (unreadable notebook: score 0), ``not-on-roster`` (not graded).
    """

    student_id: str
    status: str
    score: float | None
    max_score: float
    message: str


def check_submission(layout: CourseLayout, assignment: str, student_id: str) -> str | None:
    """Return why the submission cannot be graded, or None when it can.

    Refused: a notebook that is not valid, and any entry that is not a plain
    file or folder. nbgrader copies the submitted files into ``autograded/``
    *as the grader* (``shutil.copy`` follows links), so a symbolic link to
    the gradebook, to a classmate's notebook or to ``/etc/shadow`` would be
    read with the grader's rights and handed to the student's code.
    coursehub's collect drops links; this also covers submissions put in
    ``submitted/`` another way (nbgrader's own collect, by hand).
    """
    import nbformat

    folder = layout.course_dir / "submitted" / student_id / assignment
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


def ensure_students(layout: CourseLayout, student_ids: Iterable[str]) -> None:
    """Add to the gradebook the students it does not know yet (known ones are left as they are)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        for student_id in student_ids:
            try:
                gradebook.find_student(student_id)
            except MissingEntry:
                gradebook.add_student(student_id)


def record_zero(layout: CourseLayout, assignment: str, student_id: str) -> None:
    """Make sure the submission exists in the gradebook; its ungraded cells score 0."""
    from nbgrader.api import Gradebook

    # nbgrader builds the submission's rows one by one: no flush half-way (SAWarning)
    with (
        Gradebook(layout.db_url, course_id=layout.course_id) as gradebook,
        gradebook.db.no_autoflush,
    ):
        gradebook.update_or_create_submission(assignment, student_id)


def read_score(layout: CourseLayout, assignment: str, student_id: str) -> tuple[float, float]:
    """Return ``(score, max_score)`` of a submission from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        submission = gradebook.find_submission(assignment, student_id)
        return float(submission.score), float(submission.max_score)


def grade_one(
    layout: CourseLayout,
    assignment: str,
    student_id: str,
    limits: AutogradeLimits,
    backend: Any = None,
) -> SubmissionOutcome:
    """Autograde one collected submission in a runner job; return its outcome (never raises
    for a student's fault: timeouts, memory, corrupt notebooks and nbgrader errors are outcomes)."""
    from coursehub.grading.sandbox import grader_user_name, plan_sandbox_env
    from coursehub.runner.api import run

    problem = check_submission(layout, assignment, student_id)
    if problem:
        record_zero(layout, assignment, student_id)
        return _zero(layout, assignment, student_id, "corrupt", problem)
    log_path = layout.reports_dir / "logs" / f"autograde-{assignment}-{student_id}.log"
    log_path.unlink(missing_ok=True)
    try:
        args = autograde_args(
            layout, assignment, student_id, plan_hidden(layout, os.environ), grader_user_name()
        )
        result = run(
            AUTOGRADE_MODULE,
            args,
            module=True,
            env=plan_sandbox_env(os.environ),
            inherit_env=False,
            name=f"autograde-{student_id}",
            backend=backend,
            on_output=lambda _text: None,
            n_threads=limits.n_threads,
            mem_limit=limits.mem_limit,
            timeout_s=limits.timeout_s,
            cwd=layout.course_dir,
            log_path=log_path,
        )
    except CoursehubError as exc:  # e.g. more threads than this machine's budget
        record_zero(layout, assignment, student_id)
        return _zero(layout, assignment, student_id, "failed", f"not run: {exc}")
    if result.killed_reason:
        record_zero(layout, assignment, student_id)
        return _zero(layout, assignment, student_id, "killed", f"stopped: {result.killed_reason}")
    if not result.ok:
        record_zero(layout, assignment, student_id)
        reason = _last_error(log_path) or f"exit status {result.returncode}"
        return _zero(layout, assignment, student_id, "failed", f"nbgrader failed: {reason}")
    score, max_score = read_score(layout, assignment, student_id)
    cells = timed_out_cells(layout, assignment, student_id)
    if cells:
        message = (
            f"interrupted after {layout.execute_timeout_s} s in cell(s) {', '.join(cells)} "
            "(infinite loop?); those cells score 0"
        )
        return SubmissionOutcome(student_id, "timeout", score, max_score, message)
    return SubmissionOutcome(student_id, "graded", score, max_score, "graded")


def autograde_assignment(
    layout: CourseLayout,
    assignment: str,
    roster: Iterable[str],
    limits: AutogradeLimits = AutogradeLimits(),
    backend: Any = None,
) -> list[SubmissionOutcome]:
    """Autograde every collected submission of ``assignment``, one job each; save the outcomes.

    Parameters
    ----------
    roster
        Student ids on the course's roster; other submitters are reported
        (``not-on-roster``) and not graded.
    limits
        Threads, memory and wall clock of each job.
    backend
        Runner backend (default: a new :class:`coursehub.runner.LocalBackend`).

    Raises
    ------
    AutogradeRunningError
        If an autograde of ``assignment`` is already running (nothing is done).
    CoursehubError
        As root, if the grading account cannot be created.
    """
    from coursehub.grading.autograde_lock import autograde_lock

    with autograde_lock(layout, assignment):
        return _autograde_locked(layout, assignment, roster, limits, backend)


def _autograde_locked(
    layout: CourseLayout,
    assignment: str,
    roster: Iterable[str],
    limits: AutogradeLimits,
    backend: Any,
) -> list[SubmissionOutcome]:
    from coursehub.grading.assignments import open_api
    from coursehub.grading.sandbox import ensure_grader_user

    if os.geteuid() == 0:
        ensure_grader_user()
    plan = plan_autograde(open_api(layout).get_submitted_students(assignment), roster)
    outcomes = [
        SubmissionOutcome(
            s,
            "not-on-roster",
            None,
            0.0,
            f"{s} is not on the roster of course {layout.course_id}: not graded",
        )
        for s in plan.not_on_roster
    ]
    ensure_students(layout, plan.students)
    for student_id in plan.students:
        outcomes.append(grade_one(layout, assignment, student_id, limits, backend))
    outcomes.sort(key=lambda o: o.student_id)
    save_outcomes(layout, assignment, outcomes)
    return outcomes


def save_outcomes(layout: CourseLayout, assignment: str, outcomes: list[SubmissionOutcome]) -> Path:
    """Write the outcomes to ``reports_dir/autograde-<assignment>.json`` (atomically)."""
    path = layout.reports_dir / f"autograde-{assignment}.json"
    write_atomically(path, json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    return path


def load_outcomes(layout: CourseLayout, assignment: str) -> list[SubmissionOutcome]:
    """Read the outcomes of the last autograde of ``assignment`` (empty list if none)."""
    path = layout.reports_dir / f"autograde-{assignment}.json"
    if not path.is_file():
        return []
    return [SubmissionOutcome(**item) for item in json.loads(path.read_text("utf-8"))]


def render_outcomes(assignment: str, outcomes: list[SubmissionOutcome]) -> str:
    """Return one line per submission: ``assignment student status score/max message``."""
    lines = []
    for o in outcomes:
        score = "-" if o.score is None else f"{o.score:g}/{o.max_score:g}"
        lines.append(f"{assignment}  {o.student_id:<16} {o.status:<13} {score:>7}  {o.message}")
    return "\n".join(lines)


def _zero(
    layout: CourseLayout, assignment: str, student_id: str, status: str, message: str
) -> SubmissionOutcome:
    score, max_score = read_score(layout, assignment, student_id)
    message = f"assignment {assignment}, student {student_id}: {message}"
    return SubmissionOutcome(student_id, status, score, max_score, message)


def _last_error(log_path: Path) -> str:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    flagged = [ln.strip() for ln in lines if "[ERROR]" in ln or "Error" in ln]
    return (flagged[-1] if flagged else "")[:300]
