"""A course's nbgrader assignments and grades, for its teaching team only.

The page lists the assignments with who fetched, submitted, was collected
and autograded, buttons for each step, the last autograde's outcomes, the
grade table, the CSV export, and a link that opens the course's formgrader
in its own tab (its in-page frame is blank with JupyterHub 4.1+,
nbgrader#1870). Autograding can take minutes: it runs as a detached
``coursehub grading autograde`` process; its outcomes show once written.
Paths come from ``COURSEHUB_GRADING_*`` (:func:`coursehub.grading.layout.layout_from_env`).
"""

from __future__ import annotations

import os
import subprocess
import sys

from flask import Blueprint, Response, abort, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response as WerkzeugResponse

from coursehub.errors import CoursehubError
from coursehub.grading.layout import CourseLayout, layout_from_env
from coursehub.web.access import Access
from coursehub.web.views import load_course

bp = Blueprint("grading", __name__)

#: Steps a button may ask for, and the past participle shown after it.
STEPS: dict[str, str] = {
    "generate": "generated",
    "release": "released",
    "collect": "collected",
    "feedback": "given feedback",
    "autograde": "sent to autograding",
}


def course_layout(course_id: str) -> CourseLayout:
    """Return the grading layout of ``course_id`` from the environment."""
    return layout_from_env(course_id)


@bp.get("/courses/<course_id>/grading")
def index(course_id: str) -> str:
    """The assignments, their progress and the grade table (teaching team)."""
    from coursehub.grading.assignments import assignment_status, list_assignments
    from coursehub.grading.autograde import load_outcomes
    from coursehub.grading.export import read_grade_table
    from coursehub.grading.hubservice import formgrader_link

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = course_layout(course.course_id)
    ready = layout.config_path.is_file()
    names = list_assignments(layout) if ready else []
    return render_template(
        "grading/index.html",
        course=course,
        ready=ready,
        statuses=[assignment_status(layout, name) for name in names],
        outcomes={name: load_outcomes(layout, name) for name in names},
        table=read_grade_table(layout) if ready else None,
        formgrader=formgrader_link(course.course_id),
    )


@bp.post("/courses/<course_id>/grading/<assignment>/<step>")
def act(course_id: str, assignment: str, step: str) -> WerkzeugResponse:
    """Run one step of ``assignment`` (autograde: start it in the background)."""
    from coursehub.grading import assignments

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = course_layout(course.course_id)
    if step not in STEPS or assignment not in assignments.list_assignments(layout):
        flash(f"unknown step {step!r} or assignment {assignment!r}", "error")
        return redirect(url_for("grading.index", course_id=course_id))
    try:
        if step == "autograde":
            start_autograde(course.course_id, assignment)
        elif step == "feedback":
            assignments.generate_feedback(layout, assignment)
            assignments.release_feedback(layout, assignment)
        else:
            getattr(
                assignments,
                {"generate": "generate_assignment", "release": "release_assignment"}.get(
                    step, step
                ),
            )(layout, assignment)
    except CoursehubError as exc:
        flash(str(exc), "error")
    else:
        flash(f"{assignment} {STEPS[step]}.", "success")
    return redirect(url_for("grading.index", course_id=course_id))


@bp.get("/courses/<course_id>/grading/grades.csv")
def grades_csv(course_id: str) -> Response:
    """The course's grades as CSV, cells made safe for spreadsheets (teaching team)."""
    from coursehub.grading.export import render_grades_csv

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = course_layout(course.course_id)
    if not layout.config_path.is_file():
        abort(404, f"grading is not set up for {course.course_id}: run coursehub grading setup")
    data = render_grades_csv(layout).encode("utf-8")
    disposition = f'attachment; filename="{course.course_id}-grades.csv"'
    return Response(data, mimetype="text/csv", headers={"Content-Disposition": disposition})


def start_autograde(course_id: str, assignment: str) -> None:
    """Start ``coursehub grading autograde COURSE ASSIGNMENT`` detached from the request.

    The assignment's autograde lock is taken here and handed to the process
    (:mod:`coursehub.grading.autograde_lock`): a second press while it runs
    is refused with who started it, when, and its pid. The process gets the
    allow-listed environment of :func:`coursehub.grading.sandbox.plan_launch_env`
    (the catalog, no hub token or secret key).

    Raises
    ------
    AutogradeRunningError
        If an autograde of ``assignment`` is already running.
    """
    from flask import g

    from coursehub.grading.autograde_lock import LOCK_FD_VAR, acquire_autograde_lock
    from coursehub.grading.sandbox import plan_launch_env

    layout = course_layout(course_id)
    identity = g.get("identity")
    lock = acquire_autograde_lock(layout, assignment, identity.name if identity else "?")
    try:
        log = layout.reports_dir / f"autograde-{assignment}.log"
        env = {**plan_launch_env(os.environ), LOCK_FD_VAR: str(lock.fd)}
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "coursehub", "grading", "autograde", course_id, assignment],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                pass_fds=[lock.fd],
            )
        lock.describe(identity.name if identity else "?", proc.pid)
    finally:
        lock.release()  # the child holds its own copy of the locked descriptor
