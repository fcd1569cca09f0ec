"""The course page's "Material" section: set the repository, "Update now" (in the background)."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response
from wtforms import BooleanField, PasswordField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length, Optional

from coursehub.catalog.material import render_pull_link
from coursehub.catalog.models.courses import Course
from coursehub.errors import CoursehubError
from coursehub.material.credential import parse_credential
from coursehub.material.service import set_course_material
from coursehub.web.access import Access
from coursehub.web.database import get_session
from coursehub.web.materialjobs import material_layout, start_update
from coursehub.web.saving import commit_or_show
from coursehub.web.views.base import back_to_course, form_status, load_course

bp = Blueprint("material", __name__)


@bp.app_template_global("material_pull_link")
def material_pull_link(course: Course) -> str | None:
    """The nbgitpuller link of the course's material below the hub's base URL (None: none yet)."""
    return render_pull_link(str(current_app.config.get("HUB_BASE_URL") or "/"), course)


class MaterialForm(FlaskForm):
    """The repository of a course's material and, for a private one, its credential."""

    repo = StringField("Git repository URL", validators=[DataRequired(), Length(max=500)])
    branch = StringField("Branch", default="main", validators=[Optional(), Length(max=200)])
    subdir = StringField("Folder students get", validators=[Optional(), Length(max=500)])
    token = PasswordField("Token (https)", validators=[Optional(), Length(max=1100)])
    deploy_key = TextAreaField("Deploy key (ssh)", validators=[Optional(), Length(max=16384)])
    drop_credential = BooleanField("Forget the stored credential")
    accept_rewrite = BooleanField("Publish a force-pushed branch")


@bp.route("/courses/<course_id>/material", methods=["GET", "POST"])
def edit(course_id: str) -> tuple[str, int] | Response:
    """Set the course's repository and credential (its lead and teachers); the secret is
    never shown back, only its kind."""
    course, _ = load_course(course_id, Access.MANAGE)
    form = MaterialForm()
    if not form.is_submitted() and course.material is not None:
        form.repo.data = course.material.git_url
        form.branch.data = course.material.branch
        form.subdir.data = course.material.subpath
    if form.validate_on_submit():
        session = get_session()
        secret = (form.token.data or "").strip() or (form.deploy_key.data or "").strip()
        with commit_or_show(session, form, "repo") as saved:
            credential = parse_credential(secret.encode(), "the form") if secret else None
            set_course_material(
                session,
                course,
                material_layout(),
                form.repo.data or "",
                form.branch.data or "main",
                form.subdir.data or "",
                credential=credential,
                drop_credential=bool(form.drop_credential.data) and credential is None,
            )
        if saved:
            return back_to_course(course, "Material saved; press Update now to publish it.")
    form.token.data = form.deploy_key.data = ""  # never sent back to the browser
    return render_template("material/form.html", form=form, course=course), form_status(form)


@bp.post("/courses/<course_id>/material/update")
def update(course_id: str) -> Response:
    """ "Update now" (the teaching team): the update runs in the background."""
    course, _ = load_course(course_id, Access.READ_ROSTER)
    form = MaterialForm()
    try:
        if course.material is None:
            raise CoursehubError(f"course {course_id} has no repository yet")
        if start_update(get_session(), course, bool(form.accept_rewrite.data)):
            flash("Update started: the state below changes when it is done.", "success")
        else:
            flash(f"An update of {course_id}'s material is already running.", "warning")
    except CoursehubError as exc:
        flash(str(exc), "error")
    return redirect(url_for("courses.show", course_id=course_id) + "#material-title")
