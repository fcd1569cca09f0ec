"""The course page, and the forms that create and edit a course."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, redirect, render_template, request, url_for
from sqlalchemy.orm import Session
from werkzeug.wrappers import Response
from wtforms import SelectChoice

from coursehub.catalog.admin import (
    get_known_person,
    managed_portals,
    plan_read_only,
)
from coursehub.catalog.courses import get_portal, list_portals, list_years
from coursehub.catalog.models.courses import Course, Portal
from coursehub.catalog.profiles import list_profiles
from coursehub.catalog.queries import codes_by_year
from coursehub.catalog.yearoffers import YearOffer, plan_year_offer
from coursehub.errors import CoursehubError
from coursehub.web.access import (
    Access,
    may_copy,
    require,
    require_creator,
    require_creator_in,
    require_move,
)
from coursehub.web.actions import Material, NewCourse, apply_course_changes, apply_new_course
from coursehub.web.coursepage import load_course_page
from coursehub.web.database import get_session
from coursehub.web.forms import CourseForm
from coursehub.web.hubsync import apply_hub_sync, flash_outcome, hub_sync_settings
from coursehub.web.saving import commit_or_show
from coursehub.web.views.base import back_to_course, form_status, load_course

bp = Blueprint("courses", __name__)


@bp.get("/courses/<course_id>/")
def show(course_id: str) -> str:
    """The course page: team, groups with counts, students (team only, paged), resources."""
    session = get_session()
    page = load_course_page(
        session, course_id, g.get("identity"), page=request.args.get("page", 1, type=int)
    )
    require(page.access, Access.VIEW)
    course = page.course
    can_copy = may_copy(page.access, page.own.role.value if page.own else None)
    return render_template(
        "courses/show.html",
        page=page,
        course=course,
        access=page.access,
        Access=Access,
        hub_sync=hub_sync_settings(),
        can_copy=can_copy,
        copy_offer=copy_offer(session, course) if can_copy else None,
        read_only=plan_read_only(
            course.archived, course.year.archived, course.course_id, course.year.label
        ),
        deadlines=course_deadlines(course.course_id),
    )


def course_deadlines(course_id: str) -> list[tuple[str, Any]]:
    """The released assignments' due dates, in the course's zone (the exchange's published file)."""
    from coursehub.grading.deadline import released_deadlines
    from coursehub.grading.layout import layout_from_env

    layout = layout_from_env(course_id)
    return released_deadlines(layout.exchange_root, layout.course_id)


@bp.post("/courses/<course_id>/sync")
def sync(course_id: str) -> Response:
    """Sync the catalog into the hub now (the course's lead and teachers, admins)."""
    load_course(course_id, Access.MANAGE)
    flash_outcome(apply_hub_sync(get_session(), course_id), quiet=False)
    return redirect(url_for("courses.show", course_id=course_id))


def fill_choices(form: CourseForm, session: Session, portals: list[Portal] | None = None) -> None:
    """Offer the open years (the current one first), the portals (``portals``: those the user
    may create courses in) and the profiles in the form's menus."""
    if "year" in form:
        years = list_years(session, active_only=True)
        years.sort(key=lambda y: not y.is_current)
        form.year.choices = [SelectChoice(y.label) for y in years]
    if "portal" in form:
        form.portal.choices = [
            SelectChoice(p.code, f"{p.code} · {p.name}")
            for p in (list_portals(session) if portals is None else portals)
        ]
    if "profile" in form:
        names = [SelectChoice(p.name) for p in list_profiles(session)]
        form.profile.choices = [SelectChoice("", "hub defaults"), *names]
        form.team_profile.choices = [SelectChoice("", "the students' profile"), *names]


@bp.route("/courses/new", methods=["GET", "POST"])
def create() -> tuple[str, int] | Response:
    """Create a course in a portal one may create in; admins and the portal's managers name
    its lead (a known person), anyone else becomes it."""
    session = get_session()
    portals = require_creator(session, g.identity)
    form = CourseForm()
    if not (g.identity.admin or managed_portals(session, g.identity.name)):
        del form.profile, form.team_profile, form.lead
    fill_choices(form, session, portals)
    wanted = request.form.get("portal") or request.args.get("portal")
    if wanted and wanted not in {p.code for p in portals}:
        require_creator_in(session, g.identity, get_portal(session, wanted))
    if not form.is_submitted() and wanted:
        form.portal.data = wanted
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
    lead = (form.lead.data or "").strip() if "lead" in form else ""
    if lead:  # an unknown lead is the lead field's error, not the course code's
        try:
            get_known_person(session, lead, "lead")
        except CoursehubError as exc:
            form.lead.errors = [*form.lead.errors, str(exc)]
            return None
    new = NewCourse(
        code=form.code.data or "",
        title=form.title.data or "",
        year=form.year.data or "",
        portal=form.portal.data or "",
        description=form.description.data or "",
        profile=(form.profile.data or "") if "profile" in form else "",
        team_profile=(form.team_profile.data or "") if "team_profile" in form else "",
        lead=lead,
        material=form_material(form),
    )
    with commit_or_show(session, form, "code") as saved:
        course = apply_new_course(session, new, g.identity.name)
    return course if saved else None


@bp.route("/courses/<course_id>/edit", methods=["GET", "POST"])
def edit(course_id: str) -> tuple[str, int] | Response:
    """Edit a course's title, description, material, (admins) profile and portal: admins and
    managers of both portals move it; the others see its portal read-only, and a portal
    posted anyway is refused (403 saying who may)."""
    course, _ = load_course(course_id, Access.MANAGE)
    session = get_session()
    wanted = request.form.get("portal") if request.method == "POST" else None
    if wanted and wanted.strip() != course.portal.code:
        require_move(session, g.identity, course, wanted)
    form = CourseForm()  # not obj=course: a field left out of a post is empty, not stored
    del form.code, form.year, form.lead
    if not g.identity.admin:
        del form.profile, form.team_profile
    targets = move_targets(session, course)
    if not targets:
        del form.portal
    fill_choices(form, session, targets)
    if not form.is_submitted():
        prefill(form, course)
    if form.validate_on_submit() and apply_edit(session, form, course):
        done = back_to_course(course, f"Course {course.course_id} saved.")
        flash_outcome(apply_hub_sync(session, course_id))
        return done
    return render_template("courses/form.html", form=form, course=course), form_status(form)


def move_targets(session: Session, course: Course) -> list[Portal]:
    """Return the portals the user may move ``course`` to, its own first (admins: all; managers
    of its portal: the portals they manage; others: none, the form shows the portal as text)."""
    identity = g.identity
    if identity.admin:
        others = list_portals(session)
    else:
        managed = managed_portals(session, identity.name)
        if all(p.id != course.portal_pk for p in managed):
            return []
        others = managed
    return [course.portal, *(p for p in others if p.id != course.portal_pk)]


def prefill(form: CourseForm, course: Course) -> None:
    """Put the course's title, description, portal, profile and material in the form."""
    form.title.data, form.description.data = course.title, course.description
    if "portal" in form:
        form.portal.data = course.portal.code
    if "profile" in form:
        form.profile.data = course.profile.name if course.profile else ""
        form.team_profile.data = course.team_profile.name if course.team_profile else ""
    if course.material is not None:
        form.git_url.data = course.material.git_url
        form.branch.data = course.material.branch
        form.subpath.data = course.material.subpath


def apply_edit(session: Session, form: CourseForm, course: Course) -> bool:
    """Save a valid edit form and commit; False (errors on the form) if refused."""
    changes: dict[str, str | None] = {
        "title": form.title.data or "",
        "description": form.description.data or "",
    }
    if "portal" in form:
        changes["portal"] = form.portal.data or ""
    if "profile" in form:
        changes["profile"] = form.profile.data or ""
        changes["team_profile"] = form.team_profile.data or ""
    with commit_or_show(session, form, "title") as saved:
        apply_course_changes(session, course, changes, form_material(form))
    return bool(saved)


def copy_offer(session: Any, course: Course) -> YearOffer:
    """The years ``course`` may be copied to, else why none (one query)."""
    years = codes_by_year(session)
    return plan_year_offer(
        course.year.label,
        [(label, active) for label, (active, _) in years.items()],
        [course.code],
        {label: codes for label, (_, codes) in years.items()},
    )
