"""The HTML pages, one blueprint per subject; shared helpers for them live here.

Every page needs a signed-in user: anonymous visitors are sent to the hub's
sign-in (``auth.login``) and come back to the page they asked for.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from flask import Flask, current_app, flash, g, redirect, request, url_for
from werkzeug.wrappers import Response
from wtforms import Form

from coursehub.catalog.courses import get_course
from coursehub.catalog.models import Course
from coursehub.errors import CoursehubError
from coursehub.web.access import Access, course_access, may_create_courses, require
from coursehub.web.auth import auth_mode
from coursehub.web.database import get_session
from coursehub.web.identity import Identity

#: Seconds the header keeps "is on a teaching team" per user (a role change shows after it).
TEAM_CACHE_S = 60.0
#: endpoints that need no signed-in user (the API checks its own tokens)
PUBLIC_ENDPOINTS = frozenset({"static", "auth.login", "auth.oauth_callback", "auth.logout"})


def init_app(app: Flask) -> None:
    """Register the page blueprints and the sign-in gate."""
    from coursehub.web.views import (
        browse,
        courses,
        grading,
        groups,
        people,
        profiles,
        roster,
        team,
    )

    for module in (browse, courses, groups, team, roster, profiles, people, grading):
        app.register_blueprint(module.bp)
    app.before_request(require_login)
    app.context_processor(navigation)


def require_login() -> Response | None:
    """Send anonymous visitors of a page to the sign-in, remembering where they were going."""
    endpoint = request.endpoint or ""
    if g.get("identity") is not None or endpoint in PUBLIC_ENDPOINTS or endpoint.startswith("api."):
        return None
    if request.endpoint is None:  # unknown URL: let the 404 page answer
        return None
    return redirect(url_for("auth.login", next=requested_page()))


def requested_page() -> str:
    """Return the page asked for as a percent-encoded ASCII path with its query string."""
    path = quote(request.script_root + request.path, safe="/:@!$&'()*+,;=-._~")
    query = request.query_string.decode("latin-1")
    return path + (f"?{query}" if query else "")


def navigation() -> dict[str, Any]:
    """Template flags for the header's links (each shown only to those who may use it)."""
    identity = g.get("identity")
    creators = current_app.config["COURSE_CREATOR_GROUPS"]
    return {
        "can_create_courses": may_create_courses(identity, creators),
        "can_find_people": may_find_people(identity),
        "hub_mode": auth_mode() == "hub",
    }


def may_find_people(identity: Identity | None) -> bool:
    """Return whether ``identity`` may search for people: an admin or a teaching-team member.

    Without a query when the hub groups tell: admins, course creators (who
    lead the courses they create) and members of a ``formgrade-{course_id}``
    team group (written by the course sync), a team member of the course the
    page shows (:func:`load_course`); else the catalog decides, its answer
    kept :data:`TEAM_CACHE_S` seconds per user (one query less per page).
    """
    if identity is None:
        return False
    creators = set(current_app.config["COURSE_CREATOR_GROUPS"])
    if identity.admin or any(n in creators or n.startswith("formgrade-") for n in identity.groups):
        return True
    if g.get("on_a_teaching_team"):  # a team member of the course this page shows
        return True
    from coursehub.web.views.people import team_course_pks

    cache = current_app.extensions.setdefault("coursehub_team_members", {})
    now = time.monotonic()
    known = cache.get(identity.name)
    if known is None or known[0] < now:
        known = (now + TEAM_CACHE_S, bool(team_course_pks(get_session(), identity)))
        cache[identity.name] = known
    return known[1]


def load_course(course_id: str, needed: Access) -> tuple[Course, Access]:
    """Return the course and the user's access to it; 404 if unknown, 403 below ``needed``."""
    session = get_session()
    course = get_course(session, course_id)
    access = course_access(session, g.get("identity"), course)
    require(access, needed)
    if access >= Access.READ_ROSTER:
        g.on_a_teaching_team = True  # spares navigation() its query
    return course, access


def show_error(exc: CoursehubError, form: Form | None = None, field: str | None = None) -> None:
    """Show a service error next to ``form[field]``, else as a flash message."""
    if form is not None and field is not None and field in form:
        form[field].errors = [*form[field].errors, str(exc)]
        return
    flash(str(exc), "error")


def form_status(form: Form) -> int:
    """Return 400 for a submitted form with errors, else 200."""
    return 400 if form.errors else 200


def back_to_course(course: Course, message: str) -> Response:
    """Flash ``message`` and go to the course page."""
    flash(message, "success")
    return redirect(url_for("courses.show", course_id=course.course_id))
