"""Exams in the JSON API: who may create, start, read; bad fields named; the receipt is private.

The seeded web catalog (:func:`coursehub.web.testing.seed_web_catalog`):
lead ``mbuffat``, teacher ``tdupont``, grader ``gmartin``, students
``p2500001``... of ``mlmeca-2025``; ``p2509001`` is a student of another course.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from coursehub.web.testing import api_headers

EXAMS = "/api/v1/courses/mlmeca-2025/exams"
FINAL = EXAMS + "/final"


def body(**changes):
    now = datetime.now(UTC)
    fields = {
        "assignment": "final",
        "opens_at": (now - timedelta(minutes=5)).isoformat(timespec="seconds"),
        "duration_min": 60,
        "hard_end": (now + timedelta(hours=2)).isoformat(timespec="seconds"),
        "timezone": "Europe/Paris",
    }
    return {k: v for k, v in (fields | changes).items() if v is not None}


@pytest.fixture
def courses(tmp_path, monkeypatch):
    """The course's grading folder, with the notebook of ``final`` in its source."""
    root = tmp_path / "courses"
    (root / "mlmeca-2025" / "source" / "final").mkdir(parents=True)
    (root / "mlmeca-2025" / "nbgrader_config.py").write_text("c = get_config()\n")
    (root / "mlmeca-2025" / "source" / "final" / "final.ipynb").write_text("{}")
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(root))
    return root


@pytest.fixture
def final(client, courses):
    answer = client.post(EXAMS, json=body(start_code="K7Q2"), headers=api_headers("lead"))
    assert answer.status_code == 201, answer.get_json()
    created = answer.get_json()
    assert created.pop("warnings") == []
    return created


def test_an_exam_without_its_notebook_is_made_with_a_warning_naming_what_to_add(client, courses):
    answer = client.post(EXAMS, json=body(assignment="midterm"), headers=api_headers("lead"))
    assert answer.status_code == 201
    [warning] = answer.get_json()["warnings"]
    source = courses / "mlmeca-2025" / "source" / "midterm"
    assert warning == (
        f"mlmeca-2025 has no notebook for midterm yet ({source}): add it before the exam "
        "opens (coursehub grading add mlmeca-2025 midterm NOTEBOOK.ipynb)"
    )
    (courses / "mlmeca-2025" / "nbgrader_config.py").unlink()
    answer = client.post(EXAMS, json=body(assignment="quiz"), headers=api_headers("lead"))
    assert answer.get_json()["warnings"] == [
        "grading is not set up for mlmeca-2025 yet (coursehub grading setup mlmeca-2025): "
        "the exam's notebook quiz must be added before the exam opens"
    ]


def test_a_lead_creates_an_exam_and_everyone_in_the_course_sees_it_without_the_code(client, final):
    assert final["assignment"] == "final" and final["start_code"] is True
    assert final["created_by"] == "mbuffat" and final["timezone"] == "Europe/Paris"
    listed = client.get(EXAMS, headers=api_headers("student")).get_json()["exams"]
    assert listed == [final] and "K7Q2" not in str(listed)
    assert client.get(FINAL, headers=api_headers("student")).get_json() == final
    again = client.post(EXAMS, json=body(), headers=api_headers("lead"))
    assert again.status_code == 409


def test_an_exam_keeps_its_allowed_imports_as_top_level_names(client, final):
    assert final["allowed_imports"] is None  # no list: every import allowed
    answer = client.post(
        EXAMS,
        json=body(assignment="final2", allowed_imports=" numpy, pandas.core ,numpy"),
        headers=api_headers("lead"),
    )
    assert answer.status_code == 201, answer.get_json()
    assert answer.get_json()["allowed_imports"] == "numpy,pandas"


