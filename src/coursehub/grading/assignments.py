"""The teacher's side of an assignment: add, generate, release, follow, collect, feedback.

Every step goes through nbgrader's own Python API
(:class:`nbgrader.apps.api.NbGraderAPI`) on the course's layout, so the course
directory, gradebook and exchange are exactly what ``nbgrader`` and the
formgrader see. Checks that nbgrader does late or silently (a notebook
without nbgrader cells, a name already taken, a release before generate) are
made first, each raising :class:`~coursehub.errors.UsageError` naming the
assignment and the course.

After every step the course directory's modes are set again
(:func:`coursehub.grading.layout.secure_course`): nbgrader creates
directories 0o777/0o755 and files 0o644. Collect and the release of
feedback use coursehub's exchange classes (:mod:`coursehub.grading.collect`).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError
from coursehub.grading.layout import (
    COLLECT_CLASS,
    RELEASE_FEEDBACK_CLASS,
    CourseLayout,
    check_name,
    secure_course,
)


def nbgrader_config(layout: CourseLayout) -> Any:
    """Return the traitlets ``Config`` equal to the course's ``nbgrader_config.py``.

    As there, every HTML export (``generate_feedback``) sanitises the
    students' outputs (:func:`coursehub.grading.studenthtml.sanitizing_config`).
    """
    from coursehub.grading.studenthtml import sanitizing_config

    config = sanitizing_config()
    config.CourseDirectory.root = str(layout.course_dir)
    config.CourseDirectory.course_id = layout.course_id
    config.Exchange.root = str(layout.exchange_root)
    config.Exchange.path_includes_course = True
    config.Execute.timeout = int(layout.execute_timeout_s)
    config.ExchangeFactory.collect = COLLECT_CLASS
    config.ExchangeFactory.release_feedback = RELEASE_FEEDBACK_CLASS
    if layout.single_user:
        config.ExchangeCollect.check_owner = False
    return config


def open_api(layout: CourseLayout, before_duedate: bool = False) -> Any:
    """Return an :class:`nbgrader.apps.api.NbGraderAPI` on the course (nothing written).

    ``before_duedate`` sets nbgrader's ``ExchangeCollect.before_duedate``:
    collect then takes each student's newest submission made by the due
    date, when there is one.
    """
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = nbgrader_config(layout)
    if before_duedate:
        config.ExchangeCollect.before_duedate = True
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def check_source_notebook(path: Path, assignment: str) -> None:
    """Check that ``path`` is a notebook with at least one nbgrader cell.

    Raises
    ------
    UsageError
        If the file is missing, is not a readable notebook, or has no cell
        with ``metadata.nbgrader`` (made with nbgrader's "Create Assignment"
        toolbar or by hand).
    """
    import nbformat

    try:
        notebook = nbformat.read(path, as_version=4)
    except FileNotFoundError:
        raise UsageError(f"assignment {assignment}: notebook {path} not found") from None
    except Exception as exc:  # nbformat raises several kinds for a corrupt file
        raise UsageError(f"assignment {assignment}: {path} is not a notebook: {exc}") from exc
    if not any("nbgrader" in cell.get("metadata", {}) for cell in notebook.cells):
        raise UsageError(
            f"assignment {assignment}: {path.name} has no nbgrader cells "
            "(mark solution and autograder test cells with nbgrader's Create Assignment tool)"
        )


def add_assignment(
    layout: CourseLayout, assignment: str, sources: list[Path], duedate: datetime | None = None
) -> Path:
    """Put source notebooks (and any data files) under ``source/<assignment>``; record it.

    Returns the assignment's source directory. The copy is made in a
    temporary directory first and moved into place, so a failure leaves
    nothing behind.

    Raises
    ------
    UsageError
        Bad name, an assignment of that name already in the course, a
        source notebook without nbgrader cells.
    """
    check_name(assignment, "assignment name")
    target = layout.course_dir / "source" / assignment
    if target.exists():
        raise UsageError(f"assignment {assignment} already exists in course {layout.course_id}")
    notebooks = [p for p in sources if p.suffix == ".ipynb"]
    if not notebooks:
        raise UsageError(f"assignment {assignment}: no notebook (.ipynb) among {sources}")
    for path in notebooks:
        check_source_notebook(path, assignment)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{assignment}-"))
    try:
        for path in sources:
            shutil.copy2(path, staging / path.name)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    record_assignment(layout, assignment, duedate)
    secure_course(layout)
    return target


def record_assignment(layout: CourseLayout, assignment: str, duedate: datetime | None) -> None:
    """Create or update the assignment (and its due date) in the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        gradebook.update_or_create_assignment(assignment, duedate=duedate)


def generate_assignment(layout: CourseLayout, assignment: str) -> str:
    """Make the student version (``release/<assignment>``); return nbgrader's log.

    Raises
    ------
    UsageError
        If the assignment has no source in the course.
    CoursehubError
        If nbgrader fails (its message is included).
    """
    if not (layout.course_dir / "source" / assignment).is_dir():
        raise UsageError(
            f"assignment {assignment} not found in course {layout.course_id}: add it first"
        )
    return _check(open_api(layout).generate_assignment(assignment), "generate", layout, assignment)


