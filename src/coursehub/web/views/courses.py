"""The course page, and the forms that create and edit a course."""

from __future__ import annotations

from flask import Blueprint, g, redirect, render_template, request, url_for
from sqlalchemy.orm import Session
from werkzeug.wrappers import Response
from wtforms import SelectChoice

from coursehub.catalog.courses import list_portals, list_years
from coursehub.catalog.models import Course
from coursehub.catalog.profiles import list_profiles
from coursehub.web.access import Access, require, require_creator
from coursehub.web.actions import Material, NewCourse, apply_course_changes, apply_new_course
from coursehub.web.coursepage import load_course_page
from coursehub.web.database import get_session
from coursehub.web.forms import CourseForm
from coursehub.web.hubsync import apply_hub_sync, flash_outcome, hub_sync_settings
from coursehub.web.views import back_to_course, commit_or_show, form_status, load_course

bp = Blueprint("courses", __name__)


@bp.get("/courses/<course_id>/")
def show(course_id: str) -> str:
    """The course page: team, groups with counts, students (team only, paged), resources."""
    page = load_course_page(
        get_session(), course_id, g.get("identity"), page=request.args.get("page", 1, type=int)
    )
    require(page.access, Access.VIEW)
    return render_template(
        "courses/show.html",
        page=page,
        course=page.course,
        access=page.access,
        Access=Access,
        hub_sync=hub_sync_settings(),
    )


@bp.post("/courses/<course_id>/sync")
def sync(course_id: str) -> Response:
    """Sync the catalog into the hub now (the course's lead and teachers, admins)."""
    load_course(course_id, Access.MANAGE)
    flash_outcome(apply_hub_sync(get_session(), course_id), quiet=False)
    return redirect(url_for("courses.show", course_id=course_id))


def fill_choices(form: CourseForm, session: Session) -> None:
    """Offer the existing years, portals and profiles in the form's menus."""
    if "year" in form:
        form.year.choices = [SelectChoice(y.label) for y in list_years(session, active_only=True)]
    form.portal.choices = [
        SelectChoice(p.code, f"{p.code} · {p.name}") for p in list_portals(session)
    ]
    if "profile" in form:
        names = [SelectChoice(p.name) for p in list_profiles(session)]
        form.profile.choices = [SelectChoice("", "hub defaults"), *names]


@bp.route("/courses/new", methods=["GET", "POST"])
def create() -> tuple[str, int] | Response:
    """Create a course; a teacher becomes its lead, an admin names the lead."""
    require_creator(g.identity)
    session = get_session()
    form = CourseForm()
    if not g.identity.admin:
        del form.profile, form.lead
    fill_choices(form, session)
    if form.validate_on_submit():
        course = apply_create(session, form)
        if course is not None:
            done = back_to_course(course, f"Course {course.course_id} created.")
            flash_outcome(apply_hub_sync(session, course.course_id))
            return done
    return render_template("courses/form.html", form=form, course=None), form_status(form)


def form_material(form: CourseForm) -> Material:
    """Return the material fields of a course form."""
    return Material(form.git_url.data or "", form.branch.data or "", form.subpath.data or "")


def apply_create(session: Session, form: CourseForm) -> Course | None:
    """Create the course from a valid form and commit; None (errors on the form) if refused."""
    new = NewCourse(
        code=form.code.data or "",
        title=form.title.data or "",
        year=form.year.data or "",
        portal=form.portal.data or "",
        description=form.description.data or "",
        profile=(form.profile.data or "") if "profile" in form else "",
        lead=(form.lead.data or "") if "lead" in form else "",
        material=form_material(form),
    )
    with commit_or_show(session, form, "code") as saved:
        course = apply_new_course(session, new, g.identity.name)
    return course if saved else None


@bp.route("/courses/<course_id>/edit", methods=["GET", "POST"])
def edit(course_id: str) -> tuple[str, int] | Response:
    """Edit a course's title, description, portal, material and (admins) profile."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    form = CourseForm(obj=course)
    del form.code, form.year, form.lead
    if not g.identity.admin:
        del form.profile
    fill_choices(form, session)
    if not form.is_submitted():
        prefill(form, course)
    if form.validate_on_submit() and apply_edit(session, form, course):
        done = back_to_course(course, f"Course {course.course_id} saved.")
        flash_outcome(apply_hub_sync(session, course_id))
        return done
    return render_template("courses/form.html", form=form, course=course), form_status(form)


def prefill(form: CourseForm, course: Course) -> None:
    """Put the course's current portal, profile and material in the form."""
    form.portal.data = course.portal.code
    if "profile" in form:
        form.profile.data = course.profile.name if course.profile else ""
    if course.material is not None:
        form.git_url.data = course.material.git_url
        form.branch.data = course.material.branch
        form.subpath.data = course.material.subpath


def apply_edit(session: Session, form: CourseForm, course: Course) -> bool:
    """Save a valid edit form and commit; False (errors on the form) if refused."""
    changes: dict[str, str | None] = {
        "title": form.title.data or "",
        "description": form.description.data or "",
        "portal": form.portal.data or "",
    }
    if "profile" in form:
        changes["profile"] = form.profile.data or ""
    with commit_or_show(session, form, "title") as saved:
        apply_course_changes(session, course, changes, form_material(form))
    return bool(saved)
