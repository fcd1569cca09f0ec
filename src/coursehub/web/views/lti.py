"""A course's LMS links (LTI 1.3): confirm a pending LMS course, list and remove links,
confirm LMS accounts.

The first launch from an LMS course that is linked to no course records it
pending with a code (:mod:`coursehub.catalog.lti.links`); only an Instructor's
launch shows the code, and the code is theirs. The course's lead who is
that Instructor types it here, sees the LMS course's title and confirms
(:func:`coursehub.catalog.lti.confirm.confirm_link_as_lead`); a hub admin also
sees every pending LMS course and links one to this course directly.

A launch whose username is an existing account not bound to its LMS user is
refused and recorded as an account request; the lead confirms the requests
from this course's LMS courses for its members here
(:func:`coursehub.catalog.lti.confirm.confirm_account_request`), a hub admin
any request. Only the course's leads and hub admins use these pages: a link
decides who gets enrolled in the course, a binding who signs in as whom.
"""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from coursehub.catalog.lti.accounts import account_requests, get_account_request
from coursehub.catalog.lti.confirm import (
    check_link_by_lead,
    confirm_account_request,
    confirm_link_as_lead,
)
from coursehub.catalog.lti.links import confirm_link, get_pending, links_of, pending_links, unlink
from coursehub.catalog.models.courses import Course, Role
from coursehub.catalog.models.lti import LtiLink
from coursehub.catalog.queries import role_in_course
from coursehub.errors import CoursehubError
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.saving import commit_or_show, show_error
from coursehub.web.views.base import load_course

bp = Blueprint("lti", __name__)


def load_lead_course(course_id: str) -> Course:
    """Return the course if the user is one of its leads or a hub admin, else 403."""
    course, access = load_course(course_id, Access.MANAGE)
    role = role_in_course(get_session(), g.identity.name, course)
    if access < Access.ADMIN and role != Role.LEAD:
        abort(403, description="only the course's leads and hub admins link LMS courses to it")
    return course


def render_page(course: Course, found: LtiLink | None = None, status: int = 200) -> tuple[str, int]:
    """The page: this course's links, the code form (or the link to confirm), admins' list."""
    session = get_session()
    pending = pending_links(session) if g.identity.admin else []
    return render_template(
        "lti/course.html",
        course=course,
        links=links_of(session, course),
        pending=pending,
        found=found,
        requests=account_requests(session, course),
    ), status


@bp.get("/courses/<course_id>/lti")
def index(course_id: str) -> tuple[str, int]:
    """List the course's LMS links, with the form that links another."""
    return render_page(load_lead_course(course_id))


@bp.post("/courses/<course_id>/lti/link")
def link(course_id: str) -> Response | tuple[str, int]:
    """Find the pending LMS course of a code; with ``confirm``, link it to this course."""
    course = load_lead_course(course_id)
    session = get_session()
    code = request.form.get("code", "")
    try:
        pending = get_pending(session, code)
    except CoursehubError as exc:
        show_error(exc)
        return render_page(course, status=404)
    admin = g.identity.admin
    if not admin:
        try:
            check_link_by_lead(session, pending, g.identity.name)
        except CoursehubError as exc:
            show_error(exc)
            return render_page(course, status=403)
    if not request.form.get("confirm"):
        return render_page(course, found=pending)
    with commit_or_show(session) as saved:
        if admin:
            confirm_link(session, pending, course, g.identity.name)
        else:
            confirm_link_as_lead(session, pending, course, g.identity.name)
    if saved:
        flash(
            f"LMS course {pending.context_title!r} linked: its launches now enrol people "
            f"in {course.course_id}.",
            "success",
        )
    return redirect(url_for("lti.index", course_id=course_id))


@bp.post("/courses/<course_id>/lti/<int:link_pk>/unlink")
def remove(course_id: str, link_pk: int) -> Response:
    """Remove a link; launches from that LMS course wait for a new link (members stay)."""
    course = load_lead_course(course_id)
    session = get_session()
    with commit_or_show(session) as saved:
        gone = unlink(session, course, link_pk)
    if saved:
        flash(
            f"LMS course {gone.context_title!r} unlinked; its members stay in the course.",
            "success",
        )
    return redirect(url_for("lti.index", course_id=course_id))


@bp.post("/courses/<course_id>/lti/accounts/<int:request_pk>/confirm")
def confirm_account(course_id: str, request_pk: int) -> Response:
    """Bind the LMS account of a refused launch to the hub account it named."""
    course = load_lead_course(course_id)
    session = get_session()
    with commit_or_show(session) as saved:
        pending = get_account_request(session, request_pk)
        person = confirm_account_request(
            session, pending, g.identity.name, admin=g.identity.admin, course=course
        )
    if saved:
        flash(f"LMS account confirmed: its launches now sign in as {person.username}.", "success")
    return redirect(url_for("lti.index", course_id=course_id))
