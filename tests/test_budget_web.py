"""The student's page (My resources) and the course's weekly budget page, with their forms."""

from __future__ import annotations

import html
import re
import time

import pytest

from coursehub.catalog.budgets import course_budget, list_overrides, set_course_budget
from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Role
from coursehub.catalog.profiles import get_profile
from coursehub.catalog.usage.rollup import apply_records
from coursehub.meter.budget import WeeklyBudget
from coursehub.meter.records import UsageRecord


@pytest.fixture
def catalog(app, database_url):
    """The demo course (budget 10 CPU-hours) with 1.5 CPU-hours of p2500001 this week, 0.25
    GPU-hours of p2509001 in OTHER, and tdupont (teacher of mlmeca) a student of OTHER."""
    engine = make_engine(database_url)
    now = time.time()
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            course.team_profile = get_profile(session, "small")
            set_course_budget(course, WeeklyBudget(cpu_hours=10.0))
            other = get_course(session, "other-2025")
            other.profile = get_profile(session, "gpu-lstm")
            add_member(session, other, "tdupont", Role.STUDENT)
            records = [
                UsageRecord(
                    "close", "j1", "job", "p2500001", "mlmeca-2025", now, now - 60, cpu_s=5400.0
                ),
                UsageRecord(
                    "close",
                    "j2",
                    "job",
                    "p2509001",
                    "other-2025",
                    now,
                    now - 60,
                    cpu_s=7.0 * 3600,
                    gpu_s=900.0,
                ),
            ]
            apply_records(session, records)
    finally:
        engine.dispose()
    return database_url


def stored(url: str) -> tuple[WeeklyBudget, list[tuple[str, WeeklyBudget, str]]]:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            rows = [(r.username, r.budget, r.set_by) for r in list_overrides(session, course)]
            return course_budget(course), rows
    finally:
        engine.dispose()


def row_of(page: str, course_id: str) -> str:
    match = re.search(rf"<tr>\s*<td><a [^>]*>{course_id}</a>.*?</tr>", page, re.S)
    assert match, f"no row for {course_id} in the page"
    return html.unescape(re.sub(r"\s+", " ", match.group(0)))


def test_a_student_sees_their_limits_hours_and_home(app, catalog, pages, tmp_path):
    app.config["HOMES_DIR"] = str(tmp_path)
    (tmp_path / "p2500001").mkdir()
    (tmp_path / "p2500001" / "data.bin").write_bytes(b"x" * (3 << 20))
    assert 'href="/me/resources">My resources</a>' in pages.text("/", "student")
    page = pages.text("/me/resources", "student")
    row = row_of(page, "mlmeca-2025")
    assert "4 GiB" in row and "2 CPU" in row
    assert "1.50 of 10" in row
    assert "0.00 (no budget)" in row
    assert "other-2025" not in page
    home = html.unescape(re.search(r'<p id="my-home">(.*?)</p>', page, re.S).group(1))
    assert "0.00 GiB used" in home and "quota: no limit" in home


def test_a_second_student_sees_only_their_own_figures(catalog, pages):
    page = pages.text("/me/resources", "other_student")
    assert "mlmeca-2025" not in page and "1.50" not in page
    row = row_of(page, "other-2025")
    assert "7.00 (no budget)" in row and "0.25 (no budget)" in row
    assert pages.get("/courses/mlmeca-2025/budget", "other_student").status_code == 403
    assert pages.get("/courses/mlmeca-2025/budget", "student").status_code == 403


def test_teaching_one_course_and_studying_in_another_shows_each_roles_profile(catalog, pages):
    page = pages.text("/me/resources", "teacher")
    team, student = row_of(page, "mlmeca-2025"), row_of(page, "other-2025")
    assert "teacher (team profile)" in team and "2 GiB" in team and "1 CPU" in team
    assert "student" in student and "4 GiB" in student and "2 CPU" in student


def test_a_missing_home_is_shown_unknown(app, catalog, pages, tmp_path):
    app.config["HOMES_DIR"] = str(tmp_path / "absent")
    page = html.unescape(pages.text("/me/resources", "student"))
    assert "Used: unknown (" in page and "No such file or directory" in page


def test_the_lead_sets_the_course_budget(catalog, pages):
    url = "/courses/mlmeca-2025/budget"
    assert 'href="/courses/mlmeca-2025/budget"' in pages.text("/courses/mlmeca-2025/", "lead")
    response = pages.post_form(url, "lead", {"cpu_hours": "12.5", "gpu_hours": "3"})
    assert response.status_code == 302
    assert stored(catalog)[0] == WeeklyBudget(12.5, 3.0)
    pages.post_form(url, "lead", {"cpu_hours": "", "gpu_hours": "3"})
    assert stored(catalog)[0] == WeeklyBudget(None, 3.0)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-2", "Weekly CPU-hours per student: must be more than 0 hours, got '-2'"),
        ("twelve", "Weekly CPU-hours per student: expected a number of hours, got 'twelve'"),
        ("1e9", "Weekly CPU-hours per student: at most 43008 hours a week"),
    ],
)
def test_a_bad_budget_names_the_field_and_saves_nothing(catalog, pages, value, message):
    response = pages.post_form("/courses/mlmeca-2025/budget", "teacher", {"cpu_hours": value})
    assert response.status_code == 400
    assert message in html.unescape(response.get_data(as_text=True))
    assert stored(catalog) == (WeeklyBudget(10.0, None), [])


def test_the_team_raises_one_students_budget(catalog, pages):
    url = "/courses/mlmeca-2025/budget"
    data = {"username": "p2500001", "student_cpu_hours": "30"}
    assert pages.post_form(url, "lead", data).status_code == 302
    assert stored(catalog)[1] == [("p2500001", WeeklyBudget(30.0, None), "mbuffat")]
    page = pages.text(url, "grader")  # the team reads it, without forms
    assert "p2500001" in page and "<button" not in page
    assert "1.50 of 30" in row_of(pages.text("/me/resources", "student"), "mlmeca-2025")
    bad = pages.post_form(url, "lead", {"username": "nobody", "student_cpu_hours": "5"})
    assert bad.status_code == 400
    assert "'nobody' is not a student of mlmeca-2025" in html.unescape(bad.get_data(as_text=True))
    refused = pages.post_form(url, "grader", data, form_page="/courses/mlmeca-2025/")
    assert refused.status_code == 403
    assert len(stored(catalog)[1]) == 1


def test_the_quota_and_the_weeks_zone_come_from_the_settings(app, catalog, pages, monkeypatch):
    monkeypatch.setenv("COURSEHUB_HOME_QUOTA", "2G")
    app.config["BUDGET_TIMEZONE"] = "Europe/Paris"
    page = html.unescape(pages.text("/me/resources", "student"))
    assert "quota: 2 GiB" in page
    assert re.search(r"Mon \d{4}-\d\d-\d\d 00:00 CES?T", row_of(page, "mlmeca-2025"))
