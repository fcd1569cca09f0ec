"""The course's Usage page: for its team, refused to students; the Prometheus series for admins."""

from __future__ import annotations

import csv
import html
import io
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.usage.rollup import apply_records
from coursehub.meter.records import UsageRecord
from coursehub.web.testing import IDENTITIES, identity_headers


@pytest.fixture
def course_id(app, database_url):
    """The demo course, with a finished job of student p2500001 and a running server of p2500002."""
    from coursehub.catalog.models.courses import Course

    engine = make_engine(database_url)
    now = time.time()
    try:
        with session_scope(engine) as session:
            course = session.query(Course).filter(Course.course_id.like("mlmeca-%")).one()
            apply_records(
                session,
                [
                    UsageRecord(
                        "close",
                        "j1",
                        "job",
                        "p2500001",
                        course.course_id,
                        now,
                        now - 7200,
                        cpu_s=5400.0,
                        mem_peak_bytes=3 * 2**30,
                    ),
                    UsageRecord(
                        "sample",
                        "s1",
                        "server",
                        "p2500002",
                        course.course_id,
                        now,
                        now - 60,
                        cpu_s=30.0,
                        mem_peak_bytes=2**28,
                    ),
                    UsageRecord(
                        "close", "j2", "job", "p2509001", "OTHER", now, now - 60, cpu_s=9.0
                    ),
                ],
            )
            return str(course.course_id)
    finally:
        engine.dispose()


def get(client, part, url):
    return client.get(url, headers=identity_headers(IDENTITIES[part]))


@pytest.mark.parametrize("part", ["grader", "teacher", "lead", "admin"])
def test_the_team_sees_each_students_usage_and_what_runs_now(client, course_id, part):
    response = get(client, part, f"/courses/{course_id}/usage")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "p2500001" in page and "1.500" in page  # 5400 CPU-seconds
    assert "3072.0" in page  # peak memory in MiB
    assert "<svg" in page and "CPU-hours per day" in page
    running = page.split("Running now", 1)[1].split("Per student", 1)[0]
    assert "p2500002" in running and "p2500001" not in running
    assert "p2509001" not in page  # another course's student


@pytest.mark.parametrize("part", ["student", "other_student", "other_teacher"])
def test_a_student_or_another_courses_teacher_is_refused_the_usage_page(client, course_id, part):
    assert get(client, part, f"/courses/{course_id}/usage").status_code == 403


def test_the_course_page_links_the_usage_page_for_the_team_only(client, course_id):
    link = f"/courses/{course_id}/usage"
    assert link in get(client, "teacher", f"/courses/{course_id}/").get_data(as_text=True)
    assert link not in get(client, "student", f"/courses/{course_id}/").get_data(as_text=True)


def test_the_prometheus_series_are_per_course_for_admins_only(client, course_id):
    assert get(client, "teacher", "/metrics/usage").status_code == 403
    response = get(client, "admin", "/metrics/usage")
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.get_data(as_text=True))}
    cpu = {
        s.labels["course_id"]: s.value
        for s in families["coursehub_usage_cpu_seconds"].samples
        if s.name.endswith("_total")
    }
    assert cpu == {course_id: 5430.0, "OTHER": 9.0}
    running = families["coursehub_usage_running"].samples
    assert [(s.labels["course_id"], s.labels["kind"], s.value) for s in running] == [
        (course_id, "server", 1.0)
    ]


