"""The course page's side of autograding: start it in the background, read how far it is.

:func:`start_autograde` is the one place where the course app starts an
autograde: :func:`coursehub.grading.autograde.launch.start_autograde` (a
detached ``coursehub grading autograde COURSE ASSIGNMENT``, handed the
assignment's autograde lock, with the allow-listed environment of
:func:`coursehub.sandbox.env.plan_launch_env`). :func:`autograde_progress`
says, while it runs, how many submissions are graded out of how many, which
failed and why, and an estimate of the time left (the autograde's progress
record, :func:`coursehub.grading.autograde.progress.read_autograde_progress`).
"""

from __future__ import annotations

from coursehub.grading.autograde.progress import AutogradeProgress, read_autograde_progress
from coursehub.grading.layout import CourseLayout


def start_autograde(layout: CourseLayout, assignment: str, by: str) -> int:
    """Start the autograde of ``assignment`` detached from the caller; return its pid.

    Raises
    ------
    AutogradeRunningError
        If an autograde of ``assignment`` is already running (who started
        it, when, and its pid are in the message).
    """
    from coursehub.grading.autograde.launch import start_autograde as launch

    return launch(layout.course_id, assignment, by)


def autograde_progress(layout: CourseLayout, assignment: str) -> AutogradeProgress:
    """Return the progress of the running autograde of ``assignment``, or of the last one."""
    return read_autograde_progress(layout, assignment)
