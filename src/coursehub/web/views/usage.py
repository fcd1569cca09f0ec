"""The course's Usage page for its team, and the Prometheus usage series for admins.

``/courses/<course_id>/usage`` (the course's team, portal managers and
admins; 403 for students): CPU-hours, GPU-hours and peak memory per student,
a bar chart of CPU-hours per day, and the servers and jobs running now.
``/metrics/usage`` (the app's admins only): the per-course series of
:mod:`coursehub.usage.metrics`. Figures come from the catalog's usage tables,
filled by ``coursehub usage ingest`` (docs/usage.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flask import Blueprint, Response, abort, g, render_template, request
from markupsafe import Markup
from sqlalchemy import select

from coursehub.catalog.usage import UsageUnit
from coursehub.usage.chart import render_bar_svg
from coursehub.usage.metrics import CONTENT_TYPE, STALE_S, render_metrics
from coursehub.usage.report import usage_report
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.views import load_course

bp = Blueprint("usage", __name__)

#: Days drawn in the per-day chart.
CHART_DAYS = 120


@bp.get("/courses/<course_id>/usage")
def show(course_id: str) -> str:
    """The course's usage (its team and admins; 403 for anyone else)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    session = get_session()
    since = (datetime.now(UTC) - timedelta(days=CHART_DAYS)).date()
    students = usage_report(session, course.course_id, by="student")
    days = usage_report(session, course.course_id, since=since, by="day")
    fresh = datetime.now(UTC) - timedelta(seconds=STALE_S)
    running = session.scalars(
        select(UsageUnit)
        .where(
            UsageUnit.course_id == course.course_id,
            UsageUnit.ended_at.is_(None),
            UsageUnit.last_at >= fresh,
        )
        .order_by(UsageUnit.username)
    ).all()
    chart = render_bar_svg([(d.day, d.cpu_hours) for d in days], "CPU-hours per day")
    return render_template(
        "usage/show.html",
        course=course,
        access=access,
        students=students,
        running=running,
        chart=Markup(chart),  # render_bar_svg escapes every text
    )


@bp.get("/metrics/usage")
def metrics() -> Response:
    """Prometheus usage series (admins only; ``?per_student=1`` adds a series per student)."""
    identity = g.get("identity")
    if identity is None or not identity.admin:
        abort(403)
    per_student = request.args.get("per_student") == "1"
    return Response(render_metrics(get_session(), per_student), content_type=CONTENT_TYPE)
