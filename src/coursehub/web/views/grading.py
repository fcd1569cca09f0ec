"""A course's nbgrader assignments, from creation to exported grades, for its teaching team only.

The page lists the assignments with their due date, late-submission policy,
who fetched, submitted, was collected and autograded, a button for each
step (generate, release, collect, autograde, feedback: generate and
release), the autograde's progress while it runs (graded / total, failures
with their reason, time left; :mod:`coursehub.grading.cycle`), the grade
table ("not submitted", "submitted, not graded", scores), the exports
(nbgrader's CSV, Moodle's grade import CSV) and a link that opens the
course's formgrader in its own tab (its in-page frame is blank with
JupyterHub 4.1+, nbgrader#1870).

Who may do what (:mod:`coursehub.web.access`): the course's graders and
teachers (``READ_ROSTER``) see the page, run the steps and export; creating
an assignment and changing its due date or policy edits the course
(``MANAGE``: lead, teachers); students never reach any of it. Every action
is a POST with the CSRF token. Paths come from ``COURSEHUB_GRADING_*``
(:func:`coursehub.grading.layout.layout_from_env`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.datastructures import FileStorage
from werkzeug.wrappers import Response as WerkzeugResponse

from coursehub.errors import CoursehubError
from coursehub.grading.layout import CourseLayout, layout_from_env
from coursehub.web.access import Access
from coursehub.web.views.base import load_course
from coursehub.web.views.grading_forms import NewAssignmentForm, ScheduleForm

bp = Blueprint("grading", __name__)

#: Steps a button may ask for, and the past participle shown after it.
STEPS: dict[str, str] = {
    "generate": "generated",
    "release": "released",
    "collect": "collected",
    "autograde": "sent to autograding",
    "feedback": "given feedback (generated and released)",
}


def course_layout(course_id: str) -> CourseLayout:
    """Return the grading layout of ``course_id`` from the environment."""
    return layout_from_env(course_id)


def ready_layout(course_id: str) -> CourseLayout:
    """Return the layout of a course whose grading is set up; 404 with how to set it up."""
    layout = course_layout(course_id)
    if not layout.config_path.is_file():
        abort(
            404, f"grading is not set up for {course_id}: run coursehub grading setup {course_id}"
        )
    return layout


def course_roster(course: Any) -> list[Any]:
    """The course's students in the catalog, now: the grade table's and the exports' rows."""
    from coursehub.grading.gradebook import read_roster
    from coursehub.web.database import get_session

    return read_roster(get_session(), course)


def who() -> str:
    """The signed-in user's name, for the autograde lock's record."""
    identity = g.get("identity")
    return identity.name if identity else "?"


@bp.get("/courses/<course_id>/grading")
def index(course_id: str) -> str:
    """The assignments, their progress and the grade table (teaching team)."""
    from coursehub.grading.assignments import assignment_status, list_assignments
    from coursehub.grading.autograde.outcomes import load_outcomes
    from coursehub.grading.cycle import autograde_progress
    from coursehub.grading.export import read_grade_table
    from coursehub.grading.formgrader.service import formgrader_link
    from coursehub.grading.latepolicy import AFTER_DUE, LATE_METHODS, read_late_policies
    from coursehub.web.views.ltigrades import lms_grade_services

    course, access = load_course(course_id, Access.READ_ROSTER)
    layout = course_layout(course.course_id)
    ready = layout.config_path.is_file()
    names = list_assignments(layout) if ready else []
    table = read_grade_table(layout, course_roster(course)) if ready else None
    return render_template(
        "grading/index.html",
        course=course,
        ready=ready,
        can_manage=access >= Access.MANAGE,
        statuses=[assignment_status(layout, name) for name in names],
        outcomes={name: load_outcomes(layout, name) for name in names},
        progress={name: autograde_progress(layout, name) for name in names},
        due=shown_duedates(layout, names) if ready else {},
        policies=read_late_policies(layout.course_dir) if ready else {},
        late_methods=LATE_METHODS,
        after_due=AFTER_DUE,
        table=table,
        formgrader=formgrader_link(course.course_id),
        lms_services=lms_grade_services(course) if ready and access >= Access.MANAGE else [],
    )


