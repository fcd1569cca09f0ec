"""A course's exams in the catalog: create, list, overrides, each student's start and receipt.

The tables: :mod:`coursehub.catalog.models.exams` (migration ``0013``); the
timing rules (pure): :mod:`coursehub.catalog.examtime`. A student's start is
recorded here, by the server, at the moment they start
(:func:`start_exam`): their end is computed from it whenever it is asked for
(:func:`sitting_of`), so it survives a closed browser, a crashed server and a
change of computer, and follows an override or time added later. Nothing
here commits: the caller's transaction does. Overrides are set in
:mod:`coursehub.catalog.examoverrides`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError, NotFoundError
from coursehub.catalog.examcodes import (
    MAX_WRONG_CODES,
    WrongStartCodeError,
    clear_wrong_codes,
    paused_until,
)
from coursehub.catalog.examimports import parse_import_list
from coursehub.catalog.examnetworks import parse_networks
from coursehub.catalog.examsettings import parse_fullscreen, parse_warn_before, settings_note
from coursehub.catalog.examtime import (
    MAX_EXTRA_MIN,
    Allowance,
    Window,
    check_window,
    format_moment,
    hash_code,
    pick_allowance,
    plan_end,
    plan_start,
)
from coursehub.catalog.models.courses import Course, Membership, Person, Role
from coursehub.catalog.models.exams import Exam, ExamOverride, ExamSession
from coursehub.catalog.people import normalize_username
from coursehub.errors import UsageError

#: An nbgrader assignment name as coursehub's grading accepts it (no '/', '+', '*', spaces).
ASSIGNMENT_PATTERN = re.compile(r"^[^./\\+*\s][^/\\+*\s]{0,63}$")


def window_of(exam: Exam) -> Window:
    """Return the exam's :class:`Window`."""
    return Window(exam.opens_at, exam.duration_min, exam.hard_end, exam.timezone)


def create_exam(
    session: Session,
    course: Course,
    assignment: str,
    window: Window,
    created_by: str,
    start_code: str | None = None,
    now: datetime | None = None,
    allowed_imports: str | None = None,
    allowed_networks: str | None = None,
    warn_before_min: int | str | None = None,
    fullscreen: str | None = None,
) -> Exam:
    """Make the nbgrader assignment ``assignment`` of ``course`` an exam sat in ``window``.

    ``allowed_imports``: the top-level modules its exam kernels may import
    besides the standard library (``"numpy, pandas"``; None or "": no list).
    ``allowed_networks``: the address ranges students may start it from
    (``"192.0.2.0/24"``; None or "": anywhere, :mod:`coursehub.catalog.examnetworks`).
    ``warn_before_min``, ``fullscreen``: the exam clock's settings (None: the
    defaults, 5 minutes and ``offered``; :mod:`coursehub.catalog.examsettings`).

    Raises
    ------
    UsageError
        ``assignment``: not a valid name; the window's fields
        (:func:`coursehub.catalog.examtime.check_window`); ``start_code``: blank;
        ``allowed_imports``: a name that is not a module name;
        ``allowed_networks``: an entry that is not a network; ``warn_before_min``:
        not 0 to ``duration_min``; ``fullscreen``: not ``offered`` or ``required``.
    ConflictError
        If the course already has an exam of that assignment.
    """
    if not ASSIGNMENT_PATTERN.match(assignment or ""):
        raise UsageError(
            f"assignment: {assignment!r} must be 1 to 64 characters, without '/', '+', '*' "
            "or spaces, not starting with '.'"
        )
    check_window(window)
    if start_code is not None and not start_code.strip():
        raise UsageError("start_code: must not be blank (leave it out for no code)")
    warn_before_min = parse_warn_before(warn_before_min, window.duration_min)
    fullscreen = parse_fullscreen(fullscreen)
    if find_exam(session, course, assignment) is not None:
        raise ConflictError(f"course {course.course_id} already has an exam {assignment}")
    exam = Exam(
        course_pk=course.id,
        assignment=assignment,
        opens_at=window.opens_at,
        duration_min=window.duration_min,
        hard_end=window.hard_end,
        timezone=window.timezone,
        start_code_sha256=hash_code(start_code) if start_code else None,
        allowed_imports=parse_import_list(allowed_imports),
        allowed_networks=parse_networks(allowed_networks),
        warn_before_min=warn_before_min,
        fullscreen=fullscreen,
        created_by=created_by,
        created_at=now or datetime.now(UTC),
    )
    session.add(exam)
    session.flush()
    return exam


def find_exam(session: Session, course: Course, assignment: str) -> Exam | None:
    """Return the exam of ``assignment`` in ``course``, None if there is none."""
    return session.scalar(
        select(Exam).where(Exam.course_pk == course.id, Exam.assignment == assignment)
    )


