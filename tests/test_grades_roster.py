"""The grade table and every export follow the catalog's roster, whatever changed it.

The gradebook is set up once (``sync_gradebook``, as ``coursehub grading
setup`` does), then the roster changes by every path the catalog has: a CSV
import (new students, a changed e-mail, confirmed), a member added by hand
(the path of an LTI launch too: :func:`coursehub.catalog.members.add_member`),
a student removed after being graded. A new student's submission reaches the
gradebook the way nbgrader's autograde adds an unknown student: with the
username only. The grade table, nbgrader's CSV and Moodle's CSV (by e-mail
and by ID number), on the library, the command line and the web app, must
all list the catalog's students with the catalog's current fields.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime

import pytest

from coursehub.catalog.members import add_member, remove_member
from coursehub.catalog.people import get_person
from coursehub.catalog.roster.apply import import_roster
from coursehub.catalog.seed import seed_demo
from coursehub.grading.export import read_grade_table, render_grades_csv
from coursehub.grading.gradebook import read_roster, sync_gradebook
from coursehub.grading.layout import ensure_course, layout_from_env
from coursehub.grading.moodle import render_moodle_csv

HEADER = "N° étudiant;Nom;Prénom;Courriel;Groupe\r\n"
NEW = {
    "p2501101": ("Roux", "Léa", "lea.roux@etu.example.org"),
    "p2501102": ("Petit", "Hugo", "hugo.petit@etu.example.org"),
    "p2501103": ("Faure", "Inès", "ines.faure@etu.example.org"),
}
CHANGED_EMAIL = "bjorn.olsen@univ.example.org"


def roster_csv() -> bytes:
    lines = [f"{u};{last};{first};{mail};G1" for u, (last, first, mail) in NEW.items()]
    lines.append(f"p2500002;Ølsen;Björn;{CHANGED_EMAIL};G1")
    return (HEADER + "".join(line + "\r\n" for line in lines)).encode("utf-8-sig")


def graded(gradebook, student_id: str, score: float) -> None:
    """Give ``student_id`` a graded submission of ps1 (nbgrader adds an unknown id bare)."""
    with gradebook.db.no_autoflush:  # nbgrader builds the rows one by one (SAWarning)
        submission = gradebook.add_submission("ps1", student_id, timestamp=datetime(2025, 3, 1))
    submission.notebooks[0].grades[0].auto_score = score
    gradebook.db.commit()


@pytest.fixture
def changed(session, tmp_path, monkeypatch):
    """The demo course, its gradebook set up, then its roster changed by every path."""
    from nbgrader.api import Gradebook

    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    course = seed_demo(session)
    layout = layout_from_env(course.course_id)
    ensure_course(layout)
    sync_gradebook(session, course, layout)
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        gradebook.add_assignment("ps1")
        gradebook.add_notebook("energy", "ps1")
        gradebook.add_grade_cell("energy_test", "energy", "ps1", max_score=4, cell_type="code")
        graded(gradebook, "p2500004", 3.0)
    import_roster(session, course.course_id, roster_csv(), confirm=True)
    add_member(session, course, "p2501104", "student", first_name="Yann", last_name="Abel")
    remove_member(session, course, "p2500004")
    session.commit()
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        gradebook.add_student("p2501101")  # as nbgrader's autograde adds an unknown student
        graded(gradebook, "p2501101", 4.0)
    return session, course, layout


def catalog_students(session, course) -> dict[str, tuple[str, str, str | None, str | None]]:
    return {
        r.student_id: (r.first_name, r.last_name, r.email, r.lms_user_id)
        for r in read_roster(session, course)
    }


def test_the_grade_table_lists_every_student_with_the_catalogs_fields(changed):
    session, course, layout = changed
    expected = catalog_students(session, course)
    assert {"p2501101", "p2501102", "p2501103", "p2501104"} <= set(expected)
    table = read_grade_table(layout, read_roster(session, course))
    enrolled = {r.student_id: r for r in table.rows if r.enrolled}
    assert set(enrolled) == set(expected)
    for student_id, (first, last, email, number) in expected.items():
        row = enrolled[student_id]
        assert (row.name, row.email, row.id_number) == (
            f"{first} {last}",
            email or "",
            number or "",
        )
    assert enrolled["p2501101"].name == "Léa Roux" and enrolled["p2501101"].total == 4.0
    assert enrolled["p2500002"].email == CHANGED_EMAIL
    assert enrolled["p2501102"].cells[0].state == "not submitted"
    # the removed student keeps their grade, marked as no longer in the course
    former = [(r.student_id, r.total) for r in table.rows if not r.enrolled]
    assert former == [("p2500004", 3.0)]


def test_the_gradebook_alone_misses_the_new_students(changed):
    _, _, layout = changed
    rows = {r.student_id: r for r in read_grade_table(layout).rows}
    assert "p2501102" not in rows and rows["p2501101"].name == "p2501101"


def test_nbgraders_csv_has_a_row_per_catalog_student_with_their_email(changed):
    session, course, layout = changed
    expected = catalog_students(session, course)
    text = render_grades_csv(layout, roster=read_roster(session, course))
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(text, newline=""))}
    assert set(rows) == {*expected, "p2500004"}
    for student_id, (first, last, email, _) in expected.items():
        row = rows[student_id]
        assert (row["first_name"], row["last_name"], row["email"]) == (first, last, email or "")
    assert rows["p2500004"]["score"] == "3.0" and rows["p2501101"]["score"] == "4.0"


@pytest.mark.parametrize(("identifier", "field"), [("email", 2), ("idnumber", 3)])
def test_moodles_csv_identifies_every_catalog_student(changed, identifier, field):
    session, course, layout = changed
    expected = catalog_students(session, course)
    export = render_moodle_csv(layout, identifier, read_roster(session, course))
    values = {row[0] for row in export.rows[1:]}
    with_value = {s for s, fields in expected.items() if fields[field]}
    assert values == {expected[s][field] for s in with_value}
    assert set(export.left_out) == set(expected) - with_value
    assert export.former == ("p2500004",)
    if identifier == "email":
        assert CHANGED_EMAIL in values and NEW["p2501102"][2] in values
        assert get_person(session, "p2500002").email == CHANGED_EMAIL


def test_the_command_line_export_reads_the_catalog(changed, database_url, monkeypatch, tmp_path):
    from coursehub.cli import main

    session, course, _ = changed
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", database_url)
    dest = tmp_path / "grades.csv"
    assert main(["grading", "export", course.course_id, "-o", str(dest)]) == 0
    rows = list(csv.DictReader(io.StringIO(dest.read_text(encoding="utf-8"), newline="")))
    assert {r["student_id"] for r in rows} >= set(catalog_students(session, course))
    assert {r["email"] for r in rows if r["student_id"] == "p2500002"} == {CHANGED_EMAIL}


def test_the_web_exports_and_grade_table_read_the_catalog(changed, database_url):
    from coursehub.web.testing import IDENTITIES, dispose_app, identity_headers, make_test_app

    _, course, _ = changed
    app = make_test_app(database_url)
    headers = identity_headers(IDENTITIES["teacher"])
    try:
        client = app.test_client()
        page = client.get(f"/courses/{course.course_id}/grading", headers=headers)
        moodle = client.get(
            f"/courses/{course.course_id}/grading/grades-moodle.csv?identifier=email",
            headers=headers,
        )
    finally:
        dispose_app(app)
    html = page.get_data(as_text=True)
    assert 'data-student="p2501103"' in html and "Inès" in html
    assert "left the course; grades kept" in html
    emails = {row[0] for row in csv.reader(io.StringIO(moodle.get_data(as_text=True)))}
    assert {CHANGED_EMAIL, NEW["p2501103"][2]} <= emails
