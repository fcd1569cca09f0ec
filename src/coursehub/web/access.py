"""Who may do what: pure decisions from an identity and its role in a course.

Hub admins may do everything. A portal's managers create the portal's
courses, archive and copy them and name their leads (``Access.PORTAL`` in
each). In a course, the lead and the teachers manage it (edit, groups,
team, roster import), its leads copy it to another year, graders read its
roster, students see the course (team, groups, material) but never another
student. Members of a ``COURSE_CREATOR_GROUPS`` hub group (none by
default) may create courses in any portal, of which they become the lead.
Only admins and managers of both portals move a course to another portal.
Every refusal says who may do the action.

Within "manage", the catalog's rules (:mod:`coursehub.catalog.rules`) still
apply to the :class:`~coursehub.catalog.rules.Actor` of :func:`course_actor`:
only a lead of the course or an admin makes or unmakes leads, a course keeps
at least one lead, and only an admin changes the name, e-mail or student
number of a person who is not only in this course.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from flask import abort, current_app, g
from sqlalchemy.orm import Session

from coursehub.catalog.admin import (
    check_may_create,
    creation_refusal,
    is_manager,
    managed_portals,
    render_managers,
)
from coursehub.catalog.courses import get_portal, list_portals
from coursehub.catalog.errors import ForbiddenError
from coursehub.catalog.models.courses import Course, Portal, Role
from coursehub.catalog.queries import role_in_course
from coursehub.catalog.rules import Actor
from coursehub.web.config import parse_groups
from coursehub.web.identity import Identity


class Access(enum.IntEnum):
    """What a user may do in one course; each level includes the ones below."""

    NONE = 0
    VIEW = 1  # see the course page without other students
    READ_ROSTER = 2  # see every student and group
    MANAGE = 3  # edit the course, groups, team, import rosters
    PORTAL = 4  # a manager of the course's portal: also archive, copy, name leads
    ADMIN = 5  # hub admin


ROLE_ACCESS: dict[str, Access] = {
    Role.STUDENT.value: Access.VIEW,
    Role.GRADER.value: Access.READ_ROSTER,
    Role.TEACHER.value: Access.MANAGE,
    Role.LEAD.value: Access.MANAGE,
}


def plan_access(identity: Identity | None, role: str | None, manager: bool = False) -> Access:
    """Return the access of ``identity`` in a course where its role is ``role`` (None: none),
    ``manager`` if it manages the course's portal."""
    if identity is None:
        return Access.NONE
    if identity.admin:
        return Access.ADMIN
    if manager:
        return Access.PORTAL
    return ROLE_ACCESS.get(role or "", Access.NONE)


def may_copy(access: Access, role: str | None) -> bool:
    """Whether one with ``access`` and ``role`` may copy the course to another year: its
    leads, its portal's managers, admins (pure)."""
    return access >= Access.PORTAL or role == Role.LEAD.value


def require_copy(course: Course, access: Access, role: str | None) -> None:
    """Refuse (403, saying who may) one who may not copy ``course`` (:func:`may_copy`).

    Raises
    ------
    werkzeug.exceptions.Forbidden
        Unless ``access`` and ``role`` make one of its leads, its portal's managers or an
        admin.
    """
    if not may_copy(access, role):
        abort(
            403,
            description=f"only a lead of {course.course_id}, a manager of portal "
            f"{course.portal.code} or an admin can copy this course",
        )


def may_create_courses(identity: Identity | None, creator_groups: Iterable[str]) -> bool:
    """Return whether ``identity`` may create a course (admin or in a creator hub group)."""
    if identity is None:
        return False
    return identity.admin or bool(set(identity.groups) & set(creator_groups))


def course_actor(session: Session, identity: Identity, course: Course) -> Actor:
    """Return who ``identity`` is for the catalog's rules in ``course`` (admin flag, role,
    manager of its portal)."""
    role = role_in_course(session, identity.name, course)
    manager = is_manager(session, identity.name, course.portal)
    return Actor(identity.name, identity.admin, Role(role) if role else None, manager)


