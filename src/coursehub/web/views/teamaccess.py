"""The teaching team in its students' servers: the list page, and who can open a student's server.

The page ``/courses/<course_id>/servers`` (the course's team and admins only)
first grants the shares of the students' servers missing on the hub, to the
team's group and each member (:func:`coursehub.teamaccess.shares.sync_team_shares`
with ``grants_only``: a read per member, not per student; revocations are the
sync's; the hub, not this app, decides who may open a server), then lists
each student's server: running or not, last activity, and an "Open" link to
a running one. On the course
page a student reads who can open their server (the hub's shares of it).
The app talks to the hub with its sync token (``HUB_SYNC_URL``/``HUB_SYNC_TOKEN``
or the service's own), which needs the ``shares`` scope.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, render_template

from coursehub.catalog.queries import course_students, oom_kills_by_student
from coursehub.contract import team_group
from coursehub.errors import CoursehubError
from coursehub.teamaccess.servers import read_server_rows
from coursehub.teamaccess.shares import read_server_sharers, sync_team_shares
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.hubsync import hub_client, hub_sync_settings
from coursehub.web.views.base import load_course

bp = Blueprint("teamaccess", __name__)


@bp.get("/courses/<course_id>/servers")
def servers(course_id: str) -> str:
    """The students' servers of the course (its team and admins only; 403 for anyone else)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    client = hub_client()
    rows: list[Any] = []
    students = course_students(get_session(), course.id)
    problem = "" if client else f"no hub: {hub_sync_settings().off_reason}"
    share_errors: list[tuple[str, str]] = []
    if client is not None:
        with client:
            try:
                report = sync_team_shares(client, course.course_id, grants_only=True)
                share_errors = report.errors
                rows = read_server_rows(client, students)
            except CoursehubError as exc:
                problem = f"the hub could not be read: {exc}"
    return render_template(
        "teamaccess/servers.html",
        course=course,
        access=access,
        rows=rows,
        names=students,
        oom_kills=oom_kills_by_student(get_session(), course.course_id),
        problem=problem,
        share_errors=share_errors,
        team_group=team_group(course.course_id),
    )


@bp.app_template_global("server_sharers")
def server_sharers() -> dict[str, Any]:
    """For the signed-in user: who may open their server (``{"names": [...]}`` or ``{"error"}``)."""
    identity = g.get("identity")
    client = hub_client() if identity is not None else None
    if client is None:
        return {"error": "the hub is not reachable from this page"}
    with client:
        try:
            return {"names": read_server_sharers(client, identity.name)}
        except CoursehubError as exc:
            return {"error": f"the hub could not be read: {exc}"}