@pytest.mark.parametrize("part", ["student", "grader", "teacher", "other_teacher", "other_student"])
def test_only_a_lead_or_an_admin_creates_an_exam(client, part):
    answer = client.post(EXAMS, json=body(), headers=api_headers(part))
    assert answer.status_code == 403
    assert client.get(EXAMS, headers=api_headers("lead")).get_json()["exams"] == []
    assert client.post(EXAMS, json=body(), headers=api_headers("admin")).status_code == 201


def test_without_a_token_nothing_is_answered(client, final):
    assert client.get(EXAMS).status_code == 401
    assert client.post(FINAL + "/start").status_code == 401


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"duration_min": 0}, "duration", "must be 1 to 1440 minutes, got 0"),
        ({"duration_min": "two hours"}, "duration_min", "must be a whole number"),
        ({"duration_min": True}, "duration_min", "must be a whole number"),
        ({"opens_at": "lundi 10h"}, "opens_at", "is not a date and time"),
        ({"hard_end": None}, "hard_end", "is required"),
        ({"hard_end": "2020-01-01T00:00Z"}, "hard_end", "must be after opens_at"),
        ({"timezone": "Paris"}, "timezone", "'Paris' is unknown"),
        ({"assignment": "../final"}, "assignment", "without '/'"),
        ({"start_code": "  "}, "start_code", "must not be blank"),
        ({"allowed_imports": "numpy, sci-py"}, "allowed_imports", "'sci-py' is not a module"),
        ({"warn_before_min": -1}, "warn_before_min", "must be 0 to 60 minutes"),
        (
            {"warn_before_min": 61},
            "warn_before_min",
            "(the exam's duration; 0: no warning), got 61",
        ),
        ({"warn_before_min": "ten"}, "warn_before_min", "must be a whole number of minutes"),
        ({"warn_before_min": True}, "warn_before_min", "must be a whole number of minutes"),
        ({"fullscreen": "always"}, "fullscreen", "must be offered or required, got 'always'"),
        ({"fullscreen": 1}, "fullscreen", "must be a str"),
        ({"room": "A1"}, "room", "is not a known field"),
    ],
)
def test_bad_fields_are_a_400_naming_the_field_and_create_nothing(client, changes, field, words):
    answer = client.post(EXAMS, json=body(**changes), headers=api_headers("lead"))
    assert answer.status_code == 400
    assert words in answer.get_json()["fields"][field]
    assert client.get(EXAMS, headers=api_headers("lead")).get_json()["exams"] == []


def test_a_student_starts_once_and_reads_only_their_own_sitting(client, final):
    student = api_headers("student")
    refused = client.post(FINAL + "/start", json={"code": "nope"}, headers=student)
    assert refused.status_code == 409 and "start code is wrong" in refused.get_json()["error"]
    started = client.post(FINAL + "/start", json={"code": "k7q2"}, headers=student).get_json()
    assert started["username"] == "p2500001" and started["receipt"] is None
    assert 59 * 60 <= started["seconds_left"] <= 60 * 60
    # another browser, no code: the same sitting, the same end
    again = client.post(FINAL + "/start", headers=student).get_json()
    assert again["started_at"] == started["started_at"] and again["ends_at"] == started["ends_at"]
    own = client.get(FINAL + "/sittings/p2500001", headers=student)
    assert own.status_code == 200 and own.get_json()["ends_at"] == started["ends_at"]
    other = client.get(FINAL + "/sittings/p2500002", headers=student)
    assert other.status_code == 403
    assert client.get(FINAL + "/sittings", headers=student).status_code == 403
    outsider = client.get(FINAL + "/sittings/p2500001", headers=api_headers("other_student"))
    assert outsider.status_code == 403
    assert client.post(FINAL + "/start", headers=api_headers("other_student")).status_code == 403
    assert client.post(FINAL + "/start", headers=api_headers("teacher")).status_code == 403
    table = client.get(FINAL + "/sittings", headers=api_headers("grader")).get_json()
    assert [s["username"] for s in table["sittings"] if s["started_at"]] == ["p2500001"]


