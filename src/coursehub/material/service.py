"""The catalog side of a course's material: set it, update its mirror, list what to update.

:func:`set_course_material` checks and records the repository (the
credential goes to its private file); :func:`run_update` records
``updating``, runs :func:`coursehub.material.mirror.update_mirror` with no
database session open (a fetch may take minutes), then records the success
or the failure in a second short transaction. The CLI, the course app's
background thread and ``coursehub material update --all`` (the schedule)
all go through :func:`run_update`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from coursehub.catalog.courses import set_material
from coursehub.catalog.material import (
    NEW,
    check_branch,
    check_repo_url,
    check_subdir,
    mark_requested,
    plan_source,
    record_failure,
    record_success,
)
from coursehub.catalog.models.courses import AcademicYear, Course, CourseMaterial
from coursehub.catalog.readmodel import load_course
from coursehub.errors import CoursehubError, UsageError
from coursehub.material.credential import (
    Credential,
    check_credential_change,
    store_credential,
    stored_host,
    stored_kind,
)
from coursehub.material.hosts import HostPolicy, Resolver, check_repo_host, repo_origin, resolve
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirror import update_mirror
from coursehub.material.mirrortypes import MaterialError, MirrorSource, UpdateRunningError


@dataclass(frozen=True)
class UpdateOutcome:
    """One course's update: ``ok``, a one-line ``message``; ``running``: another one holds it.

    ``first_publication``: the course had no pull URL before (the hub sync
    must carry it to the hub groups). ``changed``: students got a new commit
    (a course book built from the material is then out of date).
    """

    course_id: str
    ok: bool
    message: str
    running: bool = False
    first_publication: bool = False
    changed: bool = False


def set_course_material(
    session: Session,
    course: Course,
    layout: MaterialLayout,
    repo: str,
    branch: str = "main",
    subdir: str = "",
    credential: Credential | None = None,
    drop_credential: bool = False,
    hosts: HostPolicy | None = None,
    resolver: Resolver = resolve,
) -> CourseMaterial:
    """Check and record the course's repository; write or remove its credential file.

    Every way of setting a repository comes here: the API's ``PUT .../material``
    and ``PATCH /courses/{id}`` (``material``), the course and material forms,
    ``coursehub material set``. The database is flushed (the caller commits);
    the credential file is written after every check passed. Without
    ``credential`` or ``drop_credential`` the stored credential stays, for a
    URL on the same scheme, host and port only
    (:func:`coursehub.material.credential.check_credential_change`).

    Parameters
    ----------
    hosts, resolver
        The site's allowed hosts (default ``COURSEHUB_MATERIAL_HOSTS``) and
        the name resolver (:func:`coursehub.material.hosts.check_repo_host`).

    Raises
    ------
    coursehub.catalog.errors.ValidationError
        A bad URL, branch or folder (:mod:`coursehub.catalog.material`).
    UsageError
        A host the site does not allow; a credential that does not fit the
        URL; a stored credential kept for another host.
    """
    url, branch, subdir = check_repo_url(repo), check_branch(branch), check_subdir(subdir)
    check_repo_host(url, hosts, resolver, unknown_ok=True)
    stored = stored_kind(layout, course.course_id)
    stored_for = stored_host(layout, course.course_id)
    if stored and stored_for is None and course.material is not None:
        stored_for = repo_origin(course.material.git_url)  # a file of an older version
    kind = check_credential_change(
        url,
        credential.kind if credential is not None else "",
        drop_credential,
        stored,
        stored_for,
    )
    material = set_material(session, course, url, branch, subdir)
    if plan_source(url, branch, subdir) != material.source:
        material.state, material.error = NEW, ""
    material.credential = kind
    session.flush()
    layout.ensure()
    if credential is not None or drop_credential:
        store_credential(layout, course.course_id, credential, url)
    return material


def run_update(
    sessions: sessionmaker[Session],
    course_id: str,
    layout: MaterialLayout,
    accept_rewrite: bool = False,
    on_published: Callable[[UpdateOutcome], None] | None = None,
) -> UpdateOutcome:
    """Update the mirror of ``course_id`` and record the outcome (two short transactions).

    ``on_published`` is called after a good update (the course app syncs
    the hub then). Failures of the repository are recorded and returned,
    never raised.

    Raises
    ------
    coursehub.catalog.errors.NotFoundError
        Unknown course.
    UsageError
        The course has no repository.
    """
    with sessions() as session:
        course = load_course(session, course_id)
        material = course.material
        if material is None:
            raise UsageError(
                f"course {course_id} has no repository: "
                f"coursehub material set {course_id} --repo URL"
            )
        mark_requested(material)
        same = plan_source(material.git_url, material.branch, material.subpath) == material.source
        last_commit = material.commit if same else ""
        first = not material.pull_url
        source = MirrorSource(course_id, material.git_url, material.branch, material.subpath)
        session.commit()
    try:
        kind = stored_kind(layout, course_id)
        source = MirrorSource(source.course_id, source.url, source.branch, source.subdir, kind)
        result = update_mirror(layout, source, last_commit, accept_rewrite)
    except UpdateRunningError as exc:
        return UpdateOutcome(course_id, False, str(exc), running=True)
    except CoursehubError as exc:  # MaterialError, or an unreadable credential file
        error = (
            str(exc)
            if isinstance(exc, MaterialError)
            else f"{exc}; the last good material is still served"
        )
        _record(sessions, course_id, lambda m: record_failure(m, error))
        return UpdateOutcome(course_id, False, error)
    _record(sessions, course_id, lambda m: record_success(m, result.commit, result.pull_url))
    what = "published" if result.changed else "unchanged at"
    outcome = UpdateOutcome(
        course_id,
        True,
        f"{what} {result.commit[:12]} ({result.published[:12]} for students, {result.access})"
        + (f"; {result.note}" if result.note else ""),
        first_publication=first,
        changed=result.changed,
    )
    if on_published is not None:
        on_published(outcome)
    return outcome


def _record(
    sessions: sessionmaker[Session], course_id: str, change: Callable[[CourseMaterial], None]
) -> None:
    with sessions() as session:
        material = load_course(session, course_id).material
        if material is not None:
            change(material)
            session.commit()


def courses_to_update(session: Session) -> list[str]:
    """The ``course_id`` of every course with a repository, not archived, in an active year."""
    query = (
        select(Course.course_id)
        .join(Course.year)
        .join(Course.material)
        .where(Course.archived.is_(False), AcademicYear.is_active.is_(True))
        .order_by(Course.course_id)
    )
    return list(session.scalars(query))
