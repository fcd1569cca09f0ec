"""The course's assignments page (blueprint ``grading``): team only, steps, grades, CSV."""

from __future__ import annotations

import csv
import re

import pytest

from coursehub.grading.assignments import add_assignment
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.layout import ensure_course, layout_from_env
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from helpers import csrf_token

PAGE = "/courses/mlmeca-2025/grading"
TEACHER = identity_headers(IDENTITIES["teacher"])


@pytest.fixture
def layout(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    made = layout_from_env("mlmeca-2025")
    ensure_course(made)
    add_assignment(made, DEMO_ASSIGNMENT, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
    return made


@pytest.fixture
def client(database_url, layout):
    seed_web_catalog(database_url)
    app = make_test_app(database_url)
    yield app.test_client()
    dispose_app(app)


@pytest.mark.parametrize(
    "who, status", [("teacher", 200), ("grader", 200), ("student", 403), ("other_teacher", 403)]
)
def test_only_the_teaching_team_sees_assignments(client, who, status):
    assert client.get(PAGE, headers=identity_headers(IDENTITIES[who])).status_code == status
    answer = client.get(f"{PAGE}/grades.csv", headers=identity_headers(IDENTITIES[who]))
    assert answer.status_code == status


def test_formgrader_opens_in_its_own_tab(client, monkeypatch):
    monkeypatch.setenv("COURSEHUB_FORMGRADER_COURSES", "numflu-2025,mlmeca-2025")
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    assert 'href="/services/mlmeca-2025/formgrader" target="_blank"' in page
    assert DEMO_ASSIGNMENT in page


@pytest.mark.parametrize("listed", [None, "", "numflu-2025"])
def test_no_formgrader_link_unless_the_hub_runs_its_service(client, monkeypatch, listed):
    if listed is None:
        monkeypatch.delenv("COURSEHUB_FORMGRADER_COURSES", raising=False)
    else:
        monkeypatch.setenv("COURSEHUB_FORMGRADER_COURSES", listed)
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    assert "formgrader" not in page and DEMO_ASSIGNMENT in page


def test_buttons_generate_then_release(client, layout):
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    data = {"csrf_token": csrf_token(page)}
    early = client.post(
        f"{PAGE}/{DEMO_ASSIGNMENT}/release", headers=TEACHER, data=data, follow_redirects=True
    )
    assert "is not generated yet" in early.get_data(as_text=True)
    for step in ("generate", "release"):
        answer = client.post(f"{PAGE}/{DEMO_ASSIGNMENT}/{step}", headers=TEACHER, data=data)
        assert answer.status_code == 302
    assert (layout.exchange_root / "mlmeca-2025" / "outbound" / DEMO_ASSIGNMENT).is_dir()


def test_grades_export_is_nbgraders_csv(client):
    answer = client.get(f"{PAGE}/grades.csv", headers=TEACHER)
    assert answer.mimetype == "text/csv"
    header = answer.get_data(as_text=True).splitlines()[0]
    assert next(csv.reader([header]))[:2] == ["assignment", "duedate"]


def test_an_assignment_not_generated_yet_says_so_instead_of_out_of_zero(client, layout):
    from coursehub.grading.autograde.gradebook import ensure_students

    ensure_students(layout, ["p2500001"])  # the table shows once the gradebook has a student
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    header = re.search(r"<thead>.*?</thead>", page, re.S)
    assert header is not None
    assert f"{DEMO_ASSIGNMENT} " in header.group(0) and "(not generated yet)" in header.group(0)
    assert "(/0)" not in header.group(0)


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("2025-03-30T23:59", "2025-03-30 23:59 CEST (Europe/Paris)"),
        ("2025-10-26T23:59", "2025-10-26 23:59 CET (Europe/Paris)"),
    ],
)
def test_the_schedule_form_shows_the_due_date_in_the_zone_it_was_typed_in(client, typed, shown):
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    answer = client.post(
        f"{PAGE}/{DEMO_ASSIGNMENT}/schedule",
        headers=TEACHER,
        data={
            "csrf_token": csrf_token(page),
            "duedate": typed,
            "timezone": "Europe/Paris",
            "late_method": "zero",
            "points_per_hour": "",
            "after_due": "refuse",
        },
    )
    assert answer.status_code == 302
    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    assert f"<dt>Due</dt><dd>{shown}</dd>" in page
    assert f'name="duedate" value="{typed}"' in page
    assert 'name="timezone" value="Europe/Paris"' in page
    assert "hard deadline: no submission after it" in page


def test_a_student_sees_the_due_date_in_the_courses_zone_on_the_course_page(client, layout):
    from coursehub.grading.assignments import generate_assignment, release_assignment

    page = client.get(PAGE, headers=TEACHER).get_data(as_text=True)
    data = {"csrf_token": csrf_token(page), "duedate": "2025-03-30T23:59"}
    data |= {"timezone": "Europe/Paris", "late_method": "zero", "after_due": "accept"}
    assert (
        client.post(f"{PAGE}/{DEMO_ASSIGNMENT}/schedule", headers=TEACHER, data=data).status_code
        == 302
    )
    generate_assignment(layout, DEMO_ASSIGNMENT)
    release_assignment(layout, DEMO_ASSIGNMENT)
    student = identity_headers(IDENTITIES["student"])
    course_page = client.get("/courses/mlmeca-2025/", headers=student).get_data(as_text=True)
    due = re.search(r"Assignments due</h2>(.*?)</dl>", course_page, re.S)
    assert due is not None, "the student's course page lists no due date"
    assert "2025-03-30 23:59 CEST (Europe/Paris)" in due.group(1)
    assert "UTC" not in due.group(1)
