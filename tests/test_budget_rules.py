"""The weekly budget arithmetic (coursehub.meter.budget): week, hours left, decision."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from coursehub.errors import UsageError
from coursehub.meter.budget import (
    BudgetStatus,
    WeeklyBudget,
    budget_zone,
    effective_budget,
    first_rollup_day,
    parse_hours,
    refusal,
    status_from_json,
    status_to_json,
    week_reset,
    week_start,
)

PARIS = budget_zone("Europe/Paris")


def status(budget: WeeklyBudget, cpu_used: float, gpu_used: float = 0.0) -> BudgetStatus:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    return BudgetStatus(
        course_id="mlmeca-2026",
        username="p2501001",
        budget=budget,
        cpu_hours_used=cpu_used,
        gpu_hours_used=gpu_used,
        week_start=week_start(now, PARIS),
        resets_at=week_reset(now, PARIS),
        ask="the course's team (mbuffat)",
    )


def test_week_starts_on_monday_midnight_in_the_zone() -> None:
    # Sunday 23:30 UTC is already Monday 00:30 in Paris (winter, UTC+1)
    now = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
    start = week_start(now, PARIS)
    assert start == datetime(2026, 11, 30, 0, 0, tzinfo=PARIS)
    assert start.astimezone(UTC) == datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    # in UTC the same instant still belongs to the week before
    assert week_start(now, budget_zone("UTC")) == datetime(2026, 11, 23, tzinfo=UTC)
    assert first_rollup_day(now, PARIS) == date(2026, 11, 30)


def test_week_across_the_spring_dst_change_lasts_167_hours() -> None:
    # Paris moves to summer time on Sunday 2026-03-29 at 02:00
    now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    start, reset = week_start(now, PARIS), week_reset(now, PARIS)
    assert start.astimezone(UTC) == datetime(2026, 3, 22, 23, 0, tzinfo=UTC)
    assert reset.astimezone(UTC) == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)
    assert (reset.astimezone(UTC) - start.astimezone(UTC)).total_seconds() == 167 * 3600
    # the Monday after the change: a new week starting at 00:00 summer time
    after = datetime(2026, 3, 29, 22, 30, tzinfo=UTC)
    assert week_start(after, PARIS) == reset
    assert reset.utcoffset() is not None and reset.utcoffset().total_seconds() == 7200


def test_week_across_the_autumn_dst_change_lasts_169_hours() -> None:
    now = datetime(2026, 10, 25, 12, 0, tzinfo=UTC)  # Sunday of the change
    start, reset = week_start(now, PARIS), week_reset(now, PARIS)
    assert (reset.astimezone(UTC) - start.astimezone(UTC)).total_seconds() == 169 * 3600


def test_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        week_start(datetime(2026, 12, 3), PARIS)


def test_no_budget_is_unlimited() -> None:
    week = status(WeeklyBudget(), cpu_used=10_000.0, gpu_used=500.0)
    assert week.cpu_hours_left is None and week.gpu_hours_left is None
    assert refusal(week, gpus=1) is None


def test_hours_left_and_the_refusal_line() -> None:
    assert refusal(status(WeeklyBudget(cpu_hours=10), cpu_used=9.5)) is None
    assert status(WeeklyBudget(cpu_hours=10), cpu_used=9.5).cpu_hours_left == pytest.approx(0.5)
    line = refusal(status(WeeklyBudget(cpu_hours=10), cpu_used=10.25))
    assert line is not None and "\n" not in line
    assert "course mlmeca-2026" in line
    assert "weekly budget of 10 CPU-hours is used up" in line
    assert "10.2 CPU-hours since Mon 2026-11-30 00:00 CET" in line
    assert "resets on Mon 2026-12-07 00:00 CET" in line
    assert "ask the course's team (mbuffat)" in line


def test_gpu_budget_refuses_only_a_start_with_gpus() -> None:
    week = status(WeeklyBudget(cpu_hours=100, gpu_hours=2), cpu_used=1, gpu_used=2.5)
    assert refusal(week, gpus=0) is None
    line = refusal(week, gpus=1)
    assert line is not None and "2 GPU-hours is used up" in line


def test_override_wins_over_the_course_budget() -> None:
    course = WeeklyBudget(cpu_hours=10, gpu_hours=2)
    raised = effective_budget(course, WeeklyBudget(cpu_hours=30))
    assert raised == WeeklyBudget(cpu_hours=30, gpu_hours=2)
    assert effective_budget(course, None) == course
    assert refusal(status(raised, cpu_used=20)) is None
    assert refusal(status(course, cpu_used=20)) is not None


@pytest.mark.parametrize(
    ("value", "expected"), [("", None), (None, None), ("12", 12.0), (" 1.5 ", 1.5), (3, 3.0)]
)
def test_parse_hours_accepts(value: object, expected: float | None) -> None:
    assert parse_hours(value, "Weekly CPU-hours") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "must be more than 0"),
        ("0", "must be more than 0"),
        ("ten", "expected a number"),
        ("nan", "must be more than 0"),
        ("inf", "must be more than 0"),
        ("1e9", "at most 43008 hours"),
        (True, "expected a number"),
        ([1], "expected a number"),
    ],
)
def test_parse_hours_refuses(value: object, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        parse_hours(value, "Weekly CPU-hours")
    assert str(info.value).startswith("Weekly CPU-hours: ")


def test_unknown_zone_is_one_line() -> None:
    with pytest.raises(UsageError, match="COURSEHUB_BUDGET_TIMEZONE 'Mars/Olympus' is unknown"):
        budget_zone("Mars/Olympus")


def test_status_json_round_trip() -> None:
    week = status(WeeklyBudget(cpu_hours=10, gpu_hours=None), cpu_used=3.0)
    again = status_from_json(status_to_json(week))
    assert again == week
    assert again.week_start.utcoffset() == week.week_start.utcoffset()
    with pytest.raises(ValueError, match="budget status"):
        status_from_json({"course_id": "x"})
