"""The JSON API of what students' browsers report during an exam (leaving full screen, the tab).

``POST /api/v1/courses/<course_id>/exams/<assignment>/events``
    the student, for themselves (the caller of the token; the exam server
    forwards its exam clock's events with the server's token,
    :mod:`coursehub.examroom.clock`), only during their sitting:
    ``{"kind": "fullscreen-exit", "detail": "..."}``. 201 with the event
    kept; 400 naming the field (``kind``: not one of the browser's kinds,
    ``detail``: longer than 255 characters); 403 for anyone but a student of
    the course; 409 when their exam is not running; 429 past the limits of
    :mod:`coursehub.catalog.examevents` (per minute, per sitting).
``GET /api/v1/courses/<course_id>/exams/<assignment>/events[?username=U]``
    the course's team (lead, teachers, graders) and admins: the events,
    oldest first.

A blueprint of :func:`coursehub.web.api.base.api_blueprint`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Response, abort, g, jsonify, request

from coursehub.catalog.errors import ConflictError
from coursehub.catalog.examevents import EventLimitError, list_events, record_event
from coursehub.catalog.examjson import field_of
from coursehub.catalog.exams import get_exam
from coursehub.catalog.models.courses import Role
from coursehub.catalog.people import normalize_username
from coursehub.catalog.queries import role_in_course
from coursehub.errors import UsageError
from coursehub.web.access import Access
from coursehub.web.api.base import api_blueprint, api_course, json_error, read_body
from coursehub.web.api.payloads import PayloadError
from coursehub.web.saving import committing

bp = api_blueprint("api_examevents", __name__)

EVENTS = "/courses/<course_id>/exams/<assignment>/events"


@bp.post(EVENTS)
def post_event(course_id: str, assignment: str) -> tuple[Response, int]:
    """Keep an event of the caller's own running sitting (a student of the course)."""
    session, course, _ = api_course(course_id, Access.VIEW)
    if role_in_course(session, g.identity.name, course) != Role.STUDENT:
        abort(403, description=f"only a student of {course.course_id} reports exam events")
    exam = get_exam(session, course, assignment)
    data = read_body({"kind": object}, {"detail": object})
    try:
        with committing(session):
            event = record_event(session, course, exam, g.identity.name, data, datetime.now(UTC))
    except EventLimitError as exc:
        return json_error(str(exc), 429)
    except ConflictError as exc:
        return json_error(str(exc), 409)
    except UsageError as exc:
        raise PayloadError({field_of(exc): str(exc).split(": ", 1)[-1]}) from None
    return jsonify(event.to_json()), 201


@bp.get(EVENTS)
def get_events(course_id: str, assignment: str) -> Response:
    """The exam's events, oldest first (the course's team, admins)."""
    session, course, _ = api_course(course_id, Access.READ_ROSTER)
    exam = get_exam(session, course, assignment)
    username = request.args.get("username")
    name = normalize_username(username) if username else None
    events = [event.to_json() for event in list_events(session, exam, name)]
    return jsonify(course_id=course.course_id, assignment=exam.assignment, events=events)