def shown_duedates(layout: CourseLayout, names: list[str]) -> dict[str, dict[str, str]]:
    """Return each assignment's due date as the page shows it and as its form is pre-filled.

    ``{"text": "2025-03-30 23:59 CEST (Europe/Paris)", "input":
    "2025-03-30T23:59", "timezone": "Europe/Paris"}``: in the zone it was
    typed in, else the course's (``COURSEHUB_GRADING_TIMEZONE``), never
    silently in UTC (jupyter/nbgrader#1932).
    """
    from coursehub.grading.deadline import default_timezone, format_due, local_input
    from coursehub.grading.latepolicy import read_timezones

    duedates = read_duedates(layout)
    zones = read_timezones(layout.course_dir)
    shown = {}
    for name in names:
        zone = zones.get(name) or default_timezone()
        due = duedates.get(name)
        shown[name] = {
            "text": format_due(due, zone),
            "input": local_input(due, zone),
            "timezone": zone,
        }
    return shown


def read_duedates(layout: CourseLayout) -> dict[str, Any]:
    """Return each assignment's due date from the gradebook (aware, UTC; None: none)."""
    from datetime import UTC

    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        return {
            a.name: None if a.duedate is None else a.duedate.replace(tzinfo=UTC)
            for a in gradebook.assignments
        }


@bp.route("/courses/<course_id>/grading/new", methods=["GET", "POST"])
def new(course_id: str) -> str | tuple[str, int] | WerkzeugResponse:
    """Create an assignment from an uploaded notebook or one of the course's material."""
    from coursehub.grading.create import (
        MAX_NOTEBOOK_BYTES,
        NewAssignment,
        create_assignment,
        list_material_notebooks,
        parse_duedate,
        read_material_notebook,
    )
    from coursehub.grading.deadline import default_timezone

    course, _ = load_course(course_id, Access.MANAGE)
    layout = ready_layout(course.course_id)
    form = NewAssignmentForm()
    material = list_material_notebooks(layout)
    form.material.choices = [("", "(upload a notebook instead)"), *((m, m) for m in material)]
    if request.method == "GET":
        form.timezone.data = default_timezone()
    problem = ""
    if form.validate_on_submit():
        upload = form.notebook.data
        try:
            new_assignment = NewAssignment(
                form.assignment.data.strip(),
                parse_duedate(form.duedate.data or "", form.timezone.data or ""),
                form.policy(),
                (form.timezone.data or "").strip(),
            )
            if form.material.data:
                filename, data = read_material_notebook(layout, form.material.data)
            elif isinstance(upload, FileStorage) and upload.filename:
                filename, data = upload.filename, upload.read(MAX_NOTEBOOK_BYTES + 1)
            else:
                raise CoursehubError(
                    "choose a source notebook to upload, or one of the course's material"
                )
            create_assignment(layout, new_assignment, filename, data)
        except CoursehubError as exc:
            problem = str(exc)
        else:
            flash(
                f"Assignment {new_assignment.assignment} created: generate it, then release it.",
                "success",
            )
            return redirect(url_for("grading.index", course_id=course.course_id))
    status = 400 if problem or form.errors else 200
    return render_template(
        "grading/new.html", course=course, form=form, problem=problem, material=material
    ), status


@bp.post("/courses/<course_id>/grading/<assignment>/schedule")
def schedule(course_id: str, assignment: str) -> WerkzeugResponse:
    """Change an assignment's due date and late-submission policy."""
    from coursehub.grading.assignments import list_assignments
    from coursehub.grading.create import parse_duedate, set_schedule

    course, _ = load_course(course_id, Access.MANAGE)
    layout = ready_layout(course.course_id)
    form = ScheduleForm()
    back = redirect(url_for("grading.index", course_id=course.course_id))
    if assignment not in list_assignments(layout):
        flash(f"assignment {assignment!r} is not in course {course.course_id}", "error")
        return back
    if not form.validate_on_submit():
        flash(f"{assignment}: the due-date form is incomplete ({form.errors})", "error")
        return back
    zone = (form.timezone.data or "").strip()
    try:
        duedate = parse_duedate(form.duedate.data or "", zone)
        changes = set_schedule(layout, assignment, duedate, form.policy(), zone)
    except CoursehubError as exc:
        flash(str(exc), "error")
        return back
    flash(f"{assignment}: due date and late policy saved.", "success")
    if changes:
        moved = ", ".join(f"{c.student_id} {c.before:g} -> {c.after:g}" for c in changes)
        flash(
            f"{assignment}: late penalties recomputed for the new due date and policy: {moved}",
            "success",
        )
    return back


