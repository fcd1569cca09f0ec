"""A portal's pages (its managers and hub admins): its courses by year with their leads,
archive and restore, "Copy to next year" per course and "Roll over" for the portal.

A course's leads copy their own course too (from its page). Copies and
rollovers carry the assignment sources (:mod:`coursehub.admin.carry`), then
sync the new courses into the hub.
"""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from coursehub.admin.carry import carry_course, carry_year
from coursehub.catalog.admin import (
    appoint_manager,
    archive_course,
    managed_portals,
    remove_manager,
)
from coursehub.catalog.courses import get_portal, list_courses, list_portals, list_years
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.members import course_leads
from coursehub.catalog.models.courses import Portal
from coursehub.catalog.queries import codes_by_year
from coursehub.catalog.readmodel import load_course as read_course
from coursehub.catalog.readmodel import load_own
from coursehub.catalog.yearoffers import plan_year_offers
from coursehub.errors import CoursehubError
from coursehub.web.access import Access, require_admin, require_copy, require_portal
from coursehub.web.database import get_session
from coursehub.web.hubsync import apply_hub_sync, flash_outcome
from coursehub.web.saving import commit_or_show, committing
from coursehub.web.views.base import form_field, load_course

bp = Blueprint("portals", __name__)


def portal_for(code: str, what: str) -> Portal:
    """Return the portal; 404 if unknown, 403 (saying who may ``what``) unless the user is an
    admin or one of its managers."""
    session = get_session()
    portal = get_portal(session, code)
    require_portal(session, g.identity, portal, what)
    return portal


@bp.get("/portals/")
def mine() -> str:
    """The portals the user manages (every portal for an admin)."""
    session = get_session()
    if g.identity.admin:
        portals = list_portals(session)
    else:
        portals = managed_portals(session, g.identity.name)
    if not portals:
        abort(403, description="only an admin or a portal's managers have portal pages")
    return render_template("admin/portals.html", portals=portals)


@bp.get("/portals/<code>/")
def show(code: str) -> str:
    """The portal's courses by year (archived ones too), with their leads and actions."""
    return render_portal(portal_for(code, "see this portal's page"))


def render_portal(portal: Portal, manager: str = "", manager_error: str = "") -> str:
    """Render the portal's page; ``manager_error`` is shown under the manager field, which
    keeps the ``manager`` typed."""
    session = get_session()
    courses = list_courses(session, portal=portal, include_archived=True)
    years = list_years(session)
    return render_template(
        "admin/portal.html",
        portal=portal,
        courses=courses,
        leads={c.id: course_leads(session, c) for c in courses},
        years=years,
        offers=plan_year_offers(
            ((y.label, y.is_active) for y in years),
            {label: codes for label, (_, codes) in codes_by_year(session).items()},
        ),
        manager=manager,
        manager_error=manager_error,
    )


@bp.post("/portals/<code>/managers")
def add_portal_manager(code: str) -> Response | tuple[str, int]:
    """Make a user a manager of the portal (admins); a refusal is shown under the field."""
    require_admin(g.identity, "name a portal's managers")
    session = get_session()
    portal = get_portal(session, code)
    username = form_field("username")
    try:
        with committing(session):
            retry_on_conflict(
                session,
                lambda: appoint_manager(session, portal, username),
                f"making {username} a manager of portal {code}",
            )
    except CoursehubError as exc:
        return render_portal(get_portal(session, code), username, str(exc)), 400
    flash(f"{username} manages portal {code}.", "success")
    return redirect(url_for("portals.show", code=code))


@bp.post("/portals/<code>/managers/<username>/delete")
def remove_portal_manager(code: str, username: str) -> Response:
    """Take a manager off the portal (admins)."""
    require_admin(g.identity, "name a portal's managers")
    session = get_session()
    with commit_or_show(session) as saved:
        remove_manager(session, get_portal(session, code), username)
    if saved:
        flash(f"{username} no longer manages portal {code}.", "success")
    return redirect(url_for("portals.show", code=code))


