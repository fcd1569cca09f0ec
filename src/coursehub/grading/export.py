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
:func:`coursehub.catalog.members.is_team`) before showing it.

The catalog is the one truth for who the students are: given the course's
roster (:func:`coursehub.grading.gradebook.read_roster`), the table and the
CSV list every student of the roster, with the catalog's current name,
e-mail and student number, whether the gradebook knows them or not
(:func:`plan_students`); a student who left the course but has a submission
keeps their grades and their row, marked not enrolled. Without a roster
(a gradebook read on its own) the gradebook's students are listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.csvsafe import Cell, render_csv
from coursehub.grading.gradebook import StudentRecord
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


@dataclass(frozen=True)
class ListedStudent:
    """A student the grade table and the exports list: who they are, and still in the course?"""

    record: StudentRecord
    enrolled: bool = True


def plan_students(
    roster: Iterable[StudentRecord] | None,
    gradebook: Iterable[StudentRecord],
    with_submissions: Iterable[str] = (),
) -> list[ListedStudent]:
    """Return the students to list, sorted by id given a roster (pure).

    ``roster`` (the catalog's students) wins: each is listed with the
    catalog's fields, in the gradebook or not; a gradebook student off the
    roster is listed (``enrolled=False``) only with a submission, so a
    student removed from the course never loses their grades. ``roster``
    None lists the gradebook's students as they are.
    """
    if roster is None:
        return [ListedStudent(s) for s in gradebook]  # nbgrader's order, as its own export
    wanted = {s.student_id: s for s in roster}
    graded = set(with_submissions)
    listed = [ListedStudent(s) for s in wanted.values()]
    listed += [
        ListedStudent(s, enrolled=False)
        for s in gradebook
        if s.student_id not in wanted and s.student_id in graded
    ]
    return sorted(listed, key=lambda s: s.record.student_id)


def read_students(gradebook: Any, roster: Sequence[StudentRecord] | None) -> list[ListedStudent]:
    """Return :func:`plan_students` of an open ``Gradebook`` and ``roster``."""
    present = [
        StudentRecord(s.id, s.first_name or "", s.last_name or "", s.email, s.lms_user_id)
        for s in gradebook.students
    ]
    graded = {s.id for s in gradebook.students if s.submissions}
    return plan_students(roster, present, graded)


def plan_grade_rows(
    gradebook: Any,
    assignments: tuple[str, ...] = (),
    roster: Sequence[StudentRecord] | None = None,
) -> list[list[Cell]]:
    """Return nbgrader's CSV rows, header first, from an open ``Gradebook``.

    The same rows as :class:`nbgrader.plugins.export.CsvExportPlugin`
    (nbgrader 0.9, ``nbgrader/plugins/export.py``): one per assignment and
    student, a missing submission scoring 0, ``score = max(0, raw_score -
    penalty)``; scores stay numbers, dates and names are text. The
    students are :func:`read_students` (the catalog's, given ``roster``).
    """
    from nbgrader.api import MissingEntry

    rows: list[list[Cell]] = [list(CSV_COLUMNS)]
    students = [s.record for s in read_students(gradebook, roster)]
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        for student in students:
            try:
                submission = gradebook.find_submission(assignment.name, student.student_id)
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
                    student.student_id,
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


def render_grades_csv(
    layout: CourseLayout,
    assignments: tuple[str, ...] = (),
    roster: Sequence[StudentRecord] | None = None,
) -> str:
    """Return the course's grades as safe CSV text (:mod:`coursehub.csvsafe`)."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        return render_csv(plan_grade_rows(gradebook, assignments, roster))


def export_grades_csv(
    layout: CourseLayout,
    dest: Path,
    assignments: tuple[str, ...] = (),
    roster: Sequence[StudentRecord] | None = None,
) -> Path:
    """Write the course's grades as CSV to ``dest`` (atomically, mode 0o600); return ``dest``.

    The file holds every student's grades: it is created owner-only, like
    the gradebook it comes from.
    """
    return write_atomically(dest, render_grades_csv(layout, assignments, roster), mode=0o600)


#: States of a grade-table cell.
NOT_SUBMITTED = "not submitted"
SUBMITTED = "submitted, not graded"
GRADED = "graded"


@dataclass(frozen=True)
class GradeCell:
    """One student's result for one assignment.

    ``state``: :data:`NOT_SUBMITTED` (nothing in the exchange, nothing
    collected), :data:`SUBMITTED` (in the exchange's inbound or collected,
    no grade yet) or :data:`GRADED` (a submission in the gradebook);
    ``score`` is nbgrader's score minus its late-submission penalty, never
    below 0 (None unless graded), ``penalty`` that penalty.
    """

    state: str
    score: float | None = None
    penalty: float = 0.0


@dataclass(frozen=True)
class GradeRow:
    """A student's results: ``cells[i]`` for ``GradeTable.assignments[i]``.

    ``enrolled`` False: no longer a student of the course in the catalog,
    listed for the grades they keep.
    """

    student_id: str
    name: str
    cells: tuple[GradeCell, ...]
    email: str = ""
    id_number: str = ""
    enrolled: bool = True

    @property
    def scores(self) -> tuple[float | None, ...]:
        """The score of each assignment (None: not graded)."""
        return tuple(c.score for c in self.cells)

    @property
    def total(self) -> float | None:
        """Sum of the graded scores; None when nothing is graded yet."""
        graded = [c.score for c in self.cells if c.score is not None]
        return sum(graded) if graded else None


@dataclass(frozen=True)
class GradeTable:
    """A course's grades: assignments (gradebook order), their max scores, a row per student."""

    course_id: str
    assignments: tuple[str, ...]
    max_scores: tuple[float, ...]
    rows: tuple[GradeRow, ...]