def require(access: Access, needed: Access) -> None:
    """Abort with 403 unless ``access`` reaches ``needed`` (anonymous users never get here)."""
    if access < needed:
        g.refused = True  # the refusal page's header reads nothing more
        abort(403, description="you do not have access to this page")


def creator_groups() -> list[str]:
    """The hub groups whose members may create courses in any portal (``COURSE_CREATOR_GROUPS``)."""
    return list(parse_groups(current_app.config["COURSE_CREATOR_GROUPS"]))


def creatable_portals(session: Session, identity: Identity) -> list[Portal]:
    """The portals ``identity`` may create courses in: all for admins and course creators,
    else those it manages."""
    if may_create_courses(identity, creator_groups()):
        return list_portals(session)
    return managed_portals(session, identity.name)


def require_creator(session: Session, identity: Identity | None) -> list[Portal]:
    """Return the portals ``identity`` may create courses in; 403 saying who may if none."""
    portals = [] if identity is None else creatable_portals(session, identity)
    if not portals:
        groups = creator_groups()
        also = f", a member of the hub group {', '.join(groups)}" if groups else ""
        abort(
            403,
            description=f"only an admin{also} or a manager of a portal can create courses "
            f"(portals and managers: {render_portal_managers(list_portals(session))})",
        )
    return portals


def require_creator_in(session: Session, identity: Identity, portal: Portal) -> None:
    """Refuse (:class:`ForbiddenError`, 403, saying who may) a course creation in ``portal``
    by one who may not."""
    in_group = may_create_courses(identity, creator_groups())
    managed = managed_portals(session, identity.name)
    try:
        check_may_create(portal, identity.admin, managed, in_group)
    except ForbiddenError:
        raise ForbiddenError(creation_refusal(portal, creator_groups())) from None


def render_portal_managers(portals: list[Portal]) -> str:
    """``"MECA: mbuffat; INFO: none yet"`` (pure, from each portal's managers)."""
    return "; ".join(f"{p.code}: {render_managers(p)}" for p in portals) or "no portal yet"


def require_portal(session: Session, identity: Identity, portal: Portal, what: str) -> None:
    """Abort with 403 unless ``identity`` is an admin or a manager of ``portal``; the message
    says who may ``what``."""
    if identity.admin or is_manager(session, identity.name, portal):
        return
    abort(
        403,
        description=f"only an admin or a manager of portal {portal.code} "
        f"(now: {render_managers(portal)}) can {what}",
    )


def require_admin(identity: Identity | None, what: str = "do this") -> None:
    """Abort with 403 unless ``identity`` is a hub admin (the message says so, for ``what``)."""
    if identity is None or not identity.admin:
        abort(403, description=f"only a hub admin can {what}")


def plan_move_refusal(
    course_id: str, source: Portal, target: Portal, admin: bool, managed: Iterable[Portal]
) -> str:
    """Return why moving ``course_id`` from portal ``source`` to ``target`` is refused, naming
    who may (``""``: allowed): admins, and managers of both portals (pure)."""
    managed_pks = {p.id for p in managed}
    if admin or source.id == target.id or {source.id, target.id} <= managed_pks:
        return ""
    return (
        f"only an admin or a manager of both portals {source.code} "
        f"(now: {render_managers(source)}) and {target.code} (now: {render_managers(target)}) "
        f"can move course {course_id} to portal {target.code}"
    )


def require_move(session: Session, identity: Identity, course: Course, portal_code: str) -> None:
    """Refuse (:class:`ForbiddenError`, 403 saying who may) moving ``course`` to the portal
    ``portal_code`` by one who may not; nothing to check when it stays in its portal.

    Raises
    ------
    coursehub.catalog.errors.NotFoundError
        If no portal has this code.
    """
    target = get_portal(session, portal_code)
    reason = plan_move_refusal(
        course.course_id,
        course.portal,
        target,
        identity.admin,
        managed_portals(session, identity.name),
    )
    if reason:
        raise ForbiddenError(reason)
