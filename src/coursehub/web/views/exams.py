"""The proctor's view of a course's exams, on the course app (docs/exams.md).

``/courses/<course_id>/exams`` (the course's team, admins): the exams with
their windows. ``/courses/<course_id>/exams/<assignment>`` (the same): every
student's sitting (started when, ends when, time left, extra time, last
submission with its SHA-256, whether the bell took it), read from the
catalog at each load (:func:`coursehub.catalog.exams.list_sittings`); the
lead and teachers add minutes to a student who started, live
(:func:`coursehub.catalog.exams.add_time`: never past the hard end) or
end one's time now (:func:`coursehub.catalog.examproctor.end_sitting`; the
bell then submits their work), or reopen the exam server of one whose server
crashed, during their own time (:mod:`coursehub.grading.examreopen`: the hub
starts it again, the end is not moved). The table shows each student's last
autosave and reloads itself every :data:`REFRESH_S` seconds unless a form is being
typed in, with each student's exam events (left full screen or the tab,
started from outside the allowed networks: the count and the last one).
The page shows the exam clock's settings, which the lead (and admins)
change there: minutes before the end when the clock warns, full screen
offered or required (:mod:`coursehub.catalog.examsettings`; a running clock
takes them at its next poll). A refused value is named in the form (or, for the
clock's settings, in the message above the table) and nothing is saved.
Students never see this page (403).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, flash, g, redirect, render_template, url_for
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import IntegerField, SelectChoice, SelectField, StringField
from wtforms.validators import DataRequired, Length, NumberRange

from coursehub.catalog.examevents import ReportedEvent, list_events
from coursehub.catalog.examproctor import end_sitting
from coursehub.catalog.exams import add_time, get_exam, list_exams, list_sittings
from coursehub.catalog.examsettings import FULLSCREEN_MODES, describe_settings
from coursehub.catalog.examtime import MAX_EXTRA_MIN, format_moment
from coursehub.catalog.models.courses import Role
from coursehub.catalog.queries import role_in_course
from coursehub.errors import UsageError
from coursehub.hub.hubclient import HubError, HubUnreachableError
from coursehub.web.access import Access, require
from coursehub.web.api.exams import reopen_server, require_lead
from coursehub.web.database import get_session
from coursehub.web.saving import commit_or_show, committing
from coursehub.web.views.base import form_status, load_course

bp = Blueprint("exams", __name__)

#: Seconds between the proctor's table's own reloads (static/proctor.js).
REFRESH_S = 30


class AddTimeForm(FlaskForm):
    """Minutes more for one student who started."""

    username = StringField("Student (hub username)", validators=[DataRequired(), Length(max=128)])
    minutes = IntegerField(
        "Minutes to add", validators=[DataRequired(), NumberRange(min=1, max=MAX_EXTRA_MIN)]
    )


class ClockForm(FlaskForm):
    """The exam clock's settings: the warning's minutes before the end, the full-screen rule.

    Checked by :func:`coursehub.catalog.examupdate.update_exam`, so that the
    page refuses what the command line and the API refuse, in the same words.
    """

    warn_before_min = StringField("Warning, minutes before the end (0: none)")
    fullscreen = SelectField(
        "Full screen",
        choices=[SelectChoice(mode) for mode in FULLSCREEN_MODES],
        validate_choice=False,
    )


@bp.get("/courses/<course_id>/exams")
def index(course_id: str) -> str:
    """The course's exams (the team, admins)."""
    course, _ = load_course(course_id, Access.READ_ROSTER)
    exams = list_exams(get_session(), course)
    return render_template("exams/index.html", course=course, exams=exams, shown=format_moment)


