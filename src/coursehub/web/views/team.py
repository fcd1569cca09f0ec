"""A course's members: add a person, change a role or group, remove (lead and teachers).

The catalog's rules apply (:mod:`coursehub.catalog.rules`): only a lead or an
admin makes or unmakes leads, the last lead stays, and the names and e-mail
of a person who is not only in this course change only by an admin (the form
is refused, naming the fields, never the stored values).
"""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, url_for
from sqlalchemy.orm import Session
from werkzeug.wrappers import Response

from coursehub.catalog.courses import get_group
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.errors import ConflictError, ForbiddenError, NotFoundError
from coursehub.catalog.members import add_member, remove_member
from coursehub.catalog.models.courses import Course, Membership
from coursehub.catalog.readmodel import CourseGroups, load_groups, load_team
from coursehub.errors import CoursehubError
from coursehub.web.access import Access, course_actor
from coursehub.web.database import get_session
from coursehub.web.forms import MemberForm
from coursehub.web.hubsync import apply_hub_sync, flash_outcome
from coursehub.web.saving import commit_or_show
from coursehub.web.views.base import form_status, load_course

bp = Blueprint("team", __name__)


def member_form(groups: CourseGroups) -> MemberForm:
    """Return the member form with the course's groups as choices."""
    form = MemberForm()
    form.group.choices = [
        ("", "no group"),
        *((g.name, f"{g.name} ({g.kind})") for g in groups.rows),
    ]
    return form


def render_team_page(
    session: Session, course: Course, groups: CourseGroups, form: MemberForm
) -> str:
    """Render the team page: the team (one query), and the member form."""
    team = load_team(session, course, groups.names)
    return render_template("courses/team.html", course=course, team=team, form=form)


@bp.route("/courses/<course_id>/members", methods=["GET", "POST"])
def index(course_id: str) -> tuple[str, int] | Response:
    """List the teaching team; the form adds a person or changes their role and group."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    groups = load_groups(session, course, counts=False)
    form = member_form(groups)
    status = None
    if form.validate_on_submit():
        username = form.username.data or ""

        def add() -> Membership:
            group = get_group(course, form.group.data) if form.group.data else None
            return add_member(
                session,
                course,
                username,
                form.role.data or "",
                group,
                first_name=form.first_name.data or "",
                last_name=form.last_name.data or "",
                email=form.email.data or None,
                actor=course_actor(session, g.identity, course),
            )

        with commit_or_show(session, form, "username") as saved:
            what = f"adding {username.strip()} to {course.course_id}"
            member = retry_on_conflict(session, add, what)
            done = f"{member.person.username} is now {member.role} in {course.course_id}."
        if saved:
            flash(done, "success")
            flash_outcome(apply_hub_sync(session, course_id))
            return redirect(url_for("team.index", course_id=course_id))
        status = error_status(saved.error)
    return render_team_page(session, course, groups, form), status or form_status(form)


def error_status(exc: CoursehubError | None) -> int:
    """Return the HTTP status of a refused change: 403, 404, 409, else 400."""
    if isinstance(exc, ForbiddenError):
        return 403
    if isinstance(exc, NotFoundError):
        return 404
    return 409 if isinstance(exc, ConflictError) else 400


@bp.post("/courses/<course_id>/members/<username>/delete")
def delete(course_id: str, username: str) -> Response | tuple[str, int]:
    """Take a person out of the course (the person stays in the catalog); a refused
    removal shows the team page with the reason and its status (403, 404, 409)."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    with commit_or_show(session) as saved:
        remove_member(session, course, username, actor=course_actor(session, g.identity, course))
    if not saved:
        groups = load_groups(session, course, counts=False)
        page = render_team_page(session, course, groups, member_form(groups))
        return page, error_status(saved.error)
    flash(f"{username} removed from {course.course_id}.", "success")
    flash_outcome(apply_hub_sync(session, course_id))
    return redirect(url_for("team.index", course_id=course_id))
