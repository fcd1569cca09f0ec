"""What the course pages and the API show, from the catalog's one read model.

Every page of a course and every API call about one starts with
:func:`load_course_access`: the course (one joined ``SELECT``) and the
user's own membership (one more), which decides the access. Then each page
reads only what it shows with :mod:`coursehub.catalog.readmodel`, a fixed
number of queries whatever the roster size. The course page lists the
students :data:`PAGE_SIZE` at a time (``?page=N``), by name as French readers
expect (sorted in Python: :func:`coursehub.catalog.readmodel.load_students`),
and runs six queries: the course, the user's membership, the groups, the
student count per group, the teaching team and the students.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import Course
from coursehub.catalog.names import same_identifiers
from coursehub.catalog.readmodel import (
    PAGE_SIZE,
    GroupRow,
    MemberRow,
    OwnRow,
    load_course,
    load_groups,
    load_students,
    load_team,
    load_viewer,
    plan_pages,
)
from coursehub.web.access import Access, plan_access
from coursehub.web.identity import Identity

__all__ = [
    "CourseAccess",
    "CoursePage",
    "load_course_access",
    "load_course_page",
]


@dataclass
class CourseAccess:
    """A course, the user's own membership in it (None: not a member) and their access."""

    course: Course
    own: OwnRow | None
    access: Access


@dataclass
class CoursePage:
    """The course page's content; ``students`` is one page (empty below READ_ROSTER);
    ``one_id_column`` when every student's username is their student number (one column)."""

    course: Course
    access: Access
    own: OwnRow | None = None
    team: list[MemberRow] = field(default_factory=list)
    groups: list[GroupRow] = field(default_factory=list)
    n_students: int = 0
    students: list[MemberRow] = field(default_factory=list)
    page: int = 1
    n_pages: int = 1
    one_id_column: bool = False


def load_course_access(session: Session, course_id: str, identity: Identity | None) -> CourseAccess:
    """Return the course ``course_id`` and what ``identity`` may do in it, in two queries.

    The access follows :func:`coursehub.web.access.plan_access` from the role
    read with the identity's own membership (hub admins: ``Access.ADMIN``).

    Raises
    ------
    coursehub.catalog.errors.NotFoundError
        If the course does not exist (the app answers 404).
    """
    course = load_course(session, course_id)
    own, manager = load_viewer(session, course, identity.name if identity is not None else None)
    return CourseAccess(course, own, plan_access(identity, own.role if own else None, manager))


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
        Who asks (:func:`load_course_access`).
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
    seen = load_course_access(session, course_id, identity)
    result = CoursePage(seen.course, seen.access, seen.own)
    if result.access < Access.VIEW:
        return result
    groups = load_groups(session, seen.course)
    result.groups, result.n_students = groups.rows, groups.n_students
    result.team = load_team(session, seen.course, groups.names)
    if result.access >= Access.READ_ROSTER:
        students = load_students(session, seen.course, groups.names)
        result.page, result.n_pages = plan_pages(len(students), page)
        start = (result.page - 1) * PAGE_SIZE
        result.students = students[start : start + PAGE_SIZE]
        result.one_id_column = bool(students) and same_identifiers(
            [(s.username, s.student_number) for s in students]
        )
    return result
