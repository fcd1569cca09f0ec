"""Academic years, portals, courses, their TD/TP groups and material.

Every function takes an open :class:`~sqlalchemy.orm.Session`, flushes its
changes (so that ids exist and uniqueness errors surface) and never commits:
the caller owns the transaction (``with session.begin():`` or
:func:`coursehub.catalog.db.session_scope`).
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import delete, inspect, select, update
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError, NotFoundError, ValidationError
from coursehub.catalog.material import check_branch, check_repo_url, check_subdir
from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import (
    AcademicYear,
    Course,
    CourseGroup,
    CourseMaterial,
    GroupKind,
    Membership,
    Portal,
    ResourceProfile,
)

_YEAR_LABEL = re.compile(r"^(\d{4})-(\d{4})$")
_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
_GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
#: Fields of a course that :func:`update_course` may change.
EDITABLE_FIELDS = frozenset({"title", "description", "portal", "profile", "team_profile"})


def parse_year_label(label: str) -> int:
    """Return the start year of a label such as ``"2025-2026"``.

    Raises
    ------
    ValidationError
        If the label is not ``YYYY-YYYY`` with consecutive years.
    """
    match = _YEAR_LABEL.match(label.strip())
    if not match or int(match[2]) != int(match[1]) + 1:
        raise ValidationError(
            f"academic year {label!r} must be YYYY-YYYY with the second year the first + 1, "
            "e.g. 2025-2026"
        )
    return int(match[1])


def make_course_id(code: str, start_year: int) -> str:
    """Return nbgrader's ``course_id`` for a UE code and a year: ``"mlmeca-2025"``.

    ``make_course_id("MLMECA", 2025) == "mlmeca-2025"``. Lower case; every
    run of characters other than ``a-z0-9`` becomes one ``-``, so the result
    is a safe hub group suffix and directory name.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", code.strip().lower()).strip("-")
    if not slug:
        raise ValidationError(f"UE code {code!r} has no letter or digit")
    return f"{slug}-{start_year}"


def create_year(session: Session, label: str, is_active: bool = True) -> AcademicYear:
    """Add an academic year (``"2025-2026"``); :class:`ConflictError` if it exists."""
    start_year = parse_year_label(label)
    if session.scalar(select(AcademicYear).where(AcademicYear.start_year == start_year)):
        raise ConflictError(f"academic year {label} already exists")
    year = AcademicYear(label=label.strip(), start_year=start_year, is_active=is_active)
    session.add(year)
    session.flush()
    return year


def get_year(session: Session, label: str) -> AcademicYear:
    """Return the year labelled ``label``; :class:`NotFoundError` if there is none."""
    year = session.scalar(select(AcademicYear).where(AcademicYear.label == label.strip()))
    if year is None:
        raise NotFoundError(f"no academic year {label!r}")
    return year


def set_year_active(session: Session, year: AcademicYear, is_active: bool) -> AcademicYear:
    """Open or close a year; the hub sync only considers the courses of active years."""
    year.is_active = is_active
    session.flush()
    return year


def list_years(session: Session, active_only: bool = False) -> list[AcademicYear]:
    """Return the academic years, newest first."""
    query = select(AcademicYear).order_by(AcademicYear.start_year.desc())
    if active_only:
        query = query.where(AcademicYear.is_active)
    return list(session.scalars(query))


def create_portal(session: Session, code: str, name: str) -> Portal:
    """Add a discipline portal (``"MECA"``, ``"Mécanique"``); :class:`ConflictError` if taken."""
    code = _check_code(code, "portal code")
    if session.scalar(select(Portal).where(Portal.code == code)):
        raise ConflictError(f"portal {code} already exists")
    portal = Portal(code=code, name=name.strip() or code)
    session.add(portal)
    session.flush()
    return portal


def get_portal(session: Session, code: str) -> Portal:
    """Return the portal with ``code``; :class:`NotFoundError` if there is none."""
    portal = session.scalar(select(Portal).where(Portal.code == code.strip()))
    if portal is None:
        raise NotFoundError(f"no portal {code!r}")
    return portal


