"""The demo course's graded assignment: "pendulum_energy", made from the pendulum notebook.

:func:`setup_demo_grading` is called by ``coursehub demo`` on first start:
it sets the course up for nbgrader, adds the shipped assignment (the
double pendulum's energy, three autograder tests, 4 points, a second to
autograde), generates and releases it. Run again, it changes nothing.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from coursehub.atomicfile import write_atomically
from coursehub.grading.assignments import (
    add_assignment,
    generate_assignment,
    list_assignments,
    release_assignment,
)
from coursehub.grading.course import setup_course
from coursehub.grading.deadline import default_timezone
from coursehub.grading.layout import CourseLayout, make_layout
from coursehub.grading.studentconfig import render_student_config

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

#: Name of the demo assignment (its folder in ``coursehub/grading/sources``).
DEMO_ASSIGNMENT = "pendulum_energy"


def demo_source_dir() -> Path:
    """Return the folder of the shipped demo assignment's source notebook."""
    return Path(str(resources.files("coursehub.grading").joinpath("sources", DEMO_ASSIGNMENT)))


def setup_demo_grading(
    session: Session,
    course_id: str,
    courses_root: Path,
    exchange_root: Path,
    student_config_dir: Path | None = None,
) -> CourseLayout:
    """Set ``course_id`` up for nbgrader and release the demo assignment once; return its layout.

    ``courses_root`` and ``exchange_root`` are folders of the demo's data
    directory; every account is the demo's one Unix user (``single_user``).
    With ``student_config_dir``, the servers' ``nbgrader_config.py`` is
    written there (point the servers' ``JUPYTER_CONFIG_PATH`` at it).
    """
    layout = make_layout(course_id, courses_root, exchange_root, single_user=True)
    setup_course(session, course_id, layout)
    if student_config_dir is not None:
        zone = default_timezone()
        text = render_student_config(layout.exchange_root, single_user=True, timezone=zone)
        write_atomically(Path(student_config_dir) / "nbgrader_config.py", text)
    if DEMO_ASSIGNMENT not in list_assignments(layout):
        add_assignment(layout, DEMO_ASSIGNMENT, sorted(demo_source_dir().glob("*.ipynb")))
    if not (layout.course_dir / "release" / DEMO_ASSIGNMENT).is_dir():
        generate_assignment(layout, DEMO_ASSIGNMENT)
    if not (exchange_root / course_id / "outbound" / DEMO_ASSIGNMENT).is_dir():
        release_assignment(layout, DEMO_ASSIGNMENT)
    return layout
