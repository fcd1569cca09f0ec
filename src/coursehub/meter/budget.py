"""Weekly compute budgets: the week, the hours used, what remains, the decision (pure).

A course may give each student a weekly budget of CPU-hours and of GPU-hours
(catalog migration ``0012``); its team may raise it for one student (an
override). The week starts on Monday 00:00 in the budget time zone
(``COURSEHUB_BUDGET_TIMEZONE``, an IANA name, default ``UTC``) and ends on the
next Monday 00:00 there, so a week across a daylight-saving change lasts 167
or 169 hours (Python documentation, :mod:`zoneinfo`: wall-clock arithmetic on
aware datetimes of one zone). The hours used come from the catalog's daily
rollup (``usage_days``, per UTC day, :mod:`coursehub.catalog.models.usage`):
the days counted are the UTC days from the week's Monday on
(:func:`first_rollup_day`).

One decision for every side: the course app's pages, the spawn-time rule of
the hub (:mod:`coursehub.spawn.budgetcheck`) and the runner's admission
(:mod:`coursehub.runner.budgetgate`) all call :func:`refusal`. A budget used
up never stops what runs: it refuses the next start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from coursehub.errors import UsageError

#: Budget time zone when ``COURSEHUB_BUDGET_TIMEZONE`` is unset.
DEFAULT_TIMEZONE = "UTC"
#: The largest weekly budget accepted, in hours: a whole week on 256 CPUs or GPUs.
MAX_HOURS = 168.0 * 256


@dataclass(frozen=True)
class WeeklyBudget:
    """Hours per student per week; None: no limit.

    Attributes
    ----------
    cpu_hours
        CPU-hours (CPU-seconds / 3600, as the usage pages count them).
    gpu_hours
        GPU-hours (the time GPUs are held, docs/usage.md).
    """

    cpu_hours: float | None = None
    gpu_hours: float | None = None

    @property
    def unlimited(self) -> bool:
        """True when neither resource has a budget."""
        return self.cpu_hours is None and self.gpu_hours is None


def budget_zone(name: str | None) -> ZoneInfo:
    """Return the IANA zone ``name`` (empty or None: :data:`DEFAULT_TIMEZONE`).

    Raises
    ------
    UsageError
        For an unknown zone name.
    """
    text = (name or "").strip() or DEFAULT_TIMEZONE
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"COURSEHUB_BUDGET_TIMEZONE {text!r} is unknown: use a name such as Europe/Paris or UTC"
        ) from None


def parse_hours(value: Any, field: str) -> float | None:
    """Return a weekly budget in hours from a form, the CLI or JSON (empty or None: no budget).

    Parameters
    ----------
    value
        A number, its text, or ``None`` / ``""``.
    field
        The field's name as the user sees it, used in the message.

    Raises
    ------
    UsageError
        Not a number, not finite, zero or negative, or over :data:`MAX_HOURS`.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise UsageError(f"{field}: expected a number of hours, got {value!r}")
    try:
        hours = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise UsageError(f"{field}: expected a number of hours, got {value!r}") from None
    if not math.isfinite(hours) or hours <= 0:
        raise UsageError(f"{field}: must be more than 0 hours, got {value!r} (empty: no budget)")
    if hours > MAX_HOURS:
        raise UsageError(f"{field}: at most {MAX_HOURS:g} hours a week, got {value!r}")
    return hours


def week_start(now: datetime, zone: ZoneInfo) -> datetime:
    """Return the Monday 00:00 in ``zone`` that starts the week of ``now`` (aware).

    Raises
    ------
    ValueError
        If ``now`` is naive.
    """
    if now.tzinfo is None:
        raise ValueError("week_start needs an aware datetime")
    local = now.astimezone(zone)
    monday = local.date() - timedelta(days=local.weekday())
    return datetime.combine(monday, time(0, 0), tzinfo=zone)


def week_reset(now: datetime, zone: ZoneInfo) -> datetime:
    """Return the next Monday 00:00 in ``zone``: when the budget of ``now``'s week starts again."""
    start = week_start(now, zone)
    return datetime.combine(start.date() + timedelta(days=7), time(0, 0), tzinfo=zone)


def first_rollup_day(now: datetime, zone: ZoneInfo) -> date:
    """Return the first UTC day of ``usage_days`` counted in ``now``'s week (its Monday's date)."""
    return week_start(now, zone).date()


