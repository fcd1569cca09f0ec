"""Plan then apply: compare two hub states and carry out the difference (no I/O but the client).

:func:`plan_sync` (pure) compares the state the catalog calls for
(:func:`desired_from_courses`) with the hub's (read by
:func:`coursehub.hub.sync.read_hub_state`); :func:`apply_sync` carries the
plan out through a :class:`~coursehub.hub.hubclient.HubClient`. The one entry
point that composes them is :func:`coursehub.hub.sync.sync_catalog`.

Hub groups (names from :mod:`coursehub.contract`, nbgrader's convention):
``nbgrader-{course_id}`` holds a course's students and ``formgrade-{course_id}``
its teaching team (lead, teacher, grader). Both carry the properties
``coursehub`` (True: the group is managed here), ``course_id``, ``role``
(``"students"`` or ``"team"``), ``year``, ``portal``, ``ue_code``, ``title``
and, when the course has a resource profile, ``profile``
(:func:`coursehub.contract.profile_to_json`, read back at spawn by
:func:`coursehub.contract.profile_from_json`): the students' profile on
``nbgrader-{course_id}``, the team's on ``formgrade-{course_id}`` (the
students' one when the course has no team profile).

The group :data:`~coursehub.contract.MANAGED_USERS_GROUP` lists every user
coursehub has put on the hub; only those (never admins) are deleted by a
pruning sync once they leave the catalog. Groups without ``coursehub: true``
are never emptied or deleted; a pre-existing group bearing a course's name is
adopted (its properties set, missing members added, nobody removed in that run).

Every step is idempotent, so a run interrupted at any point converges when
run again. :func:`apply_sync` sends the steps paced by a
:class:`~coursehub.hub.pacing.Pacer`: users and members in batches whose
size follows the hub's measured time, with pauses that let logins through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coursehub.contract import (
    COURSE_GROUP_ROLES,
    MANAGED_USERS_GROUP,
    course_id_of_group,
)
from coursehub.hub.hubclient import HubClient, HubError, HubUnreachableError
from coursehub.hub.pacing import Pacer, SyncStoppedError

#: Properties of :data:`~coursehub.contract.MANAGED_USERS_GROUP`.
MANAGED_USERS_PROPERTIES: Mapping[str, Any] = {"coursehub": True, "role": "managed-users"}


@dataclass(frozen=True)
class HubGroup:
    """A hub group: its ``name``, member usernames and properties (a JSON object)."""

    name: str
    users: frozenset[str] = frozenset()
    properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def managed(self) -> bool:
        """True when coursehub manages the group (``properties["coursehub"] is True``)."""
        return self.properties.get("coursehub") is True


@dataclass(frozen=True)
class HubState:
    """Users (normalised names), admins among them, and groups by name.

    ``admins_known`` is False for a state read without the user list (the
    users are then the members of the groups read): such a state cannot be
    pruned against, since admins, who are never deleted, are unknown.
    """

    users: frozenset[str] = frozenset()
    admins: frozenset[str] = frozenset()
    groups: Mapping[str, HubGroup] = field(default_factory=dict)
    admins_known: bool = True


@dataclass(frozen=True)
class MemberChange:
    """Users to add to, or remove from, one group."""

    group: str
    users: tuple[str, ...]


@dataclass(frozen=True)
class PropertyChange:
    """The properties a group must end up with."""

    group: str
    properties: Mapping[str, Any]


@dataclass(frozen=True)
class SyncPlan:
    """What a sync will do (:func:`apply_sync` creates groups before users)."""

    create_users: tuple[str, ...] = ()
    create_groups: tuple[str, ...] = ()
    set_properties: tuple[PropertyChange, ...] = ()
    add_members: tuple[MemberChange, ...] = ()
    remove_members: tuple[MemberChange, ...] = ()
    delete_groups: tuple[str, ...] = ()
    delete_users: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the hub already matches the catalog."""
        return not any(self.counts().values())

    @property
    def size(self) -> int:
        """Items to carry out (users, groups, properties, memberships): the progress total."""
        return sum(self.counts().values())

    def counts(self) -> dict[str, int]:
        """Number of users or groups touched by each kind of step."""
        return {
            "create_users": len(self.create_users),
            "create_groups": len(self.create_groups),
            "set_properties": len(self.set_properties),
            "add_members": sum(len(c.users) for c in self.add_members),
            "remove_members": sum(len(c.users) for c in self.remove_members),
            "delete_groups": len(self.delete_groups),
            "delete_users": len(self.delete_users),
        }


