"""What the course page shows, read with a fixed number of small queries.

A course may have thousands of students: the page lists them
:data:`PAGE_SIZE` at a time (``?page=N``). One request runs six queries
whatever the roster size: the course with its year, portal, profile and
material (one joined ``SELECT``), the user's own membership (which also
decides the access), the groups, the student count per group, the teaching
team and one page of students. Only the course is an ORM object; the rows of
the tables are plain named tuples read column by column, which is what keeps
a request cheap (building ORM objects for every row dominated its CPU time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session, joinedload

from coursehub.catalog.errors import NotFoundError
from coursehub.catalog.models import Course, CourseGroup, Membership, Person, Role
from coursehub.web.access import Access, plan_access
from coursehub.web.identity import Identity

PAGE_SIZE = 50
TEAM_ORDER = [r.value for r in Role]


class OwnRow(NamedTuple):
    """The signed-in user's membership: role and group name (None: no group)."""

    role: str
    group_name: str | None


class GroupRow(NamedTuple):
    """A TD/TP group and its number of students."""

    name: str
    kind: str
    n_students: int


class TeamRow(NamedTuple):
    """A teaching team member as the page shows it."""

    display_name: str
    username: str
    role: str


class StudentRow(NamedTuple):
    """A student as the page shows it; ``group_name`` is ``""`` without a group."""

    last_name: str
    first_name: str
    username: str
    student_number: str | None
    email: str | None
    group_name: str


@dataclass
class CoursePage:
    """The course page's content; ``students`` is one page (empty below READ_ROSTER)."""

    course: Course
    access: Access
    own: OwnRow | None = None
    team: list[TeamRow] = field(default_factory=list)
    groups: list[GroupRow] = field(default_factory=list)
    n_students: int = 0
    students: list[StudentRow] = field(default_factory=list)
    page: int = 1
    n_pages: int = 1


def plan_pages(n_items: int, page: int, size: int = PAGE_SIZE) -> tuple[int, int]:
    """Return (page clamped to 1..n_pages, n_pages) for ``n_items`` shown ``size`` per page."""
    n_pages = max(1, math.ceil(n_items / size))
    return min(max(page, 1), n_pages), n_pages


def render_display_name(first_name: str, last_name: str, username: str) -> str:
    """Return ``"First LAST"``, or the username when no name is known (as ``Person``)."""
    return f"{first_name} {last_name}".strip() or username


# The statements are built once: building one and computing its cache key
# costs more than the SQLite query itself (SQLAlchemy's compiled cache then
# finds its SQL at once); the values are bound at execution.
COURSE_QUERY = (
    select(Course)
    .where(Course.course_id == bindparam("course_id"))
    .options(joinedload(Course.year), joinedload(Course.portal),
             joinedload(Course.profile), joinedload(Course.material))
)  # fmt: skip
OWN_QUERY = (
    select(Membership.role, CourseGroup.name)
    .join(Membership.person)
    .outerjoin(Membership.group)
    .where(Membership.course_pk == bindparam("course_pk"), Person.username == bindparam("username"))
)
GROUPS_QUERY = (
    select(CourseGroup.id, CourseGroup.name, CourseGroup.kind)
    .where(CourseGroup.course_pk == bindparam("course_pk"))
    .order_by(CourseGroup.name)
)
IS_STUDENT = Membership.role == Role.STUDENT.value
COUNTS_QUERY = (
    select(Membership.group_pk, func.count())
    .where(Membership.course_pk == bindparam("course_pk"), IS_STUDENT)
    .group_by(Membership.group_pk)
)
TEAM_QUERY = (
    select(Person.first_name, Person.last_name, Person.username, Membership.role)
    .join(Membership.person)
    .where(Membership.course_pk == bindparam("course_pk"), ~IS_STUDENT)
)
STUDENTS_QUERY = (
    select(Person.last_name, Person.first_name, Person.username, Person.student_number,
           Person.email, Membership.group_pk)
    .join(Membership.person)
    .where(Membership.course_pk == bindparam("course_pk"), IS_STUDENT)
    .order_by(func.lower(Person.last_name), Person.username)
    .limit(PAGE_SIZE)
    .offset(bindparam("offset"))
)  # fmt: skip


