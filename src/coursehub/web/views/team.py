"""A course's members: add a person, change a role or group, remove (lead and teachers)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response

from coursehub.catalog.courses import course_detail, get_group
from coursehub.catalog.models import Course
from coursehub.catalog.people import add_member, remove_member
from coursehub.errors import CoursehubError
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.forms import MemberForm
from coursehub.web.hubsync import apply_hub_sync, flash_outcome
from coursehub.web.views import form_status, load_course, show_error

bp = Blueprint("team", __name__)


def member_form(course: Course) -> MemberForm:
    """Return the member form with the course's groups as choices."""
    form = MemberForm()
    form.group.choices = [
        ("", "no group"),
        *((g.name, f"{g.name} ({g.kind})") for g in course.groups),
    ]
    return form


@bp.route("/courses/<course_id>/members", methods=["GET", "POST"])
def index(course_id: str) -> tuple[str, int] | Response:
    """List the teaching team; the form adds a person or changes their role and group."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    form = member_form(course)
    if form.validate_on_submit():
        try:
            group = get_group(course, form.group.data) if form.group.data else None
            member = add_member(
                session, course, form.username.data or "", form.role.data or "", group,
                first_name=form.first_name.data or "", last_name=form.last_name.data or "",
                email=form.email.data or None,
            )  # fmt: skip
            session.commit()
        except CoursehubError as exc:
            session.rollback()
            show_error(exc, form, "username")
        else:
            flash(
                f"{member.person.username} is now {member.role} in {course.course_id}.", "success"
            )
            flash_outcome(apply_hub_sync(session, course_id))
            return redirect(url_for("team.index", course_id=course_id))
    detail = course_detail(session, course)
    return render_template(
        "courses/team.html", course=course, team=detail.team, form=form
    ), form_status(form)


@bp.post("/courses/<course_id>/members/<username>/delete")
def delete(course_id: str, username: str) -> Response:
    """Take a person out of the course (the person stays in the catalog)."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    try:
        remove_member(session, course, username)
        session.commit()
    except CoursehubError as exc:
        session.rollback()
        show_error(exc)
    else:
        flash(f"{username} removed from {course.course_id}.", "success")
        flash_outcome(apply_hub_sync(session, course_id))
    return redirect(url_for("team.index", course_id=course_id))
