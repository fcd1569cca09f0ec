"""The JSON API under ``/api/v1/``, described by ``openapi.yaml`` in this package.

Every call but the description itself needs a hub token (``Authorization:
token T`` or ``Bearer T``), resolved through ``HubOAuth.user_for_token`` (or,
in tests, the ``API_TOKEN_RESOLVER`` callable of the config). Cookies are
ignored, so the API is exempt from CSRF. Errors are ``{"error": "..."}`` with
400 (plus ``fields``), 401, 403, 404 or 409.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    g,
    jsonify,
    render_template,
    request,
    url_for,
)
from sqlalchemy.orm import Session

from coursehub.catalog.admin import open_course
from coursehub.catalog.courses import get_group, get_portal
from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.errors import IdentityError, NotFoundError
from coursehub.catalog.members import add_member, remove_member, visible_courses
from coursehub.catalog.models.courses import Course, Role
from coursehub.catalog.people import check_username
from coursehub.catalog.readmodel import (
    load_groups,
    load_member,
    load_members,
    load_students,
    load_team,
)
from coursehub.catalog.roster.apply import apply_roster, check_confirmed
from coursehub.web import auth
from coursehub.web.access import (
    Access,
    course_actor,
    require,
    require_admin,
    require_creator,
    require_creator_in,
    require_move,
    require_portal,
)
from coursehub.web.actions import apply_course_changes, apply_material
from coursehub.web.apidoc import plan_api_doc
from coursehub.web.coursepage import load_course_access
from coursehub.web.database import get_session
from coursehub.web.hubsync import HubSyncOutcome, apply_hub_sync
from coursehub.web.identity import Identity
from coursehub.web.payloads import (
    PayloadError,
    parse_course_changes,
    parse_new_course,
    parse_new_member,
    parse_roster_request,
    render_course,
    render_member,
    render_profile,
)
from coursehub.web.readonly import refuse_changes_to_read_only_courses
from coursehub.web.rosterflow import plan_import, render_plan_json
from coursehub.web.saving import committing

bp = Blueprint("api", __name__, url_prefix="/api/v1")

#: The description and its HTML view: readable without a token.
PUBLIC_ENDPOINTS = frozenset({"api.openapi", "api.openapi_html"})
TOKEN_PATTERN = re.compile(r"^(?:token|bearer)\s+(\S+)\s*$", re.IGNORECASE)
#: Response header of every change: the hub sync's status for the course.
SYNC_HEADER = "Coursehub-Hub-Sync"


def init_app(app: Flask) -> None:
    """Register the API blueprint."""
    app.register_blueprint(bp)


def parse_authorization(header: str | None) -> str | None:
    """Return the token of an ``Authorization: token T`` / ``Bearer T`` header, else None."""
    match = TOKEN_PATTERN.match(header or "")
    return match.group(1) if match else None


def resolve_token(token: str) -> Identity | None:
    """Return who owns ``token``: the configured resolver, else the hub."""
    resolver = current_app.config.get("API_TOKEN_RESOLVER")
    if resolver is not None:
        return resolver(token)  # type: ignore[no-any-return,unused-ignore]
    return auth.resolve_hub_token(token)


@bp.before_request
def authenticate() -> None:
    """Identify the caller by token (never by cookie); 401 without a valid one."""
    g.identity = None
    if request.endpoint in PUBLIC_ENDPOINTS:
        return
    token = parse_authorization(request.headers.get("Authorization"))
    if token is None:
        abort(401, description="send a hub token: Authorization: token <token>")
    g.identity = resolve_token(token)
    if g.identity is None:
        abort(401, description="the token is not valid for this service")
    refuse_changes_to_read_only_courses()


@bp.errorhandler(PayloadError)
def payload_error(exc: PayloadError) -> tuple[Response, int]:
    """Answer a malformed body: 400 with the problem of each field."""
    return jsonify(error=str(exc), fields=exc.fields), 400


def api_course(course_id: str, needed: Access) -> tuple[Session, Course, Access]:
    """Return the session, the course and the caller's access; 404 or 403 as needed
    (two queries: :func:`coursehub.web.coursepage.load_course_access`)."""
    session = get_session()
    seen = load_course_access(session, course_id, g.identity)
    require(seen.access, needed)
    return session, seen.course, seen.access


def synced(body: dict[str, Any] | None, outcome: HubSyncOutcome, status: int = 200) -> Response:
    """Answer a change with the sync's outcome: ``hub_sync`` in the JSON body (None: 204,
    no body) and the :data:`SYNC_HEADER` header."""
    if body is None:
        response = Response(status=204)
    else:
        response = jsonify(body | {"hub_sync": outcome.to_json()})
        response.status_code = status
    response.headers[SYNC_HEADER] = outcome.header()
    return response


def openapi_text() -> str:
    """The text of ``openapi.yaml``, shipped in this package."""
    return resources.files("coursehub.web").joinpath("openapi.yaml").read_text("utf-8")


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
    if (new.lead or new.profile) and not g.identity.admin:
        require_portal(session, g.identity, portal, "name a course's lead or profile")
    with committing(session):
        course = open_course(
            session,
            new.code,
            new.title,
            new.year,
            new.portal,
            lead=new.lead,
            profile=new.profile,
            description=new.description,
        )
        if not new.lead:
            add_member(session, course, g.identity.name, Role.LEAD)
        apply_material(session, course, new.material)
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
    material or (admins) profile."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    changes, material = parse_course_changes(request.get_json(silent=True))
    if "profile" in changes:
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
