"""A course's TD/TP groups: list with counts, add, remove (lead and teachers)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response

from coursehub.catalog.courses import add_group, remove_group
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.readmodel import load_groups
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.forms import GroupForm
from coursehub.web.saving import commit_or_show
from coursehub.web.views.base import form_status, load_course

bp = Blueprint("groups", __name__)


@bp.route("/courses/<course_id>/groups", methods=["GET", "POST"])
def index(course_id: str) -> tuple[str, int] | Response:
    """List the groups with their sizes; the form adds one."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    form = GroupForm()
    if form.validate_on_submit():
        name, kind = form.name.data or "", form.kind.data or "TD"
        with commit_or_show(session, form, "name") as saved:
            retry_on_conflict(
                session,
                lambda: add_group(session, course, name, kind),
                f"adding group {name.strip()} to {course.course_id}",
            )
        if saved:
            flash(f"Group {form.name.data} added.", "success")
            return redirect(url_for("groups.index", course_id=course_id))
    groups = load_groups(session, course)
    return render_template(
        "courses/groups.html", course=course, groups=groups.rows, form=form
    ), form_status(form)


@bp.post("/courses/<course_id>/groups/<name>/delete")
def delete(course_id: str, name: str) -> Response:
    """Remove a group; its students stay in the course without a group."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    with commit_or_show(session) as saved:
        remove_group(session, course, name)
    if saved:
        flash(f"Group {name} removed; its students have no group now.", "success")
    return redirect(url_for("groups.index", course_id=course_id))
