"""People and their roles in courses: the teaching team, students, visibility.

As in :mod:`coursehub.catalog.courses`, functions flush and never commit.
Usernames are stored the way JupyterHub's authenticators normalise them
(:func:`normalize_username`: stripped, lower case; JupyterHub documentation,
API reference ``jupyterhub.auth``, ``Authenticator.normalize_username``).

Two rules protect what belongs to no single course:

- Identity (:data:`IDENTITY_FIELDS`: names, e-mail, student number) is the
  person's, shared by every course. A manager of course A may change it only
  for a person whose memberships are all in A (a lead's only if a lead of A
  too); anyone else's identity only a hub admin changes
  (:func:`may_change_identity`). Adding an existing person
  to A with other values is refused (:class:`IdentityError`, HTTP 409)
  without showing the stored values; leaving the fields empty adds them as
  they are.
- A course always keeps at least one lead. Only a lead of the course or a
  hub admin makes or unmakes leads, and nobody removes or demotes the last
  lead (:func:`check_role_change`).

Callers say who asks with an :class:`Actor`; the default, :data:`SYSTEM`
(command line, seeds), has a hub admin's rights.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import (
    ConflictError,
    ForbiddenError,
    IdentityError,
    NotFoundError,
    ValidationError,
)
from coursehub.catalog.models.courses import (
    TEAM_ROLES,
    AcademicYear,
    Course,
    CourseGroup,
    Membership,
    Person,
    Role,
)
from coursehub.catalog.rules import (
    FIELD_NAMES,
    IDENTITY_FIELDS,
    SYSTEM,
    Actor,
    check_role_change,
    identity_changes,
    may_change_identity,
)
from coursehub.catalog.text import control_char_problem, quote_text

__all__ = ["SYSTEM", "Actor", "check_role_change", "identity_changes", "may_change_identity"]

#: A pragmatic e-mail check: one "@", no spaces, a dot in the domain. Full
#: RFC 5322 validation is not the point; catching a shifted CSV column is.
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_USERNAME = re.compile(r"^[a-z0-9][a-z0-9._@+-]{0,127}$")


def normalize_username(name: str) -> str:
    """Return ``name`` as the hub stores it: surrounding spaces removed, lower case."""
    return name.strip().lower()


def check_username(name: str) -> str:
    """Return the normalised username, or raise :class:`ValidationError` if it cannot be one."""
    username = normalize_username(name)
    if not _USERNAME.match(username):
        raise ValidationError(
            f"username {name!r} must be 1-128 characters among a-z 0-9 . _ @ + -, "
            "starting with a letter or digit"
        )
    return username


def check_email(email: str) -> str:
    """Return ``email`` stripped, or raise :class:`ValidationError` if it is not an address."""
    email = email.strip()
    if control_char_problem(email):
        raise ValidationError(f"the e-mail {control_char_problem(email)}")
    if not _EMAIL.match(email):
        raise ValidationError(f"{email!r} is not an e-mail address")
    return email


def check_identity(values: Mapping[str, str | None]) -> dict[str, str]:
    """Return the non-empty identity values stripped, checked for length and characters.

    Raises
    ------
    ValidationError
        A value longer than :data:`IDENTITY_FIELDS` allows, holding a control
        character (:mod:`coursehub.catalog.text`), or a bad e-mail.
    """
    checked: dict[str, str] = {}
    for name, limit in IDENTITY_FIELDS.items():
        value = (values.get(name) or "").strip()
        if not value:
            continue
        if problem := control_char_problem(value):
            raise ValidationError(f"the {FIELD_NAMES[name]} {problem}")
        if len(value) > limit:
            raise ValidationError(f"the {FIELD_NAMES[name]} is longer than {limit} characters")
        checked[name] = check_email(value) if name == "email" else value
    return checked


def parse_role(role: str) -> Role:
    """Return the :class:`Role` named ``role`` (``lead``, ``teacher``, ``grader``, ``student``)."""
    try:
        return Role(role.strip().lower())
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise ValidationError(f"role {role!r} is not one of {names}") from None


def get_person(session: Session, username: str) -> Person:
    """Return the person with ``username`` (normalised first); :class:`NotFoundError` if none."""
    person = find_person(session, username)
    if person is None:
        raise NotFoundError(f"no person with username {normalize_username(username)!r}")
    return person


def find_person(session: Session, username: str) -> Person | None:
    """Return the person with ``username`` (normalised first), or None (also for a string
    that cannot be a username)."""
    name = normalize_username(username)
    if not _USERNAME.match(name):
        return None
    return session.scalar(select(Person).where(Person.username == name))


def ensure_person(
    session: Session,
    username: str,
    first_name: str = "",
    last_name: str = "",
    email: str | None = None,
    student_number: str | None = None,
    *,
    course: Course | None = None,
    actor: Actor = SYSTEM,
) -> Person:
    """Return the person with ``username``, creating it if needed.

    Names, e-mail and student number given (non-empty) replace the stored
    ones when :func:`may_change_identity` lets ``actor``, managing
    ``course``, change them.

    Raises
    ------
    ValidationError
        A bad username or identity value (:func:`check_identity`).
    IdentityError
        The person exists, a given value differs and ``actor`` may not change
        it (the message names the fields, never the stored values).
    ForbiddenError
        The person is a lead of ``course`` only, a given value differs and
        ``actor`` is neither a lead of it nor an admin.
    ConflictError
        If the student number belongs to someone else.
    """
    username = check_username(username)
    values = check_identity(
        {
            "first_name": first_name,
            "last_name": last_name,
            "email": email,
            "student_number": student_number,
        }
    )
    person = find_person(session, username)
    if person is None:
        person = Person(username=username, first_name="", last_name="")
        session.add(person)
    else:
        current = {name: getattr(person, name) for name in IDENTITY_FIELDS}
        changes = identity_changes(current, values)
        roles = person_roles(session, person)
        courses = set(roles)
        course_pk = course.id if course is not None else None
        role = roles.get(course_pk) if course_pk is not None else None
        if changes and not may_change_identity(actor, courses, course_pk, role):
            fields = ", ".join(FIELD_NAMES[name] for name, _old, _new in changes)
            if role == Role.LEAD and courses == {course_pk}:
                raise ForbiddenError(
                    f"{username} is a lead of {course.course_id if course else 'the course'}: "
                    f"only a lead of the course or a hub admin may change their {fields}"
                )
            where = f"outside {course.course_id}" if course is not None else "already"
            raise IdentityError(
                f"{username} exists {where}: only a hub admin may change their {fields}; "
                "leave these fields empty to add them as they are"
            )
    number = values.get("student_number")
    if number:
        owner = session.scalar(select(Person).where(Person.student_number == number))
        if owner is not None and owner is not person:
            raise ConflictError(f"student number {number} belongs to {owner.username}")
    for name, value in values.items():
        setattr(person, name, value)
    session.flush()
    return person


def person_roles(session: Session, person: Person) -> dict[int, Role]:
    """Return the person's role in each of their courses, by course id (one query)."""
    if person.id is None:  # not flushed yet: in no course
        return {}
    query = select(Membership.course_pk, Membership.role).where(Membership.person_pk == person.id)
    return {course_pk: role for course_pk, role in session.execute(query)}


