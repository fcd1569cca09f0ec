"""Memberships: a person's role (and TD/TP group) in a course, the leads, visible courses.

As in :mod:`coursehub.catalog.courses`, functions flush and never commit.
A course always keeps at least one lead. Only a lead of the course or a hub
admin makes or unmakes leads, and nobody removes or demotes the last lead
(:func:`coursehub.catalog.rules.check_role_change`). The person side
(usernames, identity): :mod:`coursehub.catalog.people`.

Callers say who asks with an :class:`~coursehub.catalog.rules.Actor`; the
default, :data:`~coursehub.catalog.rules.SYSTEM` (command line, seeds), has
a hub admin's rights.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import NotFoundError, ValidationError
from coursehub.catalog.models.courses import (
    TEAM_ROLES,
    AcademicYear,
    Course,
    CourseGroup,
    Membership,
    Person,
    Role,
)
from coursehub.catalog.people import (
    check_username,
    ensure_person,
    normalize_username,
    parse_role,
    username_or_none,
)
from coursehub.catalog.rules import SYSTEM, Actor, check_role_change
from coursehub.catalog.text import quote_text


def get_membership(session: Session, course: Course, username: str) -> Membership | None:
    """Return the membership of ``username`` in ``course``, or None (also for a string that
    cannot be a username: the database never sees it)."""
    name = username_or_none(username)
    if name is None:
        return None
    query = (
        select(Membership)
        .join(Membership.person)
        .where(Membership.course_pk == course.id, Person.username == name)
    )
    return session.scalar(query)


def add_member(
    session: Session,
    course: Course,
    username: str,
    role: str | Role = Role.STUDENT,
    group: CourseGroup | None = None,
    first_name: str = "",
    last_name: str = "",
    email: str | None = None,
    student_number: str | None = None,
    *,
    actor: Actor = SYSTEM,
) -> Membership:
    """Put ``username`` in ``course`` with ``role`` (and ``group``), creating the person if needed.

    A person already in the course gets the new role and group (one
    membership per person and course). The person fields (``first_name``,
    ``last_name``, ``email``, ``student_number``) go to
    :func:`~coursehub.catalog.people.ensure_person`
    with ``actor``, who must also pass :func:`check_role_change`.

    Raises
    ------
    ValidationError
        A bad role, a group of another course, a bad person field.
    IdentityError, ForbiddenError, ConflictError
        From :func:`~coursehub.catalog.people.ensure_person` and
        :func:`~coursehub.catalog.rules.check_role_change`.
    """
    username = check_username(username)
    role = parse_role(str(role))
    if group is not None and group.course_pk != course.id:
        raise ValidationError(f"group {group.name} is not a group of course {course.course_id}")
    membership = get_membership(session, course, username)
    current = membership.role if membership is not None else None
    check_role_change(
        course.course_id,
        actor,
        normalize_username(username),
        current,
        role,
        course_leads(session, course),
    )
    person = ensure_person(
        session,
        username,
        first_name,
        last_name,
        email,
        student_number,
        course=course,
        actor=actor,
    )
    if membership is None:
        membership = Membership(person=person, course=course, role=role)
        session.add(membership)
    membership.role = role
    membership.group = group
    session.flush()
    return membership


def course_leads(session: Session, course: Course) -> list[str]:
    """Return the usernames of the course's leads, sorted."""
    query = (
        select(Person.username)
        .join(Membership.person)
        .where(Membership.course_pk == course.id, Membership.role == Role.LEAD)
        .order_by(Person.username)
    )
    return list(session.scalars(query))


def remove_member(
    session: Session, course: Course, username: str, *, actor: Actor = SYSTEM
) -> None:
    """Take ``username`` out of ``course`` (the person stays).

    Raises
    ------
    NotFoundError
        If they are not in the course.
    ForbiddenError, ConflictError
        From :func:`check_role_change` (a lead's removal).
    """
    membership = get_membership(session, course, username)
    if membership is None:
        who = quote_text(normalize_username(username), 40)
        raise NotFoundError(f"{who} is not in course {course.course_id}")
    check_role_change(
        course.course_id,
        actor,
        membership.person.username,
        membership.role,
        None,
        course_leads(session, course),
    )
    session.delete(membership)
    session.flush()


def role_in(session: Session, username: str, course: Course) -> Role | None:
    """Return the role of ``username`` in ``course``, or None if they are not in it."""
    membership = get_membership(session, course, username)
    return None if membership is None else membership.role


def is_team(role: Role | None) -> bool:
    """Whether ``role`` belongs to the teaching team (lead, teacher, grader)."""
    return role in TEAM_ROLES


def visible_courses(
    session: Session,
    username: str,
    is_admin: bool = False,
    roles: frozenset[Role] | None = None,
    include_archived: bool = False,
) -> list[Course]:
    """Return the courses ``username`` may see: all for an admin, else those they belong to.

    ``roles`` restricts to memberships with those roles (e.g.
    :data:`coursehub.catalog.models.courses.TEAM_ROLES` for the courses a teacher
    manages). Ordered by year (newest first) then UE code.
    """
    query = select(Course).join(Course.year).order_by(AcademicYear.start_year.desc(), Course.code)
    if not is_admin:
        members = select(Membership.course_pk).join(Membership.person)
        members = members.where(Person.username == normalize_username(username))
        if roles is not None:
            members = members.where(Membership.role.in_(list(roles)))
        query = query.where(Course.id.in_(members))
    if not include_archived:
        query = query.where(Course.archived.is_(False))
    return list(session.scalars(query))
