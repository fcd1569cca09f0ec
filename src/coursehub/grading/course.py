"""Per-course grading setup from the catalog, and the catalog-aware autograde.

:func:`setup_course` makes a catalog course ready for nbgrader (course
directory, ``nbgrader_config.py``, exchange directories, gradebook in step
with the roster); :func:`autograde_course_assignment` grades with the
course's roster and its resource profile's limits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import DEFAULT_JOB_TIMEOUT_S, limits_for_profile
from coursehub.grading.autograde.outcomes import SubmissionOutcome
from coursehub.grading.gradebook import GradebookPlan, read_roster, sync_gradebook
from coursehub.grading.layout import CourseLayout, ensure_course, secure_course

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def setup_course(session: Session, course_id: str, layout: CourseLayout) -> GradebookPlan:
    """Create the course's grading directories and config, then sync its gradebook.

    Idempotent: run it again after a roster change, or to correct the
    modes of an older installation (:func:`secure_course`). Returns the gradebook
    sync plan that was applied. Raises
    :class:`coursehub.catalog.errors.NotFoundError` for an unknown course.
    """
    from coursehub.catalog.courses import get_course

    course = get_course(session, course_id)
    layout = replace(layout, course_id=course.course_id)
    ensure_course(layout)
    plan = sync_gradebook(session, course, layout)
    secure_course(layout)
    return plan


def autograde_course_assignment(
    session: Session,
    course_id: str,
    layout: CourseLayout,
    assignment: str,
    timeout_s: float = DEFAULT_JOB_TIMEOUT_S,
    backend: Any = None,
    **options: Any,
) -> list[SubmissionOutcome]:
    """Autograde ``assignment`` with the course's roster and its profile's threads and memory.

    The gradebook's students are brought in step with the catalog first
    (:func:`coursehub.grading.gradebook.sync_gradebook`): a student added
    since the setup is in nbgrader's formgrader with their name and e-mail,
    not as a bare username (nbgrader's autograde adds an unknown student
    with their id only).

    The course directory's modes are set again afterwards (nbgrader writes
    ``autograded/`` with its own modes). ``options``: ``parallel``, ``force``
    and ``on_progress`` of :func:`coursehub.grading.autograde.batch.autograde_assignment`.
    """
    from coursehub.catalog.courses import get_course

    course = get_course(session, course_id)
    sync_gradebook(session, course, layout)  # nbgrader's own pages name the students too
    roster = [record.student_id for record in read_roster(session, course)]
    limits = limits_for_profile(course.profile, timeout_s)
    try:
        return autograde_assignment(layout, assignment, roster, limits, backend, **options)
    finally:
        secure_course(layout)