def plan_cell(submission: Any, handed_in: bool) -> GradeCell:
    """Return the cell of a gradebook submission (None: none); ``handed_in``: one came (pure)."""
    if submission is None:
        return GradeCell(SUBMITTED if handed_in else NOT_SUBMITTED)
    raw = float(submission.score)
    penalty = float(submission.late_submission_penalty or 0.0)
    return GradeCell(GRADED, max(0.0, raw - penalty), penalty)


def handed_in(layout: CourseLayout, assignment: str) -> set[str]:
    """Return the students who submitted ``assignment`` (exchange inbound) or were collected."""
    from coursehub.grading.assignments import parse_submission_name

    found: set[str] = set()
    inbound = layout.exchange_root / layout.course_id / "inbound"
    submitted = layout.course_dir / "submitted"
    for folder, collected in ((inbound, False), (submitted, True)):
        try:
            names = [p.name for p in folder.iterdir()]
        except OSError:  # no inbound yet, or not readable by this user
            continue
        for name in names:
            if collected and (submitted / name / assignment).is_dir():
                found.add(name)
            elif not collected:
                parsed = parse_submission_name(name)
                if parsed is not None and parsed[1] == assignment:
                    found.add(parsed[0])
    return found


def read_grade_table(
    layout: CourseLayout, roster: Sequence[StudentRecord] | None = None
) -> GradeTable:
    """Read the course's grade table from its gradebook, its submissions and ``roster``.

    The students are :func:`read_students`: given the catalog's ``roster``,
    every student of the course with the catalog's fields, and those who
    left with a submission. Sorted by last name, first name, then id, as
    French readers expect (:func:`coursehub.catalog.names.name_sort_key`).
    """
    from nbgrader.api import Gradebook, MissingEntry

    from coursehub.catalog.names import name_sort_key

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        assignments = list(gradebook.assignments)
        handed = {a.name: handed_in(layout, a.name) for a in assignments}
        rows = []
        students = sorted(
            read_students(gradebook, roster),
            key=lambda s: name_sort_key(
                s.record.last_name, s.record.first_name, s.record.student_id
            ),
        )
        for listed in students:
            student = listed.record
            cells = []
            for assignment in assignments:
                try:
                    submission = gradebook.find_submission(assignment.name, student.student_id)
                except MissingEntry:
                    submission = None
                cells.append(plan_cell(submission, student.student_id in handed[assignment.name]))
            name = f"{student.first_name} {student.last_name}".strip() or student.student_id
            rows.append(
                GradeRow(
                    student.student_id,
                    name,
                    tuple(cells),
                    student.email or "",
                    student.lms_user_id or "",
                    listed.enrolled,
                )
            )
        return GradeTable(
            layout.course_id,
            tuple(a.name for a in assignments),
            tuple(float(a.max_score) for a in assignments),
            tuple(rows),
        )


def render_cell(cell: GradeCell) -> str:
    """Return a cell as the table shows it: a score (``"2 (-2 late)"``) or its state (pure)."""
    if cell.score is None:
        return cell.state
    late = f" (-{cell.penalty:g} late)" if cell.penalty else ""
    return f"{cell.score:g}{late}"


def render_grade_table(table: GradeTable) -> str:
    """Return the table as aligned text (CLI): student, name, one column per assignment, total."""
    header = [
        "student",
        "name",
        *(f"{a} (/{m:g})" for a, m in zip(table.assignments, table.max_scores, strict=True)),
        "total",
    ]
    body = [
        [
            r.student_id,
            r.name if r.enrolled else f"{r.name} (left the course)",
            *(render_cell(c) for c in r.cells),
            "-" if r.total is None else f"{r.total:g}",
        ]
        for r in table.rows
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *body]
    )