def list_portals(session: Session, year: AcademicYear | None = None) -> list[Portal]:
    """Return the portals by code; with ``year``, only those with a course that year."""
    query = select(Portal).order_by(Portal.code)
    if year is not None:
        query = query.where(Portal.courses.any(Course.year_pk == year.id))
    return list(session.scalars(query))


def create_course(
    session: Session,
    code: str,
    title: str,
    year: AcademicYear,
    portal: Portal,
    description: str = "",
    profile: ResourceProfile | None = None,
    team_profile: ResourceProfile | None = None,
) -> Course:
    """Add a course unit (UE) for a year; its ``course_id`` is :func:`make_course_id`.

    ``profile`` is the students' resource profile, ``team_profile`` the teaching
    team's (None: the team gets the students' profile).

    Raises
    ------
    ValidationError
        If the code or title is empty or malformed.
    ConflictError
        If the code already exists that year, or the derived ``course_id`` is taken.
    """
    code = _check_code(code, "UE code")
    if not title.strip():
        raise ValidationError(f"course {code}: the title is empty")
    course_id = make_course_id(code, year.start_year)
    if session.scalar(select(Course).where(Course.course_id == course_id)):
        raise ConflictError(f"course {course_id} already exists ({code}, {year.label})")
    course = Course(
        code=code,
        title=title.strip(),
        description=description.strip(),
        course_id=course_id,
        year=year,
        portal=portal,
        profile=profile,
        team_profile=team_profile,
    )
    session.add(course)
    session.flush()
    return course


def get_course(session: Session, course_id: str) -> Course:
    """Return the course whose nbgrader ``course_id`` is given; :class:`NotFoundError` if none."""
    course = session.scalar(select(Course).where(Course.course_id == course_id.strip()))
    if course is None:
        raise NotFoundError(f"no course {course_id!r}")
    return course


def list_courses(
    session: Session,
    year: AcademicYear | None = None,
    portal: Portal | None = None,
    include_archived: bool = False,
) -> list[Course]:
    """Return courses ordered by year (newest first) then UE code, filtered as asked."""
    query = select(Course).join(Course.year).order_by(AcademicYear.start_year.desc(), Course.code)
    if year is not None:
        query = query.where(Course.year_pk == year.id)
    if portal is not None:
        query = query.where(Course.portal_pk == portal.id)
    if not include_archived:
        query = query.where(Course.archived.is_(False))
    return list(session.scalars(query))


def update_course(session: Session, course: Course, **changes: object) -> Course:
    """Change a course's ``title``, ``description``, ``portal``, ``profile`` or ``team_profile``.

    The UE code and year are fixed once created (the ``course_id`` derives
    from them and names the hub groups). :class:`ValidationError` for any
    other field or an empty title.
    """
    unknown = set(changes) - EDITABLE_FIELDS
    if unknown:
        raise ValidationError(
            f"course {course.course_id}: cannot edit {', '.join(sorted(unknown))}"
        )
    if "title" in changes and not str(changes["title"]).strip():
        raise ValidationError(f"course {course.course_id}: the title is empty")
    for name, value in changes.items():
        setattr(course, name, value.strip() if isinstance(value, str) else value)
    session.flush()
    return course


def archive_course(session: Session, course: Course, archived: bool = True) -> Course:
    """Archive (hide from current lists and hub sync) or restore a course."""
    course.archived = archived
    session.flush()
    return course


def record_sync(session: Session, course: Course, status: str, at: datetime | None = None) -> None:
    """Store the outcome of a hub sync of ``course`` (``status``, e.g. ``"ok"``), at ``at``/now."""
    course.last_sync_at = at or utcnow()
    course.last_sync_status = status[:200]
    session.flush()


