"""Keep a course's nbgrader gradebook in step with its roster in the catalog.

:func:`plan_gradebook_sync` (pure) compares the catalog's students with the
gradebook's; :func:`apply_gradebook_sync` carries the plan out through
:class:`nbgrader.api.Gradebook`. Students added to the course are added,
changed names and e-mails are updated, and students who left are removed,
except those with a submission: nbgrader's ``remove_student`` would delete
their grades, so they are kept (and listed in ``plan.kept``) until a teacher
removes them by hand. The student number goes to nbgrader's ``lms_user_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coursehub.grading.layout import CourseLayout

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from coursehub.catalog.models.courses import Course


@dataclass(frozen=True)
class StudentRecord:
    """A student as the gradebook stores them (``student_id`` is the hub username)."""

    student_id: str
    first_name: str = ""
    last_name: str = ""
    email: str | None = None
    lms_user_id: str | None = None

    def fields(self) -> dict[str, str | None]:
        """The gradebook columns other than the id."""
        return {
            "first_name": self.first_name,
            "last_name": self.last_name,
            "email": self.email,
            "lms_user_id": self.lms_user_id,
        }


@dataclass(frozen=True)
class GradebookPlan:
    """What a gradebook sync does; each tuple sorted by student id."""

    additions: tuple[StudentRecord, ...] = ()
    updates: tuple[StudentRecord, ...] = ()
    removals: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the gradebook already matches the roster."""
        return not (self.additions or self.updates or self.removals)

    def summary(self) -> str:
        """One line: ``"2 added, 1 updated, 0 removed, 1 kept (has submissions)"``."""
        return (
            f"{len(self.additions)} added, {len(self.updates)} updated, "
            f"{len(self.removals)} removed, {len(self.kept)} kept (has submissions)"
        )


def plan_gradebook_sync(
    roster: Iterable[StudentRecord],
    gradebook: Iterable[StudentRecord],
    with_submissions: Iterable[str] = (),
) -> GradebookPlan:
    """Return what makes ``gradebook`` match ``roster`` (pure).

    Parameters
    ----------
    roster
        The course's students in the catalog.
    gradebook
        The students in the course's gradebook.
    with_submissions
        Gradebook students who have at least one submission (never removed).
    """
    wanted = {s.student_id: s for s in roster}
    present = {s.student_id: s for s in gradebook}
    graded = set(with_submissions)
    gone = sorted(set(present) - set(wanted))
    return GradebookPlan(
        additions=tuple(wanted[s] for s in sorted(set(wanted) - set(present))),
        updates=tuple(
            wanted[s] for s in sorted(set(wanted) & set(present)) if wanted[s] != present[s]
        ),
        removals=tuple(s for s in gone if s not in graded),
        kept=tuple(s for s in gone if s in graded),
    )


def read_roster(session: Session, course: Course) -> list[StudentRecord]:
    """Return the catalog's students of ``course`` as gradebook records."""
    from sqlalchemy import select

    from coursehub.catalog.models.courses import Membership, Role

    query = select(Membership).where(
        Membership.course_pk == course.id, Membership.role == Role.STUDENT.value
    )
    return [
        StudentRecord(
            m.person.username,
            m.person.first_name,
            m.person.last_name,
            m.person.email,
            m.person.student_number,
        )
        for m in session.scalars(query)
    ]


def read_gradebook(layout: CourseLayout) -> tuple[list[StudentRecord], set[str]]:
    """Return the gradebook's students and the ids of those with a submission."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        records = [
            StudentRecord(s.id, s.first_name or "", s.last_name or "", s.email, s.lms_user_id)
            for s in gradebook.students
        ]
        graded = {s.id for s in gradebook.students if s.submissions}
    return records, graded


def apply_gradebook_sync(layout: CourseLayout, plan: GradebookPlan) -> None:
    """Carry out ``plan`` on the course's gradebook (additions, updates, then removals)."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        for record in (*plan.additions, *plan.updates):
            gradebook.update_or_create_student(record.student_id, **record.fields())
        for student_id in plan.removals:
            gradebook.remove_student(student_id)


def sync_gradebook(session: Session, course: Course, layout: CourseLayout) -> GradebookPlan:
    """Plan and apply the sync of ``course``'s roster into its gradebook; return the plan."""
    present, graded = read_gradebook(layout)
    plan = plan_gradebook_sync(read_roster(session, course), present, graded)
    if not plan.empty:
        apply_gradebook_sync(layout, plan)
    return plan
