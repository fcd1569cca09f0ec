"""What every blueprint of the JSON API shares: hub tokens, JSON bodies and JSON answers.

Every call but the description itself (:data:`PUBLIC_ENDPOINTS`) needs a hub
token (``Authorization: token T`` or ``Bearer T``), resolved through
``HubOAuth.user_for_token`` (or, in tests, the ``API_TOKEN_RESOLVER`` callable
of the config). Cookies are ignored, so the API is exempt from CSRF
(:data:`coursehub.web.app.CSRF_EXEMPT`). Errors are ``{"error": "..."}`` with
400 (plus ``fields``), 401, 403, 404 or 409. A blueprint made by
:func:`api_blueprint` checks the token before each call and answers a
malformed body (:class:`~coursehub.web.api.payloads.PayloadError`) with 400;
:data:`coursehub.web.app.BLUEPRINTS` mounts it under :data:`API_PREFIX`.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, abort, current_app, g, jsonify, request
from sqlalchemy.orm import Session

import coursehub.web.auth as auth
from coursehub.catalog.models.courses import Course
from coursehub.web.access import Access, require
from coursehub.web.api.payloads import PayloadError, parse_fields
from coursehub.web.coursepage import load_course_access
from coursehub.web.database import get_session
from coursehub.web.hubsync import HubSyncOutcome
from coursehub.web.identity import Identity
from coursehub.web.readonly import refuse_changes_to_read_only_courses

#: URL prefix of every blueprint of the API (given in :data:`coursehub.web.app.BLUEPRINTS`).
API_PREFIX = "/api/v1"
#: The description and its HTML view: readable without a token.
PUBLIC_ENDPOINTS = frozenset({"api.openapi", "api.openapi_html"})
TOKEN_PATTERN = re.compile(r"^(?:token|bearer)\s+(\S+)\s*$", re.IGNORECASE)
#: Response header of every change: the hub sync's status for the course.
SYNC_HEADER = "Coursehub-Hub-Sync"


def api_blueprint(name: str, import_name: str) -> Blueprint:
    """Return a blueprint whose calls need a hub token (:func:`authenticate`) and whose
    malformed bodies get 400 (:func:`payload_error`); registered under :data:`API_PREFIX`."""
    bp = Blueprint(name, import_name)
    bp.before_request(authenticate)
    bp.register_error_handler(PayloadError, payload_error)
    return bp


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


def payload_error(exc: PayloadError) -> tuple[Response, int]:
    """Answer a malformed body: 400 with the problem of each field."""
    return jsonify(error=str(exc), fields=exc.fields), 400


def json_error(message: str, status: int, **extra: Any) -> tuple[Response, int]:
    """Answer ``{"error": message, ...extra}`` with ``status``."""
    return jsonify(error=message, **extra), status


def read_body(
    required: dict[str, type], optional: dict[str, type], default: Any = None
) -> dict[str, Any]:
    """Return the request's JSON object, checked
    (:func:`coursehub.web.api.payloads.parse_fields`); ``default`` stands for a request
    without a JSON body (None: such a request is refused).

    Raises
    ------
    PayloadError
        If the body is not an object with the fields and types asked for.
    """
    raw = request.get_json(silent=True)
    return parse_fields(raw if raw is not None or default is None else default, required, optional)


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


def created(value: dict[str, Any], is_new: bool) -> tuple[Response, int]:
    """201 for a new object, 200 for one that was already there (idempotent creation)."""
    return jsonify(value), 201 if is_new else 200
