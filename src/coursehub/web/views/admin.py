"""The administration pages (hub admins): academic years and portals.

Years: create (``YYYY-YYYY``), make current, archive (its courses become
read-only), restore, roll over to another year. Portals: create, rename;
their managers and courses are on the portal's page
(:mod:`coursehub.web.views.portals`). A refused or malformed request changes
nothing and says why (a flash message on the page it came from).
"""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from coursehub.catalog.admin import (
    appoint_manager,
    archive_year,
    ensure_portal,
    ensure_year,
    rename_portal,
    set_current_year,
)
from coursehub.catalog.courses import get_portal, get_year, list_portals, list_years
from coursehub.catalog.errors import ConflictError
from coursehub.catalog.queries import codes_by_year, count_courses_by_year
from coursehub.catalog.yearoffers import plan_year_offers
from coursehub.errors import CoursehubError
from coursehub.web.access import require_admin
from coursehub.web.database import get_session
from coursehub.web.saving import commit_or_show, committing
from coursehub.web.views.base import form_field
from coursehub.web.views.portals import preview_or_run_rollover

bp = Blueprint("admin", __name__)


@bp.before_request
def admins_only() -> None:
    """Every page here is for hub admins; the refusal says so."""
    require_admin(g.get("identity"), "administer academic years and portals")


@bp.get("/admin/")
def index() -> str:
    """Years (state, number of courses) and portals (managers), with their forms."""
    return render_admin()


def render_admin(
    portal_form: dict[str, str] | None = None, portal_error: dict[str, str] | None = None
) -> str:
    """Render the administration page; ``portal_form`` (the new portal's typed values) and
    ``portal_error`` (``{field: message}``) refill a refused new-portal form."""
    session = get_session()
    counts = count_courses_by_year(session)
    years = list_years(session)
    return render_template(
        "admin/index.html",
        years=years,
        counts=counts,
        portals=list_portals(session),
        offers=plan_year_offers(
            ((y.label, y.is_active) for y in years),
            {label: codes for label, (_, codes) in codes_by_year(session).items()},
        ),
        portal_form=portal_form or {},
        portal_error=portal_error or {},
    )


def back() -> Response:
    return redirect(url_for("admin.index"))


@bp.post("/admin/years")
def create_year() -> Response:
    """Create an academic year, optionally the current one."""
    session = get_session()
    label = form_field("label")
    with commit_or_show(session) as saved:
        year, created = ensure_year(session, label, current=bool(request.form.get("current")))
        if not created:
            raise ConflictError(f"academic year {year.label} already exists")
    if saved:
        flash(f"Academic year {year.label} created.", "success")
    return back()


@bp.post("/admin/years/<year>/current")
def make_current(year: str) -> Response:
    """Make a year the current one."""
    session = get_session()
    with commit_or_show(session) as saved:
        set_current_year(session, get_year(session, year))
    if saved:
        flash(f"{year} is the current academic year.", "success")
    return back()


@bp.post("/admin/years/<year>/archive")
def archive(year: str) -> Response:
    """Archive a year: its courses become read-only; a pruning sync removes their hub groups."""
    session = get_session()
    with commit_or_show(session) as saved:
        archive_year(session, get_year(session, year))
    if saved:
        flash(
            f"Academic year {year} archived: its courses are read-only, their grades stay "
            "exportable, and the next pruning hub sync removes their groups.",
            "success",
        )
    return back()


@bp.post("/admin/years/<year>/restore")
def restore(year: str) -> Response:
    """Restore an archived year."""
    session = get_session()
    with commit_or_show(session) as saved:
        archive_year(session, get_year(session, year), archived=False)
    if saved:
        flash(f"Academic year {year} restored.", "success")
    return back()


@bp.post("/admin/years/<year>/rollover")
def rollover(year: str) -> Response | str:
    """Preview, then (``confirm``) copy every course of a year (every portal) to the year
    posted as ``to``."""
    return preview_or_run_rollover(year, form_field("to"), None, url_for("admin.index"))


@bp.post("/admin/portals")
def create_portal() -> Response | tuple[str, int]:
    """Create a portal, with an optional first manager; a refusal is shown under its field
    (the code, or the manager: a known person only), with the typed values kept (400)."""
    session = get_session()
    typed = {name: form_field(name) for name in ("code", "title", "manager")}
    field = "code"
    try:
        with committing(session):
            portal, created = ensure_portal(session, typed["code"], typed["title"])
            if not created:
                raise ConflictError(f"portal {portal.code} already exists")
            if typed["manager"]:
                field = "manager"
                appoint_manager(session, portal, typed["manager"])
    except CoursehubError as exc:
        return render_admin(typed, {field: str(exc)}), 400
    flash(f"Portal {portal.code} created.", "success")
    return back()


@bp.post("/admin/portals/<code>/rename")
def rename(code: str) -> Response:
    """Give a portal a new title."""
    session = get_session()
    with commit_or_show(session) as saved:
        portal = rename_portal(session, get_portal(session, code), form_field("title"))
    if saved:
        flash(f"Portal {portal.code} is now {portal.name}.", "success")
    return redirect(url_for("portals.show", code=code))
