"""A course's environment on its page: state for every member, build log for the team.

The state and log are files of the shared root (:mod:`coursehub.courseenv.build`),
written by ``coursehub env build``; this page only reads them. The shared
root is the app's ``SHARED_ROOT`` (``COURSEHUB_SHARED_ROOT``), else
``/srv/coursehub``.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, render_template

from coursehub.courseenv.layout import env_paths, read_log_tail, read_state
from coursehub.courselayout import check_shared_root, shared_root
from coursehub.errors import UsageError
from coursehub.web.access import Access
from coursehub.web.views.base import load_course

bp = Blueprint("courseenv", __name__)


def app_shared_root() -> Any:
    """Return the shared root of the app (``SHARED_ROOT``, else the environment's)."""
    configured = current_app.config.get("SHARED_ROOT")
    return check_shared_root(configured) if configured else shared_root()


@bp.app_template_global("course_env_state")
def course_env_state(course_id: str) -> dict[str, Any]:
    """The environment's state for the course page (``{"status": "none"}`` before any build)."""
    try:
        return read_state(env_paths(app_shared_root(), course_id))
    except UsageError as exc:
        return {"status": "unknown", "error": str(exc)}


@bp.get("/courses/<course_id>/environment")
def show(course_id: str) -> str:
    """The environment's state and last build log (the course's team and admins)."""
    course, access = load_course(course_id, Access.READ_ROSTER)
    paths = env_paths(app_shared_root(), course.course_id)
    state = read_state(paths)
    return render_template(
        "courseenv/show.html",
        course=course,
        access=access,
        state=state,
        log=read_log_tail(paths, state.get("log")),
    )