def test_a_student_cannot_give_themselves_time(client, final):
    client.post(FINAL + "/start", json={"code": "K7Q2"}, headers=api_headers("student"))
    override = {"extra_percent": 100}
    url = FINAL + "/overrides/students/p2500001"
    assert client.put(url, json=override, headers=api_headers("student")).status_code == 403
    assert client.put(url, json=override, headers=api_headers("teacher")).status_code == 403
    more = client.post(
        FINAL + "/sittings/p2500001/time", json={"minutes": 30}, headers=api_headers("student")
    )
    assert more.status_code == 403


def test_extra_time_ends_later_and_never_after_the_hard_end(client, final):
    lead = api_headers("lead")
    answer = client.put(
        FINAL + "/overrides/students/p2500001", json={"extra_percent": 33}, headers=lead
    )
    assert answer.get_json() == {
        "username": "p2500001",
        "extra_minutes": 0,
        "extra_percent": 33,
        "replaced": None,
        "warnings": [],
    }
    bad = client.put(FINAL + "/overrides/groups/G2", json={"extra_minutes": -1}, headers=lead)
    assert (
        bad.status_code == 400 and "must be 0 to 1440" in bad.get_json()["fields"]["extra_minutes"]
    )
    client.post(FINAL + "/start", json={"code": "K7Q2"}, headers=api_headers("student"))
    mine = client.get(FINAL + "/sittings/p2500001", headers=lead).get_json()
    assert mine["extra_percent"] == 33 and 79 * 60 <= mine["seconds_left"] <= 79.8 * 60
    teacher = api_headers("teacher")
    more = client.post(FINAL + "/sittings/p2500001/time", json={"minutes": 600}, headers=teacher)
    assert more.status_code == 200
    hard_end = datetime.fromisoformat(final["hard_end"])
    assert datetime.fromisoformat(more.get_json()["ends_at"]) == hard_end
    bad = client.post(FINAL + "/sittings/p2500002/time", json={"minutes": 5}, headers=teacher)
    assert bad.status_code == 400 and "has not started" in bad.get_json()["fields"]["username"]


def test_a_start_outside_the_window_is_refused_saying_when(client):
    later = datetime.now(UTC) + timedelta(days=1)
    late = body(opens_at=later.isoformat(), hard_end=(later + timedelta(hours=2)).isoformat())
    assert client.post(EXAMS, json=late, headers=api_headers("lead")).status_code == 201
    answer = client.post(FINAL + "/start", headers=api_headers("student"))
    assert answer.status_code == 409
    assert "final: the exam opens at " in answer.get_json()["error"]


def test_an_override_says_what_it_replaces_and_a_one_sided_slot_must_leave_time(client, final):
    lead = api_headers("lead")
    url = FINAL + "/overrides/students/p2500001"
    slot = {"extra_percent": 33, "hard_end": body()["hard_end"]}
    assert client.put(url, json=slot, headers=lead).get_json()["replaced"] is None
    answer = client.put(url, json={"extra_minutes": 10}, headers=lead).get_json()
    assert answer["replaced"].startswith("+33 %, hard end ")
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    bad = client.put(url, json={"hard_end": past}, headers=lead)
    assert bad.status_code == 400
    assert "is not after the exam's opening" in bad.get_json()["fields"]["hard_end"]
    late = (datetime.now(UTC) + timedelta(hours=3)).isoformat(timespec="seconds")
    bad = client.put(url, json={"opens_at": late}, headers=lead)
    assert "not before the exam's hard end" in bad.get_json()["fields"]["opens_at"]
    squeezed = client.put(url, json={"extra_percent": 200}, headers=lead).get_json()
    assert "shorter than the 180 min a student has" in squeezed["warnings"][0]


