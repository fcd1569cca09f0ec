"""A signed-in person's own resources, per course of the current year (the student's page).

For each course of the current academic year the person is a member of:
their role, the resource profile of that role (the students' profile, or
:func:`coursehub.catalog.models.courses.team_profile_of` for the team: a
person who teaches one course and studies in another sees each with its
role's limits, as the spawn page offers them, docs/profiles.md), and their
week against the course's budget (:func:`coursehub.usage.weekly.budget_status`).
Only the person's own figures are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.admin import current_year
from coursehub.catalog.models.courses import (
    TEAM_ROLES,
    Course,
    Membership,
    Person,
    ResourceProfile,
    Role,
    team_profile_of,
)
from coursehub.meter.budget import BudgetStatus
from coursehub.usage.weekly import budget_status


@dataclass(frozen=True)
class MyCourse:
    """One course on the person's page."""

    course: Course
    role: Role
    profile: ResourceProfile | None
    week: BudgetStatus

    @property
    def is_team(self) -> bool:
        """True for the lead, a teacher or a grader of the course."""
        return self.role in TEAM_ROLES


def my_courses(
    session: Session, username: str, zone: ZoneInfo, now: datetime | None = None
) -> list[MyCourse]:
    """Return ``username``'s courses of the current year, by course id, with their week."""
    year = current_year(session)
    if year is None:
        return []
    rows = session.execute(
        select(Course, Membership.role)
        .join(Membership, Membership.course_pk == Course.id)
        .join(Person, Person.id == Membership.person_pk)
        .where(Person.username == username, Course.year_pk == year.id)
        .order_by(Course.course_id)
    ).all()
    found = []
    for course, role in rows:
        profile = team_profile_of(course) if role in TEAM_ROLES else course.profile
        week = budget_status(session, course, username, zone, now)
        found.append(MyCourse(course, Role(role), profile, week))
    return found