@dataclass(frozen=True)
class SyncReport:
    """What :func:`apply_sync` did: ``requests`` sent, ``errors`` as (group or user, message)
    pairs, and ``aborted`` (the reason) when the hub stopped answering half-way."""

    requests: int = 0
    errors: tuple[tuple[str, str], ...] = ()
    aborted: str | None = None

    @property
    def ok(self) -> bool:
        """True when every step succeeded."""
        return not self.errors and self.aborted is None


@dataclass(frozen=True)
class CourseSpec:
    """One course as the hub sees it: id, hub properties, student and team usernames.

    ``team_properties`` are set on the team group only, over ``properties``
    (the team's own ``profile``).
    """

    course_id: str
    properties: Mapping[str, Any]
    students: frozenset[str]
    team: frozenset[str]
    team_properties: Mapping[str, Any] = field(default_factory=dict)


def desired_from_courses(courses: Iterable[CourseSpec]) -> HubState:
    """Return the hub state that the given courses call for (pure)."""
    groups: dict[str, HubGroup] = {}
    for course in courses:
        members_of = {"students": course.students, "team": course.team}
        for prefix, role in COURSE_GROUP_ROLES.items():
            name, members = prefix + course.course_id, members_of[role]
            props = {**course.properties, "coursehub": True, "course_id": course.course_id}
            if role == "team":
                props.update(course.team_properties)
            groups[name] = HubGroup(name, frozenset(members), {**props, "role": role})
    users = frozenset(u for group in groups.values() for u in group.users)
    groups[MANAGED_USERS_GROUP] = HubGroup(MANAGED_USERS_GROUP, users, MANAGED_USERS_PROPERTIES)
    return HubState(users=users, groups=groups)


def plan_sync(desired: HubState, actual: HubState, prune: bool = False) -> SyncPlan:
    """Compare the desired and actual hub states; return the steps that make them equal (pure).

    Users missing from the hub are created; with ``prune``, users coursehub
    put on the hub (members of :data:`MANAGED_USERS_GROUP`) that are no
    longer desired are deleted, admins never. Groups are created, their
    properties set where different, members added; members are removed
    only from managed groups (never from :data:`MANAGED_USERS_GROUP`, which
    remembers who coursehub created); with ``prune``, managed groups no
    longer desired are deleted. Every list is sorted.

    Raises
    ------
    ValueError
        For ``prune`` against a state whose admins are unknown
        (``actual.admins_known`` False): an admin could be deleted.
    """
    if prune and not actual.admins_known:
        raise ValueError("a pruning sync needs the hub's users and admins (read_hub_state)")
    create_groups, props, add, remove = [], [], [], []
    for name in sorted(desired.groups):
        want, have = desired.groups[name], actual.groups.get(name)
        if have is None:
            create_groups.append(name)
        if have is None or dict(have.properties) != dict(want.properties):
            props.append(PropertyChange(name, dict(want.properties)))
        current = have.users if have is not None else frozenset()
        if want.users - current:
            add.append(MemberChange(name, tuple(sorted(want.users - current))))
        extra = current - want.users
        if extra and have is not None and have.managed and name != MANAGED_USERS_GROUP:
            remove.append(MemberChange(name, tuple(sorted(extra))))
    delete_groups: list[str] = []
    delete_users: list[str] = []
    if prune:
        keep = {*desired.groups, MANAGED_USERS_GROUP}
        delete_groups = sorted(n for n, g in actual.groups.items() if g.managed and n not in keep)
        managed_users = actual.groups.get(MANAGED_USERS_GROUP, HubGroup(MANAGED_USERS_GROUP)).users
        delete_users = sorted(managed_users & actual.users - desired.users - actual.admins)
    return SyncPlan(
        create_users=tuple(sorted(desired.users - actual.users)),
        create_groups=tuple(create_groups),
        set_properties=tuple(props),
        add_members=tuple(add),
        remove_members=tuple(remove),
        delete_groups=tuple(delete_groups),
        delete_users=tuple(delete_users),
    )


