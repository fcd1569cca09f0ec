"""Years, portals and courses as the command line's ``--json`` and the API show them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from coursehub.catalog.members import course_leads
from coursehub.catalog.models.courses import (
    AcademicYear,
    Course,
    Membership,
    Portal,
    ResourceProfile,
    Role,
)


def plan_year_state(is_active: bool, is_current: bool) -> str:
    """Return ``"current"``, ``"open"`` or ``"archived"`` (pure)."""
    if not is_active:
        return "archived"
    return "current" if is_current else "open"


def render_year(year: AcademicYear, n_courses: int | None = None) -> dict[str, Any]:
    """Return ``{"label", "start_year", "state", "n_courses"?}``."""
    row: dict[str, Any] = {
        "label": year.label,
        "start_year": year.start_year,
        "state": plan_year_state(year.is_active, year.is_current),
    }
    if n_courses is not None:
        row["n_courses"] = n_courses
    return row


def render_portal(portal: Portal) -> dict[str, Any]:
    """Return ``{"code", "title", "managers": [usernames]}``."""
    return {
        "code": portal.code,
        "title": portal.name,
        "managers": [p.username for p in portal.managers],
    }


def render_course_row(session: Session, course: Course) -> dict[str, Any]:
    """Return a course's administration view: ids, year, portal, profile, leads, groups,
    material, number of students, state, the course it was copied from."""
    n_students = session.scalar(
        select(func.count())
        .select_from(Membership)
        .where(Membership.course_pk == course.id, Membership.role == Role.STUDENT)
    )
    source = session.get(Course, course.copied_from_pk) if course.copied_from_pk else None
    return {
        "course_id": course.course_id,
        "code": course.code,
        "title": course.title,
        "year": course.year.label,
        "portal": course.portal.code,
        "profile": course.profile.name if course.profile else None,
        "team_profile": course.team_profile.name if course.team_profile else None,
        "budget_cpu_hours": course.budget_cpu_hours,
        "budget_gpu_hours": course.budget_gpu_hours,
        "leads": course_leads(session, course),
        "groups": [g.name for g in course.groups],
        "git_url": course.material.git_url if course.material else None,
        "n_students": int(n_students or 0),
        "archived": course.archived,
        "read_only": course.archived or course.year.archived,
        "copied_from": source.course_id if source else None,
    }


def same_course(session: Session, course: Course, args: Any) -> bool:
    """Whether ``course`` already is what ``coursehub course create`` asks for (then the
    command only prints its course_id): same portal, title, and lead and profiles if given."""
    if course.portal.code != args.portal.strip() or course.title != args.title.strip():
        return False
    if args.lead.strip() and args.lead.strip().lower() not in course_leads(session, course):
        return False
    return _same_profile(course.profile, args.profile) and _same_profile(
        course.team_profile, getattr(args, "team_profile", "")
    )


def _same_profile(profile: ResourceProfile | None, wanted: str) -> bool:
    """Whether ``profile`` is the one named ``wanted`` ("": any)."""
    wanted = wanted.strip()
    return not wanted or (profile is not None and profile.name == wanted)
