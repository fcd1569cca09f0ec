"""Plan a roster's enrolment into a course (pure, previewable): additions, updates, removals.

The web app and ``coursehub roster import`` share these steps:
:func:`coursehub.catalog.roster.parse.parse_roster` reads the file,
:func:`plan_roster` compares it with the course (additions, updates and, in
``sync`` mode, removals), :func:`coursehub.catalog.roster.preview.render_plan` shows the
preview, and :func:`coursehub.catalog.roster.apply.apply_roster` writes it all or nothing.
A web "confirm" step re-parses and re-plans the uploaded bytes, then applies;
:func:`~coursehub.catalog.roster.apply.apply_roster` refuses a
plan that the course has outgrown since
(:class:`~coursehub.catalog.errors.ConflictError`).

Identity (names, e-mail, student number) belongs to the person, not to the
course (:mod:`coursehub.catalog.rules`). A row that would change it for a
person already in the catalog is listed in the plan as an
:class:`IdentityChange`, ``old -> new`` (the old values only to an importer
who may see them: an admin, or a manager of a course the person is in):
applied when the importer is a hub admin (the command line is) or the
person belongs to this course and no other, else kept as it is and marked
"not applied". Applied identity changes need a confirmation
(:attr:`RosterPlan.needs_confirmation`): the web preview's confirm button,
``confirm_identity_changes`` in the API, ``--yes`` on the command line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from coursehub.catalog.courses import check_group_name
from coursehub.catalog.errors import RosterError, ValidationError
from coursehub.catalog.models.courses import (
    Course,
    Membership,
    Person,
    Role,
)
from coursehub.catalog.roster.parse import RosterRow
from coursehub.catalog.rules import identity_changes

MODES = ("add", "sync")
#: Person fields a roster sets, in the order the preview lists changes.
PERSON_FIELDS = ("student_number", "last_name", "first_name", "email")
_CHUNK = 500  # usernames per IN (...) query


@dataclass(frozen=True)
class MemberState:
    """What the catalog holds about a person; ``role`` and ``group`` in the course, or None."""

    username: str
    student_number: str | None
    last_name: str
    first_name: str
    email: str | None
    role: Role | None = None
    group: str | None = None
    in_other_courses: bool = False


@dataclass(frozen=True)
class IdentityChange:
    """A row that changes an existing person's identity: ``(field, old, new)`` per field.

    ``applied`` is False when the importer may not change it (the person is
    outside the course, or also in another course, and the importer is no
    admin): the import then keeps the stored values. ``old_shown`` is False
    when, besides, the person is not in the course: the importer may not see
    their stored values, so each ``old`` is None (the fields that differ are
    still named, as :func:`coursehub.catalog.people.ensure_person` names them).
    """

    row: int
    username: str
    changes: tuple[tuple[str, str | None, str], ...]
    applied: bool
    old_shown: bool = True


@dataclass(frozen=True)
class RosterUpdate:
    """A student already in the course whose ``fields`` the roster changes."""

    row: RosterRow
    fields: tuple[str, ...]


@dataclass
class RosterPlan:
    """What importing a roster would do to a course."""

    course_id: str
    mode: str
    group: str | None
    additions: list[RosterRow] = field(default_factory=list)
    updates: list[RosterUpdate] = field(default_factory=list)
    removals: list[MemberState] = field(default_factory=list)
    unchanged: int = 0
    new_groups: list[str] = field(default_factory=list)
    identity_changes: list[IdentityChange] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        """Whether applying the plan would change nothing."""
        return not (self.additions or self.updates or self.removals or self.new_groups)

    @property
    def needs_confirmation(self) -> bool:
        """Whether applying the plan renames or re-mails someone already in the catalog."""
        return any(change.applied for change in self.identity_changes)

    def applies_identity(self, username: str) -> bool:
        """Whether the plan writes ``username``'s identity fields."""
        return any(c.applied and c.username == username for c in self.identity_changes)


def plan_changes(
    course_id: str,
    rows: list[RosterRow],
    state: dict[str, MemberState],
    owners: dict[str, str],
    groups: Iterable[str],
    mode: str = "add",
    group: str | None = None,
    admin: bool = False,
) -> RosterPlan:
    """Compare roster rows with the catalog's state and return the plan (pure).

    Parameters
    ----------
    course_id
        The course.
    rows
        From :func:`coursehub.catalog.roster.parse_roster`.
    state
        Username -> :class:`MemberState` for every member of the course and
        every existing person named in ``rows``.
    owners
        Student number -> username, for the student numbers of ``rows`` already known.
    groups
        Names of the course's existing groups.
    mode
        ``"add"``: add and update; ``"sync"``: also remove the course's
        students (those of ``group``, if given) absent from the rows.
    group
        Put every row in this group (else each row's own group, if any; a
        row without one keeps its current group).
    admin
        Whether the importer is a hub admin, who may change anyone's identity;
        others only that of people in this course and no other.

    Raises
    ------
    RosterError
        Every row that names a member of the teaching team, a student
        number that belongs to another username, or a malformed new group.
    ValidationError
        An unknown mode or a malformed ``group``.
    """
    if mode not in MODES:
        raise ValidationError(f"roster mode {mode!r} is not one of {', '.join(MODES)}")
    group = check_group_name(group) if group is not None else None
    plan = RosterPlan(course_id=course_id, mode=mode, group=group)
    rows = [_with_group(row, group) for row in rows]
    known = set(groups)
    problems = [p for row in rows if (p := _row_problem(course_id, row, state, owners, known))]
    if problems:
        raise RosterError(problems)
    plan.new_groups = sorted({row.group for row in rows if row.group} - known)
    for row in rows:
        current = state.get(row.username)
        applied = False
        if current is not None and (changes := identity_changes(current.__dict__, row.__dict__)):
            applied = admin or (current.role is not None and not current.in_other_courses)
            shown = applied or current.role is not None
            if not shown:  # someone else's student: their stored values are not the importer's
                changes = tuple((name, None, new) for name, _old, new in changes)
            plan.identity_changes.append(
                IdentityChange(row.row, row.username, changes, applied, shown)
            )
        if current is None or current.role is None:
            plan.additions.append(row)
        elif changed := _changed_fields(row, current, applied):
            plan.updates.append(RosterUpdate(row, changed))
        else:
            plan.unchanged += 1
    if mode == "sync":
        listed = {row.username for row in rows}
        plan.removals = sorted(
            (
                m
                for m in state.values()
                if m.role == Role.STUDENT
                and m.username not in listed
                and (group is None or m.group == group)
            ),
            key=lambda m: (m.last_name.lower(), m.username),
        )
    return plan


