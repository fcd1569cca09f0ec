"""Resource profiles: per-student CPU, memory, thread and GPU limits, Slurm placement (admins)."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, url_for
from werkzeug.wrappers import Response

from coursehub.catalog.models.courses import ResourceProfile
from coursehub.catalog.profiles import create_profile, get_profile, list_profiles, update_profile
from coursehub.contract import SLURM_FIELDS
from coursehub.resources.units import format_mem
from coursehub.web.access import require_admin
from coursehub.web.database import get_session
from coursehub.web.forms import ProfileForm
from coursehub.web.hubsync import apply_hub_sync, flash_outcome
from coursehub.web.saving import commit_or_show
from coursehub.web.views.base import form_status

bp = Blueprint("profiles", __name__)


@bp.before_request
def admins_only() -> None:
    """Every page here is for hub admins."""
    require_admin(g.get("identity"))


@bp.get("/profiles/")
def index() -> str:
    """List the profiles."""
    return render_template("profiles/index.html", profiles=list_profiles(get_session()))


def profile_values(form: ProfileForm) -> dict[str, object]:
    """Return the limits in a valid form, as the catalog's services take them."""
    return {
        "cpu_limit": float(form.cpu_limit.data or 0),
        "mem_limit": (form.mem_limit.data or "").strip(),
        "n_threads": form.n_threads.data,
        "gpus": form.gpus.data,
        "jobs_per_gpu": form.jobs_per_gpu.data,
        "gpu_mem_limit": (form.gpu_mem_limit.data or "").strip() or None,
        # blank: the cluster's default (the contract checks the names)
        **{f: (form[f].data or "").strip() or None for f in SLURM_FIELDS},
    }


@bp.route("/profiles/new", methods=["GET", "POST"])
def create() -> tuple[str, int] | Response:
    """Create a profile."""
    session = get_session()
    form = ProfileForm()
    if form.validate_on_submit():
        with commit_or_show(session, form, "name") as saved:
            create_profile(session, form.name.data or "", **profile_values(form))  # type: ignore[arg-type]
        if saved:
            flash(f"Profile {form.name.data} created.", "success")
            return redirect(url_for("profiles.index"))
    return render_template("profiles/form.html", form=form, profile=None), form_status(form)


@bp.route("/profiles/<name>/edit", methods=["GET", "POST"])
def edit(name: str) -> tuple[str, int] | Response:
    """Change a profile's limits (its name is fixed)."""
    session = get_session()
    profile: ResourceProfile = get_profile(session, name)
    form = ProfileForm()
    if not form.is_submitted():
        for name in ("cpu_limit", "n_threads", "gpus", "jobs_per_gpu", *SLURM_FIELDS):
            form[name].data = getattr(profile, name)
        form.mem_limit.data = f"{profile.mem_limit / 2**30:g}G"
        gpu_mem = profile.gpu_mem_limit
        form.gpu_mem_limit.data = format_mem(gpu_mem) if gpu_mem else ""
    form.name.data = profile.name
    if form.validate_on_submit():
        with commit_or_show(session, form, "cpu_limit") as saved:
            update_profile(session, profile, **profile_values(form))
        if saved:
            flash(f"Profile {profile.name} saved.", "success")
            flash_outcome(apply_hub_sync(session, None))
            return redirect(url_for("profiles.index"))
    return render_template("profiles/form.html", form=form, profile=profile), form_status(form)