def get_exam(session: Session, course: Course, assignment: str) -> Exam:
    """Return the exam of ``assignment`` in ``course``; :class:`NotFoundError` naming it if none."""
    exam = find_exam(session, course, assignment)
    if exam is None:
        raise NotFoundError(f"course {course.course_id} has no exam {assignment!r}")
    return exam


def list_exams(session: Session, course: Course) -> list[Exam]:
    """Return the course's exams, by opening time then name."""
    return list(
        session.scalars(
            select(Exam).where(Exam.course_pk == course.id).order_by(Exam.opens_at, Exam.assignment)
        )
    )


def course_student(session: Session, course: Course, username: str) -> tuple[Person, int | None]:
    """Return a student of ``course`` and their group's pk.

    Raises
    ------
    UsageError
        ``username``: not a student of the course.
    """
    row = session.execute(
        select(Person, Membership.group_pk)
        .join(Membership, Membership.person_pk == Person.id)
        .where(Membership.course_pk == course.id, Membership.role == Role.STUDENT)
        .where(Person.username == normalize_username(username))
    ).first()
    if row is None:
        raise UsageError(f"username: {username!r} is not a student of {course.course_id}")
    return row[0], row[1]


def allowance_of_row(row: ExamOverride | None) -> Allowance | None:
    """Return the allowance an override row gives; None for no row."""
    if row is None:
        return None
    return Allowance(row.extra_minutes, row.extra_percent, row.opens_at, row.hard_end)


def allowance_for(session: Session, exam: Exam, person_pk: int, group_pk: int | None) -> Allowance:
    """Return the allowance of a student: their own override, else their group's, else none."""
    rows = session.scalars(select(ExamOverride).where(ExamOverride.exam_pk == exam.id)).all()
    own = next((r for r in rows if r.person_pk == person_pk), None)
    group = next((r for r in rows if group_pk is not None and r.group_pk == group_pk), None)
    return pick_allowance(allowance_of_row(own), allowance_of_row(group))


@dataclass(frozen=True)
class Sitting:
    """A student's exam as the server knows it: start, end (aware UTC), receipt of the last
    submission (``receipt_sha256`` None: nothing submitted yet), who ended their time
    (``ended_by``, None: nobody), their latest autosave (time and SHA-256)."""

    username: str
    allowance: Allowance
    started_at: datetime | None
    ends_at: datetime | None
    added_minutes: int = 0
    submitted_at: datetime | None = None
    submission: str | None = None
    receipt_sha256: str | None = None
    receipt_files: dict[str, str] | None = None
    final: bool = False
    ended_by: str | None = None
    last_saved_at: datetime | None = None
    last_saved_sha256: str | None = None

    def seconds_left(self, now: datetime) -> float | None:
        """Seconds until the end (0 once over; None: not started)."""
        if self.ends_at is None:
            return None
        return max(0.0, (self.ends_at - now).total_seconds())


def _session_row(session: Session, exam: Exam, person_pk: int) -> ExamSession | None:
    return session.scalar(
        select(ExamSession).where(
            ExamSession.exam_pk == exam.id, ExamSession.person_pk == person_pk
        )
    )


def sitting_of(session: Session, course: Course, exam: Exam, username: str) -> Sitting:
    """Return ``username``'s sitting of ``exam`` (not started: no start nor end).

    Raises
    ------
    UsageError
        If ``username`` is not a student of the course.
    """
    person, group_pk = course_student(session, course, username)
    allowance = allowance_for(session, exam, person.id, group_pk)
    return _sitting(exam, person.username, allowance, _session_row(session, exam, person.id))


def _sitting(exam: Exam, username: str, allowance: Allowance, row: ExamSession | None) -> Sitting:
    if row is None:
        return Sitting(username, allowance, None, None)
    ends = plan_end(window_of(exam), row.started_at, allowance, row.added_minutes)
    if row.ended_at is not None:  # a proctor ended their time
        ends = min(ends, row.ended_at)
    files = json.loads(row.receipt_files) if row.receipt_files else None
    return Sitting(
        username,
        allowance,
        row.started_at,
        ends,
        row.added_minutes,
        row.submitted_at,
        row.submission,
        row.receipt_sha256,
        files,
        row.final,
        row.ended_by,
        row.last_saved_at,
        row.last_saved_sha256,
    )


