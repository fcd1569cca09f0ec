"""The grade table's three states, and the exports (nbgrader's CSV, Moodle's CSV) as golden files.

The gradebook is filled through nbgrader's own API (``nbgrader.api.Gradebook``):
an assignment with one autograded cell out of 4 points, a student graded,
one graded late with a penalty, one whose submission waits in the exchange,
one who submitted nothing; names and e-mails that a spreadsheet would run.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime

import pytest

from coursehub.errors import UsageError
from coursehub.grading.export import (
    GRADED,
    NOT_SUBMITTED,
    SUBMITTED,
    read_grade_table,
    render_grade_table,
    render_grades_csv,
)
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.grading.moodle import moodle_csv_text, plan_moodle_rows, render_moodle_csv
from helpers import assert_matches_golden

STUDENTS = {
    "alice": {
        "first_name": "Alice",
        "last_name": "Martin",
        "email": "alice@etu.example.org",
        "lms_user_id": "p2500001",
    },
    "bob": {
        "first_name": "Bob",
        "last_name": '=HYPERLINK("http://evil.example")',
        "email": "bob@etu.example.org",
        "lms_user_id": "p2500002",
    },
    "carol": {
        "first_name": "Carol",
        "last_name": "Roy;=1+1",
        "email": None,
        "lms_user_id": "p2500003",
    },
    "dan": {
        "first_name": "Dan",
        "last_name": "Durand",
        "email": "-dan@etu.example.org",
        "lms_user_id": None,
    },
}


@pytest.fixture
def layout(tmp_path):
    from nbgrader.api import Gradebook

    made = make_layout("exp-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(made)
    with Gradebook(made.db_url, course_id=made.course_id) as gradebook:
        gradebook.add_assignment("ps1", duedate=datetime(2025, 3, 1, 17, 0))
        gradebook.add_notebook("energy", "ps1")
        gradebook.add_grade_cell("energy_test", "energy", "ps1", max_score=4, cell_type="code")
        for student_id, fields in STUDENTS.items():
            gradebook.add_student(student_id, **fields)
        for student_id, when, penalty in (
            ("alice", datetime(2025, 3, 1, 16, 0), None),
            ("bob", datetime(2025, 3, 1, 19, 0), 2.0),
        ):
            with gradebook.db.no_autoflush:  # nbgrader builds the rows one by one (SAWarning)
                submission = gradebook.add_submission("ps1", student_id, timestamp=when)
            notebook = submission.notebooks[0]
            notebook.grades[0].auto_score = 4.0
            notebook.late_submission_penalty = penalty
            gradebook.db.commit()
    # carol's submission waits in the exchange: submitted, not collected nor graded
    (made.exchange_root / made.course_id / "inbound" / "carol+ps1+2025-03-01 16:59:00 UTC").mkdir()
    return made


def test_the_grade_table_tells_not_submitted_from_submitted_and_graded(layout):
    table = read_grade_table(layout)
    assert table.assignments == ("ps1",) and table.max_scores == (4.0,)
    states = {r.student_id: (r.cells[0].state, r.cells[0].score, r.total) for r in table.rows}
    assert states == {
        "alice": (GRADED, 4.0, 4.0),
        "bob": (GRADED, 2.0, 2.0),
        "carol": (SUBMITTED, None, None),
        "dan": (NOT_SUBMITTED, None, None),
    }
    # by last name ("=HYPERLINK(...)", Durand, Martin, "Roy;=1+1"), not by id
    assert [r.student_id for r in table.rows] == ["bob", "dan", "alice", "carol"]
    assert_matches_golden(render_grade_table(table) + "\n", "grades_table.txt.golden")


def test_a_collected_submission_counts_as_submitted(layout):
    (layout.course_dir / "submitted" / "dan" / "ps1").mkdir(parents=True)
    rows = {r.student_id: r.cells[0].state for r in read_grade_table(layout).rows}
    assert rows["dan"] == SUBMITTED


def test_nbgraders_csv_export_matches_its_golden_file(layout):
    text = render_grades_csv(layout)
    assert_matches_golden(text, "grades_nbgrader.csv.golden")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert {r["student_id"]: r["score"] for r in rows} == {
        "alice": "4.0",
        "bob": "2.0",
        "carol": "0.0",
        "dan": "0.0",
    }


@pytest.mark.parametrize("identifier", ["email", "idnumber", "username"])
def test_moodles_import_csv_matches_its_golden_file(layout, identifier):
    export = render_moodle_csv(layout, identifier)
    text = moodle_csv_text(export)
    assert_matches_golden(text, f"grades_moodle_{identifier}.csv.golden")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len({len(row) for row in rows}) == 1  # no name or e-mail shifts a column
    assert not any(re.match(r"[=+\-@]", cell) for row in rows for cell in row)


def test_moodle_leaves_out_students_it_could_not_match(layout):
    assert render_moodle_csv(layout, "email").left_out == ("carol",)
    assert render_moodle_csv(layout, "idnumber").left_out == ("dan",)
    assert render_moodle_csv(layout, "username").left_out == ()


def test_an_unknown_moodle_identifier_is_refused(layout):
    with pytest.raises(UsageError, match="identifier 'id' is unknown: choose one of email"):
        plan_moodle_rows(read_grade_table(layout), "id")
