"""The gradebook as autograde uses it: a URL with a busy timeout, students, zero scores.

Gradebook writes are serialised by SQLite's own database lock: each job's
nbgrader writes the gradebook itself, in its short transactions, through
:func:`gradebook_url`, whose ``timeout`` makes a writer wait for the lock
instead of failing with "database is locked" after pysqlite's default 5 s
(Python ``sqlite3.connect(timeout=5.0)``; SQLAlchemy's pysqlite dialect
takes ``?timeout=`` from the URL). The roster's sync is
:mod:`coursehub.grading.gradebook`.
"""

from __future__ import annotations

from collections.abc import Iterable

from coursehub.grading.layout import CourseLayout

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