@bp.route("/courses/<course_id>/exams/<assignment>", methods=["GET", "POST"])
def proctor(course_id: str, assignment: str) -> tuple[str, int] | Response:
    """Every student's sitting of the exam; the form that adds time (lead, teachers)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    session = get_session()
    exam = get_exam(session, course, assignment)
    form = AddTimeForm()
    clock_form = ClockForm(
        formdata=None, warn_before_min=str(exam.warn_before_min), fullscreen=exam.fullscreen
    )
    if form.is_submitted():
        require(access, Access.MANAGE)
        if form.validate():
            username, minutes = form.username.data or "", int(form.minutes.data or 0)
            with commit_or_show(session, form, "username") as ok:
                add_time(session, course, exam, username, minutes)
            if ok:
                flash(f"{minutes} min added to {username} by {g.identity.name}.", "success")
                here = url_for("exams.proctor", course_id=course_id, assignment=assignment)
                return redirect(here)
    page = render_template(
        "exams/proctor.html",
        course=course,
        exam=exam,
        access=access,
        Access=Access,
        form=form,
        clock_form=clock_form,
        can_set_clock=access >= Access.ADMIN
        or role_in_course(session, g.identity.name, course) == Role.LEAD,
        clock=describe_settings(exam.warn_before_min, exam.fullscreen),
        sittings=list_sittings(session, course, exam),
        events=events_by_student(list_events(session, exam)),
        now=datetime.now(UTC),
        shown=format_moment,
        refresh_s=REFRESH_S,
    )
    return page, form_status(form)


def events_by_student(events: list[ReportedEvent]) -> dict[str, list[ReportedEvent]]:
    """Group the exam's events by student, each student's oldest first (pure)."""
    grouped: dict[str, list[ReportedEvent]] = {}
    for event in events:
        grouped.setdefault(event.username, []).append(event)
    return grouped


class EndForm(FlaskForm):
    """One student of the table: end their time now, or reopen their exam server."""

    username = StringField("Student", validators=[DataRequired(), Length(max=128)])


def _student_action(course_id: str, assignment: str, action: str) -> tuple[Any, ...] | Response:
    """The proctor's form for one student (lead, teachers): ``(session, course, exam, username,
    here)``, or the redirect back to the table when the form was not accepted."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    require(access, Access.MANAGE)
    session = get_session()
    exam = get_exam(session, course, assignment)
    form = EndForm()
    here = url_for("exams.proctor", course_id=course_id, assignment=assignment)
    if not form.validate():
        flash(f"The {action} form was not accepted (expired page?): reload and try again.", "error")
        return redirect(here)
    return session, course, exam, form.username.data or "", here


@bp.post("/courses/<course_id>/exams/<assignment>/end")
def end(course_id: str, assignment: str) -> Response:
    """End a student's time now (lead, teachers); the bell then submits their work."""
    checked = _student_action(course_id, assignment, "End")
    if not isinstance(checked, tuple):
        return checked
    session, course, exam, username, here = checked
    try:
        with committing(session):
            end_sitting(session, course, exam, username, g.identity.name, datetime.now(UTC))
    except UsageError as exc:
        flash(str(exc).split(": ", 1)[-1], "error")
        return redirect(here)
    flash(f"{username}'s time ended now (by {g.identity.name}); the bell submits it.", "success")
    return redirect(here)


@bp.post("/courses/<course_id>/exams/<assignment>/reopen")
def reopen(course_id: str, assignment: str) -> Response:
    """Start a student's exam server again after a crash (lead, teachers); their end stays."""
    checked = _student_action(course_id, assignment, "Reopen")
    if not isinstance(checked, tuple):
        return checked
    session, course, exam, username, here = checked
    try:
        done = reopen_server(session, course, exam, username, g.identity.name, datetime.now(UTC))
    except UsageError as exc:
        flash(str(exc).split(": ", 1)[-1], "error")
        return redirect(here)
    except (HubError, HubUnreachableError) as exc:
        flash(f"The hub did not reopen {username}'s server: {exc}", "error")
        return redirect(here)
    flash(f"{username}'s exam server reopened by {g.identity.name}: {done.outcome}.", "success")
    return redirect(here)


@bp.post("/courses/<course_id>/exams/<assignment>/clock")
def clock(course_id: str, assignment: str) -> Response:
    """Change the exam clock's settings (the lead, admins); a bad value is named, nothing saved."""
    from coursehub.catalog.examupdate import update_exam

    course, access = load_course(course_id, Access.READ_ROSTER)
    require(access, Access.MANAGE)
    session = get_session()
    require_lead(session, course, access)
    exam = get_exam(session, course, assignment)
    here = url_for("exams.proctor", course_id=course_id, assignment=assignment)
    form = ClockForm()
    if not form.validate():
        flash("The clock form was not accepted (expired page?): reload and try again.", "error")
        return redirect(here)
    changes = {"warn_before_min": form.warn_before_min.data, "fullscreen": form.fullscreen.data}
    try:
        with committing(session):
            done = update_exam(session, exam, changes)
    except UsageError as exc:
        flash(f"Nothing changed: {exc}", "error")
        return redirect(here)
    flash(f"Exam clock of {assignment} set by {g.identity.name}: {'; '.join(done)}.", "success")
    return redirect(here)
