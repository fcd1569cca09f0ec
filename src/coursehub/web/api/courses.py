"""The course API under ``/api/v1/``: courses, their members, roster and sync, and the
description itself (``openapi.yaml`` in this package, also shown as a page).

The calls, tokens and error bodies are :mod:`coursehub.web.api.base`'s; a
course's material and budget have their own blueprints
(:mod:`coursehub.web.api.material`, :mod:`coursehub.web.api.budgets`).
"""

from __future__ import annotations

from typing import Any

from flask import Response, g, jsonify, render_template, request, url_for

from coursehub.catalog.courses import get_group, get_portal
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.errors import IdentityError, NotFoundError
from coursehub.catalog.members import add_member, remove_member, visible_courses
from coursehub.catalog.people import check_username
from coursehub.catalog.readmodel import (
    load_groups,
    load_member,
    load_members,
    load_students,
    load_team,
)
from coursehub.catalog.roster.apply import apply_roster, check_confirmed
from coursehub.web.access import (
    Access,
    course_actor,
    require_admin,
    require_creator,
    require_creator_in,
    require_move,
    require_portal,
)
from coursehub.web.actions import apply_course_changes, apply_new_course
from coursehub.web.api.apidoc import openapi_text, plan_api_doc
from coursehub.web.api.base import api_blueprint, api_course, synced
from coursehub.web.api.payloads import (
    parse_course_changes,
    parse_new_course,
    parse_new_member,
    parse_roster_request,
    render_course,
    render_member,
    render_profile,
)
from coursehub.web.database import get_session
from coursehub.web.hubsync import apply_hub_sync
from coursehub.web.identity import Identity
from coursehub.web.rosterflow import plan_import, render_plan_json
from coursehub.web.saving import committing

bp = api_blueprint("api", __name__)


@bp.get("/openapi.yaml")
def openapi() -> Response:
    """This API's OpenAPI 3 description."""
    return Response(openapi_text(), mimetype="application/yaml")


@bp.get("/")
def openapi_html() -> str:
    """The description as a page (rendered here: no script, nothing fetched elsewhere)."""
    return render_template("admin/api_docs.html", doc=plan_api_doc(openapi_text()))


@bp.get("/courses")
def list_courses() -> Response:
    """The courses the caller may see."""
    identity: Identity = g.identity
    courses = visible_courses(get_session(), identity.name, is_admin=identity.admin)
    return jsonify(courses=[render_course(c) for c in courses])


@bp.post("/courses")
def create_course() -> tuple[Response, dict[str, str]]:
    """Create a course in a portal the caller may create in; the caller (or ``lead``, a known
    person named by an admin or the portal's manager) becomes its lead."""
    session = get_session()
    require_creator(session, g.identity)
    new = parse_new_course(request.get_json(silent=True))
    portal = get_portal(session, new.portal)
    require_creator_in(session, g.identity, portal)
    if (new.lead or new.profile or new.team_profile) and not g.identity.admin:
        require_portal(session, g.identity, portal, "name a course's lead or profiles")
    with committing(session):
        course = apply_new_course(session, new, g.identity.name)
    location = url_for("api.get_course", course_id=course.course_id)
    outcome = apply_hub_sync(session, course.course_id)
    return synced(render_course(course), outcome, 201), {"Location": location}


@bp.get("/courses/<course_id>", endpoint="get_course")
def get_course_view(course_id: str) -> Response:
    """One course with its team, groups, profile and material; students and the material's
    repository for its team (others get ``material`` null)."""
    session, course, access = api_course(course_id, Access.VIEW)
    groups = load_groups(session, course)
    team = access >= Access.READ_ROSTER
    body: dict[str, Any] = render_course(course) | {
        "description": course.description,
        "profile": render_profile(course.profile),
        "team_profile": render_profile(course.team_profile),
        "budget": {"cpu_hours": course.budget_cpu_hours, "gpu_hours": course.budget_gpu_hours},
        "material": None
        if course.material is None or not team
        else {
            "git_url": course.material.git_url,
            "branch": course.material.branch,
            "subpath": course.material.subpath,
        },
        "last_sync_at": course.last_sync_at.isoformat() if course.last_sync_at else None,
        "last_sync_status": course.last_sync_status,
        "team": [render_member(m) for m in load_team(session, course, groups.names)],
        "groups": [
            {"name": c.name, "kind": c.kind.value, "n_students": c.n_students} for c in groups.rows
        ],
    }
    if team:
        students = load_students(session, course, groups.names)
        body["students"] = [render_member(m) for m in students]
    return jsonify(body)


