"""Read from the hub what a sync plan needs, and no more: the cost follows the change.

A plan (:func:`coursehub.hub.reconcile.plan_sync`) looks at the hub's users
only through two questions: which desired users already exist (those are
not created), and, to prune, which users coursehub created are admins (those
are never deleted). The groups answer most of it: every member of a group
exists, and every user coursehub created is in
:data:`~coursehub.contract.MANAGED_USERS_GROUP`. So :func:`read_hub_state`
reads the groups, then looks up only the users the groups leave open
(:func:`users_to_look_up`, pure): desired users in no group read, and for a
pruning sync the managed users about to be deleted (for their admin flag).
A no-op sync looks up nobody, whatever the size of the hub.

Those users are read one by one (``GET /users/{name}``) or, when there are
many, through the paginated list (``GET /users``), whichever the hub answers
faster (:func:`plan_user_reads`, pure; constants measured by
``benchmarks/bench_sync.py``). The state read leads to the same plan as the
hub's full state (``tests/test_sync_reads.py`` checks it on generated hubs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol

from coursehub.contract import MANAGED_USERS_GROUP, student_group, team_group
from coursehub.hub.reconcile import HubGroup, HubState

#: Hub seconds per user model in a ``GET /users`` page (0.45 ms at 3,000 users,
#: JupyterHub 6.1 on SQLite, 2 CPUs: ``benchmarks/bench_sync.py``).
LISTED_USER_S = 0.00045
#: Seconds per ``GET /users/{name}``, round trip included (same benchmark).
LOOKUP_S = 0.005
#: Users looked up one by one without first asking how many users the hub has.
FEW_LOOKUPS = 20


class HubReader(Protocol):
    """The reads :func:`read_hub_state` makes (:class:`~coursehub.hub.hubclient.HubClient`)."""

    def list_groups(self) -> list[dict[str, Any]]: ...

    def get_group(self, name: str) -> dict[str, Any] | None: ...

    def find_user(self, name: str) -> dict[str, Any] | None: ...

    def count_users(self) -> int: ...

    def list_users(self) -> list[dict[str, Any]]: ...


def users_to_look_up(
    desired: HubState, groups: Mapping[str, HubGroup], prune: bool = False
) -> set[str]:
    """Return the users whose existence or admin flag the plan needs beyond ``groups`` (pure).

    Desired users that are members of no group in ``groups`` (they may exist
    outside coursehub, or not yet), and with ``prune`` the members of
    :data:`MANAGED_USERS_GROUP` that are no longer desired (their admin flag).
    """
    members = {u for group in groups.values() for u in group.users}
    need = set(desired.users) - members
    if prune:
        managed = groups.get(MANAGED_USERS_GROUP)
        need |= set(managed.users if managed else ()) - set(desired.users)
    return need


def plan_user_reads(n_lookups: int, n_hub_users: int | None) -> Literal["none", "lookup", "list"]:
    """Choose how to read ``n_lookups`` users from a hub of ``n_hub_users`` (pure).

    ``"none"`` when there is nothing to read; ``"lookup"`` (one request per
    user) when there are at most :data:`FEW_LOOKUPS` (``n_hub_users`` may then
    be None: not asked) or when the lookups cost less than listing every
    user (:data:`LOOKUP_S`, :data:`LISTED_USER_S`); else ``"list"``.
    """
    if n_lookups <= 0:
        return "none"
    if n_lookups <= FEW_LOOKUPS or n_hub_users is None:
        return "lookup"
    return "lookup" if n_lookups * LOOKUP_S <= n_hub_users * LISTED_USER_S else "list"


def read_hub_state(
    client: HubReader,
    desired: HubState,
    course_ids: Iterable[str] | None = None,
    *,
    prune: bool = False,
) -> HubState:
    """Read what the plan of ``desired`` against the hub needs.

    Parameters
    ----------
    client
        The hub's API client.
    desired
        The state the catalog calls for (:func:`~coursehub.hub.reconcile.desired_from_courses`).
    course_ids
        None: every group (``GET /groups``, paginated). Else only the
        groups of these courses and :data:`MANAGED_USERS_GROUP`
        (``GET /groups/{name}``; a missing group is absent).
    prune
        Also read the admin flag of the managed users no longer desired;
        the state then has ``admins_known`` True (only for these users).

    Returns
    -------
    HubState
        Groups read; users: their members and the users looked up that
        exist; admins: those among the users looked up (all of them when
        the list was read).

    Raises
    ------
    HubError, HubUnreachableError
        When the hub refuses or does not answer a read.
    """
    if course_ids is None:
        models = client.list_groups()
    else:
        names = [MANAGED_USERS_GROUP]
        names += [name for cid in course_ids for name in (student_group(cid), team_group(cid))]
        models = [m for m in map(client.get_group, names) if m is not None]
    groups = {m["name"]: _group(m) for m in models}
    members = {u for g in groups.values() for u in g.users}
    need = users_to_look_up(desired, groups, prune)
    total = client.count_users() if len(need) > FEW_LOOKUPS else None
    how = plan_user_reads(len(need), total)
    if how == "list":
        found = client.list_users()
    else:
        found = [m for m in map(client.find_user, sorted(need)) if m is not None]
    return HubState(
        users=frozenset(members | {u["name"] for u in found}),
        admins=frozenset(u["name"] for u in found if u.get("admin")),
        groups=groups,
        admins_known=prune,
    )


def read_full_hub_state(client: HubReader) -> HubState:
    """Read every group and every user (``GET /groups``, ``GET /users``): for checks and tests."""
    users = client.list_users()
    return HubState(
        users=frozenset(u["name"] for u in users),
        admins=frozenset(u["name"] for u in users if u.get("admin")),
        groups={m["name"]: _group(m) for m in client.list_groups()},
    )


def _group(model: Mapping[str, Any]) -> HubGroup:
    users = frozenset(model.get("users") or ())
    return HubGroup(model["name"], users, model.get("properties") or {})
