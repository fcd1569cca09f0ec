"""Exams in and out of JSON: the fields of a new exam or an override, checked; what is shown.

Shared by ``coursehub exam`` (:mod:`coursehub.grading.examcli`) and the API
(:mod:`coursehub.web.api.exams`), so that both say the same thing about the
same bad input: every refusal is a :class:`coursehub.errors.UsageError`
whose message starts with the field's name (``duration_min: must be ...``),
:func:`field_of` reads it back.

Times are ISO 8601 (``2026-01-12T10:00``): without an offset they are wall-clock
times of the exam's zone (``timezone``, an IANA name; default the course's,
``COURSEHUB_GRADING_TIMEZONE``, as due dates are,
:func:`coursehub.grading.deadline.default_timezone`); shown as aware UTC ISO
8601 times plus the zone.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from coursehub.catalog.exams import Sitting, describe_exam
from coursehub.catalog.examtime import Allowance, Window, parse_moment, zone_named
from coursehub.catalog.models.exams import Exam
from coursehub.errors import UsageError


def field_of(error: UsageError, default: str = "body") -> str:
    """Return the field a refusal names (the text before its first ``:``), else ``default``."""
    head, sep, _ = str(error).partition(":")
    return head if sep and head.isidentifier() else default


def integer_field(fields: Mapping[str, Any], name: str, default: int | None = None) -> int:
    """Return the whole number ``fields[name]`` (an int or its text; missing: ``default``).

    Raises
    ------
    UsageError
        ``name``: missing without a default, a boolean, or not a whole number.
    """
    value = fields.get(name, default)
    if value is None:
        raise UsageError(f"{name}: is required (a whole number)")
    if isinstance(value, bool):
        raise UsageError(f"{name}: must be a whole number, got {value!r}")
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise UsageError(f"{name}: must be a whole number, got {value!r}") from None
    return number


def _moment(fields: Mapping[str, Any], name: str, timezone: str, required: bool) -> datetime | None:
    value = fields.get(name)
    if value is None or value == "":
        if required:
            raise UsageError(f"{name}: is required (a date and time such as 2026-01-12T10:00)")
        return None
    if not isinstance(value, str):
        raise UsageError(f"{name}: must be a date and time as text, got {value!r}")
    return parse_moment(value, timezone, name)


def zone_field(fields: Mapping[str, Any], default_zone: str) -> str:
    """Return the ``timezone`` field (default ``default_zone``), a known IANA zone.

    Raises
    ------
    UsageError
        ``timezone``: not text, or unknown.
    """
    zone = fields.get("timezone") or default_zone
    if not isinstance(zone, str):
        raise UsageError(f"timezone: must be a zone name such as Europe/Paris, got {zone!r}")
    return zone_named(zone).key


def window_from_fields(fields: Mapping[str, Any], default_zone: str) -> Window:
    """Return the :class:`Window` of ``opens_at``, ``duration_min``, ``hard_end``, ``timezone``.

    Raises
    ------
    UsageError
        Naming the first bad field (missing, malformed, unknown zone).
        Ranges are checked by :func:`coursehub.catalog.examtime.check_window`.
    """
    zone = zone_field(fields, default_zone)
    opens = _moment(fields, "opens_at", zone, required=True)
    duration = integer_field(fields, "duration_min")
    hard_end = _moment(fields, "hard_end", zone, required=True)
    assert opens is not None and hard_end is not None
    return Window(opens, duration, hard_end, zone)


def allowance_from_fields(fields: Mapping[str, Any], timezone: str) -> Allowance:
    """Return the :class:`Allowance` of ``extra_minutes``, ``extra_percent`` (default 0) and
    optional ``opens_at``/``hard_end`` (wall clock of the exam's ``timezone``).

    Raises
    ------
    UsageError
        Naming the first malformed field (ranges: ``check_allowance``).
    """
    return Allowance(
        integer_field(fields, "extra_minutes", 0),
        integer_field(fields, "extra_percent", 0),
        _moment(fields, "opens_at", timezone, required=False),
        _moment(fields, "hard_end", timezone, required=False),
    )


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def exam_clock_json(exam: Exam) -> dict[str, Any]:
    """The exam clock's settings (:mod:`coursehub.catalog.examsettings`):
    ``{"warn_before_min": 5, "fullscreen": "offered"}``, minutes and ``offered``/``required``."""
    return {"warn_before_min": exam.warn_before_min, "fullscreen": exam.fullscreen}


def exam_to_json(exam: Exam, course_id: str) -> dict[str, Any]:
    """An exam's JSON: times in aware UTC ISO 8601, the zone, whether there is a start code,
    the clock's settings (:func:`exam_clock_json`)."""
    return {
        "course_id": course_id,
        "assignment": exam.assignment,
        "opens_at": _iso(exam.opens_at),
        "duration_min": exam.duration_min,
        "hard_end": _iso(exam.hard_end),
        "timezone": exam.timezone,
        "start_code": exam.start_code_sha256 is not None,
        "allowed_imports": exam.allowed_imports,
        "allowed_networks": exam.allowed_networks,
        "release_at": _iso(exam.release_at),
        **exam_clock_json(exam),
        "created_by": exam.created_by,
        "created_at": _iso(exam.created_at),
        "summary": describe_exam(exam),
    }


def sitting_to_json(sitting: Sitting, now: datetime) -> dict[str, Any]:
    """A student's sitting: start, end, seconds left, extra time, who ended it (null: nobody),
    the latest autosave (null: none), the receipt (null: none)."""
    allowance = sitting.allowance
    receipt = None
    if sitting.receipt_sha256 is not None:
        receipt = {
            "submitted_at": _iso(sitting.submitted_at),
            "submission": sitting.submission,
            "sha256": sitting.receipt_sha256,
            "files": sitting.receipt_files or {},
            "final": sitting.final,
        }
    left = sitting.seconds_left(now)
    return {
        "username": sitting.username,
        "started_at": _iso(sitting.started_at),
        "ends_at": _iso(sitting.ends_at),
        "seconds_left": None if left is None else round(left),
        "extra_minutes": allowance.minutes,
        "extra_percent": allowance.percent,
        "added_minutes": sitting.added_minutes,
        "ended_by": sitting.ended_by,
        "last_saved_at": _iso(sitting.last_saved_at),
        "last_saved_sha256": sitting.last_saved_sha256,
        "receipt": receipt,
    }
