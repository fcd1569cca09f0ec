"""People: usernames, identity fields, finding and creating people, their courses.

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
- A course always keeps at least one lead
  (:func:`coursehub.catalog.rules.check_role_change`); memberships:
  :mod:`coursehub.catalog.members`.

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
    Course,
    Membership,
    Person,
    Role,
)
from coursehub.catalog.rules import (
    FIELD_NAMES,
    IDENTITY_FIELDS,
    SYSTEM,
    Actor,
    identity_changes,
    may_change_identity,
)
from coursehub.catalog.text import control_char_problem

#: A pragmatic e-mail check: one "@", no spaces, a dot in the domain. Full
#: RFC 5322 validation is not the point; catching a shifted CSV column is.
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_USERNAME = re.compile(r"^[a-z0-9][a-z0-9._@+-]{0,127}$")


def normalize_username(name: str) -> str:
    """Return ``name`` as the hub stores it: surrounding spaces removed, lower case."""
    return name.strip().lower()


def username_or_none(name: str) -> str | None:
    """Return ``name`` normalised (:func:`normalize_username`), or None if it cannot be a
    username (pure): ``username_or_none(" Ada ") == "ada"``, ``username_or_none("a b")`` is None.
    """
    username = normalize_username(name)
    return username if _USERNAME.match(username) else None


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
    name = username_or_none(username)
    if name is None:
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
