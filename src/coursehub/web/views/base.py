"""What every page shares: the sign-in gate, the header's links, loading a course, answers.

Every page needs a signed-in user: anonymous visitors are sent to the hub's
sign-in (``auth.login``) and come back to the page they asked for
(:func:`require_login`, which :func:`coursehub.web.app.create_app` runs before
each request, with :func:`refuse_page_changes_to_read_only_courses` and the
template flags of :func:`navigation`). The page blueprints import their
helpers from here (:func:`load_course`, :func:`form_status`,
:func:`back_to_course`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import quote

from flask import current_app, flash, g, redirect, request, url_for
from werkzeug.wrappers import Response
from wtforms import Form

from coursehub.catalog.admin import managed_portals
from coursehub.catalog.models.courses import Course
from coursehub.catalog.people import find_person
from coursehub.catalog.queries import team_course_pks
from coursehub.web.access import Access, creator_groups, may_create_courses, require
from coursehub.web.auth import auth_mode
from coursehub.web.coursepage import load_course_access
from coursehub.web.database import get_session
from coursehub.web.identity import Identity
from coursehub.web.readonly import refuse_changes_to_read_only_courses

T = TypeVar("T")

#: Seconds the header keeps "is on a teaching team" per user (a role change shows after it).
TEAM_CACHE_S = 60.0
#: endpoints that need no signed-in user (the API checks its own tokens)
PUBLIC_ENDPOINTS = frozenset({"static", "auth.login", "auth.oauth_callback", "auth.logout"})
#: a course book's pages decide themselves (public books: anyone; else members, after sign-in)
PUBLIC_ENDPOINTS |= {"books.root", "books.page"}
#: a built book's other files (CSS, scripts, images): an unguessable per-build address
PUBLIC_ENDPOINTS |= {"books.files"}
#: endpoint prefixes of the JSON API's blueprints (the LTI key set among them: anonymous)
API_BLUEPRINTS = ("api.", "api_admin.", "api_material.", "api_budget.", "api_exams.", "lti_api.")


def refuse_page_changes_to_read_only_courses() -> None:
    """The pages' hook (the API checks after reading its token)."""
    if not (request.endpoint or "").startswith(API_BLUEPRINTS):
        refuse_changes_to_read_only_courses()


def require_login() -> Response | None:
    """Send anonymous visitors of a page to the sign-in, remembering where they were going."""
    endpoint = request.endpoint or ""
    if g.get("identity") is not None or endpoint in PUBLIC_ENDPOINTS:
        return None
    if endpoint.startswith(API_BLUEPRINTS):
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
    creators = creator_groups()
    manager = identity is not None and not g.get("refused") and bool(my_portals(identity))
    admin_link = None
    if identity is not None and identity.admin:
        admin_link = ("Administration", url_for("admin.index"))
    elif manager:
        admin_link = ("My portals", url_for("portals.mine"))
    return {
        "can_create_courses": may_create_courses(identity, creators) or manager,
        "can_find_people": manager or may_find_people(identity),
        "hub_mode": auth_mode() == "hub",
        "admin_link": admin_link,
        "user_label": my_name(identity) if identity is not None and not g.get("refused") else "",
    }


def plan_user_label(username: str, full_name: str) -> str:
    """The header's name for the signed-in user: their catalog name, else the username (pure).

    The demo's ``admin`` read "admin admin" (the username, then the admin
    badge); with a name in the catalog it reads "Camille Roux".
    """
    return full_name.strip() or username


def my_name(identity: Identity) -> str:
    """Return :func:`plan_user_label` for ``identity``, kept per user as :func:`my_portals`."""

    def full_name() -> str:
        person = find_person(get_session(), identity.name)
        return f"{person.first_name} {person.last_name}" if person is not None else ""

    return plan_user_label(
        identity.name, cached_per_user("coursehub_display_names", identity.name, full_name)
    )


def my_portals(identity: Identity) -> list[str]:
    """Return the codes of the portals ``identity`` manages, kept :data:`TEAM_CACHE_S` seconds
    per user for the header (refusals never use this cache)."""
    codes = cached_per_user(
        "coursehub_portal_managers",
        identity.name,
        lambda: [p.code for p in managed_portals(get_session(), identity.name)],
    )
    return list(codes)


def cached_per_user(key: str, username: str, compute: Callable[[], T]) -> T:
    """Return ``compute()`` for ``username``, kept :data:`TEAM_CACHE_S` seconds (monotonic
    clock) in the app's extension ``key`` (one dict per app: username -> (expiry, value))."""
    cache = current_app.extensions.setdefault(key, {})
    now = time.monotonic()
    known = cache.get(username)
    if known is None or known[0] < now:
        known = (now + TEAM_CACHE_S, compute())
        cache[username] = known
    return cast(T, known[1])


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
    creators = set(creator_groups())
    if identity.admin or any(n in creators or n.startswith("formgrade-") for n in identity.groups):
        return True
    if g.get("on_a_teaching_team"):  # a team member of the course this page shows
        return True
    if g.get("refused"):  # a refusal page's header reads nothing more
        return False
    return cached_per_user(
        "coursehub_team_members",
        identity.name,
        lambda: bool(team_course_pks(get_session(), identity.name)),
    )


def load_course(course_id: str, needed: Access) -> tuple[Course, Access]:
    """Return the course and the user's access to it; 404 if unknown, 403 below ``needed``.

    Two queries (:func:`coursehub.web.coursepage.load_course_access`): the
    course with its year, portal, profile and material, and the user's role.
    """
    seen = load_course_access(get_session(), course_id, g.get("identity"))
    require(seen.access, needed)
    if seen.access >= Access.READ_ROSTER:
        g.on_a_teaching_team = True  # spares navigation() its query
    return seen.course, seen.access


def form_field(name: str) -> str:
    """Return a posted text field, stripped (``""`` when absent)."""
    return (request.form.get(name) or "").strip()


def form_status(form: Form) -> int:
    """Return 400 for a submitted form with errors, else 200."""
    return 400 if form.errors else 200


def back_to_course(course: Course, message: str) -> Response:
    """Flash ``message`` and go to the course page."""
    flash(message, "success")
    return redirect(url_for("courses.show", course_id=course.course_id))