def _with_group(row: RosterRow, group: str | None) -> RosterRow:
    if group is None:
        return row
    return RosterRow(**{**row.__dict__, "group": group})


def _row_problem(
    course_id: str,
    row: RosterRow,
    state: dict[str, MemberState],
    owners: dict[str, str],
    groups: set[str],
) -> str | None:
    if row.group and row.group not in groups:
        try:
            check_group_name(row.group)
        except ValidationError as exc:
            return f"row {row.row}: {exc}"
    current = state.get(row.username)
    if current is not None and current.role not in (None, Role.STUDENT):
        return f"row {row.row}: {row.username} is a {current.role} of {course_id}, not a student"
    owner = owners.get(row.student_number)
    if owner is not None and owner != row.username:
        return f"row {row.row}: student number {row.student_number} belongs to user {owner}"
    return None


def _changed_fields(row: RosterRow, current: MemberState, identity: bool) -> tuple[str, ...]:
    changed = [
        f
        for f in PERSON_FIELDS
        if identity and getattr(row, f) and getattr(row, f) != getattr(current, f)
    ]
    if row.group and row.group != current.group:
        changed.append("group")
    return tuple(changed)


def read_state(
    session: Session, course: Course, rows: list[RosterRow]
) -> tuple[dict[str, MemberState], dict[str, str]]:
    """Return the course's members and the rows' known people (username -> state), and owners.

    ``owners`` maps each student number of ``rows`` already in the catalog to its username.
    """
    state: dict[str, MemberState] = {}
    listed = people_by(session, Person.username, [r.username for r in rows])
    elsewhere = _in_other_courses(session, course, [p.id for p in listed])
    for membership in course_memberships(session, course):
        group = membership.group.name if membership.group else None
        person = membership.person
        state[person.username] = _state(person, membership.role, group, person.id in elsewhere)
    for person in listed:
        state.setdefault(person.username, _state(person, other=person.id in elsewhere))
    numbers = [r.student_number for r in rows]
    owners = {
        p.student_number or "": p.username
        for p in people_by(session, Person.student_number, numbers)
    }
    return state, owners


def _state(
    person: Person, role: Role | None = None, group: str | None = None, other: bool = False
) -> MemberState:
    return MemberState(
        person.username,
        person.student_number,
        person.last_name,
        person.first_name,
        person.email,
        role,
        group,
        other,
    )


def _in_other_courses(session: Session, course: Course, person_pks: list[int]) -> set[int]:
    """Return those of ``person_pks`` with a membership in a course other than ``course``."""
    found: set[int] = set()
    for start in range(0, len(person_pks), _CHUNK):
        chunk = person_pks[start : start + _CHUNK]
        query = select(Membership.person_pk).where(
            Membership.person_pk.in_(chunk), Membership.course_pk != course.id
        )
        found.update(session.scalars(query))
    return found


def course_memberships(session: Session, course: Course) -> list[Membership]:
    """Return every membership of ``course``, with its person and group loaded."""
    query = (
        select(Membership)
        .where(Membership.course_pk == course.id)
        .options(selectinload(Membership.person), selectinload(Membership.group))
    )
    return list(session.scalars(query))


def people_by(session: Session, column: Any, values: list[str]) -> list[Person]:
    """Return the people whose ``column`` (e.g. ``Person.username``) is one of ``values``.

    One query per :data:`_CHUNK` values.
    """
    people: list[Person] = []
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        people += session.scalars(select(Person).where(column.in_(chunk)))
    return people


def plan_roster(
    session: Session,
    course: Course,
    rows: list[RosterRow],
    mode: str = "add",
    group: str | None = None,
    admin: bool = False,
) -> RosterPlan:
    """Read the course's current members, then plan the import (:func:`plan_changes`)."""
    state, owners = read_state(session, course, rows)
    groups = [g.name for g in course.groups]
    return plan_changes(course.course_id, rows, state, owners, groups, mode, group, admin)
