"""CPU- and GPU-hours per course and per portal for one academic year (admins, portal managers).

A course belongs to one academic year (its ``course_id`` names it), so a
course's figures for the year are all of its rows in ``usage_days``
(:mod:`coursehub.catalog.models.usage`), whatever their dates: one grouped query
over the year's courses. Days older than the rollup's retention (five years)
are gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from coursehub.catalog.models.usage import UsageDay
from coursehub.csvsafe import render_csv

#: Columns of the CSV export, in order.
CSV_COLUMNS = ("portal", "course_id", "title", "cpu_hours", "gpu_hours", "units")


@dataclass(frozen=True)
class CourseHours:
    """One course's usage for its year.

    Attributes
    ----------
    portal, course_id, title
        The course.
    cpu_hours, gpu_hours
        CPU-hours used and GPU-hours held by its servers and runner jobs.
    units
        Servers and jobs started.
    """

    portal: str
    course_id: str
    title: str
    cpu_hours: float
    gpu_hours: float
    units: int


@dataclass(frozen=True)
class PortalHours:
    """A portal's total over its courses of the year (``courses``: how many)."""

    portal: str
    courses: int
    cpu_hours: float
    gpu_hours: float
    units: int


def course_seconds(
    session: Session, course_ids: Iterable[str]
) -> dict[str, tuple[float, float, int]]:
    """Return ``course_id -> (CPU-seconds, GPU-seconds, units)`` summed over every day kept.

    Courses without usage are absent. One grouped query per 500 courses.
    """
    ids = sorted(set(course_ids))
    totals: dict[str, tuple[float, float, int]] = {}
    for start in range(0, len(ids), 500):
        query = (
            select(
                UsageDay.course_id,
                func.sum(UsageDay.cpu_s),
                func.sum(UsageDay.gpu_s),
                func.sum(UsageDay.units),
            )
            .where(UsageDay.course_id.in_(ids[start : start + 500]))
            .group_by(UsageDay.course_id)
        )
        for course_id, cpu_s, gpu_s, units in session.execute(query):
            totals[course_id] = (float(cpu_s or 0.0), float(gpu_s or 0.0), int(units or 0))
    return totals


def plan_course_hours(
    courses: Sequence[tuple[str, str, str]],
    seconds: Mapping[str, tuple[float, float, int]],
) -> list[CourseHours]:
    """Return one row per course, zeros where nothing was used (pure).

    Parameters
    ----------
    courses
        ``(portal code, course_id, title)`` of the year's courses in scope.
    seconds
        :func:`course_seconds`.

    Returns
    -------
    list of CourseHours
        By portal, then most CPU-hours first, then course id.
    """
    rows = []
    for portal, course_id, title in courses:
        cpu_s, gpu_s, units = seconds.get(course_id, (0.0, 0.0, 0))
        cpu_hours, gpu_hours = round(cpu_s / 3600, 3), round(gpu_s / 3600, 3)
        rows.append(CourseHours(portal, course_id, title, cpu_hours, gpu_hours, units))
    return sorted(rows, key=lambda r: (r.portal, -r.cpu_hours, r.course_id))


def plan_portal_totals(rows: Iterable[CourseHours]) -> list[PortalHours]:
    """Return each portal's totals over ``rows``, by portal code (pure)."""
    totals: dict[str, PortalHours] = {}
    for row in rows:
        seen = totals.get(row.portal, PortalHours(row.portal, 0, 0.0, 0.0, 0))
        totals[row.portal] = PortalHours(
            row.portal,
            seen.courses + 1,
            round(seen.cpu_hours + row.cpu_hours, 3),
            round(seen.gpu_hours + row.gpu_hours, 3),
            seen.units + row.units,
        )
    return [totals[code] for code in sorted(totals)]


def render_hours_csv(rows: Iterable[CourseHours]) -> str:
    """Return the rows as spreadsheet-safe CSV (:mod:`coursehub.csvsafe`), header first."""
    return render_csv([list(CSV_COLUMNS), *([asdict(r)[c] for c in CSV_COLUMNS] for r in rows)])
