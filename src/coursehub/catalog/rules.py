"""The rules of who may change what in a course's members, as pure functions.

See :mod:`coursehub.catalog.people` for the services that apply them:
identity (names, e-mail, student number) belongs to the person and changes
only by a hub admin unless every membership of the person is in the course
of the one who asks (and, for a lead of that course, the one who asks is a
lead too); a course always keeps at least one lead, and only its
leads and hub admins make or unmake leads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coursehub.catalog.errors import ConflictError, ForbiddenError
from coursehub.catalog.models.courses import Role

#: Person fields that say who someone is, with their longest value (as in the models).
IDENTITY_FIELDS: dict[str, int] = {
    "first_name": 200,
    "last_name": 200,
    "email": 320,
    "student_number": 32,
}
FIELD_NAMES = {
    "first_name": "first name",
    "last_name": "last name",
    "email": "e-mail",
    "student_number": "student number",
}


@dataclass(frozen=True)
class Actor:
    """Who asks for a change: a hub ``admin``, or a user with ``role`` in the course (or None),
    who may be a ``manager`` of the course's portal (they name its leads, as a lead does)."""

    name: str = ""
    admin: bool = False
    role: Role | None = None
    manager: bool = False

    @property
    def names_leads(self) -> bool:
        """Whether this actor may make or unmake the course's leads (admin, manager, lead)."""
        return self.admin or self.manager or self.role == Role.LEAD


#: The command line and the seeds: a hub admin's rights.
SYSTEM = Actor("", admin=True)


def identity_changes(
    current: Mapping[str, str | None], given: Mapping[str, str | None]
) -> tuple[tuple[str, str | None, str], ...]:
    """Return ``(field, old, new)`` for each non-empty given value that differs (pure).

    ``identity_changes({"last_name": "Moreau"}, {"last_name": "Moreau-Durand"}) ==
    (("last_name", "Moreau", "Moreau-Durand"),)``; empty given values change nothing.
    """
    return tuple(
        (name, current.get(name), str(given[name]))
        for name in IDENTITY_FIELDS
        if given.get(name) and given[name] != current.get(name)
    )


def may_change_identity(
    actor: Actor,
    person_courses: set[int],
    course_pk: int | None,
    person_role: Role | None = None,
) -> bool:
    """Whether ``actor``, managing course ``course_pk``, may change the identity of a person
    who is a member of ``person_courses`` (course ids) with ``person_role`` in that course
    (pure).

    An admin always; else only if the person belongs to that course and to no
    other and, when that person is a lead of the course, ``actor`` is a lead
    too: a teacher may not unmake a lead (:func:`check_role_change`), nor
    rename or re-mail one.
    """
    if actor.admin:
        return True
    if person_role == Role.LEAD and not actor.names_leads:
        return False
    return course_pk is not None and person_courses == {course_pk}


def check_role_change(
    course_id: str,
    actor: Actor,
    username: str,
    current: Role | None,
    new: Role | None,
    leads: list[str],
) -> None:
    """Refuse a role change that breaks the lead rules (pure); ``new`` None is a removal.

    Parameters
    ----------
    leads
        Usernames of the course's current leads.

    Raises
    ------
    ForbiddenError
        If the change makes or unmakes a lead and ``actor`` is neither a lead
        of the course, a manager of its portal nor a hub admin.
    ConflictError
        If it removes or demotes the course's last lead.
    """
    if current == new or Role.LEAD not in (current, new):
        return
    who = ", ".join(leads) if leads else "none"
    if not actor.names_leads:
        raise ForbiddenError(
            f"only a lead of {course_id} (now: {who}), a manager of its portal or a hub admin "
            "may make or unmake "
            f"leads; {username} stays {current.value if current else 'out of the course'}"
        )
    if current == Role.LEAD and leads == [username]:
        raise ConflictError(
            f"{username} is the last lead of {course_id} and a course keeps at least one: "
            "make another member lead first (a lead or a hub admin can)"
        )
