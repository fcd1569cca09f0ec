"""Grades to the LMS (LTI Advantage AGS): the tool's public key set, and "Send grades to the LMS".

``GET /api/v1/lti/jwks.json`` serves the tool's public key set
(:func:`coursehub.lti.keys.public_jwks`), anonymously: the LMS fetches it to
check the tool's token requests; it holds no private member. 404 until
``coursehub lti keygen`` has made the key pair.

``POST /courses/<course_id>/grading/lms-grades`` (the course's teachers:
``MANAGE``; with the CSRF token; form: ``assignment``, ``link`` when the
course has several LMS links, ``zero_missing``) sends the assignment's scores
(:func:`coursehub.lti.passback.apply_passback`) and shows each student as
sent, skipped or failed. The key is ``LTI_TOOL_KEY`` in the config
(``COURSEHUB_LTI_TOOL_KEY``), else :func:`coursehub.lti.keys.tool_key_path`.
"""

from __future__ import annotations

from pathlib import Path

from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    jsonify,
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
from coursehub.lti.keys import ToolKeyError, load_private_key, public_jwks, tool_key_path
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.views.base import load_course

#: ``lti_grades.jwks`` is in :data:`coursehub.web.views.base.PUBLIC_ENDPOINTS` (anonymous).
bp = Blueprint("lti_grades", __name__)
#: Seconds a platform may cache the key set.
JWKS_MAX_AGE_S = 300


def key_path() -> Path:
    """Return the tool's private key path from the config, else the default."""
    configured = current_app.config.get("LTI_TOOL_KEY")
    return Path(str(configured)).expanduser() if configured else tool_key_path()


def lms_grade_services(course: Course) -> list[LtiGradeService]:
    """Return the grade services of ``course``'s LMS links (for the grading page's button)."""
    return grade_services_of(get_session(), course)


@bp.get("/api/v1/lti/jwks.json")
def jwks() -> Response | tuple[Response, int]:
    """The tool's public key set (JSON Web Key Set, RFC 7517)."""
    path = key_path()
    if not path.exists():
        message = (
            "the tool has no key pair yet: run `coursehub lti keygen` on the course app's host"
        )
        return jsonify(error=message), 404
    try:
        keys = public_jwks(load_private_key(path))
    except ToolKeyError as exc:
        current_app.logger.error("LTI key set: %s", exc)
        return jsonify(error="the tool's key pair cannot be used: see the course app's log"), 503
    response = jsonify(keys)
    response.headers["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_S}"
    return response


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
