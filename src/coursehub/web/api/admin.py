"""The JSON API of catalog administration, under ``/api/v1/`` like the course API.

Years (list, create, make current, archive, restore, roll over), portals
(list, create, rename, managers), and per course: archive, restore, copy to
another year. Same tokens, error bodies and statuses as the rest of the API
(:mod:`coursehub.web.api.base`, ``openapi.yaml``); who may do what is
:mod:`coursehub.web.access`'s.
"""

from __future__ import annotations

from typing import Any

from flask import Response, g, jsonify, request
from sqlalchemy.orm import Session

from coursehub.admin.carry import carry_course, carry_year
from coursehub.admin.render import render_course_row, render_portal, render_year
from coursehub.catalog.admin import (
    appoint_manager,
    archive_course,
    archive_year,
    ensure_portal,
    ensure_year,
    remove_manager,
    rename_portal,
    set_current_year,
)
from coursehub.catalog.courses import get_portal, get_year, list_portals, list_years
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.models.courses import Portal
from coursehub.catalog.queries import count_courses_by_year
from coursehub.web.access import Access, require, require_admin, require_copy, require_portal
from coursehub.web.api.base import api_blueprint, created, read_body, synced
from coursehub.web.api.payloads import PayloadError
from coursehub.web.coursepage import load_course_access
from coursehub.web.database import get_session
from coursehub.web.hubsync import apply_hub_sync
from coursehub.web.saving import committing

bp = api_blueprint("api_admin", __name__)


@bp.get("/years")
def years() -> Response:
    """The academic years, newest first, with their state and number of courses."""
    session = get_session()
    counts = count_courses_by_year(session)
    return jsonify(years=[render_year(y, counts.get(y.id, 0)) for y in list_years(session)])


@bp.post("/years")
def create_year() -> tuple[Response, int]:
    """Create a year (admins); 200 if it exists. ``current``: make it the current one."""
    require_admin(g.identity, "create academic years")
    data = read_body({"label": str}, {"current": bool})
    session = get_session()
    with committing(session):
        year, is_new = ensure_year(session, data["label"], current=bool(data.get("current")))
    return created(render_year(year), is_new)


def year_change(label: str, change: Any) -> Response:
    require_admin(g.identity, "change academic years")
    session = get_session()
    with committing(session):
        year = get_year(session, label)
        change(session, year)
    return jsonify(render_year(year))


@bp.post("/years/<year>/current")
def make_current(year: str) -> Response:
    """Make the year the current one (admins)."""
    return year_change(year, set_current_year)


@bp.post("/years/<year>/archive")
def archive(year: str) -> Response:
    """Archive the year: its courses become read-only (admins)."""
    return year_change(year, archive_year)


@bp.post("/years/<year>/restore")
def restore_year(year: str) -> Response:
    """Restore an archived year (admins)."""
    return year_change(year, lambda session, y: archive_year(session, y, archived=False))


@bp.post("/years/<year>/rollover")
def rollover(year: str) -> Response:
    """Copy the year's courses (of ``portal`` only: its managers may) to year ``to``."""
    raw = request.get_json(silent=True)
    portal = raw.get("portal") if isinstance(raw, dict) else None
    session = get_session()
    if isinstance(portal, str) and portal:
        require_portal(session, g.identity, get_portal(session, portal), "roll it over")
    else:
        require_admin(g.identity, "roll a whole year over (a portal's managers roll their portal)")
    data = read_body({"to": str}, {"portal": str, "with_team": bool, "dry_run": bool})
    dry_run = bool(data.get("dry_run"))
    steps = carry_year(
        session,
        year,
        data["to"],
        portal=data.get("portal"),
        with_team=bool(data.get("with_team")),
        dry_run=dry_run,
    )
    rows = [
        {"source": s.source, "target": s.target, "action": s.action, "applied": new is not None}
        for s, new in steps
    ]
    for _step, new in steps:
        if new is not None:
            apply_hub_sync(session, new.course_id)
    return jsonify(steps=rows, dry_run=dry_run)


@bp.get("/portals")
def portals() -> Response:
    """The portals with their managers."""
    return jsonify(portals=[render_portal(p) for p in list_portals(get_session())])


@bp.post("/portals")
def create_portal() -> tuple[Response, int]:
    """Create a portal (admins), with its ``managers``; 200 if it exists."""
    require_admin(g.identity, "create portals")
    data = read_body({"code": str}, {"title": str, "managers": list})
    managers = data.get("managers") or []
    if not all(isinstance(m, str) for m in managers):
        raise PayloadError({"managers": "must be a list of usernames"})
    session = get_session()
    with committing(session):
        portal, is_new = ensure_portal(session, data["code"], data.get("title") or "", managers)
    return created(render_portal(portal), is_new)


@bp.patch("/portals/<code>")
def update_portal(code: str) -> Response:
    """Rename a portal (admins)."""
    require_admin(g.identity, "rename portals")
    data = read_body({"title": str}, {})
    session = get_session()
    with committing(session):
        portal = rename_portal(session, get_portal(session, code), data["title"])
    return jsonify(render_portal(portal))


@bp.put("/portals/<code>/managers/<username>")
def put_manager(code: str, username: str) -> Response:
    """Make a user a manager of the portal (admins); idempotent."""
    require_admin(g.identity, "name a portal's managers")
    session = get_session()
    portal = retry_on_conflict(
        session,
        lambda: _add_manager(session, code, username),
        f"making {username} a manager of portal {code}",
    )
    return jsonify(render_portal(portal))


def _add_manager(session: Session, code: str, username: str) -> Portal:
    portal = get_portal(session, code)
    appoint_manager(session, portal, username)
    return portal


@bp.delete("/portals/<code>/managers/<username>")
def delete_manager(code: str, username: str) -> Response:
    """Take a manager off the portal (admins)."""
    require_admin(g.identity, "name a portal's managers")
    session = get_session()
    with committing(session):
        remove_manager(session, get_portal(session, code), username)
    return Response(status=204)


def course_change(course_id: str, archived: bool) -> Response:
    session = get_session()
    seen = load_course_access(session, course_id, g.identity)
    require(seen.access, Access.PORTAL)
    with committing(session):
        archive_course(session, seen.course, archived)
    return synced(render_course_row(session, seen.course), apply_hub_sync(session, course_id))


@bp.post("/courses/<course_id>/archive", endpoint="archive_course")
def archive_course_view(course_id: str) -> Response:
    """Archive a course (its portal's managers, admins): read-only, out of the hub."""
    return course_change(course_id, True)


@bp.post("/courses/<course_id>/restore", endpoint="restore")
def restore_course(course_id: str) -> Response:
    """Restore an archived course (its portal's managers, admins)."""
    return course_change(course_id, False)


@bp.post("/courses/<course_id>/copy", endpoint="copy")
def copy_course(course_id: str) -> Response:
    """Copy a course to year ``to_year`` (its leads, its portal's managers, admins)."""
    session = get_session()
    seen = load_course_access(session, course_id, g.identity)
    require(seen.access, Access.VIEW)
    require_copy(seen.course, seen.access, seen.own.role.value if seen.own else None)
    data = read_body({"to_year": str}, {"with_team": bool})
    new = carry_course(session, course_id, data["to_year"], with_team=bool(data.get("with_team")))
    outcome = apply_hub_sync(session, new.course_id)
    return synced(render_course_row(session, new), outcome, 201)
