"""The course's Usage page: for its team, refused to students; the Prometheus series for admins."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.usage import apply_records
from coursehub.meter.records import UsageRecord
from coursehub.web.testing import IDENTITIES, identity_headers


@pytest.fixture
def course_id(app, database_url):
    """The demo course, with a finished job of student p2500001 and a running server of p2500002."""
    from coursehub.catalog.models import Course

    engine = make_engine(database_url)
    now = time.time()
    try:
        with session_scope(engine) as session:
            course = session.query(Course).filter(Course.course_id.like("mlmeca-%")).one()
            apply_records(session, [
                UsageRecord("close", "j1", "job", "p2500001", course.course_id, now, now - 7200,
                            cpu_s=5400.0, mem_peak_bytes=3 * 2**30),
                UsageRecord("sample", "s1", "server", "p2500002", course.course_id, now, now - 60,
                            cpu_s=30.0, mem_peak_bytes=2**28),
                UsageRecord("close", "j2", "job", "p2509001", "OTHER", now, now - 60, cpu_s=9.0),
            ])  # fmt: skip
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
    cpu = {s.labels["course_id"]: s.value for s in families["coursehub_usage_cpu_seconds"].samples
           if s.name.endswith("_total")}  # fmt: skip
    assert cpu == {course_id: 5430.0, "OTHER": 9.0}
    running = families["coursehub_usage_running"].samples
    assert [(s.labels["course_id"], s.labels["kind"], s.value) for s in running] == [
        (course_id, "server", 1.0)
    ]