def test_an_exam_in_the_past_or_longer_than_its_window_is_made_with_a_warning(client):
    now = datetime.now(UTC)
    past = body(
        opens_at=(now - timedelta(hours=3)).isoformat(timespec="seconds"),
        hard_end=(now - timedelta(hours=2)).isoformat(timespec="seconds"),
        duration_min=90,
    )
    answer = client.post(EXAMS, json=past, headers=api_headers("lead"))
    assert answer.status_code == 201
    warnings = answer.get_json()["warnings"]
    assert "is past: nobody can start it" in warnings[0]
    assert "the window is 60 min from opening to hard end, shorter than the 90 min" in warnings[1]


def test_wrong_start_codes_pause_the_student_and_a_right_one_clears_them(client, final):
    student = api_headers("student")
    for guess in ("AAAA", "BBBB", "CCCC", "DDDD"):
        answer = client.post(FINAL + "/start", json={"code": guess}, headers=student)
        assert answer.status_code == 409 and "start code is wrong" in answer.get_json()["error"]
    forgot = client.post(FINAL + "/start", json={}, headers=student)  # not counted
    assert "no start code was given" in forgot.get_json()["error"]
    client.post(FINAL + "/start", json={"code": "EEEE"}, headers=student)  # the fifth
    paused = client.post(FINAL + "/start", json={"code": "K7Q2"}, headers=student)
    assert paused.status_code == 409
    assert "5 wrong start codes in a row: try again at " in paused.get_json()["error"]


def test_a_right_code_after_a_few_wrong_ones_starts_and_clears_the_count(client, final):
    student = api_headers("student")
    for guess in ("AAAA", "BBBB", "CCCC", "DDDD"):
        client.post(FINAL + "/start", json={"code": guess}, headers=student)
    assert client.post(FINAL + "/start", json={"code": "k7q2"}, headers=student).status_code == 200


def test_a_teacher_ends_a_students_time_and_a_student_cannot(client, final):
    client.post(FINAL + "/start", json={"code": "K7Q2"}, headers=api_headers("student"))
    url = FINAL + "/sittings/p2500001/end"
    assert client.post(url, headers=api_headers("student")).status_code == 403
    ended = client.post(url, headers=api_headers("teacher"))
    assert ended.status_code == 200
    sitting = ended.get_json()
    assert sitting["seconds_left"] == 0 and sitting["ended_by"] == "tdupont"
    again = client.post(url, headers=api_headers("teacher"))
    assert again.status_code == 400 and "is over already" in again.get_json()["fields"]["username"]
    never = client.post(FINAL + "/sittings/p2500002/end", headers=api_headers("teacher"))
    assert never.status_code == 400 and "has not started" in never.get_json()["fields"]["username"]


def test_a_start_from_outside_the_rooms_network_is_refused_and_recorded(client, app):
    from coursehub.catalog.models.exams import ExamEvent
    from coursehub.web.database import get_session

    room = body(assignment="room", allowed_networks="192.0.2.0/24, 2001:db8::/32")
    created = client.post(EXAMS, json=room, headers=api_headers("lead"))
    assert created.status_code == 201
    assert created.get_json()["allowed_networks"] == "192.0.2.0/24,2001:db8::/32"
    url = EXAMS + "/room/start"
    outside = {"REMOTE_ADDR": "198.51.100.9"}
    refused = client.post(url, json={}, headers=api_headers("student"), environ_base=outside)
    assert refused.status_code == 403
    assert "your address 198.51.100.9 is outside it" in refused.get_json()["error"]
    inside = {"REMOTE_ADDR": "192.0.2.44"}
    started = client.post(url, json={}, headers=api_headers("student"), environ_base=inside)
    assert started.status_code == 200
    with app.app_context():
        [event] = get_session().query(ExamEvent).all()
        assert (event.kind, event.detail) == ("sign-in-outside", "start from 198.51.100.9")
    bad = client.post(
        EXAMS, json=body(assignment="x", allowed_networks="room A"), headers=api_headers("lead")
    )
    assert bad.status_code == 400
    assert "'room A' is not a network" in bad.get_json()["fields"]["allowed_networks"]