def load_course(session: Session, course_id: str) -> Course:
    """Return the course with its year, portal, profile and material, in one query.

    Raises
    ------
    coursehub.catalog.errors.NotFoundError
        If no course has this ``course_id`` (the app answers 404).
    """
    course = session.scalar(COURSE_QUERY, {"course_id": course_id.strip()})
    if course is None:
        raise NotFoundError(f"no course {course_id!r}")
    return course


def load_own(session: Session, course: Course, identity: Identity | None) -> OwnRow | None:
    """Return the identity's role and group name in ``course``; None if not a member."""
    if identity is None:
        return None
    row = session.execute(OWN_QUERY, {"course_pk": course.id, "username": identity.name}).first()
    return None if row is None else OwnRow(*row)


def load_groups(session: Session, course: Course) -> tuple[dict[int, str], list[GroupRow], int]:
    """Return (group id -> name, the groups with their counts, the number of students)."""
    groups = session.execute(GROUPS_QUERY, {"course_pk": course.id}).all()
    counts: dict[int | None, int] = {
        pk: n for pk, n in session.execute(COUNTS_QUERY, {"course_pk": course.id})
    }
    rows = [GroupRow(name, kind, counts.get(pk, 0)) for pk, name, kind in groups]
    return {pk: name for pk, name, _ in groups}, rows, sum(counts.values())


def load_team(session: Session, course: Course) -> list[TeamRow]:
    """Return the teaching team, lead first, then by last name (case-insensitive) and username."""
    rows = sorted(
        session.execute(TEAM_QUERY, {"course_pk": course.id}),
        key=lambda r: (TEAM_ORDER.index(r.role), r.last_name.lower(), r.username),
    )
    return [TeamRow(render_display_name(*r[:3]), r.username, r.role) for r in rows]


def load_students(
    session: Session, course: Course, page: int, group_names: dict[int, str]
) -> list[StudentRow]:
    """Return page ``page`` (1-based, in range) of the students, by last name then username."""
    values = {"course_pk": course.id, "offset": (page - 1) * PAGE_SIZE}
    return [
        StudentRow(*row[:5], group_names.get(row[5], "") if row[5] is not None else "")
        for row in session.execute(STUDENTS_QUERY, values)
    ]


def load_course_page(
    session: Session, course_id: str, identity: Identity | None, page: int = 1
) -> CoursePage:
    """Read the course page of ``course_id`` for ``identity``; the access is decided here too.

    Parameters
    ----------
    session : Session
        The request's session.
    course_id : str
        The course's nbgrader ``course_id``.
    identity : Identity or None
        Who asks; the access follows :func:`coursehub.web.access.plan_access`
        from the role read with the user's own membership.
    page : int
        Page of students wanted (1-based; clamped to the existing pages).

    Returns
    -------
    CoursePage
        Below ``Access.VIEW`` only ``course`` and ``access`` are filled (the
        caller answers 403); students only from ``Access.READ_ROSTER``.

    Raises
    ------
    coursehub.catalog.errors.NotFoundError
        If the course does not exist.
    """
    course = load_course(session, course_id)
    own = load_own(session, course, identity)
    result = CoursePage(course, plan_access(identity, own.role if own else None), own)
    if result.access < Access.VIEW:
        return result
    group_names, result.groups, result.n_students = load_groups(session, course)
    result.team = load_team(session, course)
    if result.access >= Access.READ_ROSTER:
        result.page, result.n_pages = plan_pages(result.n_students, page)
        result.students = load_students(session, course, result.page, group_names)
    return result
