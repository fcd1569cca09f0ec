"""Who may do what: pure decisions from an identity and its role in a course.

Hub admins may do everything. In a course, the lead and the teachers manage
it (edit, groups, team, roster import), graders read its roster, students
see the course (team, groups, material) but never another student. Members
of a ``COURSE_CREATOR_GROUPS`` hub group (default ``teachers``) may create
courses, of which they become the lead.

Within "manage", the catalog's rules (:mod:`coursehub.catalog.rules`) still
apply to the :class:`~coursehub.catalog.rules.Actor` of :func:`course_actor`:
only a lead of the course or an admin makes or unmakes leads, a course keeps
at least one lead, and only an admin changes the name, e-mail or student
number of a person who is not only in this course.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from flask import abort, current_app
from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models import Course, Membership, Person, Role
from coursehub.catalog.rules import Actor
from coursehub.web.identity import Identity


class Access(enum.IntEnum):
    """What a user may do in one course; each level includes the ones below."""

    NONE = 0
    VIEW = 1  # see the course page without other students
    READ_ROSTER = 2  # see every student and group
    MANAGE = 3  # edit the course, groups, team, import rosters
    ADMIN = 4  # hub admin


ROLE_ACCESS: dict[str, Access] = {
    Role.STUDENT.value: Access.VIEW,
    Role.GRADER.value: Access.READ_ROSTER,
    Role.TEACHER.value: Access.MANAGE,
    Role.LEAD.value: Access.MANAGE,
}


def plan_access(identity: Identity | None, role: str | None) -> Access:
    """Return the access of ``identity`` in a course where its role is ``role`` (None: none)."""
    if identity is None:
        return Access.NONE
    if identity.admin:
        return Access.ADMIN
    return ROLE_ACCESS.get(role or "", Access.NONE)


def may_create_courses(identity: Identity | None, creator_groups: Iterable[str]) -> bool:
    """Return whether ``identity`` may create a course (admin or in a creator hub group)."""
    if identity is None:
        return False
    return identity.admin or bool(set(identity.groups) & set(creator_groups))


def role_in_course(session: Session, identity: Identity | None, course: Course) -> str | None:
    """Return the identity's role in ``course`` (``"lead"``, ``"student"``...), None if none."""
    if identity is None:
        return None
    query = (
        select(Membership.role)
        .join(Membership.person)
        .where(Membership.course_pk == course.id, Person.username == identity.name)
    )
    return session.scalar(query)


def course_access(session: Session, identity: Identity | None, course: Course) -> Access:
    """Return the access of ``identity`` in ``course``, reading its role from the catalog."""
    if identity is not None and identity.admin:
        return Access.ADMIN
    return plan_access(identity, role_in_course(session, identity, course))


def course_actor(session: Session, identity: Identity, course: Course) -> Actor:
    """Return who ``identity`` is for the catalog's rules in ``course`` (admin flag, role)."""
    role = role_in_course(session, identity, course)
    return Actor(identity.name, identity.admin, Role(role) if role else None)


def require(access: Access, needed: Access) -> None:
    """Abort with 403 unless ``access`` reaches ``needed`` (anonymous users never get here)."""
    if access < needed:
        abort(403, description="you do not have access to this page")


def require_creator(identity: Identity | None) -> None:
    """Abort with 403 unless ``identity`` may create courses."""
    if not may_create_courses(identity, current_app.config["COURSE_CREATOR_GROUPS"]):
        abort(403, description="only admins and teachers may create courses")


def require_admin(identity: Identity | None) -> None:
    """Abort with 403 unless ``identity`` is a hub admin."""
    if identity is None or not identity.admin:
        abort(403, description="only hub admins may do this")
