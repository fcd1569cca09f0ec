"""Due dates in the course's zone on daylight-saving days, and what submit decides after them.

Pure functions of :mod:`coursehub.grading.deadline` and
:mod:`coursehub.grading.create`; the real exchange is in
``test_assignment_cycle_deadline.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from coursehub.errors import UsageError
from coursehub.grading.create import parse_duedate
from coursehub.grading.deadline import (
    CONFIRM_WINDOW_S,
    Deadline,
    format_due,
    local_input,
    newest_on_time,
    plan_submit,
    take_confirmation,
)
from coursehub.grading.latepolicy import LatePolicy, parse_late_policy


@pytest.mark.parametrize(
    ("typed", "zone", "utc", "shown"),
    [
        # Europe/Paris: CET (+1) until 30 March 2025 02:00, CEST (+2) until 26 October 03:00
        ("2025-03-30T23:59", "Europe/Paris", datetime(2025, 3, 30, 21, 59), "CEST (Europe/Paris)"),
        ("2025-03-30T01:59", "Europe/Paris", datetime(2025, 3, 30, 0, 59), "CET (Europe/Paris)"),
        ("2025-10-26T23:59", "Europe/Paris", datetime(2025, 10, 26, 22, 59), "CET (Europe/Paris)"),
        ("2025-10-26T01:59", "Europe/Paris", datetime(2025, 10, 25, 23, 59), "CEST (Europe/Paris)"),
        # America/New_York: EST (-5) until 9 March 2025, EDT (-4) until 2 November
        ("2025-03-09T23:59", "America/New_York", datetime(2025, 3, 10, 3, 59), "EDT"),
        ("2025-11-02T23:59", "America/New_York", datetime(2025, 11, 3, 4, 59), "EST"),
        ("2025-10-26T23:59", "UTC", datetime(2025, 10, 26, 23, 59), "UTC"),
    ],
)
def test_a_due_date_is_read_and_shown_in_its_zone_on_both_dst_days(typed, zone, utc, shown):
    due = parse_duedate(typed, zone)
    assert due == utc.replace(tzinfo=UTC)
    day, clock = typed.split("T")
    expected_abbreviation = shown.split(" ")[0]
    text = format_due(due, zone)
    assert text.startswith(f"{day} {clock} {expected_abbreviation}")
    assert zone in text
    assert local_input(due, zone) == typed
    assert format_due(due.replace(tzinfo=None), zone) == text  # the gradebook's naive UTC


@pytest.mark.parametrize(
    ("typed", "zone"),
    [("2025-03-30T02:30", "Europe/Paris"), ("2025-03-09T02:30", "America/New_York")],
)
def test_a_time_the_spring_change_skips_is_refused(typed, zone):
    with pytest.raises(UsageError, match=f"does not exist in {zone}"):
        parse_duedate(typed, zone)


@pytest.mark.parametrize(
    ("typed", "zone", "first", "second"),
    [
        ("2025-10-26T02:30", "Europe/Paris", "+02:00", "+01:00"),
        ("2025-11-02T01:30", "America/New_York", "-04:00", "-05:00"),
    ],
)
def test_a_time_the_autumn_change_repeats_needs_its_offset(typed, zone, first, second):
    with pytest.raises(UsageError, match="happens twice") as info:
        parse_duedate(typed, zone)
    assert first in str(info.value) and second in str(info.value)
    earlier, later = parse_duedate(typed + first, zone), parse_duedate(typed + second, zone)
    assert later - earlier == timedelta(hours=1)  # the same wall-clock time, an hour apart


DUE = datetime(2025, 3, 30, 21, 59, tzinfo=UTC)
ON_TIME = datetime(2025, 3, 30, 21, 30, tzinfo=UTC)
LATE = datetime(2025, 3, 30, 22, 10, tzinfo=UTC)


def deadline(after_due: str) -> Deadline:
    return Deadline(
        DUE, after_due, "Europe/Paris", LatePolicy("zero", after_due=after_due).describe()
    )


def test_submit_on_time_goes_ahead_silently_whatever_the_rule():
    for rule in ("accept", "keep_on_time", "refuse"):
        assert plan_submit("ps1 of c", ON_TIME, deadline(rule), ON_TIME, False).message == ""
        assert plan_submit("ps1 of c", DUE, deadline(rule), None, False).allowed


def test_a_hard_deadline_refuses_a_late_submission_naming_the_local_due_date():
    decision = plan_submit("ps1 of c", LATE, deadline("refuse"), ON_TIME, False)
    assert not decision.allowed
    assert "2025-03-30 23:59 CEST (Europe/Paris)" in decision.message
    assert "hard deadline" in decision.message


def test_a_late_submission_replacing_an_on_time_one_is_confirmed_first():
    first = plan_submit("ps1 of c", LATE, deadline("accept"), ON_TIME, False)
    assert not first.allowed
    assert "replace your on-time submission of 2025-03-30 23:30 CEST" in first.message
    assert "submit again" in first.message
    again = plan_submit("ps1 of c", LATE, deadline("accept"), ON_TIME, True)
    assert again.allowed and "replaces your on-time submission" in again.message


def test_a_late_submission_is_warned_when_it_replaces_nothing_or_the_on_time_one_stays():
    alone = plan_submit("ps1 of c", LATE, deadline("accept"), None, False)
    assert alone.allowed and "late policy: score 0 when late" in alone.message
    kept = plan_submit("ps1 of c", LATE, deadline("keep_on_time"), ON_TIME, False)
    assert kept.allowed and "stays the one graded" in kept.message


def test_the_newest_on_time_submission_is_found_in_the_students_cache(tmp_path: Path):
    for name in (
        "ana+ps1+2025-03-30 21:00:00.000000 UTC",
        "ana+ps1+2025-03-30 21:30:00.000000 UTC+rAnD0m",
        "ana+ps1+2025-03-30 22:10:00.000000 UTC",
        "ana+ps2+2025-03-30 21:45:00.000000 UTC",
        "bob+ps1+2025-03-30 21:50:00.000000 UTC",
    ):
        (tmp_path / name).mkdir()
    assert newest_on_time(tmp_path, "ana", "ps1", DUE) == ON_TIME
    assert newest_on_time(tmp_path, "ana", "ps1", datetime(2025, 3, 30, 20, tzinfo=UTC)) is None
    assert newest_on_time(tmp_path / "missing", "ana", "ps1", DUE) is None


def test_a_confirmation_counts_within_its_window_only(tmp_path: Path):
    assert not take_confirmation(tmp_path, "ana", "ps1", now=1000.0)  # asks, leaves a marker
    assert take_confirmation(tmp_path, "ana", "ps1", now=1000.0 + CONFIRM_WINDOW_S)
    assert not take_confirmation(tmp_path, "ana", "ps1", now=5000.0)  # used up: asks again
    assert not take_confirmation(tmp_path, "ana", "ps1", now=5001.0 + CONFIRM_WINDOW_S)


def test_the_after_due_rule_is_part_of_the_policy():
    assert parse_late_policy("zero").after_due == "accept"
    assert parse_late_policy("per_hour", "1", "keep_on_time") == LatePolicy(
        "per_hour", 1.0, "keep_on_time"
    )
    assert parse_late_policy("none", None, "refuse").describe().startswith("hard deadline")
    with pytest.raises(UsageError, match="after-due rule 'later' is unknown"):
        parse_late_policy("zero", None, "later")
