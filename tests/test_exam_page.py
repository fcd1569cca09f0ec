"""The proctor's view on the course app: who started, time left, last submission; added time."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest

from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.exams import (
    Receipt,
    create_exam,
    get_exam,
    record_receipt,
    sitting_of,
    start_exam,
)
from coursehub.catalog.examtime import Window

URL = "/courses/mlmeca-2025/exams/final"


@pytest.fixture
def catalog(app, database_url):
    """Exam ``final`` of the demo course: 60 min; p2500001 started 10 min ago and submitted."""
    now = datetime.now(UTC)
    engine = make_engine(database_url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            window = Window(now - timedelta(hours=1), 60, now + timedelta(hours=2), "Europe/Paris")
            exam = create_exam(session, course, "final", window, "mbuffat")
            start_exam(session, course, exam, "p2500001", now - timedelta(minutes=10))
            receipt = Receipt(now - timedelta(minutes=1), "p2500001+final+x", "ab" * 32, {})
            record_receipt(session, course, exam, "p2500001", receipt, final=False)
    finally:
        engine.dispose()
    return database_url


def row_of(page: str, username: str) -> str:
    match = re.search(rf'<tr><td class="code">{username}</td>.*?</tr>', page, re.S)
    assert match, f"no row for {username}"
    return html.unescape(re.sub(r"\s+", " ", match.group(0)))


def ends_of(url: str, username: str) -> datetime:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            sitting = sitting_of(session, course, get_exam(session, course, "final"), username)
            return sitting.ends_at
    finally:
        engine.dispose()


def test_the_team_sees_who_started_time_left_and_the_last_submission(catalog, pages):
    assert 'href="/courses/mlmeca-2025/exams"' in pages.text("/courses/mlmeca-2025/", "grader")
    assert 'href="/courses/mlmeca-2025/exams/final"' in pages.text(
        "/courses/mlmeca-2025/exams", "grader"
    )
    page = pages.text(URL, "grader")
    started = row_of(page, "p2500001")
    assert "(Europe/Paris)" in started and ">50<" in started.replace(" ", "")
    assert "abababababab" in started and "(the bell)" not in started
    assert "not started" in row_of(page, "p2500002")
    assert "Add time" not in page  # graders read, the lead and teachers add


@pytest.mark.parametrize("part", ["student", "other_student", "other_teacher"])
def test_students_and_other_courses_never_see_it(catalog, pages, part):
    assert pages.get(URL, part).status_code == 403
    assert pages.get("/courses/mlmeca-2025/exams", part).status_code == 403


def test_a_teacher_adds_time_live_and_a_bad_value_is_named(catalog, pages):
    before = ends_of(catalog, "p2500001")
    response = pages.post_form(URL, "teacher", {"username": "p2500001", "minutes": "15"})
    assert response.status_code == 302
    assert ends_of(catalog, "p2500001") == before + timedelta(minutes=15)
    page = pages.text(URL, "teacher")
    assert "+15 min added" in row_of(page, "p2500001")
    refused = pages.post_form(URL, "teacher", {"username": "p2500002", "minutes": "5"})
    assert refused.status_code == 400
    assert "p2500002 has not started final" in html.unescape(refused.get_data(as_text=True))
    refused = pages.post_form(URL, "teacher", {"username": "p2500001", "minutes": "0"})
    assert refused.status_code == 400
    assert ends_of(catalog, "p2500001") == before + timedelta(minutes=15)
    token = pages.csrf(URL, "teacher")
    data = {"csrf_token": token, "username": "p2500001", "minutes": "5"}
    assert pages.client.post(URL, data=data, headers=pages.headers("grader")).status_code == 403


def test_a_teacher_ends_a_students_time_and_the_table_says_by_whom(catalog, pages):
    page = pages.text(URL, "lead")
    assert "End now" in row_of(page, "p2500001") and "End now" not in row_of(page, "p2500002")
    assert 'data-refresh-s="30"' in page and "proctor.js" in page
    end = URL + "/end"
    answer = pages.post_form(end, "teacher", {"username": "p2500001"}, form_page=URL)
    assert answer.status_code == 302
    assert ends_of(catalog, "p2500001") <= datetime.now(UTC)
    row = row_of(pages.text(URL, "teacher"), "p2500001")
    assert "(ended by tdupont)" in row
    assert "End now" not in row
    again = pages.post_form(end, "teacher", {"username": "p2500001"}, form_page=URL)
    assert again.status_code == 302  # said in a flash message, nothing changed
    token = pages.csrf(URL, "teacher")
    data = {"csrf_token": token, "username": "p2500001"}
    assert pages.client.post(end, data=data, headers=pages.headers("grader")).status_code == 403


def test_the_table_shows_the_last_autosave(catalog, pages):
    from coursehub.catalog.examproctor import record_save

    engine = make_engine(catalog)
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            exam = get_exam(session, course, "final")
            saved = datetime.now(UTC) - timedelta(seconds=30)
            record_save(session, course, exam, "p2500001", saved, "cd" * 32)
    finally:
        engine.dispose()
    row = row_of(pages.text(URL, "grader"), "p2500001")
    assert "cdcdcdcdcdcd" in row
    assert "none" in row_of(pages.text(URL, "grader"), "p2500002")


def test_the_table_shows_each_students_exam_events(catalog, pages):
    from coursehub.catalog.examproctor import note_outside_start

    engine = make_engine(catalog)
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            exam = get_exam(session, course, "final")
            note_outside_start(session, course, exam, "p2500002", "198.51.100.7", datetime.now(UTC))
    finally:
        engine.dispose()
    page = pages.text(URL, "grader")
    row = row_of(page, "p2500002")
    assert "1: last sign-in-outside at " in row and "start from 198.51.100.7" in row
    assert "none" in row_of(page, "p2500001")


def test_the_lead_sets_the_exam_clock_and_a_bad_value_is_named_and_changes_nothing(catalog, pages):
    clock = URL + "/clock"
    assert "warning 5 min before the end, full screen offered" in pages.text(URL, "grader")
    assert "Save the clock" not in pages.text(URL, "teacher")  # the lead's, and admins'
    form = {"warn_before_min": "10", "fullscreen": "required"}
    answer = pages.post_form(clock, "lead", form, form_page=URL)
    assert answer.status_code == 302
    page = html.unescape(pages.text(URL, "lead"))
    assert "warning 10 min before the end, full screen required" in page
    assert "warn_before_min: 10 min; fullscreen: required" in page  # the flash message
    index = pages.text("/courses/mlmeca-2025/exams", "grader")
    assert '<td class="num">10</td><td>required</td>' in index
    for bad, words in (
        ({"warn_before_min": "61"}, "warn_before_min: must be 0 to 60 minutes"),
        ({"warn_before_min": "-2"}, "warn_before_min: must be 0 to 60 minutes"),
        ({"fullscreen": "kiosk"}, "fullscreen: must be offered or required, got 'kiosk'"),
        ({"warn_before_min": ""}, "warn_before_min: must be a whole number of minutes, got ''"),
    ):
        answer = pages.post_form(clock, "lead", form | bad, form_page=URL)
        assert answer.status_code == 302
        page = html.unescape(pages.text(URL, "lead"))
        assert "Nothing changed: " + words in page, page
        assert "warning 10 min before the end, full screen required" in page
    refused = pages.post_form(clock, "teacher", form, form_page=URL)
    assert refused.status_code == 403