def start_exam(
    session: Session,
    course: Course,
    exam: Exam,
    username: str,
    now: datetime,
    code: str | None = None,
) -> Sitting:
    """Record that ``username`` starts ``exam`` at ``now``; return their sitting.

    A student who has started already gets their sitting as it is: their
    time keeps running from their first start, whatever the browser or the
    computer (no code asked again).

    Raises
    ------
    UsageError
        Not a student of the course; a start outside their window, without
        the start code (:func:`coursehub.catalog.examtime.plan_start`, the
        message says why), or while paused after too many wrong codes
        (:mod:`coursehub.catalog.examcodes`, saying until when).
    WrongStartCodeError
        A wrong start code: the caller counts it
        (:func:`coursehub.catalog.examcodes.note_wrong_code`).
    """
    sitting = sitting_of(session, course, exam, username)
    if sitting.started_at is not None:
        return sitting
    person, _ = course_student(session, course, username)
    until = paused_until(session, exam.id, person.id, now)
    if until is not None:
        raise UsageError(
            f"{exam.assignment}: {MAX_WRONG_CODES} wrong start codes in a row: try again at "
            f"{format_moment(until, exam.timezone)}, or ask the proctor"
        )
    decision = plan_start(window_of(exam), now, sitting.allowance, exam.start_code_sha256, code)
    if decision.wrong_code:
        raise WrongStartCodeError(f"{exam.assignment}: {decision.message}")
    if not decision.allowed:
        raise UsageError(f"{exam.assignment}: {decision.message}")
    clear_wrong_codes(session, exam.id, person.id)
    session.add(ExamSession(exam_pk=exam.id, person_pk=person.id, started_at=now, added_minutes=0))
    session.flush()
    return sitting_of(session, course, exam, username)


def add_time(session: Session, course: Course, exam: Exam, username: str, minutes: int) -> Sitting:
    """Give a student who started ``minutes`` more, live (never past their hard end).

    Raises
    ------
    UsageError
        ``minutes``: not 1 to :data:`MAX_EXTRA_MIN` in all; the student has
        not started.
    """
    person, _ = course_student(session, course, username)
    row = _session_row(session, exam, person.id)
    if row is None:
        raise UsageError(f"username: {person.username} has not started {exam.assignment}")
    if minutes < 1 or row.added_minutes + minutes > MAX_EXTRA_MIN:
        raise UsageError(f"minutes: must be at least 1, at most {MAX_EXTRA_MIN} in all")
    row.added_minutes += minutes
    session.flush()
    return sitting_of(session, course, exam, username)


def record_receipt(
    session: Session,
    course: Course,
    exam: Exam,
    username: str,
    receipt: Receipt,
    final: bool,
) -> Sitting:
    """Keep the receipt of ``username``'s submission; ``final``: the bell's (no more after it)."""
    person, _ = course_student(session, course, username)
    row = _session_row(session, exam, person.id)
    if row is None:
        raise UsageError(f"username: {person.username} has not started {exam.assignment}")
    row.submitted_at, row.submission = receipt.submitted_at, receipt.submission
    row.receipt_sha256 = receipt.sha256
    row.receipt_files = json.dumps(receipt.files, sort_keys=True)
    row.final = row.final or final
    session.flush()
    return sitting_of(session, course, exam, username)


@dataclass(frozen=True)
class Receipt:
    """What was submitted: when (aware UTC), the exchange folder's name, the SHA-256 of the
    manifest of its files and each file's SHA-256 (``{relative path: hex}``)."""

    submitted_at: datetime
    submission: str
    sha256: str
    files: dict[str, str]


def list_sittings(session: Session, course: Course, exam: Exam) -> list[Sitting]:
    """Return the sitting of every student of ``course`` (started or not), by username.

    Three queries whatever the number of students: the students with their
    group, the exam's overrides, its sessions.
    """
    students = session.execute(
        select(Person.id, Person.username, Membership.group_pk)
        .join(Membership, Membership.person_pk == Person.id)
        .where(Membership.course_pk == course.id, Membership.role == Role.STUDENT)
        .order_by(Person.username)
    ).all()
    overrides = session.scalars(select(ExamOverride).where(ExamOverride.exam_pk == exam.id)).all()
    own = {r.person_pk: r for r in overrides if r.person_pk is not None}
    groups = {r.group_pk: r for r in overrides if r.group_pk is not None}
    rows = {
        r.person_pk: r
        for r in session.scalars(select(ExamSession).where(ExamSession.exam_pk == exam.id))
    }
    return [
        _sitting(
            exam,
            username,
            pick_allowance(
                allowance_of_row(own.get(pk)),
                allowance_of_row(groups.get(group_pk) if group_pk is not None else None),
            ),
            rows.get(pk),
        )
        for pk, username, group_pk in students
    ]


def describe_exam(exam: Exam) -> str:
    """One line: ``ps-final: opens 2026-01-12 10:00 CET (Europe/Paris), 120 min, hard end ...``,
    with the clock's settings when they are not the defaults (``..., full screen required``)."""
    code = ", start code" if exam.start_code_sha256 else ""
    code += settings_note(exam.warn_before_min, exam.fullscreen)
    return (
        f"{exam.assignment}: opens {format_moment(exam.opens_at, exam.timezone)}, "
        f"{exam.duration_min} min, hard end {format_moment(exam.hard_end, exam.timezone)}{code}"
    )
