"""Copying courses to another academic year: one course, or a whole year (a rollover).

A copy keeps the course's UE code, title, description, portal, resource
profile, material (repository, branch, folder) and its TD/TP group names
(empty); its leads always (a course keeps at least one lead,
:mod:`coursehub.catalog.rules`) and, with ``with_team``, its teachers and
graders. Students never, nor anything of grading: the gradebook lives in the
course's nbgrader directory, whose assignment sources the caller copies
(:mod:`coursehub.admin.carry`). The new ``course_id`` is
:func:`coursehub.catalog.courses.make_course_id` of the code and the new year.

Refused, with nothing written: a source year that is archived, a target year
that is archived or the same, a target year that already has the course's code
(a rollover skips those courses instead, so it can run again). Functions
flush and never commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.admin import ReadOnlyError
from coursehub.catalog.courses import list_courses, make_course_id
from coursehub.catalog.errors import ConflictError, ValidationError
from coursehub.catalog.models.courses import (
    AcademicYear,
    Course,
    CourseGroup,
    CourseMaterial,
    Membership,
    Portal,
    Role,
)

#: Roles copied without ``with_team`` / with it.
LEADS_ONLY: frozenset[Role] = frozenset({Role.LEAD})
WHOLE_TEAM: frozenset[Role] = frozenset({Role.LEAD, Role.TEACHER, Role.GRADER})


@dataclass(frozen=True)
class CopyStep:
    """One course of a rollover: ``action`` is ``"copy"`` or ``"exists"`` (skipped)."""

    source: str
    target: str
    code: str
    title: str
    portal: str
    action: str


def plan_rollover(
    courses: Iterable[tuple[str, str, str, str]], existing_codes: set[str], to_start_year: int
) -> list[CopyStep]:
    """Return the steps of a rollover (pure).

    Parameters
    ----------
    courses
        ``(course_id, code, title, portal code)`` of each course to copy.
    existing_codes
        UE codes the target year already has (their courses are skipped).
    to_start_year
        The target year's first calendar year (``2026`` for ``2026-2027``).
    """
    return [
        CopyStep(
            source=course_id,
            target=make_course_id(code, to_start_year),
            code=code,
            title=title,
            portal=portal,
            action="exists" if code in existing_codes else "copy",
        )
        for course_id, code, title, portal in courses
    ]


def check_copy_years(source: AcademicYear, target: AcademicYear) -> None:
    """Refuse a copy from an archived year, to an archived year, the same or an earlier year."""
    if source.archived:
        raise ReadOnlyError(
            f"academic year {source.label} is archived: its courses cannot be rolled over "
            "(an admin can restore it first)"
        )
    if target.archived:
        raise ReadOnlyError(
            f"academic year {target.label} is archived: nothing can be copied to it"
        )
    if target.id == source.id:
        raise ValidationError(f"copying onto the same academic year {target.label}")
    if target.start_year < source.start_year:
        raise ValidationError(
            f"academic year {target.label} is before {source.label}: courses are copied "
            "to a later year only"
        )


def codes_in(session: Session, year: AcademicYear) -> set[str]:
    """Return the UE codes of every course of ``year`` (archived ones included)."""
    return set(session.scalars(select(Course.code).where(Course.year_pk == year.id)))


def copy_course(
    session: Session, course: Course, to_year: AcademicYear, with_team: bool = False
) -> Course:
    """Copy ``course`` to ``to_year`` and return the new course (see the module's docstring).

    Raises
    ------
    ReadOnlyError
        The course's year or ``to_year`` is archived.
    ValidationError
        ``to_year`` is the course's year.
    ConflictError
        ``to_year`` already has a course with this code.
    """
    check_copy_years(course.year, to_year)
    target_id = make_course_id(course.code, to_year.start_year)
    if course.code in codes_in(session, to_year):
        raise ConflictError(
            f"academic year {to_year.label} already has course {course.code} ({target_id}): "
            "nothing copied"
        )
    new = Course(
        code=course.code,
        title=course.title,
        description=course.description,
        course_id=target_id,
        year=to_year,
        portal=course.portal,
        profile=course.profile,
        team_profile=course.team_profile,
        copied_from_pk=course.id,
    )
    session.add(new)
    for group in course.groups:
        session.add(CourseGroup(course=new, name=group.name, kind=group.kind))
    if course.material is not None:
        new.material = CourseMaterial(
            git_url=course.material.git_url,
            branch=course.material.branch,
            subpath=course.material.subpath,
        )
    session.flush()
    roles = WHOLE_TEAM if with_team else LEADS_ONLY
    team = session.execute(
        select(Membership.person_pk, Membership.role).where(
            Membership.course_pk == course.id, Membership.role.in_(list(roles))
        )
    )
    for person_pk, role in team:
        session.add(Membership(person_pk=person_pk, course_pk=new.id, role=role))
    session.flush()
    return new


def rollover(
    session: Session,
    from_year: AcademicYear,
    to_year: AcademicYear,
    *,
    portal: Portal | None = None,
    with_team: bool = False,
    dry_run: bool = False,
) -> list[tuple[CopyStep, Course | None]]:
    """Copy every non-archived course of ``from_year`` (of ``portal`` only, if given) to
    ``to_year``, skipping those whose code ``to_year`` already has; idempotent.

    Returns each step with its new course (None when skipped or ``dry_run``).
    Raises :class:`ReadOnlyError` / :class:`ValidationError` as :func:`check_copy_years`.
    """
    check_copy_years(from_year, to_year)
    courses = list_courses(session, year=from_year, portal=portal)
    steps = plan_rollover(
        ((c.course_id, c.code, c.title, c.portal.code) for c in courses),
        codes_in(session, to_year),
        to_year.start_year,
    )
    done: list[tuple[CopyStep, Course | None]] = []
    for step, course in zip(steps, courses, strict=True):
        copied = None
        if step.action == "copy" and not dry_run:
            copied = copy_course(session, course, to_year, with_team=with_team)
        done.append((step, copied))
    return done


def render_steps(steps: Iterable[CopyStep], dry_run: bool = False) -> str:
    """Return one line per step: ``copy mlmeca-2025 -> mlmeca-2026 (MECA: title)`` (pure)."""
    lines = []
    for step in steps:
        verb = {"copy": "would copy" if dry_run else "copied", "exists": "already there"}
        lines.append(
            f"{verb[step.action]}: {step.source} -> {step.target} ({step.portal}: {step.title})"
        )
    if not lines:
        lines.append("no course to roll over")
    return "\n".join(lines) + "\n"
