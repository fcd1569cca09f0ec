"""What a student's browser reports during their exam: leaving full screen, hiding the tab.

The exam clock in JupyterLab (``labextension/``) posts, through the exam
server (:mod:`coursehub.examroom.clock`), the events of the browser's
Fullscreen API (``fullscreenchange``) and Page Visibility API
(``visibilitychange``), and the window's ``blur``. They are kept in
``exam_events`` (:class:`coursehub.catalog.models.exams.ExamEvent`) with the
server's time, for the course's team to read.

A browser is the student's and is not trusted: the student is the caller of
the API (never a name in the body), an event is taken only during their own
sitting (started, end not reached), its kind is one of
:data:`BROWSER_EVENT_KINDS`, and a student cannot flood the table: at most
:data:`MAX_PER_MINUTE` events a minute and :data:`MAX_PER_SITTING` in all
(:func:`plan_event_admission`). Every exam event, the browser's or the
server's, is written by :func:`record_event`. Nothing here commits: the
caller's transaction does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError
from coursehub.catalog.exams import course_student, sitting_of
from coursehub.catalog.models.courses import Course, Person
from coursehub.catalog.models.exams import Exam, ExamEvent
from coursehub.errors import UsageError

#: Kinds a browser may report, with what each means.
BROWSER_EVENT_KINDS: Mapping[str, str] = {
    "fullscreen-enter": "entered full screen",
    "fullscreen-exit": "left full screen",
    "tab-hidden": "hid the exam's tab (another tab, another window, minimised)",
    "tab-visible": "came back to the exam's tab",
    "window-blur": "the exam's window lost the focus",
}
#: Longest ``detail``, in characters (the column's size).
MAX_DETAIL = 255
#: Events one student may report in any minute, and in their whole sitting.
MAX_PER_MINUTE = 30
MAX_PER_SITTING = 600


class EventLimitError(ConflictError):
    """A student reported more events than :data:`MAX_PER_MINUTE` or :data:`MAX_PER_SITTING`."""


def check_event_fields(fields: Mapping[str, Any]) -> tuple[str, str]:
    """Return ``(kind, detail)`` of a reported event's fields (pure).

    Raises
    ------
    UsageError
        ``kind``: missing, or not one of :data:`BROWSER_EVENT_KINDS`;
        ``detail``: not text, or longer than :data:`MAX_DETAIL` characters.
    """
    kind = fields.get("kind")
    if kind not in BROWSER_EVENT_KINDS:
        known = ", ".join(BROWSER_EVENT_KINDS)
        raise UsageError(f"kind: must be one of {known}, got {kind!r}")
    detail = fields.get("detail", "")
    if not isinstance(detail, str):
        raise UsageError(f"detail: must be text, got {detail!r}")
    if len(detail) > MAX_DETAIL:
        raise UsageError(f"detail: at most {MAX_DETAIL} characters, got {len(detail)}")
    return str(kind), " ".join(detail.split())


def plan_event_admission(last_minute: int, in_all: int) -> str | None:
    """Return why one more event is refused, or None when it is taken (pure).

    ``last_minute``: the student's events of the last 60 s; ``in_all``: of
    their sitting.
    """
    if in_all >= MAX_PER_SITTING:
        return f"at most {MAX_PER_SITTING} events are kept for one sitting"
    if last_minute >= MAX_PER_MINUTE:
        return f"at most {MAX_PER_MINUTE} events a minute; this one is not kept"
    return None


def _count(session: Session, exam: Exam, person_pk: int, since: datetime | None) -> int:
    query = select(func.count(ExamEvent.id)).where(
        ExamEvent.exam_pk == exam.id, ExamEvent.person_pk == person_pk
    )
    if since is not None:
        query = query.where(ExamEvent.at > since)
    return int(session.scalar(query) or 0)


def record_event(
    session: Session,
    course: Course,
    exam: Exam,
    username: str,
    kind: str,
    detail: str,
    now: datetime,
) -> ReportedEvent:
    """Keep an event of ``username``'s sitting of ``exam``: ``kind`` at ``now`` (aware UTC).

    The one place where exam events are written: the browser's
    (:func:`record_browser_event`), a start from outside the allowed networks
    (:func:`coursehub.catalog.examproctor.note_outside_start`), a server
    reopened by a proctor (:func:`coursehub.catalog.examproctor.note_reopen`).
    ``detail`` is cut to :data:`MAX_DETAIL` characters. Nothing is checked
    about the sitting: the caller decides whether the event is taken.

    Raises
    ------
    UsageError
        ``username``: not a student of the course.
    """
    person, _ = course_student(session, course, username)
    detail = detail[:MAX_DETAIL]
    session.add(ExamEvent(exam_pk=exam.id, person_pk=person.id, at=now, kind=kind, detail=detail))
    session.flush()
    return ReportedEvent(person.username, now, kind, detail)


def record_browser_event(
    session: Session,
    course: Course,
    exam: Exam,
    username: str,
    fields: Mapping[str, Any],
    now: datetime,
) -> ReportedEvent:
    """Keep an event that ``username``'s browser reported during their sitting of ``exam``.

    Raises
    ------
    UsageError
        Not a student of the course; a bad ``kind`` or ``detail``
        (:func:`check_event_fields`).
    ConflictError
        The student's exam is not running (not started, or their end passed).
    EventLimitError
        Too many events (:func:`plan_event_admission`).
    """
    kind, detail = check_event_fields(fields)
    person, _ = course_student(session, course, username)
    sitting = sitting_of(session, course, exam, username)
    if sitting.started_at is None or not sitting.seconds_left(now):
        raise ConflictError(f"{exam.assignment}: {person.username}'s exam is not running")
    recent = _count(session, exam, person.id, now - timedelta(seconds=60))
    refusal = plan_event_admission(recent, _count(session, exam, person.id, None))
    if refusal is not None:
        raise EventLimitError(f"{exam.assignment}: {refusal}")
    return record_event(session, course, exam, username, kind, detail, now)


def list_events(session: Session, exam: Exam, username: str | None = None) -> list[ReportedEvent]:
    """Return the exam's events (one student's with ``username``), oldest first."""
    query = (
        select(Person.username, ExamEvent)
        .join(Person, Person.id == ExamEvent.person_pk)
        .where(ExamEvent.exam_pk == exam.id)
        .order_by(ExamEvent.at, ExamEvent.id)
    )
    if username is not None:
        query = query.where(Person.username == username)
    return [
        ReportedEvent(name, event.at, event.kind, event.detail)
        for name, event in session.execute(query).all()
    ]


@dataclass(frozen=True)
class ReportedEvent:
    """One event of a sitting: who, when (aware UTC), what."""

    username: str
    at: datetime
    kind: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        """The event's JSON: ``at`` in aware UTC ISO 8601."""
        return {
            "username": self.username,
            "at": self.at.isoformat(),
            "kind": self.kind,
            "detail": self.detail,
        }
