"""A student's week in a course: the budget, the hours used since Monday, what is left.

The hours are the usage report's (:func:`coursehub.usage.report.usage_report`
grouped by student, from the week's first rollup day,
:func:`coursehub.meter.budget.first_rollup_day`), so the student's page, the
API, the spawn-time rule and the runner's admission read the figures the
course's Usage page shows. The budget is the course's, or the student's
override (:mod:`coursehub.catalog.budgets`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from coursehub.catalog.budgets import course_budget, override_of, who_to_ask
from coursehub.catalog.models.courses import Course
from coursehub.meter.budget import (
    BudgetStatus,
    budget_zone,
    effective_budget,
    first_rollup_day,
    week_reset,
    week_start,
)
from coursehub.usage.report import usage_report

#: The variable naming the budget's time zone (IANA), read by :func:`zone_from_env`.
ZONE_VAR = "COURSEHUB_BUDGET_TIMEZONE"


def zone_from_env(environ: Mapping[str, str] | None = None) -> ZoneInfo:
    """Return the zone of ``COURSEHUB_BUDGET_TIMEZONE`` (unset: UTC).

    Raises
    ------
    UsageError
        For an unknown zone name.
    """
    env = os.environ if environ is None else environ
    return budget_zone(env.get(ZONE_VAR))


def hours_this_week(
    session: Session, course_id: str, username: str, now: datetime, zone: ZoneInfo
) -> tuple[float, float]:
    """Return ``(CPU-hours, GPU-hours)`` of ``username`` in ``course_id`` since Monday."""
    since = first_rollup_day(now, zone)
    rows = usage_report(session, course_id, since=since, by="student", username=username)
    return (sum(r.cpu_hours for r in rows), sum(r.gpu_hours for r in rows))


def budget_status(
    session: Session,
    course: Course,
    username: str,
    zone: ZoneInfo,
    now: datetime | None = None,
) -> BudgetStatus:
    """Return ``username``'s week in ``course`` (their override, else the course's budget)."""
    now = now or datetime.now(UTC)
    cpu_h, gpu_h = hours_this_week(session, course.course_id, username, now, zone)
    return BudgetStatus(
        course_id=course.course_id,
        username=username,
        budget=effective_budget(course_budget(course), override_of(session, course, username)),
        cpu_hours_used=cpu_h,
        gpu_hours_used=gpu_h,
        week_start=week_start(now, zone),
        resets_at=week_reset(now, zone),
        ask=who_to_ask(session, course),
    )
