"""Grades out of a course's gradebook: nbgrader's CSV export and the course page's grade table.

The CSV has nbgrader's columns and rows (those of
:class:`nbgrader.plugins.export.CsvExportPlugin`: ``assignment, duedate,
timestamp, student_id, last_name, first_name, email, raw_score,
late_submission_penalty, score, max_score``; a missing submission scores 0),
but is written by :mod:`coursehub.csvsafe`: nbgrader's plugin writes raw
lines, so a name with a comma shifts the columns and one starting with
``=`` runs as a formula in a spreadsheet.
The grade table (one row per student, one column per assignment) is for
the teaching team only: callers check the role (e.g.
:func:`coursehub.catalog.people.is_team`) before showing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.csvsafe import Cell, render_csv
from coursehub.grading.layout import CourseLayout

#: nbgrader's CSV columns, in order.
CSV_COLUMNS: tuple[str, ...] = (
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
)


def plan_grade_rows(gradebook: Any, assignments: tuple[str, ...] = ()) -> list[list[Cell]]:
    """Return nbgrader's CSV rows, header first, from an open ``Gradebook``.

    The same rows as :class:`nbgrader.plugins.export.CsvExportPlugin`
    (nbgrader 0.9, ``nbgrader/plugins/export.py``): one per assignment and
    student, a missing submission scoring 0, ``score = max(0, raw_score -
    penalty)``; scores stay numbers, dates and names are text.
    """
    from nbgrader.api import MissingEntry

    rows: list[list[Cell]] = [list(CSV_COLUMNS)]
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                timestamp, raw, penalty = None, 0.0, 0.0
            else:
                timestamp = submission.timestamp
                raw = float(submission.score)
                penalty = float(submission.late_submission_penalty)
            rows.append(
                [
                    assignment.name,
                    None if assignment.duedate is None else str(assignment.duedate),
                    None if timestamp is None else str(timestamp),
                    student.id,
                    student.last_name,
                    student.first_name,
                    student.email,
                    raw,
                    penalty,
                    max(0.0, raw - penalty),
                    float(assignment.max_score),
                ]
            )
    return rows


def render_grades_csv(layout: CourseLayout, assignments: tuple[str, ...] = ()) -> str:
    """Return the course's grades as safe CSV text (:mod:`coursehub.csvsafe`)."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        return render_csv(plan_grade_rows(gradebook, assignments))


def export_grades_csv(layout: CourseLayout, dest: Path, assignments: tuple[str, ...] = ()) -> Path:
    """Write the course's grades as CSV to ``dest`` (atomically, mode 0o600); return ``dest``.

    The file holds every student's grades: it is created owner-only, like
    the gradebook it comes from.
    """
    return write_atomically(dest, render_grades_csv(layout, assignments), mode=0o600)


@dataclass(frozen=True)
class GradeRow:
    """A student's scores: ``scores[i]`` for ``GradeTable.assignments[i]`` (None: not submitted)."""

    student_id: str
    name: str
    scores: tuple[float | None, ...]

    @property
    def total(self) -> float:
        """Sum of the scores (a missing submission counts 0)."""
        return sum(s or 0.0 for s in self.scores)


@dataclass(frozen=True)
class GradeTable:
    """A course's grades: assignments (gradebook order), their max scores, a row per student."""

    course_id: str
    assignments: tuple[str, ...]
    max_scores: tuple[float, ...]
    rows: tuple[GradeRow, ...]


def read_grade_table(layout: CourseLayout) -> GradeTable:
    """Read the course's grade table from its gradebook (students sorted by id)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        assignments = list(gradebook.assignments)
        rows = []
        for student in sorted(gradebook.students, key=lambda s: s.id):
            scores: list[float | None] = []
            for assignment in assignments:
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    scores.append(None)
                else:
                    scores.append(float(submission.score))
            name = f"{student.first_name or ''} {student.last_name or ''}".strip() or student.id
            rows.append(GradeRow(student.id, name, tuple(scores)))
        return GradeTable(
            layout.course_id,
            tuple(a.name for a in assignments),
            tuple(float(a.max_score) for a in assignments),
            tuple(rows),
        )


def render_grade_table(table: GradeTable) -> str:
    """Return the table as aligned text (CLI): student, name, one column per assignment, total."""
    header = [
        "student",
        "name",
        *(f"{a} (/{m:g})" for a, m in zip(table.assignments, table.max_scores, strict=True)),
        "total",
    ]
    body = [
        [r.student_id, r.name, *("-" if s is None else f"{s:g}" for s in r.scores), f"{r.total:g}"]
        for r in table.rows
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *body]
    )
