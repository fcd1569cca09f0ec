"""The JSON API of a course's weekly budget, under ``/api/v1/courses/<course_id>/budget``.

``GET .../budget`` (the course's team, admins): the budget per student and
the overrides; ``PUT .../budget`` (lead, teachers): set it;
``PUT .../budget/students/<username>`` (lead, teachers): one student's own
budget (both figures null: back to the course's); ``GET
.../budget/students/<username>`` (that student, the course's team, admins):
their week (:func:`coursehub.meter.budget.status_to_json`), which the hub
reads at spawn and the runner before a job. Figures are JSON numbers of hours
(null: no budget), checked by :func:`coursehub.meter.budget.parse_hours`. A
blueprint of :func:`coursehub.web.api.base.api_blueprint`: the API's tokens,
errors and read-only rule.
"""

from __future__ import annotations

from typing import Any

from flask import Response, abort, g, jsonify

from coursehub.catalog.budgets import (
    OverrideRow,
    course_budget,
    list_overrides,
    set_course_budget,
    set_override,
)
from coursehub.catalog.people import normalize_username
from coursehub.errors import UsageError
from coursehub.meter.budget import WeeklyBudget, parse_hours, status_to_json
from coursehub.usage.weekly import budget_status, zone_from_env
from coursehub.web.access import Access
from coursehub.web.api.base import api_blueprint, api_course, read_body
from coursehub.web.api.payloads import PayloadError
from coursehub.web.saving import committing

bp = api_blueprint("api_budget", __name__)

FIELDS = ("cpu_hours", "gpu_hours")


def parse_budget() -> WeeklyBudget:
    """Return the body's budget (a missing field: null).

    Raises
    ------
    PayloadError
        A field that is not a number or null, or a figure ``parse_hours`` refuses.
    """
    data = read_body({}, {name: object for name in FIELDS})
    problems: dict[str, str] = {}
    hours: dict[str, float | None] = {}
    for name in FIELDS:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            problems[name] = "must be a number of hours or null"
            continue
        try:
            hours[name] = parse_hours(value, name)
        except UsageError as exc:
            problems[name] = str(exc)
    if problems:
        raise PayloadError(problems)
    return WeeklyBudget(hours["cpu_hours"], hours["gpu_hours"])


def render_budget(budget: WeeklyBudget) -> dict[str, Any]:
    """A budget's JSON: ``cpu_hours``, ``gpu_hours`` (null: no budget)."""
    return {"cpu_hours": budget.cpu_hours, "gpu_hours": budget.gpu_hours}


def render_override(row: OverrideRow) -> dict[str, Any]:
    """An override's JSON: the student, the figures, who set it and when (UTC)."""
    return {"username": row.username, **render_budget(row.budget)} | {
        "set_by": row.set_by,
        "set_at": row.set_at.isoformat(),
    }


@bp.get("/courses/<course_id>/budget")
def get_budget(course_id: str) -> Response:
    """The course's weekly budget per student and its overrides (the team, admins)."""
    session, course, _ = api_course(course_id, Access.READ_ROSTER)
    overrides = [render_override(r) for r in list_overrides(session, course)]
    return jsonify(render_budget(course_budget(course)) | {"overrides": overrides})


@bp.put("/courses/<course_id>/budget")
def put_budget(course_id: str) -> Response:
    """Set the course's weekly budget per student (lead, teachers, admins)."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    budget = parse_budget()
    with committing(session):
        set_course_budget(course, budget)
    return get_budget(course_id)


@bp.put("/courses/<course_id>/budget/students/<username>")
def put_student_budget(course_id: str, username: str) -> Response:
    """Give one student their own weekly budget; both null removes it (lead, teachers)."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    budget = parse_budget()
    with committing(session):
        row = set_override(session, course, username, budget, g.identity.name)
    if row is None:
        return Response(status=204)
    return jsonify(render_override(row))


@bp.get("/courses/<course_id>/budget/students/<username>")
def get_student_week(course_id: str, username: str) -> Response:
    """One student's week: budget, hours used, left, reset (the student, the team, admins)."""
    session, course, access = api_course(course_id, Access.VIEW)
    username = normalize_username(username)
    if access < Access.READ_ROSTER and username != g.identity.name:
        abort(403, description="a student reads only their own budget")
    try:
        zone = zone_from_env()
    except UsageError as exc:
        abort(500, description=str(exc))
    return jsonify(status_to_json(budget_status(session, course, username, zone)))
