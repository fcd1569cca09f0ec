"""Extra time of a student or a group for an exam, and who records it.

An override (:class:`coursehub.catalog.models.exams.ExamOverride`) gives one
student, or one group, of the course an
:class:`coursehub.catalog.examtime.Allowance`: extra minutes, extra percent,
optionally their own window (a conflict slot). A student's own override
replaces their group's (:func:`coursehub.catalog.exams.allowance_for`).
Nothing here commits: the caller's transaction does.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.exams import allowance_of_row, course_student, window_of
from coursehub.catalog.examtime import Allowance, check_allowance, check_slot
from coursehub.catalog.models.courses import Course, CourseGroup, Membership, Person, Role
from coursehub.catalog.models.exams import Exam, ExamOverride
from coursehub.catalog.people import normalize_username
from coursehub.errors import UsageError


def _group(session: Session, course: Course, name: str) -> CourseGroup:
    group = session.scalar(
        select(CourseGroup).where(CourseGroup.course_pk == course.id, CourseGroup.name == name)
    )
    if group is None:
        raise UsageError(f"group: course {course.course_id} has no group {name!r}")
    return group


def set_override(
    session: Session,
    course: Course,
    exam: Exam,
    allowance: Allowance,
    set_by: str,
    *,
    username: str | None = None,
    group: str | None = None,
    now: datetime | None = None,
) -> ExamOverride:
    """Give one student (``username``) or one group (``group``) of ``course`` ``allowance``.

    A second call for the same student or group replaces the first, its own
    window included (read it first with :func:`override_of` to say so).

    Raises
    ------
    UsageError
        Neither or both of ``username`` and ``group``; not a student or
        group of the course; the allowance's fields
        (:func:`coursehub.catalog.examtime.check_allowance`); a one-sided
        slot that leaves no time (:func:`coursehub.catalog.examtime.check_slot`).
    """
    if (username is None) == (group is None):
        raise UsageError("username: give a student or a group, not both nor neither")
    check_allowance(allowance)
    check_slot(window_of(exam), allowance)
    if username is not None:
        person, _ = course_student(session, course, username)
        where = ExamOverride.person_pk == person.id
        target = {"person_pk": person.id}
    else:
        group_row = _group(session, course, group or "")
        where = ExamOverride.group_pk == group_row.id
        target = {"group_pk": group_row.id}
    row = session.scalar(select(ExamOverride).where(ExamOverride.exam_pk == exam.id, where))
    if row is None:
        row = ExamOverride(exam_pk=exam.id, **target)
        session.add(row)
    row.extra_minutes, row.extra_percent = allowance.minutes, allowance.percent
    row.opens_at, row.hard_end = allowance.opens_at, allowance.hard_end
    row.set_by, row.set_at = set_by, now or datetime.now(UTC)
    session.flush()
    return row


def override_of(
    session: Session,
    course: Course,
    exam: Exam,
    *,
    username: str | None = None,
    group: str | None = None,
) -> Allowance | None:
    """Return the override ``username`` (or ``group``) has now; None if none.

    Raises
    ------
    UsageError
        Not a student or group of the course.
    """
    if username is not None:
        person, _ = course_student(session, course, username)
        where = ExamOverride.person_pk == person.id
    else:
        where = ExamOverride.group_pk == _group(session, course, group or "").id
    return allowance_of_row(
        session.scalar(select(ExamOverride).where(ExamOverride.exam_pk == exam.id, where))
    )


def check_lead(session: Session, course: Course, username: str) -> str:
    """Return ``username`` normalised if it names a lead of ``course`` (who records an exam).

    Raises
    ------
    UsageError
        ``by``: nobody of that name in the catalog, or not a lead of the course
        (the message names their role there, if any).
    """
    name = normalize_username(username)
    role = session.scalar(
        select(Membership.role)
        .join(Person, Membership.person_pk == Person.id)
        .where(Membership.course_pk == course.id, Person.username == name)
    )
    if role == Role.LEAD:
        return name
    what = f"a {Role(role).value}" if role is not None else "not in the course"
    raise UsageError(
        f"by: {username!r} is not a lead of {course.course_id} ({what}); name a lead, "
        "or leave it out to record the account that runs the command"
    )