def parse_group_kind(name: str, kind: str | GroupKind) -> GroupKind:
    """Return the :class:`GroupKind` named ``kind`` (``"TD"``, ``"TP"``) of group ``name``.

    Raises
    ------
    ValidationError
        If ``kind`` is neither.
    """
    try:
        return GroupKind(kind)
    except ValueError:
        raise ValidationError(f"group {name}: kind must be TD or TP, got {kind!r}") from None


def add_group(
    session: Session, course: Course, name: str, kind: str | GroupKind = GroupKind.TD
) -> CourseGroup:
    """Add a TD or TP sub-group (``"G1"``) to a course; :class:`ConflictError` if it exists."""
    name = check_group_name(name)
    group_kind = parse_group_kind(name, kind)
    if any(group.name == name for group in course.groups):
        raise ConflictError(f"course {course.course_id} already has a group {name}")
    group = CourseGroup(course=course, name=name, kind=group_kind)
    session.add(group)
    session.flush()
    return group


def check_group_name(name: str) -> str:
    """Return ``name`` stripped, or raise :class:`ValidationError` if it cannot name a group."""
    name = name.strip()
    if not _GROUP_NAME.match(name):
        raise ValidationError(
            f"group name {name!r} must be 1-32 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def get_group(course: Course, name: str) -> CourseGroup:
    """Return the course's group called ``name``; :class:`NotFoundError` if none."""
    for group in course.groups:
        if group.name == name.strip():
            return group
    raise NotFoundError(f"course {course.course_id} has no group {name!r}")


def remove_group(session: Session, course: Course, name: str) -> None:
    """Delete a group; its members stay in the course without a group.

    Two statements, whatever the group's size: one ``UPDATE`` of its
    memberships, one ``DELETE``. The group never goes through the ORM's
    per-object delete, which would walk its (write-only) memberships, and
    so would JupyterHub's ``persistent_to_deleted`` listener, registered on
    every SQLAlchemy ``Session`` of a process that imports ``jupyterhub.orm``.
    """
    group = get_group(course, name)
    session.flush()
    loaded = [  # members of the group already in the session: their .group goes stale
        obj
        for obj in session.identity_map.values()
        if isinstance(obj, Membership) and inspect(obj).dict.get("group_pk") == group.id
    ]
    session.execute(update(Membership).where(Membership.group_pk == group.id).values(group_pk=None))
    session.execute(
        delete(CourseGroup).where(CourseGroup.id == group.id),
        execution_options={"synchronize_session": False},
    )
    session.expunge(group)
    for membership in loaded:
        session.expire(membership, ["group"])
    session.expire(course, ["groups"])


def set_material(
    session: Session, course: Course, git_url: str, branch: str = "main", subpath: str = ""
) -> CourseMaterial:
    """Set (or replace) the git repository holding a course's notebooks.

    Only the URL's form is checked here: the course app and the CLI call
    :func:`coursehub.material.service.set_course_material`, which also checks
    the host and the stored credential, and calls this.
    """
    if not git_url.strip():
        raise ValidationError(f"course {course.course_id}: the git URL is empty")
    git_url, branch, subpath = check_repo_url(git_url), check_branch(branch), check_subdir(subpath)
    if course.material is None:
        course.material = CourseMaterial(git_url=git_url.strip())
    course.material.git_url = git_url.strip()
    course.material.branch = branch.strip() or "main"
    course.material.subpath = subpath.strip().strip("/")
    session.flush()
    return course.material


def catalog_tree(
    session: Session, include_archived: bool = False
) -> dict[AcademicYear, dict[Portal, list[Course]]]:
    """Return years (newest first) -> portals (by code) -> courses (by UE code)."""
    tree: dict[AcademicYear, dict[Portal, list[Course]]] = {}
    for year in list_years(session):
        tree[year] = {}
    courses = list_courses(session, include_archived=include_archived)
    for course in sorted(courses, key=lambda c: (c.portal.code, c.code)):
        tree[course.year].setdefault(course.portal, []).append(course)
    return tree


def _check_code(code: str, what: str) -> str:
    code = code.strip()
    if not _CODE.match(code):
        raise ValidationError(
            f"{what} {code!r} must be 1-32 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return code
