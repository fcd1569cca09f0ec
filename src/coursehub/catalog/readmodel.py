"""A course as it is shown: the one read model of the pages and the JSON API.

A course may have thousands of students, so nothing here walks the ORM's
relationships (a course's and a person's memberships are write-only in
:mod:`coursehub.catalog.models.courses`): each function runs one fixed ``SELECT``,
whatever the roster size. Only the course itself is an ORM object (with its
year, portal, profile and material, joined in the same query); the rows of
the other tables are plain named tuples read column by column, which is what
keeps a request cheap (building ORM objects for every row dominated its CPU
time; ``benchmarks/bench_web.py`` measures it).

The statements are built once, at import: building one and computing its
cache key costs more than the SQLite query itself (SQLAlchemy's compiled
cache then finds its SQL at once); the values are bound at execution.

People are ordered as French readers expect (:mod:`coursehub.catalog.names`:
last name, first name, with the Unicode Collation Algorithm, "Çelik" among
the C's), which no portable SQL ``ORDER BY`` does (SQLite compares code
points, PostgreSQL's order depends on the server's locale). So a course's
students are read in one query and sorted here, then paged: a course has at
most a few thousand students, and the collation keys of names, which recur
from request to request, are kept (:data:`NAME_KEYS_CACHED` names per
process), so that a page costs a sort of cached keys, not a UCA key per name
(``benchmarks/bench_name_order.py`` measures both).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

from sqlalchemy import and_, bindparam, func, select
from sqlalchemy.orm import Session, joinedload

from coursehub.catalog.errors import NotFoundError
from coursehub.catalog.models.courses import (
    Course,
    CourseGroup,
    GroupKind,
    Membership,
    Person,
    PortalManager,
    Role,
)
from coursehub.catalog.names import collation_key

#: Students shown per page of a course.
PAGE_SIZE = 50
#: Order of the teaching team: lead, teacher, grader (then student).
ROLE_ORDER: list[Role] = list(Role)
#: First and last names whose collation keys each process keeps (about 0.3 KiB each).
NAME_KEYS_CACHED = 20_000


class OwnRow(NamedTuple):
    """One person's membership of a course: role and group name (None: no group)."""

    role: Role
    group_name: str | None


class GroupRow(NamedTuple):
    """A TD/TP group and its number of students."""

    name: str
    kind: GroupKind
    n_students: int


class MemberRow(NamedTuple):
    """A member of a course as pages and API show them; ``group_name`` is ``""`` without one."""

    username: str
    first_name: str
    last_name: str
    email: str | None
    student_number: str | None
    role: Role
    group_name: str

    @property
    def display_name(self) -> str:
        """``"First Last"``, or the username when no name is known (as ``Person``)."""
        return render_display_name(self.first_name, self.last_name, self.username)


class CourseGroups(NamedTuple):
    """The groups of a course with their counts, their names by id, and the student count."""

    rows: list[GroupRow]
    names: dict[int, str]
    n_students: int


def plan_pages(n_items: int, page: int, size: int = PAGE_SIZE) -> tuple[int, int]:
    """Return (page clamped to 1..n_pages, n_pages) for ``n_items`` shown ``size`` per page."""
    n_pages = max(1, math.ceil(n_items / size))
    return min(max(page, 1), n_pages), n_pages


def render_display_name(first_name: str, last_name: str, username: str) -> str:
    """Return ``"First Last"``, or the username when no name is known (as ``Person``)."""
    return f"{first_name} {last_name}".strip() or username


@functools.lru_cache(maxsize=NAME_KEYS_CACHED)
def cached_name_key(text: str) -> tuple[int, ...]:
    """Return :func:`coursehub.catalog.names.collation_key` of a first or last name, kept for
    the next requests (names recur; a key costs tens of microseconds with pyuca)."""
    return collation_key(text)


def name_order(row: MemberRow) -> tuple[Any, ...]:
    """Return the key ordering members by last name, first name (UCA, as
    :func:`coursehub.catalog.names.sort_by_name`), then username (normalised ASCII)."""
    return (cached_name_key(row.last_name), cached_name_key(row.first_name), row.username)


def plan_name_order(rows: list[MemberRow]) -> list[MemberRow]:
    """Return ``rows`` by :func:`name_order` (pure): "Çelik" before "Dupont", "Émile" by "Eve"."""
    return sorted(rows, key=name_order)


def plan_team_order(rows: list[MemberRow]) -> list[MemberRow]:
    """Return the team lead first, then teachers, graders; each by :func:`name_order`."""
    return sorted(rows, key=lambda r: (ROLE_ORDER.index(r.role), name_order(r)))