@pytest.fixture
def year_usage(app, database_url):
    """Usage of 2025-2026 in the demo course (MECA) and in OTHER (INFO); pmanager manages MECA."""
    from coursehub.catalog.admin import add_manager
    from coursehub.catalog.courses import get_portal
    from coursehub.catalog.models.courses import Course

    engine = make_engine(database_url)
    now = time.time()
    try:
        with session_scope(engine) as session:
            add_manager(session, get_portal(session, "MECA"), "pmanager")
            meca = session.query(Course).filter(Course.course_id.like("mlmeca-%")).one()
            info = session.query(Course).filter(Course.code == "OTHER").one()
            apply_records(
                session,
                [
                    UsageRecord(
                        "close",
                        "j1",
                        "job",
                        "p2500001",
                        meca.course_id,
                        now,
                        now - 7200,
                        cpu_s=5400.0,
                        gpu_s=7200.0,
                    ),
                    UsageRecord(
                        "close",
                        "j2",
                        "job",
                        "p2509001",
                        info.course_id,
                        now,
                        now - 60,
                        cpu_s=1800.0,
                    ),
                ],
            )
            return str(meca.course_id), str(info.course_id)
    finally:
        engine.dispose()


def manager_get(client, url):
    from coursehub.web.identity import Identity

    return client.get(url, headers=identity_headers(Identity("pmanager")))


def test_an_admin_sees_the_years_hours_per_course_and_per_portal(client, year_usage):
    meca, info = year_usage
    page = get(client, "admin", "/usage/?year=2025-2026").get_data(as_text=True)
    per_portal = page.split("Per portal", 1)[1].split("Per course", 1)[0]
    assert "MECA" in per_portal and "1.500" in per_portal and "2.000" in per_portal
    assert "INFO" in per_portal and "0.500" in per_portal
    per_course = page.split("Per course", 1)[1]
    assert meca in per_course and info in per_course


def test_a_portal_manager_sees_only_the_courses_of_their_portals(client, year_usage):
    meca, info = year_usage
    page = manager_get(client, "/usage/").get_data(as_text=True)  # the current year
    assert meca in page and info not in page
    assert manager_get(client, "/portals/MECA/usage").status_code == 200
    assert manager_get(client, "/portals/INFO/usage").status_code == 403
    assert manager_get(client, "/usage/courses.csv?portal=INFO").status_code == 403


def test_the_years_table_downloads_as_csv(client, year_usage):
    meca, info = year_usage
    response = get(client, "admin", "/usage/courses.csv?year=2025-2026")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert "2025-2026" in response.headers["Content-Disposition"]
    header, *rows = csv.reader(io.StringIO(response.get_data(as_text=True)))
    assert header == ["portal", "course_id", "title", "cpu_hours", "gpu_hours", "units"]
    by_course = {row[1]: row for row in rows}
    assert by_course[meca][0] == "MECA" and by_course[meca][3:] == ["1.5", "2.0", "1"]
    assert by_course[info][0] == "INFO" and by_course[info][3:] == ["0.5", "0.0", "1"]


def test_an_unknown_year_is_a_clear_404(client, year_usage):
    response = get(client, "admin", "/usage/?year=1999")
    text = html.unescape(response.get_data(as_text=True))
    assert response.status_code == 404 and "no academic year '1999'" in text


def test_the_admin_and_portal_pages_link_the_usage_views(client, year_usage):
    assert "/usage/" in get(client, "admin", "/admin/").get_data(as_text=True)
    assert "/portals/MECA/usage" in manager_get(client, "/portals/MECA/").get_data(as_text=True)


def test_a_gpu_server_without_a_hub_to_ask_is_not_accused_of_idling(
    client, course_id, database_url
):
    engine = make_engine(database_url)
    now = time.time()
    try:
        with session_scope(engine) as session:
            apply_records(
                session,
                [
                    UsageRecord(
                        "sample",
                        "server:h:p2500003::1",
                        "server",
                        "p2500003",
                        course_id,
                        now,
                        now - 3600,
                        cpu_s=1.0,
                        gpu_s=3600.0,
                    ),
                ],
            )
    finally:
        engine.dispose()
    page = get(client, "teacher", f"/courses/{course_id}/usage").get_data(as_text=True)
    section = page.split("Holding a GPU with no kernel busy", 1)[1].split("Per student", 1)[0]
    assert "cannot be checked for activity: no hub" in section
    assert "p2500003" not in section