@bp.post("/courses/<course_id>/grading/<assignment>/<step>")
def act(course_id: str, assignment: str, step: str) -> WerkzeugResponse:
    """Run one step of ``assignment`` (autograde: start it in the background)."""
    from coursehub.grading import assignments

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = course_layout(course.course_id)
    back = redirect(url_for("grading.index", course_id=course.course_id))
    if step not in STEPS or assignment not in assignments.list_assignments(layout):
        flash(f"unknown step {step!r} or assignment {assignment!r}", "error")
        return back
    try:
        skipped = run_step(layout, assignment, step)
    except CoursehubError as exc:
        flash(str(exc), "error")
        return back
    flash(f"{assignment} {STEPS[step]}.", "success")
    for line in skipped:
        flash(line, "warning")
    return back


def run_step(layout: CourseLayout, assignment: str, step: str) -> list[str]:
    """Run ``step`` on ``assignment``; return its warnings: the submissions collect skipped,
    the large files generate found shipped with the assignment (else none)."""
    from coursehub.grading import assignments
    from coursehub.grading.cycle import start_autograde
    from coursehub.grading.limits import large_shipped_files

    if step == "generate":
        assignments.generate_assignment(layout, assignment)
        source = layout.course_dir / "source" / assignment
        return [f"{assignment}: {line}" for line in large_shipped_files(source)]
    elif step == "release":
        assignments.release_assignment(layout, assignment)
    elif step == "collect":
        skipped = assignments.skipped_submissions(assignments.collect(layout, assignment))
        return [f"collect skipped the submission {line}" for line in skipped]
    elif step == "autograde":
        start_autograde(layout, assignment, who())
    elif step == "feedback":
        assignments.generate_feedback(layout, assignment)
        assignments.release_feedback(layout, assignment)
    return []


@bp.get("/courses/<course_id>/grading/<assignment>/progress.json")
def progress(course_id: str, assignment: str) -> Response:
    """The autograde's progress of ``assignment`` as JSON (the page polls it while it runs)."""
    from coursehub.grading.assignments import list_assignments
    from coursehub.grading.cycle import autograde_progress

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = ready_layout(course.course_id)
    if assignment not in list_assignments(layout):
        abort(404, f"assignment {assignment!r} is not in course {course.course_id}")
    state = autograde_progress(layout, assignment)
    return jsonify({**asdict(state), "is_running": state.is_running})


@bp.get("/courses/<course_id>/grading/grades.csv")
def grades_csv(course_id: str) -> Response:
    """The course's grades as nbgrader's CSV, cells made safe for spreadsheets (teaching team)."""
    from coursehub.grading.export import render_grades_csv

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = ready_layout(course.course_id)
    text = render_grades_csv(layout, roster=course_roster(course))
    return csv_download(text, f"{course.course_id}-grades.csv")


@bp.get("/courses/<course_id>/grading/grades-moodle.csv")
def grades_moodle_csv(course_id: str) -> Response:
    """The grades as Moodle's grade import CSV; ``?identifier=email|idnumber|username``."""
    from coursehub.grading.moodle import moodle_csv_text, render_moodle_csv

    course, _ = load_course(course_id, Access.READ_ROSTER)
    layout = ready_layout(course.course_id)
    identifier = request.args.get("identifier", "email")
    try:
        export = render_moodle_csv(layout, identifier, course_roster(course))
    except CoursehubError as exc:
        abort(400, str(exc))
    name = f"{course.course_id}-moodle-{identifier}.csv"
    return csv_download(moodle_csv_text(export), name)


def csv_download(text: str, filename: str) -> Response:
    """Return ``text`` as a CSV attachment named ``filename``."""
    disposition = f'attachment; filename="{filename}"'
    return Response(
        text.encode("utf-8"), mimetype="text/csv", headers={"Content-Disposition": disposition}
    )
