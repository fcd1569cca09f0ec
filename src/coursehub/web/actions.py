"""Course changes shared by the pages and the JSON API, built on the catalog's services.

These functions flush, never commit: the view commits, or rolls back when a
:class:`~coursehub.errors.CoursehubError` comes out.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from coursehub.catalog.admin import open_course
from coursehub.catalog.courses import get_portal, update_course
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Course, Role
from coursehub.catalog.profiles import get_profile
from coursehub.material.service import set_course_material
from coursehub.web.materialjobs import material_layout


@dataclass(frozen=True)
class Material:
    """Where a course's notebooks live (``git_url`` empty: leave the material as it is)."""

    git_url: str = ""
    branch: str = "main"
    subpath: str = ""


@dataclass(frozen=True)
class NewCourse:
    """What creating a course needs: UE ``code``, ``title``, year label, portal code..."""

    code: str
    title: str
    year: str
    portal: str
    description: str = ""
    profile: str = ""
    team_profile: str = ""
    lead: str = ""
    material: Material = Material()


def apply_new_course(session: Session, new: NewCourse, creator: str) -> Course:
    """Create the course in an open year, make ``new.lead`` (a known person; empty: the
    username ``creator``) its lead, and set its material (the course page's form and
    ``POST /api/v1/courses``).

    Raises
    ------
    coursehub.catalog.errors.NotFoundError
        Unknown year, portal or profile, or a lead who is not a known person.
    coursehub.catalog.errors.ValidationError, ReadOnlyError, ConflictError
        From :func:`coursehub.catalog.admin.open_course`.
    coursehub.errors.CoursehubError
        From :func:`apply_material`.
    """
    course = open_course(
        session,
        new.code,
        new.title,
        new.year,
        new.portal,
        lead=new.lead,
        profile=new.profile,
        team_profile=new.team_profile,
        description=new.description,
    )
    if not new.lead:
        add_member(session, course, creator, Role.LEAD)
    apply_material(session, course, new.material)
    return course


def apply_course_changes(
    session: Session, course: Course, changes: dict[str, str | None], material: Material | None
) -> Course:
    """Change ``title``, ``description``, ``portal`` (code), ``profile`` or ``team_profile``
    (names, "" for none: the team then gets the students' profile).

    Raises the catalog's errors as :func:`apply_new_course` does.
    """
    values: dict[str, object] = {k: v for k, v in changes.items() if k in ("title", "description")}
    if changes.get("portal") is not None:
        values["portal"] = get_portal(session, str(changes["portal"]))
    for field in ("profile", "team_profile"):
        if field in changes:
            name = changes[field]
            values[field] = get_profile(session, name) if name else None
    update_course(session, course, **values)
    if material is not None:
        apply_material(session, course, material)
    return course


def apply_material(session: Session, course: Course, material: Material) -> None:
    """Set the course's repository when ``material.git_url`` is given.

    Through :func:`coursehub.material.service.set_course_material`, the checks
    of the material's own form and API: allowed host, and a stored credential
    kept only for a URL on its host.

    Raises
    ------
    coursehub.errors.CoursehubError
        As :func:`~coursehub.material.service.set_course_material` does.
    """
    if material.git_url.strip():
        set_course_material(
            session,
            course,
            material_layout(),
            material.git_url,
            material.branch or "main",
            material.subpath,
        )
