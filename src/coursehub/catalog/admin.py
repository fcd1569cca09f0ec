"""Running a department's catalog: years (current, archived), portals and their managers.

Who may do what (pure functions, so the web app, the API and the tests
share one rule and one refusal message):

- hub admins: everything;
- a portal's managers: create the portal's courses, archive and restore
  them, copy them to another year, name their leads (:class:`~coursehub.catalog.rules.Actor`
  ``manager``);
- a course's leads: manage their course, and copy it to another year.

An archived year (``AcademicYear.is_active`` false) makes its courses
read-only (:func:`check_writable`); an archived course is read-only too,
except for its restoration. As in :mod:`coursehub.catalog.courses`,
functions flush and never commit.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from coursehub.catalog.courses import (
    create_course,
    create_portal,
    create_year,
    get_portal,
    get_year,
    parse_year_label,
)
from coursehub.catalog.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import (
    AcademicYear,
    Course,
    Person,
    Portal,
    PortalManager,
    Role,
)
from coursehub.catalog.people import check_username, ensure_person, find_person
from coursehub.catalog.profiles import get_profile


class ReadOnlyError(ConflictError):
    """A change to a course of an archived year, or to an archived course (HTTP 409)."""


def ensure_year(session: Session, label: str, current: bool = False) -> tuple[AcademicYear, bool]:
    """Return the year ``label`` and whether it was created; make it current if asked.

    Idempotent (the command line's ``year create``). Raises
    :class:`ValidationError` for a label that is not ``YYYY-YYYY`` with
    consecutive years, and :class:`ReadOnlyError` when asked to make an
    archived year current.
    """
    start_year = parse_year_label(label)
    year = session.scalar(select(AcademicYear).where(AcademicYear.start_year == start_year))
    created = year is None
    if year is None:
        year = create_year(session, label)
    if current:
        set_current_year(session, year)
    return year, created


def set_current_year(session: Session, year: AcademicYear) -> AcademicYear:
    """Make ``year`` the current one (the others are not); :class:`ReadOnlyError` if archived."""
    if year.archived:
        raise ReadOnlyError(f"academic year {year.label} is archived: it cannot be the current one")
    session.execute(
        update(AcademicYear).where(AcademicYear.id != year.id).values(is_current=False),
        execution_options={"synchronize_session": "fetch"},
    )
    year.is_current = True
    session.flush()
    return year


def current_year(session: Session) -> AcademicYear | None:
    """Return the current year, else the newest active one, else None."""
    query = select(AcademicYear).where(AcademicYear.is_active.is_(True))
    years = list(session.scalars(query.order_by(AcademicYear.start_year.desc())))
    return next((y for y in years if y.is_current), years[0] if years else None)


def next_year_label(label: str) -> str:
    """Return the label of the year after ``label``: ``"2025-2026"`` -> ``"2026-2027"`` (pure)."""
    start = parse_year_label(label) + 1
    return f"{start}-{start + 1}"


def archive_year(session: Session, year: AcademicYear, archived: bool = True) -> AcademicYear:
    """Archive a year (its courses become read-only and leave the hub) or restore it.

    Archiving the current year leaves no current year. Idempotent.
    """
    year.is_active = not archived
    if archived:
        year.is_current = False
    session.flush()
    return year


def ensure_portal(
    session: Session, code: str, title: str = "", managers: Iterable[str] = ()
) -> tuple[Portal, bool]:
    """Return the portal ``code`` (created with ``title`` if new) and whether it was created,
    with ``managers`` added (:func:`appoint_manager`: known people only).

    An existing portal keeps its title unless ``title`` is given and differs:
    then :class:`ConflictError` (rename it with :func:`rename_portal`).
    """
    portal = session.scalar(select(Portal).where(Portal.code == code.strip()))
    created = portal is None
    if portal is None:
        portal = create_portal(session, code, title)
    elif title.strip() and title.strip() != portal.name:
        raise ConflictError(
            f"portal {portal.code} exists with the title {portal.name!r}: "
            f"rename it (`coursehub portal rename {portal.code} --title ...`)"
        )
    for username in managers:
        appoint_manager(session, portal, username)
    return portal, created


def rename_portal(session: Session, portal: Portal, title: str) -> Portal:
    """Give the portal a new title; :class:`ValidationError` if it is empty or over 200."""
    title = title.strip()
    if not title or len(title) > 200:
        raise ValidationError(f"portal {portal.code}: the title must be 1-200 characters")
    portal.name = title
    session.flush()
    return portal


def appoint_manager(session: Session, portal: Portal, username: str) -> Person:
    """Make the known person ``username`` a manager of ``portal``; idempotent.

    The rule of the web app, the API and ``coursehub portal``: a manager, as a
    lead, must be a known person. Raises :class:`NotFoundError` naming the
    field (``portal manager``) otherwise.
    """
    get_known_person(session, username, "portal manager")
    return add_manager(session, portal, username)


def add_manager(session: Session, portal: Portal, username: str) -> Person:
    """Make ``username`` a manager of ``portal`` (the person is created if unknown). Idempotent.

    For seeding (the demo's manager, test catalogs); people's requests go
    through :func:`appoint_manager`.
    """
    person = ensure_person(session, username)
    exists = session.scalar(
        select(PortalManager.id).where(
            PortalManager.portal_pk == portal.id, PortalManager.person_pk == person.id
        )
    )
    if exists is None:
        session.add(PortalManager(portal_pk=portal.id, person_pk=person.id))
        session.flush()
        session.expire(portal, ["managers"])
    return person


def remove_manager(session: Session, portal: Portal, username: str) -> None:
    """Take ``username`` off the portal's managers; :class:`NotFoundError` if not one."""
    person = find_person(session, username)
    row = None
    if person is not None:
        row = session.scalar(
            select(PortalManager).where(
                PortalManager.portal_pk == portal.id, PortalManager.person_pk == person.id
            )
        )
    if row is None:
        raise NotFoundError(f"{check_username(username)} is not a manager of portal {portal.code}")
    session.delete(row)
    session.flush()
    session.expire(portal, ["managers"])


def managed_portals(session: Session, username: str) -> list[Portal]:
    """Return the portals ``username`` manages, by code."""
    query = (
        select(Portal)
        .join(PortalManager, PortalManager.portal_pk == Portal.id)
        .join(Person, Person.id == PortalManager.person_pk)
        .where(Person.username == username.strip().lower())
        .order_by(Portal.code)
    )
    return list(session.scalars(query))


def is_manager(session: Session, username: str, portal: Portal) -> bool:
    """Whether ``username`` manages ``portal``."""
    return any(p.id == portal.id for p in managed_portals(session, username))


def render_managers(portal: Portal) -> str:
    """Return ``"mbuffat, tdupont"`` or ``"none yet"`` (pure, from ``portal.managers``)."""
    return ", ".join(p.username for p in portal.managers) or "none yet"


def creation_refusal(portal: Portal, creator_groups: Iterable[str] = ()) -> str:
    """Return the message that refuses a course creation in ``portal`` and says who may.

    ``creation_refusal(meca) == "only an admin or a manager of portal MECA (now: mbuffat)
    can create courses in it"``; hub groups that may create courses anywhere are named too.
    """
    groups = sorted(creator_groups)
    also = f" or a member of the hub group {', '.join(groups)}" if groups else ""
    return (
        f"only an admin{also} or a manager of portal {portal.code} "
        f"(now: {render_managers(portal)}) can create courses in it"
    )


def check_may_create(
    portal: Portal, admin: bool, managed: Iterable[Portal], in_creator_group: bool = False
) -> None:
    """Refuse (:class:`ForbiddenError`) a course creation in ``portal`` by someone who is not
    an admin, a manager of it, nor in a course-creating hub group (pure)."""
    if admin or in_creator_group or any(p.id == portal.id for p in managed):
        return
    raise ForbiddenError(creation_refusal(portal))


def plan_read_only(course_archived: bool, year_archived: bool, course_id: str, year: str) -> str:
    """Return why a course is read-only (``""``: it is not), naming how to lift it (pure)."""
    if year_archived:
        return (
            f"course {course_id} is read-only: academic year {year} is archived "
            "(its grades stay exportable; an admin can restore the year)"
        )
    if course_archived:
        return (
            f"course {course_id} is read-only: it is archived "
            "(an admin or a manager of its portal can restore it)"
        )
    return ""


def check_writable(course: Course) -> None:
    """Raise :class:`ReadOnlyError` if ``course`` is archived or its year is."""
    reason = plan_read_only(
        course.archived, course.year.archived, course.course_id, course.year.label
    )
    if reason:
        raise ReadOnlyError(reason)


def archive_course(session: Session, course: Course, archived: bool = True) -> Course:
    """Archive (read-only, out of the hub) or restore a course; idempotent.

    Restoring a course of an archived year is refused (:class:`ReadOnlyError`).
    """
    if not archived and course.year.archived:
        raise ReadOnlyError(
            f"course {course.course_id} stays archived: academic year {course.year.label} is "
            "archived (an admin can restore the year)"
        )
    course.archived = archived
    session.flush()
    return course


def get_open_year(session: Session, label: str, what: str) -> AcademicYear:
    """Return the year ``label``; :class:`ReadOnlyError` if archived (``what``: what is refused)."""
    year = get_year(session, label)
    if year.archived:
        raise ReadOnlyError(f"academic year {year.label} is archived: cannot {what}")
    return year


def get_known_person(session: Session, username: str, what: str) -> Person:
    """Return the person ``username``; :class:`NotFoundError` naming ``what`` (e.g. ``"lead"``)
    and how people become known when there is none."""
    person = find_person(session, username)
    if person is None:
        raise NotFoundError(
            f"{what} {check_username(username)!r} is not a known person: people become known "
            "when they join a course (its Members page, a roster import)"
        )
    return person


def open_course(
    session: Session,
    code: str,
    title: str,
    year_label: str,
    portal_code: str,
    *,
    lead: str = "",
    profile: str = "",
    team_profile: str = "",
    description: str = "",
) -> Course:
    """Create a course in an open year and a portal, with ``lead`` (a known person) as its lead.

    Raises
    ------
    ValidationError
        A bad code, an empty title, a year label that is not ``YYYY-YYYY``.
    NotFoundError
        An unknown year, portal, profile (students' or team's), or a lead who is not a
        known person.
    ReadOnlyError
        The year is archived.
    ConflictError
        The code already exists that year.
    """
    parse_year_label(year_label)
    year = get_open_year(session, year_label, "create courses in it")
    portal = get_portal(session, portal_code)
    known = get_known_person(session, lead, "lead") if lead.strip() else None
    chosen = get_profile(session, profile) if profile.strip() else None
    team = get_profile(session, team_profile) if team_profile.strip() else None
    course = create_course(
        session,
        code,
        title,
        year,
        portal,
        description=description,
        profile=chosen,
        team_profile=team,
    )
    if known is not None:
        add_member(session, course, known.username, Role.LEAD)
    return course
