"""The course's Usage page for its team; usage per course and portal for admins and managers.

``/courses/<course_id>/usage`` (the course's team, portal managers and
admins; 403 for students): CPU-hours, GPU-hours and peak memory per student,
a bar chart of CPU-hours per day, the servers and jobs running now, and the
servers holding a GPU with no kernel busy (:mod:`coursehub.usage.idlegpu`:
the usage records say who holds a GPU, the hub's activity of the server says
no kernel is busy; the app's hub token reads ``GET /users/{name}``).
``/usage/`` (admins: every portal; a portal's managers: their portals) and
``/portals/<code>/usage`` (one portal): CPU- and GPU-hours per course and per
portal for an academic year (``?year=``, default the current one), as CSV at
``/usage/courses.csv`` (``?year=``, ``?portal=``).
``/metrics/usage`` (the app's admins only): the per-course series of
:mod:`coursehub.usage.metrics`. Figures come from the catalog's usage tables,
filled by ``coursehub usage ingest`` (docs/usage.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, g, render_template, request
from markupsafe import Markup

from coursehub.catalog.admin import current_year, managed_portals
from coursehub.catalog.courses import get_portal, list_courses, list_portals, list_years
from coursehub.catalog.models.courses import AcademicYear, Portal
from coursehub.catalog.queries import running_units
from coursehub.errors import CoursehubError
from coursehub.usage.chart import render_bar_svg
from coursehub.usage.idlegpu import (
    IDLE_AFTER_S,
    IdleGpuServer,
    gpu_holders,
    plan_idle_gpu_servers,
)
from coursehub.usage.metrics import CONTENT_TYPE, STALE_S, render_metrics
from coursehub.usage.report import usage_report
from coursehub.usage.yearly import (
    CourseHours,
    course_seconds,
    plan_course_hours,
    plan_portal_totals,
    render_hours_csv,
)
from coursehub.web.access import Access, require_portal
from coursehub.web.database import get_session
from coursehub.web.hubsync import hub_client, hub_sync_settings
from coursehub.web.views.base import load_course

bp = Blueprint("usage", __name__)

#: Days drawn in the per-day chart.
CHART_DAYS = 120


@bp.get("/courses/<course_id>/usage")
def show(course_id: str) -> str:
    """The course's usage (its team and admins; 403 for anyone else)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    session = get_session()
    now = datetime.now(UTC)
    since = (now - timedelta(days=CHART_DAYS)).date()
    students = usage_report(session, course.course_id, by="student")
    days = usage_report(session, course.course_id, since=since, by="day")
    fresh = now - timedelta(seconds=STALE_S)
    running = running_units(session, course.course_id, fresh)
    idle_gpus, gpu_problem = idle_gpu_servers(course.course_id, now)
    chart = render_bar_svg([(d.day, d.cpu_hours) for d in days], "CPU-hours per day")
    return render_template(
        "usage/show.html",
        course=course,
        access=access,
        students=students,
        running=running,
        idle_gpus=idle_gpus,
        gpu_problem=gpu_problem,
        idle_after_s=IDLE_AFTER_S,
        chart=Markup(chart),  # render_bar_svg escapes every text
    )


def idle_gpu_servers(course_id: str, now: datetime) -> tuple[list[IdleGpuServer], str]:
    """Return the course's servers holding a GPU with no kernel busy, and why none can be told.

    The hub is asked only about the users of servers holding a GPU (one
    ``GET /users/{name}`` each); without GPU holders it is not asked at all.
    """
    holders = gpu_holders(get_session(), course_id, now)
    if not holders:
        return [], ""
    client = hub_client()
    if client is None:
        reason = hub_sync_settings().off_reason
        return [], f"servers holding a GPU cannot be checked for activity: no hub ({reason})"
    users: dict[str, Any] = {}
    with client:
        try:
            for name in sorted({h.username for h in holders}):
                users[name] = client.find_user(name)
        except CoursehubError as exc:
            return [], f"servers holding a GPU cannot be checked for activity: {exc}"
    return plan_idle_gpu_servers(holders, users, now), ""


def visible_portals() -> list[Portal]:
    """Every portal for an admin, the user's own for a manager; 403 for anyone else."""
    session = get_session()
    if g.identity.admin:
        return list_portals(session)
    portals = managed_portals(session, g.identity.name)
    if not portals:
        abort(403, description="only an admin or a portal's managers see usage per course")
    return portals


def chosen_year() -> AcademicYear | None:
    """The year of ``?year=`` (404 if unknown), else the current one (None: no year yet)."""
    session = get_session()
    label = (request.args.get("year") or "").strip()
    if not label:
        return current_year(session)
    year = next((y for y in list_years(session) if y.label == label), None)
    if year is None:
        abort(404, description=f"no academic year {label!r} (years look like 2025-2026)")
    return year


def year_hours(portals: list[Portal], year: AcademicYear | None) -> list[CourseHours]:
    """Return the hours of each course of ``year`` in ``portals`` (archived courses too)."""
    if year is None:
        return []
    session = get_session()
    wanted = {p.id for p in portals}
    courses = [
        (c.portal.code, c.course_id, c.title)
        for c in list_courses(session, year=year, include_archived=True)
        if c.portal_pk in wanted
    ]
    return plan_course_hours(courses, course_seconds(session, [c[1] for c in courses]))


def render_hours(portals: list[Portal], portal: Portal | None) -> str:
    year = chosen_year()
    rows = year_hours(portals, year)
    return render_template(
        "usage/courses.html",
        portal=portal,
        year=year,
        years=list_years(get_session()),
        rows=rows,
        totals=plan_portal_totals(rows),
    )


@bp.get("/usage/")
def courses() -> str:
    """CPU- and GPU-hours per course and portal for a year (admins; managers: their portals)."""
    return render_hours(visible_portals(), None)


@bp.get("/portals/<code>/usage")
def portal_usage(code: str) -> str:
    """CPU- and GPU-hours per course of one portal for a year (admins, its managers)."""
    portal = get_portal(get_session(), code)
    require_portal(get_session(), g.identity, portal, "see this portal's usage")
    return render_hours([portal], portal)


@bp.get("/usage/courses.csv")
def courses_csv() -> Response:
    """The per-course table as CSV (``?year=``, ``?portal=CODE``: one portal in scope)."""
    portals = visible_portals()
    code = (request.args.get("portal") or "").strip()
    if code:
        portals = [p for p in portals if p.code == code]
        if not portals:
            get_portal(get_session(), code)  # 404 if there is no such portal
            abort(403, description=f"only an admin or a manager of portal {code} sees its usage")
    year = chosen_year()
    text = render_hours_csv(year_hours(portals, year))
    name = f"usage-{year.label if year else 'none'}{'-' + code if code else ''}.csv"
    return Response(
        text.encode("utf-8"),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@bp.get("/metrics/usage")
def metrics() -> Response:
    """Prometheus usage series (admins only; ``?per_student=1`` adds a series per student).

    With ``HOMES_DIR`` (``COURSEHUB_HOMES_DIR``) set, also the homes near their quota.
    """
    identity = g.get("identity")
    if identity is None or not identity.admin:
        abort(403)
    per_student = request.args.get("per_student") == "1"
    homes = current_app.config.get("HOMES_DIR")
    text = render_metrics(get_session(), per_student, Path(homes) if homes else None)
    return Response(text, content_type=CONTENT_TYPE)
