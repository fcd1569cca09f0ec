"""``POST /api/v1/lti/launch``: the hub's LTI authenticator asks the course app who launched.

The hub process (:class:`coursehub.spawn.lti.CoursehubLTIAuthenticator`) has
verified an LTI 1.3 ``id_token`` and posts its claims here with the launch
token (``Authorization: token T``, ``LTI_LAUNCH_TOKEN`` in the config, the
``COURSEHUB_LTI_LAUNCH_TOKEN`` variable the rendered hub configuration gives
the course app; without it this endpoint answers 404). The app parses the
launch (:func:`coursehub.catalog.ltilaunch.parse_launch`), records its
nonce, enrols the person in the linked course and syncs that course into
the hub (at every accepted launch) (:func:`coursehub.web.hubsync.apply_hub_sync`, which calls
:func:`coursehub.hub.sync.sync_catalog` with ``course_ids=[course_id]``): the
hub groups and the gradebook follow at once, without a hub restart.

Answers: 200 ``{"name", "course_id", "role", "next", "hub_sync"}``; 403
``{"error"}`` for a refusal, the message shown to the person (an unlinked
LMS course adds ``"code"``, the link code); 400 for a malformed request;
401 without the token.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any
from urllib.parse import quote, urlencode

from flask import Blueprint, Flask, Response, abort, current_app, jsonify, request

from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.lti import LtiLink
from coursehub.catalog.ltilaunch import (
    LaunchError,
    LaunchRefusedError,
    apply_launch,
    claim_nonce,
    parse_launch,
)
from coursehub.catalog.models import Course, CourseMaterial
from coursehub.errors import CoursehubError
from coursehub.web.api import parse_authorization
from coursehub.web.database import get_session
from coursehub.web.hubsync import apply_hub_sync
from coursehub.web.redirects import safe_next

log = logging.getLogger(__name__)

bp = Blueprint("lti_api", __name__, url_prefix="/api/v1/lti")


def init_app(app: Flask) -> None:
    """Register the launch API (exempt from CSRF: it reads a token, never a cookie) and the
    LMS link pages (:mod:`coursehub.web.views.lti`)."""
    from coursehub.web.views import lti

    csrf = app.extensions.get("csrf")
    if csrf is not None:
        csrf.exempt(bp)
    app.register_blueprint(bp)
    app.register_blueprint(lti.bp)


def hub_prefix(config: Any) -> str:
    """Return the hub's path prefix (``"/hub/"`` under base URL ``/``)."""
    return str(config.get("HUB_BASE_URL") or "/").rstrip("/") + "/hub/"


def render_pull_url(prefix: str, course_id: str, material: CourseMaterial, notebook: str) -> str:
    """Return the hub URL that pulls the course material with nbgitpuller and opens ``notebook``.

    ``{prefix}user-redirect/git-pull?repo=...&branch=...&targetpath=<course_id>&urlpath=
    lab/tree/<course_id>/<subpath>/<notebook>`` (nbgitpuller's link parameters,
    https://nbgitpuller.readthedocs.io/en/latest/topic/url-options.html), every
    value percent-encoded; the result is checked by
    :func:`coursehub.web.redirects.safe_next` against ``prefix``.

    Raises
    ------
    LaunchRefusedError
        If the URL would leave the hub (it never should: the parts are checked).
    """
    path = "/".join(p for p in (course_id, material.subpath, notebook) if p)
    query = urlencode(
        {
            "repo": material.git_url,
            "branch": material.branch,
            "targetpath": course_id,
            "urlpath": "lab/tree/" + quote(path),
        }
    )
    url = f"{prefix}user-redirect/git-pull?{query}"
    if safe_next(url, prefix) != url:
        raise LaunchRefusedError("the notebook link of this LMS activity cannot be opened safely")
    return url


def check_token() -> None:
    """404 when launches are not configured, 401 without the launch token."""
    expected = str(current_app.config.get("LTI_LAUNCH_TOKEN") or "")
    if not expected:
        abort(404, description="LTI launches are not configured (COURSEHUB_LTI_LAUNCH_TOKEN)")
    given = parse_authorization(request.headers.get("Authorization")) or ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        abort(401, description="send the hub's LTI launch token: Authorization: token <token>")


def refusal(message: str, status: int = 403, **extra: Any) -> tuple[Response, int]:
    """Answer a refused launch: ``{"error": message, ...}``."""
    return jsonify(error=message, **extra), status


def unlinked_message(link: LtiLink) -> str:
    """Tell the person whom to ask for linking the LMS course (pure)."""
    title = link.context_title or "this LMS course"
    return (
        f"The LMS course {title!r} is not linked to a course of the hub yet, so nothing was "
        f"changed. Ask your teacher (the lead of the course in the course app) or a hub "
        f"admin to link it on the course's page with the code {link.code}, then launch again."
    )


@bp.post("/launch")
def launch() -> Response | tuple[Response, int]:
    """Enrol the launching person (see the module docstring)."""
    check_token()
    payload = request.get_json(silent=True)
    if not isinstance(payload, dict):
        return refusal("send the launch as a JSON object", 400)
    session = get_session()
    try:
        parsed = parse_launch(payload)
        claim_nonce(session, parsed)
        session.commit()
    except LaunchError as exc:
        session.rollback()
        return refusal(str(exc), 400)
    except LaunchRefusedError as exc:
        session.rollback()
        return refusal(str(exc))
    try:
        result = retry_on_conflict(
            session,
            lambda: apply_launch(session, parsed),
            f"enrolling {parsed.username}",
            commit=False,
        )
        course: Course | None = result.link.course if result.link is not None else None
        if result.course_id is None or course is None:
            assert result.link is not None
            session.commit()
            return refusal(unlinked_message(result.link), code=result.link.code)
        next_url = None
        if parsed.notebook:
            if course.material is None:
                raise LaunchRefusedError(
                    f"the LMS activity opens notebook {parsed.notebook!r}, but course "
                    f"{course.course_id} has no material repository: ask its teachers"
                )
            next_url = render_pull_url(
                hub_prefix(current_app.config), course.course_id, course.material, parsed.notebook
            )
        session.commit()
    except CoursehubError as exc:
        session.rollback()
        return refusal(str(exc))
    # Every accepted launch syncs its course: the person may be new to the hub, or a
    # roster import's sync may have failed; one course's sync reads three groups.
    outcome = apply_hub_sync(session, result.course_id)
    if outcome.failed:
        log.warning("LTI launch of %s: hub sync: %s", result.username, outcome.status)
    assert result.role is not None
    return jsonify(
        name=result.username,
        course_id=result.course_id,
        role=result.role.value,
        next=next_url,
        hub_sync=outcome.status,
    )