def run_rollover(from_year: str, to_year: str, portal: str | None, with_team: bool) -> None:
    """Roll a year (a portal of it) over, flash what was copied, sync the new courses."""
    session = get_session()
    try:
        steps = carry_year(session, from_year, to_year, portal=portal, with_team=with_team)
    except CoursehubError as exc:
        flash(str(exc), "error")
        return
    copied = [new.course_id for _, new in steps if new is not None]
    skipped = [step.target for step, new in steps if new is None]
    flash(
        f"Rolled over {from_year} to {to_year}: copied {', '.join(copied) or 'nothing'}"
        + (f"; already there: {', '.join(skipped)}" if skipped else "")
        + ".",
        "success",
    )
    for course_id in copied:
        flash_outcome(apply_hub_sync(session, course_id))


def preview_or_run_rollover(
    from_year: str, to_year: str, portal: str | None, back: str
) -> Response | str:
    """Without ``confirm`` in the form, show what the rollover would copy (a dry run) and a
    Confirm button; with it, roll over and return to ``back``."""
    with_team = bool(request.form.get("with_team"))
    if request.form.get("confirm"):
        run_rollover(from_year, to_year, portal, with_team)
        return redirect(back)
    try:
        steps = carry_year(
            get_session(), from_year, to_year, portal=portal, with_team=with_team, dry_run=True
        )
    except CoursehubError as exc:
        flash(str(exc), "error")
        return redirect(back)
    return render_template(
        "admin/rollover_preview.html",
        steps=[step for step, _ in steps],
        from_year=from_year,
        to_year=to_year,
        scope=f"{portal} " if portal else "",
        with_team=with_team,
        back=back,
    )


@bp.post("/portals/<code>/rollover")
def rollover(code: str) -> Response | str:
    """Preview, then (``confirm``) copy the portal's courses of year ``from`` to year ``to``."""
    portal = portal_for(code, "roll its courses over")
    back = url_for("portals.show", code=portal.code)
    return preview_or_run_rollover(form_field("from"), form_field("to"), portal.code, back)


def course_back(course_id: str) -> Response:
    """Return to the page the form came from (the portal's page or the course's)."""
    if request.form.get("back") == "portal":
        return redirect(url_for("portals.show", code=request.form.get("portal", "")))
    return redirect(url_for("courses.show", course_id=course_id))


@bp.post("/courses/<course_id>/archive")
def archive_course_view(course_id: str) -> Response:
    """Archive a course (read-only, out of the hub): its portal's managers, admins."""
    course, _ = load_course(course_id, Access.PORTAL)
    session = get_session()
    with commit_or_show(session) as saved:
        archive_course(session, course)
    if saved:
        flash(f"Course {course_id} archived: it is read-only now.", "success")
    return course_back(course_id)


@bp.post("/courses/<course_id>/restore")
def restore_course(course_id: str) -> Response:
    """Restore an archived course: its portal's managers, admins."""
    course, _ = load_course(course_id, Access.PORTAL)
    session = get_session()
    with commit_or_show(session) as saved:
        archive_course(session, course, archived=False)
    if saved:
        flash(f"Course {course_id} restored.", "success")
        flash_outcome(apply_hub_sync(session, course_id))
    return course_back(course_id)


@bp.post("/courses/<course_id>/copy")
def copy_course(course_id: str) -> Response:
    """Copy a course to the year posted as ``to_year`` (its leads, its portal's managers,
    admins), with its teachers and graders if ``with_team``."""
    course, access = load_course(course_id, Access.VIEW)
    role = course_role(course_id)
    require_copy(course, access, role)
    session = get_session()
    try:
        new = carry_course(
            session, course_id, form_field("to_year"), with_team=bool(request.form.get("with_team"))
        )
    except CoursehubError as exc:
        flash(str(exc), "error")
        return course_back(course_id)
    flash(f"Course {course_id} copied to {new.course_id}.", "success")
    flash_outcome(apply_hub_sync(session, new.course_id))
    if request.form.get("back") == "portal":
        return course_back(course_id)
    return redirect(url_for("courses.show", course_id=new.course_id))


def course_role(course_id: str) -> str | None:
    """The signed-in user's role in the course (None: none)."""
    session = get_session()
    own = load_own(session, read_course(session, course_id), g.identity.name)
    return own.role.value if own else None