COURSE_QUERY = (
    select(Course)
    .where(Course.course_id == bindparam("course_id"))
    .options(
        joinedload(Course.year),
        joinedload(Course.portal),
        joinedload(Course.profile),
        joinedload(Course.team_profile),
        joinedload(Course.material),
    )
)
OWN_QUERY = (
    select(Membership.role, CourseGroup.name)
    .join(Membership.person)
    .outerjoin(Membership.group)
    .where(Membership.course_pk == bindparam("course_pk"), Person.username == bindparam("username"))
)
VIEWER_QUERY = (
    select(Membership.role, CourseGroup.name, PortalManager.id)
    .select_from(Person)
    .outerjoin(
        Membership,
        and_(Membership.person_pk == Person.id, Membership.course_pk == bindparam("course_pk")),
    )
    .outerjoin(CourseGroup, CourseGroup.id == Membership.group_pk)
    .outerjoin(
        PortalManager,
        and_(PortalManager.person_pk == Person.id, PortalManager.portal_pk == bindparam("portal")),
    )
    .where(Person.username == bindparam("username"))
)
GROUPS_QUERY = (
    select(CourseGroup.id, CourseGroup.name, CourseGroup.kind)
    .where(CourseGroup.course_pk == bindparam("course_pk"))
    .order_by(CourseGroup.name)
)
IS_STUDENT = Membership.role == Role.STUDENT
COUNTS_QUERY = (
    select(Membership.group_pk, func.count())
    .where(Membership.course_pk == bindparam("course_pk"), IS_STUDENT)
    .group_by(Membership.group_pk)
)
MEMBER_COLUMNS = (
    Person.username,
    Person.first_name,
    Person.last_name,
    Person.email,
    Person.student_number,
    Membership.role,
    Membership.group_pk,
)
TEAM_QUERY = (
    select(*MEMBER_COLUMNS)
    .join(Membership.person)
    .where(Membership.course_pk == bindparam("course_pk"), ~IS_STUDENT)
)
STUDENTS_QUERY = (
    select(*MEMBER_COLUMNS)
    .join(Membership.person)
    .where(Membership.course_pk == bindparam("course_pk"), IS_STUDENT)
)
MEMBERS_QUERY = (
    select(*MEMBER_COLUMNS)
    .join(Membership.person)
    .where(Membership.course_pk == bindparam("course_pk"))
    .order_by(Person.username)
)
MEMBER_QUERY = MEMBERS_QUERY.where(Person.username == bindparam("username"))
N_MEMBERS_QUERY = (
    select(func.count())
    .select_from(Membership)
    .where(Membership.course_pk == bindparam("course_pk"))
)


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


def load_own(session: Session, course: Course, username: str | None) -> OwnRow | None:
    """Return the role and group name of ``username`` in ``course``; None if not a member."""
    if username is None:
        return None
    row = session.execute(OWN_QUERY, {"course_pk": course.id, "username": username}).first()
    return None if row is None else OwnRow(*row)


def load_viewer(
    session: Session, course: Course, username: str | None
) -> tuple[OwnRow | None, bool]:
    """Return the membership of ``username`` in ``course`` (None: not a member) and whether
    they manage its portal, in one query."""
    if username is None:
        return None, False
    values = {"course_pk": course.id, "portal": course.portal_pk, "username": username}
    row = session.execute(VIEWER_QUERY, values).first()
    if row is None:
        return None, False
    role, group_name, manager_pk = row
    return (None if role is None else OwnRow(role, group_name)), manager_pk is not None


def load_groups(session: Session, course: Course, counts: bool = True) -> CourseGroups:
    """Return the course's groups by name, with their student counts (``counts=False``:
    every count and the total are 0, one query less)."""
    groups = session.execute(GROUPS_QUERY, {"course_pk": course.id}).all()
    sizes: dict[int | None, int] = {}
    if counts:
        sizes = {pk: n for pk, n in session.execute(COUNTS_QUERY, {"course_pk": course.id})}
    rows = [GroupRow(name, kind, sizes.get(pk, 0)) for pk, name, kind in groups]
    return CourseGroups(rows, {pk: name for pk, name, _ in groups}, sum(sizes.values()))


def _member(row: Any, group_names: dict[int, str]) -> MemberRow:
    username, first_name, last_name, email, student_number, role, group_pk = row
    group = group_names.get(group_pk, "") if group_pk is not None else ""
    return MemberRow(username, first_name, last_name, email, student_number, role, group)


def load_team(session: Session, course: Course, group_names: dict[int, str]) -> list[MemberRow]:
    """Return the teaching team in :func:`plan_team_order`."""
    rows = session.execute(TEAM_QUERY, {"course_pk": course.id})
    return plan_team_order([_member(r, group_names) for r in rows])


def load_students(
    session: Session, course: Course, group_names: dict[int, str], page: int | None = None
) -> list[MemberRow]:
    """Return the students in :func:`plan_name_order`: page ``page`` (1-based,
    :data:`PAGE_SIZE` each), or all of them with ``page=None``; one query either way (every
    student is read and sorted here, see the module's docstring)."""
    rows = session.execute(STUDENTS_QUERY, {"course_pk": course.id})
    students = plan_name_order([_member(r, group_names) for r in rows])
    if page is None:
        return students
    start = (max(page, 1) - 1) * PAGE_SIZE
    return students[start : start + PAGE_SIZE]


def load_members(session: Session, course: Course, group_names: dict[int, str]) -> list[MemberRow]:
    """Return every member of the course (team and students), by username."""
    rows = session.execute(MEMBERS_QUERY, {"course_pk": course.id})
    return [_member(r, group_names) for r in rows]


def load_member(
    session: Session, course: Course, username: str, group_names: dict[int, str]
) -> MemberRow | None:
    """Return the member ``username`` (as stored: normalised) of the course, or None."""
    row = session.execute(MEMBER_QUERY, {"course_pk": course.id, "username": username}).first()
    return None if row is None else _member(row, group_names)


def count_members(session: Session, course: Course) -> int:
    """Return the number of members of the course (team and students)."""
    return int(session.scalar(N_MEMBERS_QUERY, {"course_pk": course.id}) or 0)
