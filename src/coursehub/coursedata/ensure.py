"""``coursehub data ensure``: every course's data folder made or refreshed from the catalog."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import TEAM_ROLES, Course, Membership, Person, Role
from coursehub.catalog.people import normalize_username
from coursehub.coursedata.folders import (
    CourseDataError,
    CourseDataPlan,
    apply_course_data,
    plan_course_data,
    unix_account_exists,
)
from coursehub.errors import UsageError


@dataclass(frozen=True)
class Roster:
    """A course's usernames by side: ``team`` (lead, teacher, grader) and ``students``."""

    course_id: str
    team: frozenset[str]
    students: frozenset[str]


@dataclass(frozen=True)
class DataOutcome:
    """What ``ensure`` did for one course: the folder, or the error; the plan either way."""

    plan: CourseDataPlan
    folder: Path | None
    error: str = ""


def load_rosters(session: Session, course_ids: Iterable[str] | None = None) -> list[Roster]:
    """Return the roster of each course (every course when ``course_ids`` is None).

    Raises
    ------
    UsageError
        If a course id of ``course_ids`` is not in the catalog.
    """
    query = select(Course.id, Course.course_id).order_by(Course.course_id)
    wanted = None if course_ids is None else sorted(set(course_ids))
    if wanted is not None:
        query = query.where(Course.course_id.in_(wanted))
    courses = {pk: course_id for pk, course_id in session.execute(query)}
    if wanted is not None:
        unknown = sorted(set(wanted) - set(courses.values()))
        if unknown:
            raise UsageError(f"no course {', '.join(unknown)} in the catalog")
    members: dict[int, list[tuple[Role, str]]] = {pk: [] for pk in courses}
    rows = session.execute(
        select(Membership.course_pk, Membership.role, Person.username)
        .join(Membership.person)
        .where(Membership.course_pk.in_(list(courses)))
    )
    for course_pk, role, username in rows:
        members[course_pk].append((role, normalize_username(username)))
    return [
        Roster(
            course_id=courses[pk],
            team=frozenset(u for role, u in rows_ if role in TEAM_ROLES),
            students=frozenset(u for role, u in rows_ if role == Role.STUDENT),
        )
        for pk, rows_ in members.items()
    ]


def ensure_data(
    session: Session,
    root: str | os.PathLike[str],
    course_ids: Iterable[str] | None = None,
    recursive: bool = False,
) -> list[DataOutcome]:
    """Make or refresh the data folders of ``course_ids`` (None: every course); one outcome each.

    A course that fails (a command refused) is reported and the others go on.
    """
    outcomes = []
    for roster in load_rosters(session, course_ids):
        plan = plan_course_data(roster.course_id, roster.team, roster.students, unix_account_exists)
        try:
            folder = apply_course_data(root, plan, recursive=recursive)
        except CourseDataError as exc:
            outcomes.append(DataOutcome(plan, None, str(exc)))
        else:
            outcomes.append(DataOutcome(plan, folder))
    return outcomes


def render_outcomes(outcomes: list[DataOutcome]) -> str:
    """Return one line per course (pure): folder, group sizes, accounts missing, or the error."""
    lines = []
    for o in outcomes:
        p = o.plan
        if o.error:
            lines.append(f"{p.course_id}: error: {o.error}")
            continue
        line = (
            f"{p.course_id}: {o.folder} (team {p.team_group}: {len(p.team)}, "
            f"students {p.students_group}: {len(p.students)})"
        )
        if p.missing:
            line += f"; no Unix account for {', '.join(p.missing)}"
        lines.append(line)
    return "\n".join(lines) if lines else "no course in the catalog"