def effective_budget(course: WeeklyBudget, override: WeeklyBudget | None) -> WeeklyBudget:
    """Return a student's budget: the override's figure where it has one, else the course's."""
    if override is None:
        return course
    return WeeklyBudget(
        cpu_hours=course.cpu_hours if override.cpu_hours is None else override.cpu_hours,
        gpu_hours=course.gpu_hours if override.gpu_hours is None else override.gpu_hours,
    )


@dataclass(frozen=True)
class BudgetStatus:
    """One student's week in one course.

    Attributes
    ----------
    course_id, username
        Whose week.
    budget
        The student's budget (:func:`effective_budget`).
    cpu_hours_used, gpu_hours_used
        Hours used since :attr:`week_start` (the rollup's days, :func:`first_rollup_day`).
    week_start, resets_at
        Monday 00:00 of this week and of the next, aware, in the budget zone.
    ask
        Who can raise the budget ("the course's team: alice, bob").
    """

    course_id: str
    username: str
    budget: WeeklyBudget
    cpu_hours_used: float
    gpu_hours_used: float
    week_start: datetime
    resets_at: datetime
    ask: str = "the course's team"

    @property
    def cpu_hours_left(self) -> float | None:
        """CPU-hours left this week (never below 0); None without a CPU budget."""
        return _left(self.budget.cpu_hours, self.cpu_hours_used)

    @property
    def gpu_hours_left(self) -> float | None:
        """GPU-hours left this week (never below 0); None without a GPU budget."""
        return _left(self.budget.gpu_hours, self.gpu_hours_used)


def _left(budget: float | None, used: float) -> float | None:
    return None if budget is None else max(0.0, budget - used)


def refusal(status: BudgetStatus, gpus: int = 0) -> str | None:
    """Return the one line refusing a start, or None when the budget allows it.

    Parameters
    ----------
    status
        The student's week.
    gpus
        GPUs the start asks for: a GPU budget used up refuses only a start with GPUs.
    """
    spent = []
    if status.cpu_hours_left == 0.0:
        spent.append(("CPU", status.budget.cpu_hours, status.cpu_hours_used))
    if gpus > 0 and status.gpu_hours_left == 0.0:
        spent.append(("GPU", status.budget.gpu_hours, status.gpu_hours_used))
    if not spent:
        return None
    kind, budget, used = spent[0]
    since = _when(status.week_start)
    return (
        f"course {status.course_id}: the weekly budget of {budget:g} {kind}-hours is used up"
        f" ({used:.1f} {kind}-hours since {since}); it resets on {_when(status.resets_at)};"
        f" ask {status.ask} to raise it"
    )


def _when(moment: datetime) -> str:
    return f"{moment:%a %Y-%m-%d %H:%M} {moment.tzname()}"


def status_to_json(status: BudgetStatus) -> dict[str, Any]:
    """Return ``status`` as JSON (the API's answer, read back by :func:`status_from_json`)."""
    return {
        "course_id": status.course_id,
        "username": status.username,
        "cpu_hours": status.budget.cpu_hours,
        "gpu_hours": status.budget.gpu_hours,
        "cpu_hours_used": round(status.cpu_hours_used, 6),
        "gpu_hours_used": round(status.gpu_hours_used, 6),
        "cpu_hours_left": status.cpu_hours_left,
        "gpu_hours_left": status.gpu_hours_left,
        "week_start": status.week_start.isoformat(),
        "resets_at": status.resets_at.isoformat(),
        "zone": str(status.week_start.tzinfo),
        "ask": status.ask,
    }


def status_from_json(data: Any) -> BudgetStatus:
    """Read back :func:`status_to_json`.

    Raises
    ------
    ValueError
        A field missing or of the wrong type.
    """
    if not isinstance(data, dict):
        raise ValueError("a budget status is a JSON object")
    try:
        zone = budget_zone(str(data["zone"]))
        return BudgetStatus(
            course_id=str(data["course_id"]),
            username=str(data["username"]),
            budget=WeeklyBudget(_hours(data["cpu_hours"]), _hours(data["gpu_hours"])),
            cpu_hours_used=float(data["cpu_hours_used"]),
            gpu_hours_used=float(data["gpu_hours_used"]),
            week_start=datetime.fromisoformat(data["week_start"]).astimezone(zone),
            resets_at=datetime.fromisoformat(data["resets_at"]).astimezone(zone),
            ask=str(data.get("ask") or "the course's team"),
        )
    except (KeyError, TypeError, UsageError) as exc:
        raise ValueError(f"a budget status: {exc}") from None


def _hours(value: Any) -> float | None:
    return None if value is None else float(value)