def test_a_lead_changes_the_imports_ranges_and_code_and_empty_clears_them(client, final):
    lead = api_headers("lead")
    answer = client.patch(FINAL, json={"allowed_imports": "numpy, scipy.linalg"}, headers=lead)
    assert answer.status_code == 200, answer.get_json()
    changed = answer.get_json()
    assert changed["allowed_imports"] == "numpy,scipy" and changed["start_code"] is True
    assert changed["changed"] == ["allowed_imports: numpy,scipy"]
    answer = client.patch(
        FINAL, json={"start_code": "", "allowed_networks": "192.0.2.7/24"}, headers=lead
    )
    assert answer.get_json()["changed"] == ["allowed_networks: 192.0.2.0/24", "start code removed"]
    assert answer.get_json()["start_code"] is False
    assert client.get(FINAL, headers=lead).get_json()["allowed_networks"] == "192.0.2.0/24"
    answer = client.patch(FINAL, json={"allowed_imports": ""}, headers=lead)
    assert answer.get_json()["allowed_imports"] is None


def test_an_exam_clocks_settings_default_are_set_at_creation_and_changed(client, courses):
    lead = api_headers("lead")
    made = client.post(EXAMS, json=body(assignment="quiz"), headers=lead).get_json()
    assert (made["warn_before_min"], made["fullscreen"]) == (5, "offered")
    short = body(assignment="short", duration_min=3, warn_before_min=None)
    assert client.post(EXAMS, json=short, headers=lead).get_json()["warn_before_min"] == 3
    made = client.post(
        EXAMS, json=body(warn_before_min=10, fullscreen="required"), headers=lead
    ).get_json()
    assert (made["warn_before_min"], made["fullscreen"]) == (10, "required")
    assert "warning 10 min before the end, full screen required" in made["summary"]
    answer = client.patch(
        FINAL, json={"warn_before_min": "0", "fullscreen": "offered"}, headers=lead
    )
    assert answer.status_code == 200, answer.get_json()
    changed = answer.get_json()
    assert changed["changed"] == ["warn_before_min: 0 (no warning)", "fullscreen: offered"]
    assert (changed["warn_before_min"], changed["fullscreen"]) == (0, "offered")
    assert client.get(FINAL, headers=lead).get_json()["warn_before_min"] == 0


def test_the_sitting_a_student_reads_carries_the_exam_clocks_settings(client, final):
    lead, student = api_headers("lead"), api_headers("student")
    client.patch(FINAL, json={"warn_before_min": 12, "fullscreen": "required"}, headers=lead)
    client.post(FINAL + "/start", json={"code": "K7Q2"}, headers=student)
    sitting = client.get(FINAL + "/sittings/p2500001", headers=student).get_json()
    assert (sitting["warn_before_min"], sitting["fullscreen"]) == (12, "required")


def test_a_bad_change_is_refused_naming_its_field_and_changes_nothing(client, final):
    lead = api_headers("lead")
    for body_, field in (
        ({"allowed_imports": "numpy, sci-py"}, "allowed_imports"),
        ({"allowed_networks": "not-a-network"}, "allowed_networks"),
        ({"start_code": "   "}, "start_code"),
        ({"warn_before_min": -5}, "warn_before_min"),
        ({"warn_before_min": 61}, "warn_before_min"),
        ({"warn_before_min": ""}, "warn_before_min"),
        ({"fullscreen": "kiosk"}, "fullscreen"),
        ({"allowed_imports": "scipy", "fullscreen": "kiosk"}, "fullscreen"),
        ({"fullscreen": "required", "warn_before_min": 90}, "warn_before_min"),
        ({}, "body"),
    ):
        answer = client.patch(FINAL, json=body_, headers=lead)
        assert answer.status_code == 400, (body_, answer.get_json())
        assert field in str(answer.get_json()), answer.get_json()
    assert client.get(FINAL, headers=lead).get_json() == final
    assert (
        client.patch(FINAL, json={"start_code": ""}, headers=api_headers("teacher")).status_code
        == 403
    )
