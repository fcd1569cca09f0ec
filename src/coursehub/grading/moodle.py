"""Grades as a CSV that Moodle's gradebook imports ("Import grades from CSV file").

Moodle's CSV grade import (``grade/import/csv``, documented at
https://docs.moodle.org/en/Grade_import) reads a file whose first row names
the columns; on its "Identify user by" step the teacher maps one column
("Map from") to a user field ("Map to": ``userid``, ``username``,
``useridnumber`` or ``useremail``, the fields of
``grade/import/csv/classes/load_data.php``), and each other column to a grade
item (or "ignore"). A row whose identifier is blank is skipped by Moodle.

The file written here has one identifier column and one grade column per
assignment:

=================  ==============================  ================================
``identifier``     column                          value (coursehub / nbgrader)
=================  ==============================  ================================
``email``          ``Email address``               the student's e-mail (gradebook)
``idnumber``       ``ID number``                   the student number (nbgrader's
                                                   ``lms_user_id``, from the roster)
``username``       ``Username``                    the hub username (nbgrader's
                                                   student id)
=================  ==============================  ================================

Each grade column is named after the assignment; its value is nbgrader's
score minus the late-submission penalty (never below 0), a plain number
with ``.`` as decimal point (Moodle's default). A student with nothing
graded for an assignment (not submitted, or not graded yet) gets an empty
cell: Moodle then leaves that grade alone, and the teacher decides.
Students without the chosen identifier are left out (listed by
:func:`plan_moodle_rows`), since Moodle could not match them. The students
and their identifiers are the catalog's (the course's roster, read when the
file is made: a changed e-mail or a new student is in the next file); a
student who left the course keeps their grades in the gradebook but is not
in the file (listed in ``MoodleExport.former``). Cells go through
:mod:`coursehub.csvsafe` like every CSV coursehub writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coursehub.csvsafe import Cell, render_csv
from coursehub.errors import UsageError
from coursehub.grading.export import GradeRow, GradeTable, read_grade_table
from coursehub.grading.gradebook import StudentRecord
from coursehub.grading.layout import CourseLayout

#: Identifier choice -> (column header, Moodle's "Map to" field).
MOODLE_IDENTIFIERS: dict[str, tuple[str, str]] = {
    "email": ("Email address", "useremail"),
    "idnumber": ("ID number", "useridnumber"),
    "username": ("Username", "username"),
}


@dataclass(frozen=True)
class MoodleExport:
    """The rows of the file (header first), the students left out (no identifier), the former.

    ``former``: students no longer in the course whose grades the gradebook keeps.
    """

    rows: list[list[Cell]]
    left_out: tuple[str, ...]
    former: tuple[str, ...] = ()


def identifier_of(row: GradeRow, identifier: str) -> str:
    """Return the student's value for ``identifier`` (pure); "" when they have none."""
    return {"email": row.email, "idnumber": row.id_number, "username": row.student_id}[identifier]


def plan_moodle_rows(table: GradeTable, identifier: str = "email") -> MoodleExport:
    """Return the Moodle import rows of ``table`` (pure).

    Raises
    ------
    UsageError
        For an identifier not in :data:`MOODLE_IDENTIFIERS`.
    """
    if identifier not in MOODLE_IDENTIFIERS:
        raise UsageError(
            f"Moodle export: identifier {identifier!r} is unknown: "
            f"choose one of {', '.join(MOODLE_IDENTIFIERS)}"
        )
    rows: list[list[Cell]] = [[MOODLE_IDENTIFIERS[identifier][0], *table.assignments]]
    left_out, former = [], []
    for row in table.rows:
        if not row.enrolled:
            former.append(row.student_id)
            continue
        value = identifier_of(row, identifier).strip()
        if not value:
            left_out.append(row.student_id)
            continue
        rows.append([value, *row.scores])
    return MoodleExport(rows, tuple(left_out), tuple(former))


def render_moodle_csv(
    layout: CourseLayout,
    identifier: str = "email",
    roster: Sequence[StudentRecord] | None = None,
) -> MoodleExport:
    """Return the course's Moodle export (the students of ``roster``, the catalog's).

    Its text is ``render_csv(export.rows)``.
    """
    return plan_moodle_rows(read_grade_table(layout, roster), identifier)


def moodle_csv_text(export: MoodleExport) -> str:
    """Return the export as spreadsheet-safe CSV text (pure)."""
    return render_csv(export.rows)
