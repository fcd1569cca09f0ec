"""Browse the catalogue: academic years, then portals, then courses.

Each user sees only the courses they belong to (any role) and those of the
portals they manage; hub admins see every course.
"""

from __future__ import annotations

from flask import Blueprint, abort, g, render_template

from coursehub.catalog.admin import managed_portals
from coursehub.catalog.courses import list_courses
from coursehub.catalog.members import visible_courses
from coursehub.catalog.models.courses import Course
from coursehub.web.database import get_session

bp = Blueprint("browse", __name__)


def my_courses() -> list[Course]:
    """Return the courses the signed-in user may see, newest year first: theirs and those of
    the portals they manage (every course for an admin)."""
    identity = g.identity
    session = get_session()
    courses = visible_courses(session, identity.name, is_admin=identity.admin)
    if identity.admin:
        return courses
    seen = {c.id for c in courses}
    for portal in managed_portals(session, identity.name):
        courses += [c for c in list_courses(session, portal=portal) if c.id not in seen]
    return sorted(courses, key=lambda c: (-c.year.start_year, c.code))


def plan_tree(courses: list[Course]) -> dict[str, dict[str, list[Course]]]:
    """Group courses by year label, then portal code, keeping their order."""
    tree: dict[str, dict[str, list[Course]]] = {}
    for course in courses:
        tree.setdefault(course.year.label, {}).setdefault(course.portal.code, []).append(course)
    return tree


@bp.get("/")
def index() -> str:
    """The academic years with the user's courses in them."""
    courses = my_courses()
    return render_template("browse/index.html", tree=plan_tree(courses), courses=courses)


@bp.get("/years/<year>/")
def year(year: str) -> str:
    """The portals of one academic year."""
    portals = plan_tree(my_courses()).get(year)
    if portals is None:
        abort(404, description=f"no courses of yours in academic year {year}")
    return render_template("browse/year.html", year=year, portals=portals)


@bp.get("/years/<year>/<portal>/")
def portal(year: str, portal: str) -> str:
    """The courses of one portal in one academic year."""
    courses = plan_tree(my_courses()).get(year, {}).get(portal)
    if courses is None:
        abort(404, description=f"no courses of yours in portal {portal}, year {year}")
    return render_template(
        "browse/portal.html", year=year, portal=courses[0].portal, courses=courses
    )
