"""Each student's home quota from the catalog: course, else portal, else the department's default.

A course's ``home_quota`` applies to its students; a course without one
takes its portal's; a portal without one, the department's default
(``COURSEHUB_HOME_QUOTA``, e.g. ``2G``; unset: no limit). A student in
several courses gets the most generous of their courses' quotas (one home,
as the spawn profile picks the most generous default). Only courses that are
not archived, in an active year, count; teams are not limited.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import AcademicYear, Course, Membership, Person, Role
from coursehub.errors import UsageError
from coursehub.resources.units import parse_mem

#: The department's default quota (a size such as ``2G``), read by :func:`department_default`.
DEFAULT_VAR = "COURSEHUB_HOME_QUOTA"


def parse_quota(text: str, where: str = "home quota") -> int | None:
    """Return bytes for a size such as ``2G`` or ``500M``; ``none`` (or "") for no limit.

    Raises
    ------
    UsageError
        For a size :func:`coursehub.resources.units.parse_mem` refuses, or 0.
    """
    if text.strip().lower() in ("", "none"):
        return None
    try:
        value = parse_mem(text)
    except (UsageError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}") from None
    if value <= 0:
        raise UsageError(f"{where} must be more than 0 (or 'none'), got {text!r}")
    return value


def department_default(environ: Mapping[str, str] | None = None) -> int | None:
    """Return ``COURSEHUB_HOME_QUOTA`` in bytes (None when unset: no limit)."""
    env = os.environ if environ is None else environ
    return parse_quota(env.get(DEFAULT_VAR, ""), DEFAULT_VAR)


def course_quota(course: Course, default: int | None) -> int | None:
    """Return the quota of ``course``'s students: the course's, the portal's, the default."""
    if course.home_quota is not None:
        return course.home_quota
    if course.portal.home_quota is not None:
        return course.portal.home_quota
    return default


def most_generous(quotas: Iterable[int | None]) -> int | None:
    """Return the largest of ``quotas``; None (no limit) beats any size (pure)."""
    values = list(quotas)
    if not values or any(q is None for q in values):
        return None
    return max(q for q in values if q is not None)


def student_quotas(session: Session, default: int | None) -> dict[str, int | None]:
    """Return ``{username: bytes or None}`` for every student of a live course (sorted)."""
    rows = session.execute(
        select(Person.username, Course)
        .join(Membership, Membership.person_pk == Person.id)
        .join(Course, Membership.course_pk == Course.id)
        .join(AcademicYear, Course.year_pk == AcademicYear.id)
        .where(Membership.role == Role.STUDENT)
        .where(Course.archived.is_(False), AcademicYear.is_active.is_(True))
    ).all()
    found: dict[str, list[int | None]] = {}
    for username, course in rows:
        found.setdefault(username, []).append(course_quota(course, default))
    return {user: most_generous(found[user]) for user in sorted(found)}