def release_assignment(layout: CourseLayout, assignment: str) -> str:
    """Copy the generated assignment to the exchange's ``outbound``; return nbgrader's log.

    Raises
    ------
    UsageError
        If it was not generated yet, or is already released.
    """
    if not (layout.course_dir / "release" / assignment).is_dir():
        raise UsageError(
            f"assignment {assignment} of course {layout.course_id} is not generated yet: "
            "generate it before releasing it"
        )
    outbound = layout.exchange_root / layout.course_id / "outbound" / assignment
    if outbound.exists():
        raise UsageError(
            f"assignment {assignment} of course {layout.course_id} is already released"
        )
    from coursehub.grading.deadline import publish_deadlines

    log = _check(open_api(layout).release_assignment(assignment), "release", layout, assignment)
    publish_deadlines(layout)
    return log


def collect(layout: CourseLayout, assignment: str, before_duedate: bool = False) -> str:
    """Copy the newest valid submission of each student into ``submitted/``; return nbgrader's log.

    With ``before_duedate`` (or the assignment's after-due rule
    ``keep_on_time``), the newest made by the due date when there is one;
    with the rule ``refuse``, late submissions are skipped. A submission
    whose folder does not belong to the student it names, or that holds a
    symbolic link, is skipped with a warning in the log
    (:func:`skipped_submissions` lists them;
    :class:`coursehub.grading.collect.VerifiedCollect`).
    """
    api = open_api(layout, before_duedate)
    return _check(api.collect(assignment), "collect", layout, assignment)


def skipped_submissions(log: str) -> list[str]:
    """Return the submissions that collect skipped and why, from its log (pure)."""
    marker = "Skipping submission "
    return [line.split(marker, 1)[1].strip() for line in log.splitlines() if marker in line]


def generate_feedback(layout: CourseLayout, assignment: str) -> str:
    """Render the feedback (HTML) of every autograded submission; return nbgrader's log."""
    result = open_api(layout).generate_feedback(assignment)
    return _check(result, "generate feedback for", layout, assignment)


def release_feedback(layout: CourseLayout, assignment: str) -> str:
    """Put the generated feedback in the exchange for students to fetch; return nbgrader's log."""
    import warnings

    with warnings.catch_warnings():
        # nbgrader 0.9's release_feedback reads timestamp.txt without closing it
        warnings.simplefilter("ignore", ResourceWarning)
        result = open_api(layout).release_feedback(assignment)
    return _check(result, "release feedback of", layout, assignment)


@dataclass(frozen=True)
class AssignmentStatus:
    """Where an assignment stands; student ids sorted.

    ``fetched`` comes from the fetch records (students fetching through
    coursehub's fetch class), ``submitted`` from the exchange's inbound,
    ``collected`` from ``submitted/`` and ``autograded`` from the gradebook.
    """

    assignment: str
    generated: bool
    released: bool
    fetched: tuple[str, ...]
    submitted: tuple[str, ...]
    collected: tuple[str, ...]
    autograded: tuple[str, ...]


def parse_submission_name(name: str) -> tuple[str, str] | None:
    """Return ``(student_id, assignment)`` of an inbound entry ``student+assignment+time[+rand]``.

    Student ids and assignment names never hold ``+`` (:func:`check_name`),
    nbgrader's timestamps and random suffixes (URL-safe base64) neither.
    """
    parts = name.split("+")
    return (parts[0], parts[1]) if len(parts) in (3, 4) else None


def assignment_status(layout: CourseLayout, assignment: str) -> AssignmentStatus:
    """Return who fetched, submitted, was collected and autograded for ``assignment``."""
    course_exchange = layout.exchange_root / layout.course_id
    inbound = course_exchange / "inbound"
    entries = [parse_submission_name(p.name) for p in _listdir(inbound)]
    submitted = {e[0] for e in entries if e is not None and e[1] == assignment}
    fetched = {
        p.name.rsplit("+", 1)[0]
        for p in _listdir(layout.fetched_dir)
        if p.name.rsplit("+", 1)[-1] == assignment
    }
    api = open_api(layout)
    return AssignmentStatus(
        assignment=assignment,
        generated=(layout.course_dir / "release" / assignment).is_dir(),
        released=(course_exchange / "outbound" / assignment).is_dir(),
        fetched=tuple(sorted(fetched)),
        submitted=tuple(sorted(submitted)),
        collected=tuple(sorted(api.get_submitted_students(assignment))),
        autograded=tuple(sorted(api.get_autograded_students(assignment))),
    )


def list_assignments(layout: CourseLayout) -> list[str]:
    """Return the names of the course's assignments (its ``source/`` folders), sorted."""
    return sorted(p.name for p in _listdir(layout.course_dir / "source") if p.is_dir())


def _listdir(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if not p.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _check(result: dict[str, Any] | None, verb: str, layout: CourseLayout, assignment: str) -> str:
    """Secure the course directory; return nbgrader's log, or raise a one-line CoursehubError."""
    secure_course(layout)
    result = result or {"success": False, "error": "not available on this platform"}
    if result.get("success"):
        return str(result.get("log", ""))
    text = str(result.get("error") or result.get("log") or "no message")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = lines[-1] if lines else "no message"
    raise CoursehubError(
        f"could not {verb} assignment {assignment} of course {layout.course_id}: {reason}"
    )
