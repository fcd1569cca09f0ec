"""Usage reports from the daily rollup: per student, per day or per course.

All figures come from ``usage_days`` (:mod:`coursehub.catalog.models.usage`): one
grouped query per report, whatever the number of students.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from coursehub.catalog.models.usage import UsageDay
from coursehub.csvsafe import render_csv as render_csv_rows
from coursehub.errors import UsageError

#: The groupings of a report.
GROUPINGS = ("student", "day", "course")


@dataclass(frozen=True)
class ReportRow:
    """One line of a usage report.

    Attributes
    ----------
    course_id
        The course (``""`` in a per-day report over several courses).
    username
        The student (``""`` unless grouped by student).
    day
        ISO day (``""`` unless grouped by day).
    cpu_hours, gpu_hours
        CPU- and GPU-hours used.
    mem_peak_mib
        Largest peak memory of one server or job, in MiB.
    units
        Servers and jobs started.
    """

    course_id: str
    username: str
    day: str
    cpu_hours: float
    gpu_hours: float
    mem_peak_mib: float
    units: int


def parse_since(text: str | None) -> date | None:
    """Parse ``--since`` (``YYYY-MM-DD``); None stays None.

    Raises
    ------
    UsageError
        If the text is not an ISO date.
    """
    if text is None:
        return None
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since must be a date like 2026-09-01, got {text!r}") from None


def usage_report(
    session: Session,
    course_id: str | None = None,
    since: date | None = None,
    by: str = "student",
    username: str | None = None,
) -> list[ReportRow]:
    """Return the usage grouped ``by`` student, day or course (most CPU first; days in order).

    Parameters
    ----------
    course_id
        Only this course (None: every course).
    since
        Only days from this UTC day on.
    by
        ``student`` (course, student), ``day`` (day, over the courses in scope)
        or ``course``.
    username
        Only this student's days (None: everyone's).

    Raises
    ------
    UsageError
        If ``by`` is not one of :data:`GROUPINGS`.
    """
    if by not in GROUPINGS:
        raise UsageError(f"--by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    groupings: dict[str, list[InstrumentedAttribute[Any]]] = {
        "student": [UsageDay.course_id, UsageDay.username],
        "day": [UsageDay.day],
        "course": [UsageDay.course_id],
    }
    keys = groupings[by]
    query = select(
        *keys,
        func.sum(UsageDay.cpu_s),
        func.sum(UsageDay.gpu_s),
        func.max(UsageDay.mem_peak_bytes),
        func.sum(UsageDay.units),
    ).group_by(*keys)
    if course_id is not None:
        query = query.where(UsageDay.course_id == course_id)
    if since is not None:
        query = query.where(UsageDay.day >= since)
    if username is not None:
        query = query.where(UsageDay.username == username)
    rows = []
    for values in session.execute(query):
        *key, cpu_s, gpu_s, peak, units = values
        named = dict(zip([k.key for k in keys], key, strict=True))
        day = named.get("day")
        rows.append(
            ReportRow(
                course_id=named.get("course_id", course_id or ""),
                username=named.get("username", ""),
                day=day.isoformat() if isinstance(day, date) else "",
                cpu_hours=round((cpu_s or 0.0) / 3600, 6),
                gpu_hours=round((gpu_s or 0.0) / 3600, 6),
                mem_peak_mib=round((peak or 0) / 2**20, 1),
                units=int(units or 0),
            )
        )
    if by == "day":
        return sorted(rows, key=lambda r: r.day)
    return sorted(rows, key=lambda r: (-r.cpu_hours, r.course_id, r.username))


def _columns(by: str) -> list[str]:
    first = {"student": ["course_id", "username"], "day": ["day"], "course": ["course_id"]}[by]
    return [*first, "cpu_hours", "gpu_hours", "mem_peak_mib", "units"]


def render_csv(rows: list[ReportRow], by: str) -> str:
    """Return the report as spreadsheet-safe CSV (:mod:`coursehub.csvsafe`) with a header."""
    columns = _columns(by)
    return render_csv_rows([columns, *([asdict(r)[c] for c in columns] for r in rows)])


def render_json(rows: list[ReportRow], by: str) -> str:
    """Return the report as a JSON list of objects (the CSV's columns)."""
    columns = _columns(by)
    return json.dumps([{c: asdict(r)[c] for c in columns} for r in rows], indent=1) + "\n"


def render_table(rows: list[ReportRow], by: str) -> str:
    """Return the report as aligned text columns (``no usage recorded`` when empty)."""
    if not rows:
        return "no usage recorded\n"
    columns = _columns(by)
    cells = [columns, *([str(asdict(r)[c]) for c in columns] for r in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() + "\n"
        for line in cells
    )
