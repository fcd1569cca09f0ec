"""A course's weekly compute budget and the per-student overrides its team sets.

The budget (``courses.budget_cpu_hours`` / ``budget_gpu_hours``) and the
overrides (:class:`coursehub.catalog.models.budgets.BudgetOverride`) come with
migration ``0012``; the arithmetic (week, hours left, decision) is
:mod:`coursehub.meter.budget`, the hours used :mod:`coursehub.usage.weekly`.
Every figure is checked by :func:`coursehub.meter.budget.parse_hours`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models.budgets import BudgetOverride
from coursehub.catalog.models.courses import Course, Membership, Person, Role
from coursehub.catalog.people import normalize_username
from coursehub.errors import UsageError
from coursehub.meter.budget import WeeklyBudget

#: Who a student asks to raise their budget: the course's lead and teachers.
ASKED_ROLES = (Role.LEAD, Role.TEACHER)


@dataclass(frozen=True)
class OverrideRow:
    """One student's override as the course page and the API show it."""

    username: str
    budget: WeeklyBudget
    set_by: str
    set_at: datetime


def course_budget(course: Course) -> WeeklyBudget:
    """Return the course's weekly budget per student (None figures: no limit)."""
    return WeeklyBudget(course.budget_cpu_hours, course.budget_gpu_hours)


def set_course_budget(course: Course, budget: WeeklyBudget) -> None:
    """Set the course's weekly budget per student (checked figures, see ``parse_hours``)."""
    course.budget_cpu_hours = budget.cpu_hours
    course.budget_gpu_hours = budget.gpu_hours


def _student(session: Session, course: Course, username: str) -> Person:
    person = session.scalar(
        select(Person)
        .join(Membership, Membership.person_pk == Person.id)
        .where(Membership.course_pk == course.id, Membership.role == Role.STUDENT)
        .where(Person.username == normalize_username(username))
    )
    if person is None:
        raise UsageError(f"{username!r} is not a student of {course.course_id}")
    return person


def set_override(
    session: Session,
    course: Course,
    username: str,
    budget: WeeklyBudget,
    set_by: str,
    now: datetime | None = None,
) -> OverrideRow | None:
    """Give one student of ``course`` their own weekly budget; an unlimited one removes it.

    Returns
    -------
    OverrideRow or None
        The override kept (None once removed).

    Raises
    ------
    UsageError
        If ``username`` is not a student of the course.
    """
    person = _student(session, course, username)
    row = session.scalar(
        select(BudgetOverride).where(
            BudgetOverride.course_pk == course.id, BudgetOverride.person_pk == person.id
        )
    )
    if budget.unlimited:
        if row is not None:
            session.delete(row)
        return None
    if row is None:
        row = BudgetOverride(course_pk=course.id, person_pk=person.id)
        session.add(row)
    row.cpu_hours, row.gpu_hours = budget.cpu_hours, budget.gpu_hours
    row.set_by, row.set_at = set_by, now or datetime.now(UTC)
    session.flush()
    return OverrideRow(person.username, budget, row.set_by, row.set_at)


def list_overrides(session: Session, course: Course) -> list[OverrideRow]:
    """Return the course's overrides by username."""
    rows = session.execute(
        select(Person.username, BudgetOverride)
        .join(Person, Person.id == BudgetOverride.person_pk)
        .where(BudgetOverride.course_pk == course.id)
        .order_by(Person.username)
    )
    return [
        OverrideRow(user, WeeklyBudget(o.cpu_hours, o.gpu_hours), o.set_by, o.set_at)
        for user, o in rows
    ]


def override_of(session: Session, course: Course, username: str) -> WeeklyBudget | None:
    """Return ``username``'s override in ``course``, if any."""
    row = session.execute(
        select(BudgetOverride.cpu_hours, BudgetOverride.gpu_hours)
        .join(Person, Person.id == BudgetOverride.person_pk)
        .where(BudgetOverride.course_pk == course.id, Person.username == username)
    ).first()
    return None if row is None else WeeklyBudget(row[0], row[1])


def who_to_ask(session: Session, course: Course) -> str:
    """Return whom a student asks for more: "the course's team (alice, bob)"."""
    names = session.scalars(
        select(Person.username)
        .join(Membership, Membership.person_pk == Person.id)
        .where(Membership.course_pk == course.id, Membership.role.in_(list(ASKED_ROLES)))
        .order_by(Person.username)
    ).all()
    return f"the course's team ({', '.join(names)})" if names else "the course's team"
