"""Error pages: plain HTML for people, ``{"error": "..."}`` for the JSON API.

No traceback is ever shown. An unexpected exception is logged by Flask
(``app.logger``) and answered with a plain 500 page.
"""

from __future__ import annotations

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from coursehub.catalog.errors import ConflictError, ForbiddenError, NotFoundError, RosterError
from coursehub.errors import CoursehubError

API_PREFIX = "/api/"


def init_app(app: Flask) -> None:
    """Register the error handlers."""
    app.register_error_handler(HTTPException, handle_http_error)
    app.register_error_handler(CoursehubError, handle_coursehub_error)


def wants_json() -> bool:
    """Return whether the request is for the JSON API."""
    return request.path.startswith(API_PREFIX)


def error_response(status: int, message: str, title: str) -> tuple[Response | str, int]:
    """Return the error as JSON for the API, else as the plain error page."""
    if wants_json():
        return jsonify(error=message), status
    return render_template("error.html", status=status, title=title, message=message), status


def handle_http_error(exc: HTTPException) -> tuple[Response | str, int] | HTTPException:
    """Answer 4xx/5xx raised by ``abort`` (redirects pass through)."""
    status = exc.code or 500
    if status < 400:
        return exc
    message = exc.description or exc.name
    if status >= 500:
        message = "Something went wrong on our side; it has been logged."
    return error_response(status, message, exc.name)


def handle_coursehub_error(exc: CoursehubError) -> tuple[Response | str, int]:
    """Answer a catalog error not handled by the view: 403, 404, 409 or 400 with its message."""
    if isinstance(exc, ForbiddenError):
        return error_response(403, str(exc), "Forbidden")
    if isinstance(exc, NotFoundError):
        return error_response(404, str(exc), "Not found")
    if isinstance(exc, ConflictError):
        return error_response(409, str(exc), "Conflict")
    if isinstance(exc, RosterError) and wants_json():
        return jsonify(error=str(exc), problems=exc.problems), 400
    return error_response(400, str(exc), "Bad request")
