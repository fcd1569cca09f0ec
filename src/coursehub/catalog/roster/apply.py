"""Apply a roster plan in one transaction, and the one-call import of a roster file.

:func:`apply_roster` writes a :class:`~coursehub.catalog.roster.plan.RosterPlan`
all or nothing, refusing a plan that the course has outgrown since
(:class:`~coursehub.catalog.errors.ConflictError`); database errors become
messages without values (:mod:`coursehub.catalog.dberrors`).
:func:`import_roster` parses, plans and applies a file, as
``coursehub roster import`` does.
"""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from coursehub.catalog.courses import get_course
from coursehub.catalog.dberrors import describe_db_error
from coursehub.catalog.errors import ConflictError, IdentityError, RosterError
from coursehub.catalog.models.courses import (
    Course,
    CourseGroup,
    GroupKind,
    Membership,
    Person,
    Role,
)
from coursehub.catalog.roster.parse import RosterRow, parse_roster
from coursehub.catalog.roster.plan import (
    PERSON_FIELDS,
    RosterPlan,
    course_memberships,
    people_by,
    plan_roster,
)


def apply_roster(session: Session, plan: RosterPlan) -> None:
    """Write a plan in one transaction and commit; on any error roll everything back and re-raise.

    New people and memberships are inserted in bulk (SQLAlchemy "ORM bulk
    INSERT"), so the session is expired afterwards: loaded collections such
    as ``course.groups`` reload on next access.

    Raises
    ------
    ConflictError
        If the catalog changed after the plan was made (a student to add is
        already in the course, one to update or remove has left it or joined
        its teaching team, or a student number was given to someone else):
        the message names the broken rule, never a value.
    RosterError
        If the database refuses a value (too long, a character it cannot
        store): nothing written.
    """
    try:
        course = get_course(session, plan.course_id)
        groups = {g.name: g for g in course.groups}
        for name in plan.new_groups:
            groups[name] = CourseGroup(course=course, name=name, kind=GroupKind.TD)
            session.add(groups[name])
        members = {m.person.username: m for m in course_memberships(session, course)}
        _check_current(plan, members)
        session.flush()
        _apply_additions(session, course, plan, groups)
        for update in plan.updates:
            if plan.applies_identity(update.row.username):
                _set_fields(members[update.row.username].person, update.row)
            if update.row.group:
                members[update.row.username].group = groups[update.row.group]
        for removed in plan.removals:
            session.delete(members[removed.username])
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise ConflictError(
            f"roster of {plan.course_id} not applied, nothing written: the catalog changed "
            f"meanwhile ({describe_db_error(exc)}): preview again"
        ) from None
    except DBAPIError as exc:
        session.rollback()
        raise RosterError(
            [
                "not applied, nothing written: the database refused a value "
                f"({describe_db_error(exc)})"
            ]
        ) from None
    except BaseException:
        session.rollback()
        raise
    session.expire_all()


def _check_current(plan: RosterPlan, members: dict[str, Membership]) -> None:
    """Raise ConflictError unless every row to update or remove is still a student of the
    course (a roster never touches the teaching team: a member promoted meanwhile, maybe to
    lead, stays) and every row to add is still out of it."""

    def gone(username: str) -> bool:
        member = members.get(username)
        return member is None or member.role != Role.STUDENT

    stale = [row.username for row in plan.additions if row.username in members]
    stale += [u.row.username for u in plan.updates if gone(u.row.username)]
    stale += [m.username for m in plan.removals if gone(m.username)]
    if stale:
        raise ConflictError(
            f"course {plan.course_id} changed since the preview "
            f"({', '.join(stale[:5])}): preview again"
        )


def _apply_additions(
    session: Session, course: Course, plan: RosterPlan, groups: dict[str, CourseGroup]
) -> None:
    rows = plan.additions
    existing = people_by(session, Person.username, [r.username for r in rows])
    person_pks = {p.username: p.id for p in existing}
    by_username = {p.username: p for p in existing}
    for row in rows:
        if row.username in by_username and plan.applies_identity(row.username):
            _set_fields(by_username[row.username], row)
    new = [_person_values(row) for row in rows if row.username not in person_pks]
    if new:
        inserted = session.execute(insert(Person).returning(Person.id, Person.username), new)
        person_pks.update({username: pk for pk, username in inserted})
    memberships = [
        {
            "person_pk": person_pks[row.username],
            "course_pk": course.id,
            "role": Role.STUDENT,
            "group_pk": groups[row.group].id if row.group else None,
        }
        for row in rows
    ]
    if memberships:
        session.execute(insert(Membership), memberships)


def _person_values(row: RosterRow) -> dict[str, str | None]:
    return {"username": row.username, **{name: getattr(row, name) for name in PERSON_FIELDS}}


def _set_fields(person: Person, row: RosterRow) -> None:
    for name in PERSON_FIELDS:
        value = getattr(row, name)
        if value:
            setattr(person, name, value)


def import_roster(
    session: Session,
    course_id: str,
    data: bytes,
    mode: str = "add",
    group: str | None = None,
    username_rule: str = "student_id",
    dry_run: bool = False,
    admin: bool = False,
    confirm: bool = False,
) -> RosterPlan:
    """Parse, plan and (unless ``dry_run``) apply a roster file; return the plan.

    ``admin``: the importer is a hub admin (:func:`coursehub.catalog.roster.plan.plan_changes`);
    ``confirm``: apply the plan's identity changes
    (:attr:`coursehub.catalog.roster.plan.RosterPlan.needs_confirmation`).

    Raises
    ------
    RosterError
        Any problem of the file (:func:`coursehub.catalog.roster.parse.parse_roster`) or plan.
    IdentityError
        If the plan renames or re-mails existing people and ``confirm`` is False.
    NotFoundError
        If the course does not exist.
    """
    rows = parse_roster(data, username_rule)
    plan = plan_roster(session, get_course(session, course_id), rows, mode, group, admin)
    if not dry_run:
        check_confirmed(plan, confirm)
        apply_roster(session, plan)
    return plan


def check_confirmed(plan: RosterPlan, confirm: bool) -> None:
    """Raise :class:`IdentityError` if ``plan`` changes identities and ``confirm`` is False."""
    if plan.needs_confirmation and not confirm:
        count = sum(1 for change in plan.identity_changes if change.applied)
        raise IdentityError(
            f"roster of {plan.course_id} not applied, nothing written: it changes the name, "
            f"e-mail or student number of {count} existing "
            f"{'person' if count == 1 else 'people'} (the '~ row' lines of the preview): "
            "confirm these changes to apply it"
        )
