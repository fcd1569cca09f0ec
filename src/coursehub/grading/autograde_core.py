"""The parts of autograding every other autograde module uses: limits, outcomes, gradebook.

Kept apart from :mod:`coursehub.grading.autograde` (the entry point, which
re-exports these names) so that the job and batch modules depend on this
one and no module imports back the one that imports it.
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
from coursehub.grading.layout import CourseLayout

#: Default wall-clock limit of one submission's autograde job, in seconds.
DEFAULT_JOB_TIMEOUT_S = 600.0
#: Seconds a gradebook writer waits for SQLite's lock before "database is locked"
#: (Python's default is 5 s: too short when many jobs finish together on a busy disk).
GRADEBOOK_BUSY_TIMEOUT_S = 300.0


def gradebook_url(layout: CourseLayout, busy_timeout_s: float = GRADEBOOK_BUSY_TIMEOUT_S) -> str:
    """Return the gradebook's URL with a SQLite busy timeout (pure).

    ``sqlite:////.../gradebook.db?timeout=300``: SQLAlchemy's pysqlite dialect
    passes ``timeout`` to ``sqlite3.connect`` (seconds a connection waits
    for another connection's lock; https://docs.python.org/3/library/sqlite3.html).
    """
    return f"{layout.db_url}?timeout={busy_timeout_s:g}"


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


#: The outcome status of a submission that a host fault stopped (:class:`SubmissionOutcome`).
HOST_ERROR = "error"
#: What nbgrader's log says when the kernel ended before running any cell: the
#: sandbox or the installation, never the student's code (nbclient ``wait_for_ready``).
KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Kernel didn't respond")


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
        f"--CourseDirectory.db_url={gradebook_url(layout)}",
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
    ``corrupt`` (unreadable notebook: score 0), ``error`` (a fault of the host, not of
    the student's code: the runner failed, or the kernel died before it ran a cell;
    score 0, and ``coursehub grading autograde`` exits 1), ``not-on-roster`` (not graded).
    ``submitted_at``: the submission's nbgrader ``timestamp.txt`` ("" if none),
    so that a later run knows whether it was graded already.
    """

    student_id: str
    status: str
    score: float | None
    max_score: float
    message: str
    submitted_at: str = ""


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


def ensure_students(layout: CourseLayout, student_ids: Iterable[str]) -> None:
    """Add to the gradebook the students it does not know yet (known ones are left as they are)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(layout), course_id=layout.course_id) as gradebook:
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
        Gradebook(gradebook_url(layout), course_id=layout.course_id) as gradebook,
        gradebook.db.no_autoflush,
    ):
        gradebook.update_or_create_submission(assignment, student_id)


def read_score(layout: CourseLayout, assignment: str, student_id: str) -> tuple[float, float]:
    """Return ``(score, max_score)`` of a submission from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(gradebook_url(layout), course_id=layout.course_id) as gradebook:
        submission = gradebook.find_submission(assignment, student_id)
        return float(submission.score), float(submission.max_score)


def not_on_roster(layout: CourseLayout, student_ids: Iterable[str]) -> list[SubmissionOutcome]:
    """Return the ``not-on-roster`` outcomes of submitters who are not on the roster."""
    return [
        SubmissionOutcome(
            s,
            "not-on-roster",
            None,
            0.0,
            f"{s} is not on the roster of course {layout.course_id}: not graded",
        )
        for s in student_ids
    ]


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
    known = set(SubmissionOutcome.__dataclass_fields__)
    try:
        items = json.loads(path.read_text("utf-8"))
        return [SubmissionOutcome(**{k: v for k, v in i.items() if k in known}) for i in items]
    except (ValueError, TypeError, AttributeError):  # damaged by hand: grade everything again
        return []


def render_outcomes(assignment: str, outcomes: list[SubmissionOutcome]) -> str:
    """Return one line per submission: ``assignment student status score/max message``."""
    lines = []
    for o in outcomes:
        score = "-" if o.score is None else f"{o.score:g}/{o.max_score:g}"
        lines.append(f"{assignment}  {o.student_id:<16} {o.status:<13} {score:>7}  {o.message}")
    return "\n".join(lines)
