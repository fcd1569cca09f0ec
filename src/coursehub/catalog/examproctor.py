"""What a proctor does during an exam beyond extra time: end a student's time, see their saves.

* :func:`end_sitting`: a proctor ends one student's time now (the student
  left, was caught cheating, or asked to hand in early). Their end becomes
  now (:attr:`coursehub.catalog.models.exams.ExamSession.ended_at`, which
  :func:`coursehub.catalog.exams.sitting_of` applies); the bell then submits
  their work as for anyone whose time is up, and any later submission is
  refused as after the end.
* :func:`record_save`: the autosave (``coursehub exam snapshot``) records the
  time and the SHA-256 of each student's latest copy, which the proctor's
  table shows as their last save.
* :func:`count_wrong_code`: a wrong start code counted, in the caller's
  own transaction (:mod:`coursehub.catalog.examcodes`).
* :func:`schedule_release`: when the exam's scores and feedback are
  released (``coursehub exam release-due``, from a timer, releases them).
* :func:`note_outside_start`: a start refused because it came from outside
  the exam's allowed networks (:mod:`coursehub.catalog.examnetworks`),
  recorded as an exam event (``sign-in-outside``) for the proctor.
* :func:`check_reopen` and :func:`note_reopen`: a proctor reopens the exam
  server of a student whose server crashed (:mod:`coursehub.grading.examreopen`
  asks the hub); only during the student's own time, which stays as it was,
  and recorded as an exam event (``server-reopened``, by whom).

Exam events are written by :func:`coursehub.catalog.examevents.record_event`.

Nothing here commits: the caller's transaction does.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.examcodes import note_wrong_code
from coursehub.catalog.examevents import ReportedEvent, record_event
from coursehub.catalog.exams import Sitting, course_student, sitting_of
from coursehub.catalog.examtime import format_moment
from coursehub.catalog.models.courses import Course
from coursehub.catalog.models.exams import Exam, ExamSession
from coursehub.errors import UsageError


def _session_row(session: Session, course: Course, exam: Exam, username: str) -> ExamSession:
    person, _ = course_student(session, course, username)
    row = session.scalar(
        select(ExamSession).where(
            ExamSession.exam_pk == exam.id, ExamSession.person_pk == person.id
        )
    )
    if row is None:
        raise UsageError(f"username: {person.username} has not started {exam.assignment}")
    return row


def end_sitting(
    session: Session, course: Course, exam: Exam, username: str, ended_by: str, now: datetime
) -> Sitting:
    """End ``username``'s time at ``now`` (aware UTC); return their sitting.

    Raises
    ------
    UsageError
        ``username``: not a student of the course, has not started, or their
        time is over already (saying when it ended).
    """
    sitting = sitting_of(session, course, exam, username)
    row = _session_row(session, course, exam, username)
    if sitting.ends_at is not None and sitting.ends_at <= now:
        when = format_moment(sitting.ends_at, exam.timezone)
        raise UsageError(f"username: {sitting.username}'s time is over already (ended {when})")
    row.ended_at, row.ended_by = now, ended_by
    session.flush()
    return sitting_of(session, course, exam, username)


def record_save(
    session: Session, course: Course, exam: Exam, username: str, saved_at: datetime, sha256: str
) -> None:
    """Record the latest autosave of ``username``'s exam home: when (aware UTC), its SHA-256.

    Raises
    ------
    UsageError
        ``username``: not a student of the course, or has not started.
    """
    row = _session_row(session, course, exam, username)
    row.last_saved_at, row.last_saved_sha256 = saved_at, sha256
    session.flush()


def count_wrong_code(
    session: Session, course: Course, exam: Exam, username: str, now: datetime
) -> int:
    """Count a wrong start code of ``username`` at ``now``; return their count in a row."""
    person, _ = course_student(session, course, username)
    return note_wrong_code(session, exam.id, person.id, now)


#: The event kind of a start from outside the exam's allowed networks.
OUTSIDE_START = "sign-in-outside"


def note_outside_start(
    session: Session, course: Course, exam: Exam, username: str, address: str, now: datetime
) -> None:
    """Record that ``username`` tried to start ``exam`` from ``address``, outside its networks.

    Raises
    ------
    UsageError
        ``username``: not a student of the course.
    """
    detail = f"start from {address or 'an unknown address'}"
    record_event(session, course, exam, username, OUTSIDE_START, detail, now)


#: The event kind of a student's exam server reopened by a proctor.
REOPENED = "server-reopened"


def check_reopen(
    session: Session, course: Course, exam: Exam, username: str, now: datetime
) -> Sitting:
    """Return ``username``'s sitting if their exam server may be reopened at ``now`` (aware UTC).

    A server is reopened only during the student's own time: started, end
    not reached (the end itself, never past the hard end, is not moved), and
    not submitted at the bell.

    Raises
    ------
    UsageError
        ``username``: not a student of the course, has not started, was
        submitted at the bell, or their time is over (saying when it ended
        and who ended it).
    """
    sitting = sitting_of(session, course, exam, username)
    name = sitting.username
    if sitting.started_at is None or sitting.ends_at is None:
        raise UsageError(f"username: {name} has not started {exam.assignment}: nothing to reopen")
    if sitting.final:
        raise UsageError(
            f"username: {name}'s {exam.assignment} was submitted at the bell: nothing to reopen"
        )
    if sitting.ends_at <= now:
        when = format_moment(sitting.ends_at, exam.timezone)
        by = f" by {sitting.ended_by}" if sitting.ended_by else ""
        raise UsageError(
            f"username: {name}'s time on {exam.assignment} is over (ended {when}{by}): "
            "nothing to reopen"
        )
    return sitting


def note_reopen(
    session: Session,
    course: Course,
    exam: Exam,
    username: str,
    reopened_by: str,
    outcome: str,
    now: datetime,
) -> ReportedEvent:
    """Record that ``reopened_by`` reopened ``username``'s exam server at ``now`` (aware UTC).

    ``outcome`` is what the hub did (:func:`coursehub.grading.examreopen.restart_exam_server`).

    Raises
    ------
    UsageError
        ``username``: not a student of the course.
    """
    detail = f"by {reopened_by}: {outcome}"
    return record_event(session, course, exam, username, REOPENED, detail, now)


def schedule_release(exam: Exam, when: datetime | None) -> list[str]:
    """Set when ``exam``'s scores and feedback are released (None: by hand); return warnings.

    A time before the exam's hard end is kept, with a warning: feedback
    released while students may still sit the exam would show them answers.
    """
    exam.release_at = when
    if when is None or when >= exam.hard_end:
        return []
    release, hard_end = (format_moment(t, exam.timezone) for t in (when, exam.hard_end))
    return [
        f"the release ({release}) is before the hard end ({hard_end}): "
        "students still sitting it could read the feedback"
    ]
