"""A person's own resources, and a course's weekly compute budget set by its team.

``/me/resources`` (anyone signed in, their own figures only): per course of
the current year, the memory and CPU limits of their role's profile, the
hours used this week against the budget (:mod:`coursehub.usage.mine`), and
their home's size against its quota (:mod:`coursehub.homequota`).
``/courses/<course_id>/budget`` (the course's lead and teachers, portal
managers, admins; read-only for graders; 403 for students): the weekly
CPU- and GPU-hours per student, and one student's own budget (an override,
with who set it and when). Figures are checked by
:func:`coursehub.meter.budget.parse_hours`; a refused field is named and
nothing is saved. The budget is read by the hub at each spawn and by the
runner at each job (docs/budgets.md).
"""

from __future__ import annotations

import pwd
from pathlib import Path
from zoneinfo import ZoneInfo

from flask import Blueprint, current_app, flash, g, redirect, render_template, request, url_for
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import StringField
from wtforms.validators import DataRequired, Length, ValidationError

from coursehub.catalog.budgets import (
    course_budget,
    list_overrides,
    set_course_budget,
    set_override,
)
from coursehub.catalog.models.courses import Course
from coursehub.errors import UsageError
from coursehub.homequota.plan import course_quota, department_default, most_generous
from coursehub.homequota.usage import HomeUsage, home_usage
from coursehub.meter.budget import WeeklyBudget, parse_hours
from coursehub.usage.mine import MyCourse, my_courses
from coursehub.usage.weekly import zone_from_env
from coursehub.web.access import Access, require
from coursehub.web.database import get_session
from coursehub.web.saving import commit_or_show
from coursehub.web.views.base import form_status, load_course

bp = Blueprint("budgets", __name__)


def hours_field(label: str) -> StringField:
    """A field of hours per week (empty: no budget), checked by ``parse_hours``."""

    def check(form: FlaskForm, field: StringField) -> None:
        try:
            parse_hours(field.data, label)
        except UsageError as exc:
            raise ValidationError(str(exc)) from None

    return StringField(label, validators=[Length(max=40), check])


class BudgetForm(FlaskForm):
    """The course's weekly budget per student."""

    cpu_hours = hours_field("Weekly CPU-hours per student")
    gpu_hours = hours_field("Weekly GPU-hours per student")


class OverrideForm(FlaskForm):
    """One student's own weekly budget (both empty: back to the course's)."""

    username = StringField("Student (hub username)", validators=[DataRequired(), Length(max=128)])
    student_cpu_hours = hours_field("Their weekly CPU-hours")
    student_gpu_hours = hours_field("Their weekly GPU-hours")


def app_zone() -> ZoneInfo:
    """The budget time zone: the app's ``BUDGET_TIMEZONE`` (``COURSEHUB_BUDGET_TIMEZONE``)."""
    return zone_from_env(
        {"COURSEHUB_BUDGET_TIMEZONE": current_app.config.get("BUDGET_TIMEZONE") or ""}
    )


def home_of(username: str) -> Path | None:
    """The person's home: ``HOMES_DIR/<username>`` when the app sets it, else the account's."""
    root = current_app.config.get("HOMES_DIR")
    if root:
        return Path(root) / username
    try:
        return Path(pwd.getpwnam(username).pw_dir)
    except KeyError:
        return None


def home_quota(rows: list[MyCourse]) -> tuple[int | None, str]:
    """The quota of the person's home (None: no limit) and, if it cannot be told, why."""
    try:
        default = department_default()
    except UsageError as exc:
        return None, str(exc)
    live = [r.course for r in rows if r.role == "student" and not r.course.archived]
    return (most_generous(course_quota(c, default) for c in live) if live else None), ""


@bp.get("/me/resources")
def mine() -> str:
    """The signed-in person's own limits, hours this week and home (never anyone else's)."""
    username = g.identity.name
    rows = my_courses(get_session(), username, app_zone())
    home = home_of(username)
    used = home_usage(home) if home is not None else HomeUsage(None, "no such account")
    quota, quota_problem = home_quota(rows)
    return render_template(
        "budgets/mine.html",
        rows=rows,
        home=home,
        used=used,
        quota=quota,
        quota_problem=quota_problem,
    )


@bp.route("/courses/<course_id>/budget", methods=["GET", "POST"])
def edit(course_id: str) -> tuple[str, int] | Response:
    """The course's weekly budget and its overrides (forms for the lead and teachers)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    session = get_session()
    form, override = BudgetForm(), OverrideForm()
    posted: BudgetForm | OverrideForm = override if "username" in request.form else form
    if posted is not form or not form.is_submitted():
        budget = course_budget(course)
        form.cpu_hours.data = "" if budget.cpu_hours is None else f"{budget.cpu_hours:g}"
        form.gpu_hours.data = "" if budget.gpu_hours is None else f"{budget.gpu_hours:g}"
    if form.is_submitted():
        require(access, Access.MANAGE)
        if posted.validate():
            with commit_or_show(session, posted, "username" if posted is override else None) as ok:
                _save(course, posted)
            if ok:
                flash(f"Weekly budget of {course.course_id} saved.", "success")
                return redirect(url_for("budgets.edit", course_id=course.course_id))
    page = render_template(
        "budgets/edit.html",
        course=course,
        access=access,
        Access=Access,
        form=form,
        override=override,
        overrides=list_overrides(session, course),
    )
    return page, form_status(posted)


def _save(course: Course, posted: BudgetForm | OverrideForm) -> None:
    if isinstance(posted, OverrideForm):
        cpu, gpu = posted.student_cpu_hours, posted.student_gpu_hours
    else:
        cpu, gpu = posted.cpu_hours, posted.gpu_hours
    budget = WeeklyBudget(
        parse_hours(cpu.data, cpu.label.text), parse_hours(gpu.data, gpu.label.text)
    )
    if isinstance(posted, OverrideForm):
        set_override(get_session(), course, posted.username.data or "", budget, g.identity.name)
    else:
        set_course_budget(course, budget)
