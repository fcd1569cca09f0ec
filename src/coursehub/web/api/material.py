"""The JSON API of a course's material, under ``/api/v1/courses/<course_id>/material``.

``GET`` (anyone who sees the course): the mirror's state and the
students' pull link; the repository (URL, branch, folder, credential kind)
and the last error only for the course's team and admins; ``PUT`` (the course's lead and teachers):
set the repository and its credential (sent in the body over the hub's
HTTPS, stored as a private file, never answered back); ``POST .../update``
(the teaching team): start an update in the background (202). A blueprint
of :func:`coursehub.web.api.base.api_blueprint`: the API's tokens, errors and
read-only rule.
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, jsonify

from coursehub.catalog.material import render_pull_link, render_state
from coursehub.catalog.models.courses import Course
from coursehub.errors import UsageError
from coursehub.material.credential import parse_credential
from coursehub.material.service import set_course_material
from coursehub.web.access import Access
from coursehub.web.api.base import api_blueprint, api_course, json_error, read_body
from coursehub.web.materialjobs import material_layout, start_update
from coursehub.web.saving import committing

bp = api_blueprint("api_material", __name__)


def render_material(course: Course, team: bool = True) -> dict[str, Any]:
    """The material's JSON: :func:`~coursehub.catalog.material.render_state` and ``pull_link``.

    ``team``: the reader is on the course's team (else no repository, no error).
    """
    base = str(current_app.config.get("HUB_BASE_URL") or "/")
    return render_state(course, team) | {"pull_link": render_pull_link(base, course)}


@bp.get("/courses/<course_id>/material")
def show(course_id: str) -> Response:
    """The course's material and its mirror's state (the repository and error: its team)."""
    _session, course, access = api_course(course_id, Access.VIEW)
    return jsonify(render_material(course, team=access >= Access.READ_ROSTER))


@bp.put("/courses/<course_id>/material")
def put(course_id: str) -> Response:
    """Set the repository, branch, folder and (``credential``: its text) credential."""
    session, course, _access = api_course(course_id, Access.MANAGE)
    data = read_body(
        {"repo": str}, {"branch": str, "subdir": str, "credential": str, "drop_credential": bool}
    )
    secret = data.get("credential")
    credential = parse_credential(secret.encode(), "the request") if secret else None
    if credential is not None and data.get("drop_credential"):
        raise UsageError("send credential or drop_credential, not both")
    with committing(session):
        set_course_material(
            session,
            course,
            material_layout(),
            data["repo"],
            data.get("branch") or "main",
            data.get("subdir") or "",
            credential=credential,
            drop_credential=bool(data.get("drop_credential")),
        )
    return jsonify(render_material(course))


@bp.post("/courses/<course_id>/material/update")
def update(course_id: str) -> tuple[Response, int]:
    """Start an update now (202); 409 if one runs, or the course has no repository."""
    session, course, _access = api_course(course_id, Access.READ_ROSTER)
    data = read_body({}, {"accept_rewrite": bool}, default={})
    if course.material is None:
        return json_error(f"course {course_id} has no repository yet", 409)
    if not start_update(session, course, bool(data.get("accept_rewrite"))):
        return json_error(f"an update of {course_id}'s material is already running", 409)
    return jsonify(render_material(course)), 202
