"""Grades to the LMS (LTI Advantage AGS): "Send grades to the LMS".

``POST /courses/<course_id>/grading/lms-grades`` (the course's teachers:
``MANAGE``; with the CSRF token; form: ``assignment``, ``link`` when the
course has several LMS links, ``zero_missing``) sends the assignment's scores
(:func:`coursehub.lti.passback.apply_passback`) and shows each student as
sent, skipped or failed. The key is ``LTI_TOOL_KEY`` in the config
(``COURSEHUB_LTI_TOOL_KEY``), else :func:`coursehub.lti.keys.tool_key_path`
(:func:`coursehub.web.api.lti.key_path`; the public key set the LMS fetches
is served there too).
"""

from __future__ import annotations

from flask import (
    Blueprint,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.wrappers import Response as WerkzeugResponse

from coursehub.catalog.lti.ags import grade_services_of
from coursehub.catalog.models.courses import Course
from coursehub.catalog.models.lti import LtiGradeService
from coursehub.errors import CoursehubError
from coursehub.web.access import Access
from coursehub.web.api.lti import key_path
from coursehub.web.database import get_session
from coursehub.web.views.base import load_course

bp = Blueprint("lti_grades", __name__)


def lms_grade_services(course: Course) -> list[LtiGradeService]:
    """Return the grade services of ``course``'s LMS links (for the grading page's button)."""
    return grade_services_of(get_session(), course)


@bp.post("/courses/<course_id>/grading/lms-grades")
def send(course_id: str) -> str | WerkzeugResponse:
    """Send the form's ``assignment``'s scores to the LMS gradebook; show each student."""
    from coursehub.grading.layout import layout_from_env
    from coursehub.lti.passback import FAILED, SENT, SKIPPED, apply_passback

    course, _ = load_course(course_id, Access.MANAGE)
    back = redirect(url_for("grading.index", course_id=course.course_id))
    layout = layout_from_env(course.course_id)
    assignment = request.form.get("assignment", "").strip()
    if not assignment:
        flash("choose the assignment whose grades go to the LMS", "error")
        return back
    try:
        report = apply_passback(
            get_session(),
            course,
            layout,
            assignment,
            link_code=request.form.get("link") or None,
            zero_missing=bool(request.form.get("zero_missing")),
            key_path=key_path(),
        )
    except CoursehubError as exc:
        flash(f"{assignment}: no grade was sent to the LMS: {exc}", "error")
        return back
    return render_template(
        "lti/passback.html",
        course=course,
        report=report,
        counts={name: report.count(name) for name in (SENT, SKIPPED, FAILED)},
    )
