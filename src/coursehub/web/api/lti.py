"""``POST /api/v1/lti/launch``: the hub's LTI authenticator asks the course app who launched.

The hub process (:class:`coursehub.spawn.lti.CoursehubLTIAuthenticator`) has
verified an LTI 1.3 ``id_token`` and posts its claims here with the launch
token (``Authorization: token T``, ``LTI_LAUNCH_TOKEN`` in the config, the
``COURSEHUB_LTI_LAUNCH_TOKEN`` variable the rendered hub configuration gives
the course app; without it this endpoint answers 404). The app parses the
launch (:func:`coursehub.catalog.lti.claims.parse_launch`), records its
nonce, enrols the person in the linked course and syncs that course into
the hub (at every accepted launch) (:func:`coursehub.web.hubsync.apply_hub_sync`, which calls
:func:`coursehub.hub.sync.sync_catalog` with ``course_ids=[course_id]``): the
hub groups and the gradebook follow at once, without a hub restart.

Before deciding who the person is, the app asks the hub about the launch's
username (:func:`hub_account`: does a hub user have it, is it an admin), so
that :func:`coursehub.catalog.lti.identity.plan_account` never maps a launch
onto a hub account outside the catalog or onto an admin.

Answers: 200 ``{"name", "course_id", "role", "next", "hub_sync"}``; 403
``{"error"}`` for a refusal, the message shown to the person (an unlinked
LMS course adds ``"code"``, the link code, to an Instructor's launch only);
400 for a malformed request; 401 without the token; 503 when the hub cannot
be asked about the username.

``GET /api/v1/lti/jwks.json`` serves the tool's public key set
(:func:`coursehub.lti.keys.public_jwks`), anonymously: the LMS fetches it to
check the tool's token requests; it holds no private member. 404 until
``coursehub lti keygen`` has made the key pair (:func:`key_path`).
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, jsonify, request

from coursehub.catalog.dberrors import retry_on_conflict
from coursehub.catalog.lti.claims import Launch, LaunchError, LaunchRefusedError, parse_launch
from coursehub.catalog.lti.identity import HubAccount
from coursehub.catalog.lti.launch import apply_launch, claim_nonce
from coursehub.catalog.material import render_pull_link
from coursehub.catalog.models.courses import Course
from coursehub.catalog.models.lti import LtiLink
from coursehub.errors import CoursehubError
from coursehub.hub.hubclient import HubClient, HubError
from coursehub.lti.keys import ToolKeyError, load_private_key, public_jwks, tool_key_path
from coursehub.web.api.base import json_error, parse_authorization
from coursehub.web.database import get_session
from coursehub.web.hubsync import apply_hub_sync, hub_sync_settings
from coursehub.web.redirects import safe_next

log = logging.getLogger(__name__)

#: Registered under ``/api/v1/lti`` (:data:`coursehub.web.app.BLUEPRINTS`).
bp = Blueprint("lti_api", __name__)
#: Seconds a platform may cache the key set.
JWKS_MAX_AGE_S = 300


def hub_prefix(config: Any) -> str:
    """Return the hub's path prefix (``"/hub/"`` under base URL ``/``)."""
    return str(config.get("HUB_BASE_URL") or "/").rstrip("/") + "/hub/"


def render_deep_link(hub_base_url: str, course: Course, notebook: str) -> str:
    """Return the hub URL that pulls the course's published material and opens ``notebook``.

    The course page's nbgitpuller link (:func:`coursehub.catalog.material.render_pull_link`:
    the published mirror ``pull_url``, its branch, the folder ``<course_id>-material``),
    opening ``notebook`` in it; the result is checked by
    :func:`coursehub.web.redirects.safe_next` against the hub's prefix.

    Raises
    ------
    LaunchRefusedError
        If the course has no published material yet, or the URL would leave the hub (it
        never should: the parts are checked).
    """
    url = render_pull_link(hub_base_url, course, notebook)
    if url is None:
        raise LaunchRefusedError(
            f"the LMS activity opens notebook {notebook!r}, but course {course.course_id} has "
            "no published material yet: ask its teachers"
        )
    if safe_next(url, hub_prefix({"HUB_BASE_URL": hub_base_url})) != url:
        raise LaunchRefusedError("the notebook link of this LMS activity cannot be opened safely")
    return url


