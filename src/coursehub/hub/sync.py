"""Sync the catalog into JupyterHub: :func:`sync_catalog`, the one entry point.

The command line (``coursehub hub sync``), the course app after an edit
(:mod:`coursehub.web.hubsync`) and the demo all call :func:`sync_catalog`:
read the catalog (:func:`course_specs`), read the hub
(:func:`coursehub.hub.hubread.read_hub_state`), plan
(:func:`coursehub.hub.reconcile.plan_sync`, pure), apply
(:func:`coursehub.hub.reconcile.apply_sync`) and record each course's
``last_sync_at`` / ``last_sync_status``.

Outcome semantics (:class:`SyncOutcome`):

* the hub cannot be read (no answer, or an error status after the retries):
  nothing is planned nor applied; the outcome carries the error
  (``report.aborted``, ``plan`` None) and every course in scope is recorded
  ``"error: sync interrupted: reading the hub: ..."``. Never a half-read plan.
* the hub stops answering while the plan is applied: the steps done stay
  done (each is idempotent), the rest is left; ``report.aborted`` says why,
  every course without an error of its own is recorded in error, and the
  next sync completes the work.
* a step refused (4xx): recorded against its course; the other steps go on.
* ``dry_run``: the plan only; nothing applied nor recorded.

What is read from the hub (:mod:`coursehub.hub.hubread`): ``GET /groups``
(every group with its members and properties), or with ``course_ids`` only
the course's two groups and ``coursehub-users`` (``GET /groups/{name}``);
then only the users the groups leave open: desired users in no group (new
students, or users that exist outside coursehub) and, to prune, the managed
users about to be deleted (their admin flag). A no-op sync reads no user,
however many the hub has.

What is written (:func:`coursehub.hub.reconcile.apply_sync`): paced by a
:class:`~coursehub.hub.pacing.Pacer`, batches sized from the hub's measured
time so that no request blocks the hub for long, with pauses between them.
``progress`` counts what is done (``plan.size`` in all); setting ``stop``
ends the run between two requests, like a hub that stops answering: the next
sync resumes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from coursehub.catalog.courses import record_sync
from coursehub.catalog.material import material_properties
from coursehub.catalog.models.courses import (
    TEAM_ROLES,
    AcademicYear,
    Course,
    Membership,
    Person,
    Role,
    team_profile_of,
)
from coursehub.catalog.people import normalize_username
from coursehub.catalog.profiles import profile_json
from coursehub.errors import UsageError
from coursehub.homequota.plan import course_quota
from coursehub.hub.hubclient import HubClient, HubError, HubUnreachableError
from coursehub.hub.hubread import read_hub_state
from coursehub.hub.pacing import PacePolicy, Pacer
from coursehub.hub.reconcile import (
    CourseSpec,
    SyncPlan,
    SyncReport,
    apply_sync,
    desired_from_courses,
    plan_sync,
    render_course_errors,
)

#: Prefix of ``report.aborted`` when the hub could not be read (nothing was applied).
READ_FAILED = "reading the hub: "


@dataclass(frozen=True)
class SyncOutcome:
    """What one :func:`sync_catalog` did.

    Attributes
    ----------
    course_ids
        The courses planned: non-archived courses of an active year, within
        the ``course_ids`` asked for (if any).
    plan
        The plan, or None when the hub could not be read.
    report
        What was applied (empty for a dry run); ``aborted`` starts with
        :data:`READ_FAILED` when the hub could not be read.
    statuses
        ``course_id`` -> ``"ok"`` or ``"error: ..."``, as recorded (empty for a dry run).
    dry_run
        True when nothing was applied nor recorded.
    """

    course_ids: tuple[str, ...]
    plan: SyncPlan | None
    report: SyncReport
    statuses: Mapping[str, str] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        """True when the hub was read and every step applied (a dry run: when the hub was read)."""
        return self.plan is not None and self.report.ok

    @property
    def read_failed(self) -> bool:
        """True when the hub could not be read, so nothing was planned nor applied."""
        return self.plan is None


def sync_catalog(
    session: Session,
    client: HubClient,
    *,
    course_ids: Collection[str] | None = None,
    prune: bool = False,
    dry_run: bool = False,
    chunk_size: int | None = None,
    on_plan: Callable[[SyncPlan], None] | None = None,
    now: datetime | None = None,
    pace: PacePolicy | None = None,
    progress: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
) -> SyncOutcome:
    """Reconcile the catalog (or some courses of it) into the hub; record and return the outcome.

    Parameters
    ----------
    session
        Catalog session: read, then the statuses are written (flushed; the caller commits).
    client
        The hub's API client (scopes ``admin:users``, ``admin:groups``,
        ``list:users``, ``read:users``).
    course_ids
        Sync only these courses (read and plan only their groups); None: the whole catalog.
    prune
        Also delete the managed groups and users that left the catalog
        (whole catalog only).
    dry_run
        Plan only: apply nothing, record nothing.
    chunk_size
        Most users per request (default: ``pace.max_batch``).
    on_plan
        Called with the plan before it is applied (the CLI prints it).
    now
        Time recorded as ``last_sync_at`` (default: now, UTC).
    pace
        Batch sizes and pauses (default :class:`~coursehub.hub.pacing.PacePolicy`).
    progress
        Called with the number of items each request carried out (``plan.size`` in all).
    stop
        Set it to stop the run between two requests (recorded like an
        interrupted run: ``report.aborted`` says so; the next sync resumes).

    Raises
    ------
    UsageError
        For ``prune`` with ``course_ids``. Hub failures are never raised:
        they are in the outcome (see the module's documentation).
    """
    if prune and course_ids is not None:
        raise UsageError("a pruning sync covers the whole catalog: do not name courses")
    courses = course_specs(session, course_ids)
    ids = tuple(c.course_id for c in courses)
    scope = None if course_ids is None else ids
    desired = desired_from_courses(courses)
    try:
        actual = read_hub_state(client, desired, scope, prune=prune)
    except (HubUnreachableError, HubError) as exc:
        report = SyncReport(aborted=f"{READ_FAILED}{exc}")
        if dry_run:
            return SyncOutcome(ids, None, report, dry_run=True)
        return SyncOutcome(ids, None, report, _record(session, ids, report, now))
    plan = plan_sync(desired, actual, prune=prune)
    if on_plan is not None:
        on_plan(plan)
    if dry_run:
        return SyncOutcome(ids, plan, SyncReport(), dry_run=True)
    pace = pace or PacePolicy()
    if chunk_size is not None:
        pace = replace(pace, max_batch=chunk_size, first_batch=min(pace.first_batch, chunk_size))
    report = apply_sync(plan, client, Pacer(pace, stop, progress))
    return SyncOutcome(ids, plan, report, _record(session, ids, report, now))


def _record(
    session: Session, course_ids: Iterable[str], report: SyncReport, now: datetime | None
) -> dict[str, str]:
    statuses = render_course_errors(course_ids, report)
    when = now or datetime.now(UTC)
    for course in session.scalars(select(Course).where(Course.course_id.in_(list(statuses)))):
        record_sync(session, course, statuses[course.course_id], at=when)
    session.flush()
    return statuses


def course_specs(session: Session, course_ids: Iterable[str] | None = None) -> list[CourseSpec]:
    """Return a :class:`CourseSpec` per course to sync, optionally only those in ``course_ids``.

    Non-archived courses of active academic years only; None: every such course.
    """
    query = (
        select(Course)
        .join(Course.year)
        .where(Course.archived.is_(False), AcademicYear.is_active.is_(True))
        .options(
            selectinload(Course.year),
            selectinload(Course.portal),
            selectinload(Course.profile),
            selectinload(Course.team_profile),
            selectinload(Course.material),
        )
        .order_by(Course.course_id)
    )
    if course_ids is not None:
        query = query.where(Course.course_id.in_(list(course_ids)))
    courses = list(session.scalars(query))
    # Course.memberships is write-only (catalog.models.courses): read them, 500 courses a query
    members_of: dict[int, list[tuple[Role, str]]] = {}
    pks = [course.id for course in courses]
    for start in range(0, len(pks), 500):
        rows = session.execute(
            select(Membership.course_pk, Membership.role, Person.username)
            .join(Membership.person)
            .where(Membership.course_pk.in_(pks[start : start + 500]))
        )
        for course_pk, role, username in rows:
            members_of.setdefault(course_pk, []).append((role, normalize_username(username)))
    specs = []
    for course in courses:
        members = members_of.get(course.id, [])
        specs.append(
            CourseSpec(
                course_id=course.course_id,
                properties=course_properties(course),
                students=frozenset(u for role, u in members if role == Role.STUDENT),
                team=frozenset(u for role, u in members if role in TEAM_ROLES),
                team_properties=team_properties(course),
            )
        )
    return specs


def team_properties(course: Course) -> dict[str, Any]:
    """Return what the team group holds over :func:`course_properties`: the team's
    ``profile`` (:func:`~coursehub.catalog.models.courses.team_profile_of`: its own, else
    the students')."""
    profile = team_profile_of(course)
    return {} if profile is None else {"profile": profile_json(profile)}


def course_properties(course: Course) -> dict[str, Any]:
    """Return the hub group properties of a course (the students' ``profile`` as the
    contract's JSON; :func:`team_properties` for the team group's)."""
    props: dict[str, Any] = {
        "year": course.year.label,
        "portal": course.portal.code,
        "ue_code": course.code,
        "title": course.title,
    }
    if course.profile is not None:
        props["profile"] = profile_json(course.profile)
    if (home_quota := course_quota(course, None)) is not None:
        props["home_quota"] = home_quota  # bytes, read at spawn by coursehub.spawn.homelimit
    if (material := material_properties(course.course_id, course.material)) is not None:
        props["material"] = material  # read at spawn time by coursehub.spawn.material
    return props
