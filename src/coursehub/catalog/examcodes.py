"""Wrong start codes: a student who keeps guessing is paused.

A start code is announced in the room; without a limit, a short one can be
guessed through the API in seconds. After :data:`MAX_WRONG_CODES` wrong codes
in a row, a student's next start is refused until :data:`PAUSE_MIN` minutes
after the last one, whatever code they give (the rule of OWASP's
"Blocking Brute Force Attacks": a per-account delay). A right code clears the
count; a start without a code (forgotten) is not counted. The counts are in
the catalog (:class:`coursehub.catalog.models.exams.ExamCodeFailure`), so
every worker of the course app and every computer shares them. Nothing here
commits: the caller's transaction does.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from coursehub.catalog.models.exams import ExamCodeFailure
from coursehub.errors import UsageError

#: Wrong codes in a row before a pause.
MAX_WRONG_CODES = 5
#: Minutes of the pause, counted from the last wrong code.
PAUSE_MIN = 10


class WrongStartCodeError(UsageError):
    """A start refused for a wrong start code: the caller records it (:func:`note_wrong_code`)
    in a transaction of its own, since the refused start's is rolled back."""


def paused_until(session: Session, exam_pk: int, person_pk: int, now: datetime) -> datetime | None:
    """Return until when the student's starts are paused (aware UTC), None if they are not."""
    row = session.scalar(
        select(ExamCodeFailure).where(
            ExamCodeFailure.exam_pk == exam_pk, ExamCodeFailure.person_pk == person_pk
        )
    )
    if row is None or row.failures < MAX_WRONG_CODES:
        return None
    until = row.last_failed_at + timedelta(minutes=PAUSE_MIN)
    return until if now < until else None


def note_wrong_code(session: Session, exam_pk: int, person_pk: int, now: datetime) -> int:
    """Count one wrong code of the student at ``now``; return their count in a row.

    After a pause has run out, the count starts again from 1.
    """
    row = session.scalar(
        select(ExamCodeFailure).where(
            ExamCodeFailure.exam_pk == exam_pk, ExamCodeFailure.person_pk == person_pk
        )
    )
    if row is None:
        row = ExamCodeFailure(exam_pk=exam_pk, person_pk=person_pk, failures=0, last_failed_at=now)
        session.add(row)
    elif row.failures >= MAX_WRONG_CODES:  # the pause is over (a paused start never gets here)
        row.failures = 0
    row.failures += 1
    row.last_failed_at = now
    session.flush()
    return row.failures


def clear_wrong_codes(session: Session, exam_pk: int, person_pk: int) -> None:
    """Forget the student's wrong codes (a right code was given)."""
    session.execute(
        delete(ExamCodeFailure).where(
            ExamCodeFailure.exam_pk == exam_pk, ExamCodeFailure.person_pk == person_pk
        )
    )