class PersonCourse(NamedTuple):
    """A course a person belongs to, with its id and the person's role in it."""

    course_pk: int
    course_id: str
    role: Role


#: People per ``IN (...)`` list, below the bound parameters every SQLite allows (999).
_CHUNK = 500


def search_people(session: Session, text: str, limit: int = 50) -> list[Person]:
    """Return people whose username, names, e-mail or student number contain ``text``.

    Case-insensitive, by last name then username; :func:`courses_of` tells
    where they are enrolled.
    """
    pattern = f"%{text.strip().lower()}%"
    columns = (Person.username, Person.first_name, Person.last_name, Person.email)
    query = (
        select(Person)
        .where(or_(*(col.ilike(pattern) for col in columns), Person.student_number.ilike(pattern)))
        .order_by(Person.last_name, Person.username)
        .limit(limit)
    )
    return list(session.scalars(query))


def courses_of(session: Session, people: list[Person]) -> dict[int, list[PersonCourse]]:
    """Return the courses of each person (by person id; by ``course_id``), one query per
    :data:`_CHUNK` people; people in no course are left out."""
    found: dict[int, list[PersonCourse]] = {}
    pks = [p.id for p in people]
    for start in range(0, len(pks), _CHUNK):
        query = (
            select(Membership.person_pk, Membership.course_pk, Course.course_id, Membership.role)
            .join(Membership.course)
            .where(Membership.person_pk.in_(pks[start : start + _CHUNK]))
            .order_by(Course.course_id)
        )
        for person_pk, course_pk, course_id, role in session.execute(query):
            found.setdefault(person_pk, []).append(PersonCourse(course_pk, course_id, role))
    return found


def get_membership(session: Session, course: Course, username: str) -> Membership | None:
    """Return the membership of ``username`` in ``course``, or None (also for a string that
    cannot be a username: the database never sees it)."""
    name = normalize_username(username)
    if not _USERNAME.match(name):
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
    ``last_name``, ``email``, ``student_number``) go to :func:`ensure_person`
    with ``actor``, who must also pass :func:`check_role_change`.

    Raises
    ------
    ValidationError
        A bad role, a group of another course, a bad person field.
    IdentityError, ForbiddenError, ConflictError
        From :func:`ensure_person` and :func:`check_role_change`.
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