def apply_sync(
    plan: SyncPlan,
    client: HubClient,
    pacer: Pacer | None = None,
) -> SyncReport:
    """Carry out ``plan`` on the hub, paced by ``pacer``; return what happened.

    Order: groups are created and their properties set; users are created
    in batches, each batch added to :data:`MANAGED_USERS_GROUP` at once (so
    that an interrupted run leaves no user coursehub created outside it);
    then the other members are added and removed in batches, and with
    ``prune`` groups then users are deleted. Every step is idempotent, so
    a run stopped anywhere converges when run again.

    A 4xx answer is recorded against its group (or user) and the other
    steps go on; a batch of users refused for an invalid name is retried
    name by name, and those users are left out of group additions. When
    the hub stops answering (:class:`HubUnreachableError`, or 5xx after the
    retries) or the pacer's stop is set, the run stops and ``aborted`` says
    why; running the sync again completes it.

    Parameters
    ----------
    plan
        The steps (:func:`plan_sync`).
    client
        The hub's API client.
    pacer
        Batch sizes, pauses, progress and stop (default: a :class:`Pacer`
        with the default :class:`~coursehub.hub.pacing.PacePolicy`).
    """
    pacer = pacer or Pacer()
    run = _Run(client, pacer)
    managed_adds = {u for c in plan.add_members if c.group == MANAGED_USERS_GROUP for u in c.users}
    try:
        for name in plan.create_groups:
            run.step(name, client.create_group, name)
        for props in plan.set_properties:
            run.step(props.group, client.set_group_properties, props.group, props.properties)
        failed = run.create_users(plan.create_users, managed_adds)
        for change in plan.add_members:
            missing = sorted(failed.intersection(change.users))
            if missing:
                run.errors.append((change.group, f"users not created: {', '.join(missing)}"))
            skip = failed | (run.added if change.group == MANAGED_USERS_GROUP else set())
            users = [u for u in change.users if u not in skip]
            run.members(change.group, client.add_group_users, users, "add_members")
        for change in plan.remove_members:
            run.members(change.group, client.remove_group_users, change.users, "remove_members")
        for name in plan.delete_groups:
            run.step(name, client.delete_group, name)
        for name in plan.delete_users:
            run.step(name, client.delete_user, name)
    except (HubUnreachableError, HubError, SyncStoppedError) as exc:
        return SyncReport(run.requests, tuple(run.errors), aborted=str(exc))
    return SyncReport(run.requests, tuple(run.errors))


class _Run:
    """Book-keeping of one :func:`apply_sync`: requests sent, errors met, users added."""

    def __init__(self, client: HubClient, pacer: Pacer) -> None:
        self.client, self.pacer = client, pacer
        self.requests = 0
        self.errors: list[tuple[str, str]] = []
        #: users created here and already added to MANAGED_USERS_GROUP
        self.added: set[str] = set()

    def step(self, target: str, action: Any, *args: Any, items: int = 1) -> bool:
        """Send one paced request; record a 4xx against ``target``; let 5xx, no answer through."""
        self.requests += 1
        try:
            self.pacer.one(lambda: action(*args), items)
        except HubError as exc:
            if exc.status >= 500:
                raise
            self.errors.append((target, exc.message))
            return False
        return True

    def members(self, group: str, action: Any, users: Sequence[str], kind: str) -> None:
        """Add or remove ``users`` in batches; a refused batch stops that group's change."""
        for batch in self.pacer.batches(kind, users):
            if not self._send(group, action, group, list(batch)):
                return

    def create_users(self, names: Sequence[str], managed_adds: set[str]) -> set[str]:
        """Create users in batches, each then added to the managed group if planned.

        On a refused batch, the users are created one by one. Returns the names that failed.
        """
        failed: set[str] = set()
        for batch in self.pacer.batches("create_users", names):
            if not self._send("users", self.client.create_users, list(batch), len(batch)):
                self.errors.pop()
                failed.update(u for u in batch if not self.step(u, self.client.create_users, [u]))
            add = [u for u in batch if u in managed_adds and u not in failed]
            group = MANAGED_USERS_GROUP
            if add and self._send(group, self.client.add_group_users, group, add):
                self.added.update(add)
                self.pacer.count(len(add))
        return failed

    def _send(self, target: str, action: Any, *args: Any) -> bool:
        """Send one request of a batch (paced by the batch loop); errors as in :meth:`step`."""
        self.requests += 1
        try:
            action(*args)
        except HubError as exc:
            if exc.status >= 500:
                raise
            self.errors.append((target, exc.message))
            return False
        return True


def render_course_errors(course_ids: Iterable[str], report: SyncReport) -> dict[str, str]:
    """Return each course's sync status: ``"ok"`` or ``"error: <first message>"`` (pure).

    Errors on a course's groups go to that course; an aborted run puts
    every course without an error of its own in error.
    """
    per_course: dict[str, str] = {}
    for target, message in report.errors:
        course_id = course_id_of_group(target)
        if course_id is not None:
            per_course.setdefault(course_id, f"{target}: {message}")
    aborted = f"sync interrupted: {report.aborted}" if report.aborted else None
    status = {}
    for course_id in course_ids:
        problem = per_course.get(course_id) or aborted
        status[course_id] = f"error: {problem}" if problem else "ok"
    return status
