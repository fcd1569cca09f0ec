"""An exam's timing: a student's end, extra time, the hard end, who may start when (issue 26).

The pure rules (:mod:`coursehub.catalog.examtime`) and the same rules on a
real catalog (:mod:`coursehub.catalog.exams`, SQLite and PostgreSQL): the
start is recorded by the server, so the end does not depend on the browser.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from coursehub.catalog.courses import get_course
from coursehub.catalog.examjson import allowance_from_fields, field_of, window_from_fields
from coursehub.catalog.examoverrides import set_override
from coursehub.catalog.exams import (
    add_time,
    create_exam,
    list_sittings,
    sitting_of,
    start_exam,
)
from coursehub.catalog.examtime import (
    Allowance,
    Window,
    check_window,
    format_moment,
    hash_code,
    plan_end,
    plan_start,
)
from coursehub.catalog.seed import seed_demo
from coursehub.errors import UsageError

OPENS = datetime(2026, 1, 12, 9, 0, tzinfo=UTC)
WINDOW = Window(OPENS, 120, OPENS + timedelta(hours=3), "Europe/Paris")


def test_a_student_ends_their_duration_after_their_own_start():
    start = OPENS + timedelta(minutes=7, seconds=17)
    assert plan_end(WINDOW, start) == start + timedelta(minutes=120)


def test_extra_time_of_33_percent_ends_later_and_never_after_the_hard_end():
    start = OPENS
    plain = plan_end(WINDOW, start)
    extra = plan_end(WINDOW, start, Allowance(percent=33))
    assert extra == start + timedelta(minutes=120 * 1.33) > plain
    late_start = OPENS + timedelta(minutes=100)
    assert plan_end(WINDOW, late_start, Allowance(percent=33)) == WINDOW.hard_end
    assert plan_end(WINDOW, late_start) == WINDOW.hard_end
    assert plan_end(WINDOW, start, Allowance(minutes=600), added_min=600) == WINDOW.hard_end


def test_a_conflict_slot_has_its_own_window_and_hard_end():
    slot = Allowance(
        opens_at=OPENS + timedelta(days=1), hard_end=OPENS + timedelta(days=1, hours=1)
    )
    assert not plan_start(WINDOW, OPENS + timedelta(minutes=5), slot).allowed
    start = OPENS + timedelta(days=1, minutes=10)
    assert plan_start(WINDOW, start, slot).allowed
    assert plan_end(WINDOW, start, slot) == slot.hard_end


@pytest.mark.parametrize(
    ("now", "words"),
    [
        (OPENS - timedelta(seconds=1), "the exam opens at 2026-01-12 10:00 CET (Europe/Paris)"),
        (WINDOW.hard_end, "the exam closed at 2026-01-12 13:00 CET (Europe/Paris)"),
        (WINDOW.hard_end + timedelta(days=2), "can no longer be started"),
    ],
)
def test_a_start_outside_the_window_is_refused_saying_when(now, words):
    decision = plan_start(WINDOW, now)
    assert not decision.allowed
    assert words in decision.message


def test_the_start_code_is_asked_and_compared_without_case_or_spaces():
    code = hash_code("K7Q2")
    assert "no start code was given" in plan_start(WINDOW, OPENS, code_hash=code).message
    assert "the start code is wrong" in plan_start(WINDOW, OPENS, Allowance(), code, "K7Q3").message
    assert plan_start(WINDOW, OPENS, Allowance(), code, " k7q2 ").allowed


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"duration_min": 90, "hard_end": "2026-01-12T13:00"}, "opens_at", "is required"),
        ({"opens_at": "12/01/2026", "duration_min": 90, "hard_end": "x"}, "opens_at", "not a date"),
        ({"opens_at": "2026-01-12T10:00", "duration_min": "1h30", "hard_end": "2026-01-12T13:00"},
         "duration_min", "whole number"),
        ({"opens_at": "2026-01-12T10:00", "duration_min": 90, "hard_end": "2026-01-12T13:00",
          "timezone": "Mars/Olympus"}, "timezone", "unknown"),
        ({"opens_at": "2026-03-29T02:30", "duration_min": 90, "hard_end": "2026-03-29T05:00",
          "timezone": "Europe/Paris"}, "opens_at", "daylight-saving"),
    ],
)  # fmt: skip
def test_bad_fields_are_refused_naming_the_field(fields, field, words):
    with pytest.raises(UsageError, match=words) as caught:
        window_from_fields(fields, "UTC")
    assert field_of(caught.value) == field


def test_window_ranges_name_the_field():
    with pytest.raises(UsageError, match=r"^duration: must be 1 to 1440 minutes, got 0"):
        check_window(Window(OPENS, 0, OPENS + timedelta(hours=1)))
    with pytest.raises(UsageError, match=r"^hard_end: must be after opens_at"):
        check_window(Window(OPENS, 60, OPENS))


def test_wall_clock_times_are_the_exams_zone_and_shown_in_it():
    window = window_from_fields(
        {"opens_at": "2026-07-01T10:00", "duration_min": 60, "hard_end": "2026-07-01T12:00+02:00"},
        "Europe/Paris",
    )
    assert window.opens_at == datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
    assert window.hard_end == datetime(2026, 7, 1, 10, 0, tzinfo=UTC)
    shown = format_moment(window.opens_at + timedelta(seconds=17), "Europe/Paris")
    assert shown == "2026-07-01 10:00:17 CEST (Europe/Paris)"


# --- on a real catalog -------------------------------------------------------------------------


@pytest.fixture
def exam(session):
    course = seed_demo(session)
    return course, create_exam(session, course, "final", WINDOW, "mbuffat", start_code="K7Q2")


def test_the_start_is_recorded_once_and_a_second_start_keeps_the_first(session, exam):
    course, final = exam
    first = start_exam(session, course, final, "p2500001", OPENS + timedelta(minutes=3), "K7Q2")
    session.commit()
    # another computer, a crashed server: starting again changes nothing, no code asked again
    again = start_exam(session, course, final, "p2500001", OPENS + timedelta(minutes=50))
    assert again.started_at == first.started_at == OPENS + timedelta(minutes=3)
    assert again.ends_at == OPENS + timedelta(minutes=123)
    fresh = sitting_of(session, get_course(session, course.course_id), final, "p2500001")
    assert fresh.ends_at == first.ends_at


def test_extra_time_in_the_catalog_student_over_group_and_capped(session, exam):
    course, final = exam
    set_override(session, course, final, Allowance(percent=33), "mbuffat", username="p2500001")
    set_override(session, course, final, Allowance(minutes=30), "mbuffat", group="G1")
    for student in ("p2500001", "p2500002", "p2500003"):
        start_exam(session, course, final, student, OPENS, "K7Q2")
    ends = {s.username: s.ends_at for s in list_sittings(session, course, final)}
    assert ends["p2500001"] == OPENS + timedelta(minutes=159.6)  # own +33 %, not the group's
    assert ends["p2500002"] == OPENS + timedelta(minutes=150)  # group G1: +30 min
    assert ends["p2500003"] == OPENS + timedelta(minutes=120)  # G2: none
    assert ends["p2500004"] is None  # not started
    assert ends["p2500003"] < ends["p2500001"] <= final.hard_end
    later = add_time(session, course, final, "p2500003", 10)
    assert later.ends_at == OPENS + timedelta(minutes=130)
    assert add_time(session, course, final, "p2500001", 600).ends_at == final.hard_end


def test_refusals_in_the_catalog_say_why(session, exam):
    course, final = exam
    with pytest.raises(UsageError, match="final: the exam opens at"):
        start_exam(session, course, final, "p2500001", OPENS - timedelta(minutes=1), "K7Q2")
    with pytest.raises(UsageError, match="the start code is wrong"):
        start_exam(session, course, final, "p2500001", OPENS, "nope")
    with pytest.raises(UsageError, match=r"^username: 'mbuffat' is not a student of mlmeca-2025"):
        start_exam(session, course, final, "mbuffat", OPENS, "K7Q2")
    with pytest.raises(UsageError, match=r"^extra_percent: must be 0 to 300, got 400"):
        set_override(session, course, final, Allowance(percent=400), "x", username="p2500001")
    with pytest.raises(UsageError, match=r"^group: course mlmeca-2025 has no group 'G9'"):
        set_override(session, course, final, Allowance(minutes=5), "x", group="G9")
    with pytest.raises(UsageError, match=r"^username: p2500001 has not started final"):
        add_time(session, course, final, "p2500001", 5)
    with pytest.raises(UsageError, match=r"^extra_minutes: must be a whole number"):
        allowance_from_fields({"extra_minutes": "ten"}, "UTC")


def test_a_pause_after_wrong_codes_is_one_students_and_ends_after_its_minutes(session):
    from coursehub.catalog.examcodes import (
        MAX_WRONG_CODES,
        PAUSE_MIN,
        WrongStartCodeError,
        note_wrong_code,
        paused_until,
    )

    course = seed_demo(session)
    now = datetime.now(UTC)
    window = Window(now - timedelta(hours=1), 60, now + timedelta(hours=2), "UTC")
    exam = create_exam(session, course, "final", window, "mbuffat", start_code="K7Q2")
    for _ in range(MAX_WRONG_CODES - 1):
        with pytest.raises(WrongStartCodeError):
            start_exam(session, course, exam, "p2500001", now, "nope")
        note_wrong_code(session, exam.id, sitting_pk(session, course, "p2500001"), now)
    with pytest.raises(WrongStartCodeError):
        start_exam(session, course, exam, "p2500001", now, "nope")
    assert note_wrong_code(session, exam.id, sitting_pk(session, course, "p2500001"), now) == 5
    pk = sitting_pk(session, course, "p2500001")
    assert paused_until(session, exam.id, pk, now) == now + timedelta(minutes=PAUSE_MIN)
    with pytest.raises(UsageError, match="5 wrong start codes in a row"):
        start_exam(session, course, exam, "p2500001", now, "K7Q2")
    assert start_exam(session, course, exam, "p2500002", now, "K7Q2").started_at == now
    later = now + timedelta(minutes=PAUSE_MIN, seconds=1)
    assert paused_until(session, exam.id, pk, later) is None
    assert start_exam(session, course, exam, "p2500001", later, "k7q2").started_at == later


def sitting_pk(session, course, username):
    from coursehub.catalog.exams import course_student

    return course_student(session, course, username)[0].id


def test_allowed_networks_are_normalised_and_read_for_v4_v6_and_mapped_addresses():
    from coursehub.catalog.examnetworks import address_allowed, parse_networks

    assert parse_networks(" 192.0.2.7/24 ,10.0.0.1, 192.0.2.0/24") == "192.0.2.0/24,10.0.0.1/32"
    assert parse_networks("") is None and address_allowed(None, "203.0.113.1")
    nets = parse_networks("192.0.2.0/24,2001:db8::/32")
    assert address_allowed(nets, "192.0.2.200") and address_allowed(nets, "2001:db8::5")
    assert address_allowed(nets, "::ffff:192.0.2.9")
    assert not address_allowed(nets, "198.51.100.1") and not address_allowed(nets, "")
    assert not address_allowed(nets, "localhost")
    with pytest.raises(UsageError, match="allowed_networks: at most 64"):
        parse_networks(",".join(f"10.0.{i}.0/24" for i in range(65)))


def test_the_proxy_hops_follow_the_mode_and_refuse_a_bad_value():
    from coursehub.web.config import plan_proxy_hops

    assert plan_proxy_hops({}, "hub") == 1 and plan_proxy_hops({}, "dev") == 0
    assert plan_proxy_hops({"PROXY_HOPS": "2"}, "hub") == 2
    with pytest.raises(UsageError, match="COURSEHUB_PROXY_HOPS must be a whole number"):
        plan_proxy_hops({"PROXY_HOPS": "many"}, "hub")