@bp.patch("/courses/<course_id>")
def update_course(course_id: str) -> Response:
    """Change a course's title, description, portal (admins, managers of both portals),
    material or (admins) profiles."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    changes, material = parse_course_changes(request.get_json(silent=True))
    if "profile" in changes or "team_profile" in changes:
        require_admin(g.identity)
    if changes.get("portal") is not None:
        require_move(session, g.identity, course, str(changes["portal"]))
    with committing(session):
        apply_course_changes(session, course, changes, material)
    return synced(render_course(course), apply_hub_sync(session, course_id))


@bp.get("/courses/<course_id>/members")
def list_members(course_id: str) -> Response:
    """Every member of the course (team and students): the course's team only."""
    session, course, _ = api_course(course_id, Access.READ_ROSTER)
    names = load_groups(session, course, counts=False).names
    return jsonify(members=[render_member(m) for m in load_members(session, course, names)])


@bp.post("/courses/<course_id>/members", endpoint="add_member")
def add_member_view(course_id: str) -> Response:
    """Add a person (role ``student`` by default) or change their role and group."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    data = parse_new_member(request.get_json(silent=True))
    username = check_username(data["username"])
    names = load_groups(session, course, counts=False).names
    existed = load_member(session, course, username, names) is not None

    def add() -> None:
        group = get_group(course, data["group"]) if data.get("group") else None
        add_member(
            session,
            course,
            username,
            data.get("role") or "student",
            group,
            first_name=data.get("first_name") or "",
            last_name=data.get("last_name") or "",
            email=data.get("email") or None,
            actor=course_actor(session, g.identity, course),
        )

    retry_on_conflict(session, add, f"adding {username} to {course_id}")
    member = load_member(session, course, username, names)
    if member is None:  # removed meanwhile by another request
        raise NotFoundError(f"{username} is not in course {course_id}")
    outcome = apply_hub_sync(session, course_id)
    return synced(render_member(member), outcome, 200 if existed else 201)


@bp.delete("/courses/<course_id>/members/<username>")
def delete_member(course_id: str, username: str) -> Response:
    """Take a person out of the course."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    with committing(session):
        remove_member(session, course, username, actor=course_actor(session, g.identity, course))
    return synced(None, apply_hub_sync(session, course_id))


@bp.post("/courses/<course_id>/roster")
def import_roster(course_id: str) -> Response:
    """Import a roster CSV; with ``dry_run`` only return what it would change.

    A plan that renames or re-mails existing people is applied only with
    ``confirm_identity_changes``; else 409 with the plan (nothing written).
    """
    session, course, _ = api_course(course_id, Access.MANAGE)
    req, dry_run, confirmed = parse_roster_request(request.get_json(silent=True))
    plan = plan_import(session, course, req, admin=g.identity.admin)
    body = render_plan_json(plan) | {"applied": not dry_run}
    if dry_run:
        return jsonify(body)
    try:
        check_confirmed(plan, confirmed)
    except IdentityError as exc:
        answer = jsonify(
            body | {"applied": False, "error": f"{exc}: send confirm_identity_changes"}
        )
        answer.status_code = 409
        return answer
    apply_roster(session, plan)
    return synced(body, apply_hub_sync(session, course_id))


@bp.post("/courses/<course_id>/sync")
def sync_course(course_id: str) -> Response:
    """Sync the catalog into the hub now; answer the course's sync outcome."""
    session, _, _ = api_course(course_id, Access.MANAGE)
    return synced({}, apply_hub_sync(session, course_id))
