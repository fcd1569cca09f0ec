"""Roster import pages: upload, preview additions/updates/removals, confirm (lead, teachers)."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, g, render_template
from werkzeug.wrappers import Response

from coursehub.catalog.errors import RosterError
from coursehub.catalog.models.courses import Course
from coursehub.catalog.names import same_identifiers, sort_by_name
from coursehub.catalog.readmodel import load_groups, load_members
from coursehub.catalog.roster.apply import apply_roster
from coursehub.catalog.roster.plan import RosterPlan
from coursehub.catalog.roster.preview import FIELD_LABELS, plan_update_changes
from coursehub.errors import CoursehubError
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.forms import RosterConfirmForm, RosterUploadForm
from coursehub.web.hubsync import apply_hub_sync, flash_outcome
from coursehub.web.rosterflow import (
    RosterRequest,
    plan_digest,
    plan_import,
    read_preview,
    sign_preview,
)
from coursehub.web.saving import show_error
from coursehub.web.views.base import back_to_course, form_status, load_course

bp = Blueprint("roster", __name__)


def render_preview(
    course: Course, req: RosterRequest, plan: RosterPlan, status: int = 200
) -> tuple[str, int]:
    """Show the plan (changed fields as old -> new) with a confirm form carrying the upload."""
    token = sign_preview(current_app.config["SECRET_KEY"], course.course_id, req, plan_digest(plan))
    form = RosterConfirmForm(payload=token)
    old_groups: dict[str, str | None] = {}
    if any("group" in u.fields for u in plan.updates):
        session = get_session()
        names = load_groups(session, course, counts=False).names
        old_groups = {m.username: m.group_name for m in load_members(session, course, names)}
    updated_rows = {u.row.row for u in plan.updates}
    page = {
        "changes": plan_update_changes(plan, old_groups),
        # each change shown once: an update's identity changes are in its row of "To update"
        "identity_changes": [c for c in plan.identity_changes if c.row not in updated_rows],
        "not_applied_rows": {c.row for c in plan.identity_changes if not c.applied},
        "field_labels": FIELD_LABELS,
        "removals": sort_by_name(list(plan.removals)),
        # usernames are student numbers (the default rule): one column, not two equal ones
        "one_id_column": same_identifiers([(r.username, r.student_number) for r in plan.additions]),
    }
    html = render_template("roster/preview.html", course=course, plan=plan, form=form, **page)
    return html, status


@bp.route("/courses/<course_id>/roster", methods=["GET", "POST"])
def upload(course_id: str) -> str | tuple[str, int]:
    """Upload a roster file; a valid one is previewed, a bad one lists its row/column errors."""
    course, _ = load_course(course_id, Access.MANAGE)
    form = RosterUploadForm()
    problems: list[str] = []
    if form.validate_on_submit():
        req = RosterRequest(
            data=form.roster.data.read(),
            mode=form.mode.data or "add",
            group=(form.group.data or "").strip() or None,
            username_rule=form.username_rule.data or "student_id",
        )
        try:
            plan = plan_import(get_session(), course, req, admin=g.identity.admin)
            return render_preview(course, req, plan)
        except RosterError as exc:
            problems = exc.problems
        except CoursehubError as exc:
            show_error(exc)
    return render_template(
        "roster/upload.html", course=course, form=form, problems=problems
    ), 400 if problems else form_status(form)


@bp.post("/courses/<course_id>/roster/confirm")
def confirm(course_id: str) -> Response | tuple[str, int]:
    """Apply a previewed roster, unless the course changed since the preview."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    form = RosterConfirmForm()
    try:
        if not form.validate_on_submit():
            raise RosterError(["the confirmation form is incomplete: upload the file again"])
        req, digest = read_preview(
            current_app.config["SECRET_KEY"], course_id, form.payload.data or ""
        )
        plan = plan_import(session, course, req, admin=g.identity.admin)
        if plan_digest(plan) != digest:
            flash(
                "The course changed since the preview: check the new preview, then confirm.",
                "warning",
            )
            return render_preview(course, req, plan, status=409)
        apply_roster(session, plan)
    except CoursehubError as exc:
        show_error(exc)
        upload_form = RosterUploadForm(formdata=None)
        problems = exc.problems if isinstance(exc, RosterError) else []
        return render_template(
            "roster/upload.html", course=course, form=upload_form, problems=problems
        ), 400
    done = back_to_course(
        course,
        f"Roster imported: {len(plan.additions)} added, {len(plan.updates)} updated, "
        f"{len(plan.removals)} removed.",
    )
    flash_outcome(apply_hub_sync(session, course_id))
    return done
