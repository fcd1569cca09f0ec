"""The catalog questions of the course app's pages and API that are not a course's read model.

:mod:`coursehub.catalog.readmodel` reads one course as it is shown; the
queries here answer questions across courses: how many courses each academic
year holds, which courses a person teaches or manages through a portal, a
person's role in a course, a course with its year (the read-only check), a
course's students as hub usernames, the usage units running now, the OOM
kills in each student's servers, the years a course's code is in. Each runs
one ``SELECT``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from coursehub.catalog.models.courses import (
    TEAM_ROLES,
    AcademicYear,
    Course,
    Membership,
    Person,
    PortalManager,
    Role,
)
from coursehub.catalog.models.usage import UsageUnit
from coursehub.catalog.people import normalize_username
from coursehub.meter.records import oom_kills_of


def codes_by_year(session: Session) -> dict[str, tuple[bool, set[str]]]:
    """Return each academic year's ``(is_active, UE codes of its courses)``, by the year's label.

    Every year, with or without courses: what a copy or a rollover into that
    year would find already there
    (:func:`coursehub.catalog.yearoffers.plan_year_offer`), in the one query
    the course page can afford.
    """
    rows = session.execute(
        select(AcademicYear.label, AcademicYear.is_active, Course.code).outerjoin(
            Course, Course.year_pk == AcademicYear.id
        )
    )
    held: dict[str, tuple[bool, set[str]]] = {}
    for label, active, code in rows:
        codes = held.setdefault(label, (bool(active), set()))[1]
        if code is not None:
            codes.add(code)
    return held


def count_courses_by_year(session: Session) -> dict[int, int]:
    """Return the number of courses of each academic year, by the year's id (years without
    courses are absent)."""
    rows = session.execute(select(Course.year_pk, func.count()).group_by(Course.year_pk))
    return dict((pk, n) for pk, n in rows)


def team_course_pks(session: Session, username: str) -> set[int]:
    """Return the ids of the courses where ``username`` is lead, teacher or grader."""
    query = (
        select(Membership.course_pk)
        .join(Membership.person)
        .where(Person.username == username, Membership.role.in_(list(TEAM_ROLES)))
    )
    return set(session.scalars(query))


def role_in_course(session: Session, username: str, course: Course) -> Role | None:
    """Return ``username``'s role in ``course`` (``Role.LEAD``...), None if they have none."""
    query = (
        select(Membership.role)
        .join(Membership.person)
        .where(Membership.course_pk == course.id, Person.username == username)
    )
    return session.scalar(query)


def course_with_year(session: Session, course_id: str) -> Course | None:
    """Return the course ``course_id`` with its academic year loaded; None if there is none."""
    return session.scalar(
        select(Course).options(joinedload(Course.year)).where(Course.course_id == course_id)
    )


def managed_course_pks(session: Session, username: str) -> set[int] | None:
    """Return the ids of the courses in the portals ``username`` manages; None if they manage
    no portal (a portal without courses gives an empty set)."""
    query = (
        select(PortalManager.portal_pk, Course.id)
        .join(Person, Person.id == PortalManager.person_pk)
        .outerjoin(Course, Course.portal_pk == PortalManager.portal_pk)
        .where(Person.username == username)
    )
    rows = session.execute(query).all()
    if not rows:
        return None
    return {course_pk for _portal, course_pk in rows if course_pk is not None}


def course_students(session: Session, course_pk: int) -> dict[str, str]:
    """Return the hub usernames of the course's students, each with the person's name, sorted
    by username."""
    people = session.scalars(
        select(Person)
        .join(Membership.person)
        .where(Membership.course_pk == course_pk, Membership.role == Role.STUDENT)
    )
    names = {normalize_username(p.username): p.display_name for p in people}
    return dict(sorted(names.items()))


def running_units(session: Session, course_id: str, fresh: datetime) -> list[UsageUnit]:
    """Return the course's usage units (servers, jobs) not ended and seen since ``fresh``
    (a timezone-aware time), by username."""
    query = (
        select(UsageUnit)
        .where(
            UsageUnit.course_id == course_id,
            UsageUnit.ended_at.is_(None),
            UsageUnit.last_at >= fresh,
        )
        .order_by(UsageUnit.username)
    )
    return list(session.scalars(query).all())


def oom_kills_by_student(session: Session, course_id: str) -> dict[str, int]:
    """Return the OOM kills in each student's servers of the course, by username (none: absent).

    Summed over the course's server usage units, from the count their
    ``exit_reason`` carries (:func:`coursehub.meter.records.oom_kills_of`);
    what ``coursehub usage ingest`` has read so far.
    """
    query = select(UsageUnit.username, UsageUnit.exit_reason).where(
        UsageUnit.course_id == course_id,
        UsageUnit.kind == "server",
        UsageUnit.exit_reason.like("%OOM kill%"),
    )
    counts: dict[str, int] = {}
    for username, exit_reason in session.execute(query):
        kills = oom_kills_of(exit_reason)
        if kills:
            counts[username] = counts.get(username, 0) + kills
    return counts