def hub_account(username: str) -> HubAccount | None:
    """Return what the hub says of ``username`` (None when the app has no hub API).

    Raises
    ------
    LaunchRefusedError
        If the hub cannot be asked (the launch is refused rather than guessed).
    """
    settings = hub_sync_settings()
    if not settings.enabled:
        return None
    assert settings.api_url is not None
    try:
        with HubClient(settings.api_url, settings.token, retry=settings.retry()) as client:
            model = client.find_user(username)
    except (HubError, OSError) as exc:
        log.warning("LTI launch of %s: asking the hub: %s", username, exc)
        raise LaunchRefusedError(
            f"the hub could not be asked whether hub user {username} exists: try again in a minute"
        ) from None
    return HubAccount(exists=model is not None, admin=bool(model and model.get("admin")))


def check_token() -> None:
    """404 when launches are not configured, 401 without the launch token."""
    expected = str(current_app.config.get("LTI_LAUNCH_TOKEN") or "")
    if not expected:
        abort(404, description="LTI launches are not configured (COURSEHUB_LTI_LAUNCH_TOKEN)")
    given = parse_authorization(request.headers.get("Authorization")) or ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        abort(401, description="send the hub's LTI launch token: Authorization: token <token>")


def unlinked_message(link: LtiLink, launch: Launch) -> str:
    """Tell the person what to do about an LMS course not linked yet (pure): the code only to
    the Instructor it belongs to, everyone else only that it is not linked."""
    title = link.context_title or "this LMS course"
    if launch.instructor and link.instructor_subject == launch.subject:
        return (
            f"The LMS course {title!r} is not linked to a course of the hub yet, so nothing "
            f"was changed. As the lead of the course in the course app, link it on the "
            f"course's page (LMS links) with the code {link.code}, then launch again; the "
            "code works for you only."
        )
    return (
        f"The LMS course {title!r} is not linked to a course of the hub yet, so nothing was "
        "changed. Your teacher links it (by launching the hub once from this LMS course as "
        "Instructor); launch again once it is done."
    )


@bp.post("/launch")
def launch() -> Response | tuple[Response, int]:
    """Enrol the launching person (see the module docstring)."""
    check_token()
    payload = request.get_json(silent=True)
    if not isinstance(payload, dict):
        return json_error("send the launch as a JSON object", 400)
    session = get_session()
    try:
        parsed = parse_launch(payload)
        claim_nonce(session, parsed)
        session.commit()
    except LaunchError as exc:
        session.rollback()
        return json_error(str(exc), 400)
    except LaunchRefusedError as exc:
        session.rollback()
        return json_error(str(exc), 403)
    try:
        account = hub_account(parsed.username)
        result = retry_on_conflict(
            session,
            lambda: apply_launch(session, parsed, account),
            f"enrolling {parsed.username}",
            commit=False,
        )
        course: Course | None = result.link.course if result.link is not None else None
        if result.refused is not None:
            session.commit()  # the account request, for the lead or an admin
            return json_error(result.refused, 403)
        if result.course_id is None or course is None:
            assert result.link is not None
            session.commit()
            message = unlinked_message(result.link, parsed)
            if result.link.code in message:
                return json_error(message, 403, code=result.link.code)
            return json_error(message, 403)
        next_url = None
        if parsed.notebook:
            next_url = render_deep_link(
                str(current_app.config.get("HUB_BASE_URL") or "/"), course, parsed.notebook
            )
        session.commit()
    except CoursehubError as exc:
        session.rollback()
        return json_error(str(exc), 403)
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


def key_path() -> Path:
    """Return the tool's private key path from the config, else the default."""
    configured = current_app.config.get("LTI_TOOL_KEY")
    return Path(str(configured)).expanduser() if configured else tool_key_path()


@bp.get("/jwks.json")
def jwks() -> Response | tuple[Response, int]:
    """The tool's public key set (JSON Web Key Set, RFC 7517)."""
    path = key_path()
    if not path.exists():
        message = (
            "the tool has no key pair yet: run `coursehub lti keygen` on the course app's host"
        )
        return jsonify(error=message), 404
    try:
        keys = public_jwks(load_private_key(path))
    except ToolKeyError as exc:
        current_app.logger.error("LTI key set: %s", exc)
        return jsonify(error="the tool's key pair cannot be used: see the course app's log"), 503
    response = jsonify(keys)
    response.headers["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_S}"
    return response
