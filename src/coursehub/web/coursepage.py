"""What the course page shows, read with a few targeted queries.

A course may have thousands of students: the page lists them
:data:`PAGE_SIZE` at a time (``?page=N``), so a request reads the team, the
group counts, the number of students and one page of them, never the whole
roster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, contains_eager, selectinload

from coursehub.catalog.models import Course, CourseGroup, Membership, Person, Role

PAGE_SIZE = 50


@dataclass
class CoursePage:
    """The course page's content; ``students`` is one page (empty for students' own view)."""

    course: Course
    team: list[Membership]
    groups: list[tuple[CourseGroup, int]]
    n_students: int
    own: Membership | None = None
    students: list[Membership] = field(default_factory=list)
    page: int = 1
    n_pages: int = 1

    @property
    def group_names(self) -> dict[int, str]:
        """Group id -> name, to label the students' groups."""
        return {group.id: group.name for group, _ in self.groups}


def plan_pages(n_items: int, page: int, size: int = PAGE_SIZE) -> tuple[int, int]:
    """Return (page clamped to 1..n_pages, n_pages) for ``n_items`` shown ``size`` per page."""
    n_pages = max(1, math.ceil(n_items / size))
    return min(max(page, 1), n_pages), n_pages


def members_query(course: Course) -> Select[Membership]:
    """Return a query of the course's memberships with their people loaded."""
    return (
        select(Membership)
        .join(Membership.person)
        .where(Membership.course_pk == course.id)
        .options(contains_eager(Membership.person))
    )


def load_course_page(
    session: Session, course: Course, username: str, with_students: bool, page: int = 1
) -> CoursePage:
    """Read the team, group counts, the user's own membership and one page of students."""
    team_order = [r.value for r in Role]
    team = sorted(
        session.scalars(members_query(course).where(Membership.role != Role.STUDENT.value)),
        key=lambda m: (team_order.index(m.role), m.person.last_name.lower(), m.person.username),
    )
    count_query = (
        select(Membership.group_pk, func.count())
        .where(Membership.course_pk == course.id, Membership.role == Role.STUDENT.value)
        .group_by(Membership.group_pk)
    )
    counts: dict[int | None, int] = {pk: n for pk, n in session.execute(count_query)}
    course = session.scalars(
        select(Course).where(Course.id == course.id)
        .options(selectinload(Course.groups), selectinload(Course.profile),
                 selectinload(Course.material))
    ).one()  # fmt: skip
    groups = [(group, counts.get(group.id, 0)) for group in course.groups]
    n_students = sum(counts.values())
    own = session.scalars(members_query(course).where(Person.username == username)).first()
    result = CoursePage(course, team, groups, n_students, own)
    if with_students:
        result.page, result.n_pages = plan_pages(n_students, page)
        query = (
            members_query(course)
            .where(Membership.role == Role.STUDENT.value)
            .order_by(func.lower(Person.last_name), Person.username)
            .limit(PAGE_SIZE)
            .offset((result.page - 1) * PAGE_SIZE)
        )
        result.students = list(session.scalars(query))
    return result
