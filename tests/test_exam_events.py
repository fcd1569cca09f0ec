"""What students' browsers report during an exam: taken from the student only, during their
sitting, from a fixed list, within limits; read by the course's team.

The seeded web catalog (:func:`coursehub.web.testing.seed_web_catalog`):
lead ``mbuffat``, teacher ``tdupont``, grader ``gmartin``, students
``p2500001``... of ``mlmeca-2025``; ``p2509001`` is a student of another course.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from coursehub.catalog.examevents import (
    MAX_PER_MINUTE,
    MAX_PER_SITTING,
    check_event_fields,
    plan_event_admission,
)
from coursehub.catalog.models.exams import ExamSession
from coursehub.errors import UsageError
from coursehub.web.testing import api_headers

EXAMS = "/api/v1/courses/mlmeca-2025/exams"
FINAL = EXAMS + "/final"
EVENTS = FINAL + "/events"


@pytest.fixture
def final(client):
    now = datetime.now(UTC)
    body = {
        "assignment": "final",
        "opens_at": (now - timedelta(minutes=5)).isoformat(timespec="seconds"),
        "duration_min": 60,
        "hard_end": (now + timedelta(hours=2)).isoformat(timespec="seconds"),
    }
    answer = client.post(EXAMS, json=body, headers=api_headers("lead"))
    assert answer.status_code == 201, answer.get_json()


@pytest.fixture
def started(client, final):
    answer = client.post(FINAL + "/start", headers=api_headers("student"))
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def report(client, part="student", **body):
    return client.post(EVENTS, json=body, headers=api_headers(part))


def test_a_student_in_their_exam_reports_events_the_team_reads_them(client, started):
    left = report(client, kind="fullscreen-exit", detail="  the student left\nfull screen ")
    assert left.status_code == 201, left.get_json()
    assert left.get_json()["username"] == "p2500001"
    assert left.get_json()["detail"] == "the student left full screen"
    assert report(client, kind="tab-hidden").status_code == 201
    for part in ("lead", "teacher", "grader", "admin"):
        answer = client.get(EVENTS, headers=api_headers(part))
        assert answer.status_code == 200, (part, answer.get_json())
        kinds = [(e["username"], e["kind"]) for e in answer.get_json()["events"]]
        assert kinds == [("p2500001", "fullscreen-exit"), ("p2500001", "tab-hidden")]
    one = client.get(EVENTS + "?username=P2500001", headers=api_headers("lead")).get_json()
    assert len(one["events"]) == 2
    other = client.get(EVENTS + "?username=p2500002", headers=api_headers("lead")).get_json()
    assert other["events"] == []


@pytest.mark.parametrize("part", ["student", "other_student", "other_teacher"])
def test_students_and_outsiders_never_read_the_events(client, started, part):
    assert client.get(EVENTS, headers=api_headers(part)).status_code == 403


@pytest.mark.parametrize("part", ["lead", "teacher", "grader", "other_student"])
def test_only_a_student_of_the_course_reports_events(client, started, part):
    assert report(client, part, kind="tab-hidden").status_code == 403


def test_no_event_is_taken_before_the_start_nor_after_the_end(client, final, session):
    before = report(client, kind="tab-hidden")
    assert before.status_code == 409 and "not running" in before.get_json()["error"]
    assert client.post(FINAL + "/start", headers=api_headers("student")).status_code == 200
    assert report(client, kind="tab-hidden").status_code == 201
    ended = datetime.now(UTC) - timedelta(seconds=1)
    session.execute(update(ExamSession).values(ended_at=ended, ended_by="mbuffat"))
    session.commit()
    after = report(client, kind="tab-hidden")
    assert after.status_code == 409 and "not running" in after.get_json()["error"]
    events = client.get(EVENTS, headers=api_headers("lead")).get_json()["events"]
    assert len(events) == 1


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "kind", ""),
        ({"kind": "screenshot"}, "kind", "must be one of fullscreen-enter"),
        ({"kind": 3}, "kind", "must be one of"),
        ({"kind": "tab-hidden", "detail": "x" * 256}, "detail", "at most 255 characters"),
        ({"kind": "tab-hidden", "detail": ["x"]}, "detail", "must be text"),
        ({"kind": "tab-hidden", "username": "p2500002"}, "username", ""),
    ],
)
def test_bad_events_are_a_400_naming_the_field(client, started, body, field, words):
    answer = report(client, **body)
    assert answer.status_code == 400, answer.get_json()
    assert field in answer.get_json()["fields"]
    assert words in answer.get_json()["fields"][field]
    assert client.get(EVENTS, headers=api_headers("lead")).get_json()["events"] == []


def test_a_script_cannot_flood_the_table(client, started):
    answers = [report(client, kind="window-blur").status_code for _ in range(MAX_PER_MINUTE + 5)]
    assert answers == [201] * MAX_PER_MINUTE + [429] * 5
    refused = report(client, kind="window-blur").get_json()["error"]
    assert f"at most {MAX_PER_MINUTE} events a minute" in refused
    events = client.get(EVENTS, headers=api_headers("lead")).get_json()["events"]
    assert len(events) == MAX_PER_MINUTE


def test_the_limits_per_minute_and_per_sitting():
    assert plan_event_admission(0, 0) is None
    assert plan_event_admission(MAX_PER_MINUTE - 1, 10) is None
    assert "a minute" in (plan_event_admission(MAX_PER_MINUTE, 10) or "")
    assert "one sitting" in (plan_event_admission(0, MAX_PER_SITTING) or "")


def test_event_fields_are_checked_before_anything_is_read():
    assert check_event_fields({"kind": "tab-visible"}) == ("tab-visible", "")
    with pytest.raises(UsageError, match=r"^kind: must be one of"):
        check_event_fields({"kind": "TAB-HIDDEN"})


def test_the_api_description_lists_the_kinds_the_catalog_takes(client):
    import yaml

    from coursehub.catalog.examevents import BROWSER_EVENT_KINDS

    spec = yaml.safe_load(client.get("/api/v1/openapi.yaml").get_data(as_text=True))
    post = spec["paths"]["/courses/{course_id}/exams/{assignment}/events"]["post"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["kind"]["enum"] == list(BROWSER_EVENT_KINDS)
