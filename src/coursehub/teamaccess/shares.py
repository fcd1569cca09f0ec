"""Share each student's server with the course's team: a group share, and one share per member.

Why shares and not RBAC roles: JupyterHub (5.x, 6.x) defines roles in its
configuration only (``c.JupyterHub.load_roles``, read at start-up; the REST
API has no roles endpoint), so a role per course
(``access:servers!group=nbgrader-X`` for the group ``formgrade-X``) would
need a hub restart for each new course. Shares (JupyterHub 5.0, "Sharing
access to user servers", ``/hub/api/shares``) are rows of the hub's database,
granted and revoked at run time by a token with the ``shares`` scope.

Why a share per team member besides the group's: JupyterHub 6.1 honours a
group's shares for the hub's own checks (``jupyterhub/scopes.py``,
``get_scopes_for`` of a user: ``for group in orm_object.groups: ... group.shared_with_me``;
so the hub's authorize page lets a member through), but an OAuth token's
scopes are cut to its owner's roles and the owner's *direct* shares only
(``get_scopes_for`` of an ``APIToken``: ``for share in owner.shared_with_me``).
The single-user server therefore gets a token without
``access:servers!server={student}/`` (hub log: "discarding scopes ... not
present in roles of owner") and answers 403. So each student's default server has:

* one share granted to the group ``formgrade-{course_id}``
  (``POST /shares/{student}/`` with ``{"group": ...}``; default scope
  ``access:servers!server={student}/``): it records that the server belongs
  to a student of the course, and is what the student reads on the course page;
* one share per member of the team group of each course whose group share
  the server holds (``POST /shares/{student}/`` with ``{"user": ...}``): the
  one the server honours. A user share to anybody else is revoked
  (``PATCH /shares/{student}/`` with ``{"user": ...}`` and no scopes: all
  revoked, the share deleted; ``jupyterhub/apihandlers/shares.py``): coursehub
  owns the user shares of its students' default servers.

:func:`sync_team_shares` keeps both in step with the hub's groups, which
``coursehub hub sync`` writes: a new student's server is shared, a former
student's shares are revoked, a new team member gets a share of each
student's server and a removed one loses them, at the sync (not before:
the user shares stay until then). The plan is pure (:func:`plan_team_shares`);
every request goes through a :class:`~coursehub.hub.pacing.Pacer`.

Nothing here needs a hub restart; the course app's token needs the
``shares`` scope (in the rendered ``coursehub-sync`` role) and
``read:users:name`` (held through ``read:users``) to share with users by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from urllib.parse import quote

from coursehub.contract import parse_course_group, student_group, team_group
from coursehub.hub.hubclient import HubClient, HubError
from coursehub.hub.pacing import Pacer


@dataclass(frozen=True)
class ServerShares:
    """Who a default server is shared with: group names and user names (the hub's shares)."""

    groups: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SharePlan:
    """Shares of one course to grant and to revoke.

    Attributes
    ----------
    course_id
        The course.
    grant, revoke
        Students whose server gets, or loses, the share of the team group.
    grant_users, revoke_users
        ``(student, user)``: the user share of the student's server to grant, or revoke.
    """

    course_id: str
    grant: tuple[str, ...]
    revoke: tuple[str, ...]
    grant_users: tuple[tuple[str, str], ...] = ()
    revoke_users: tuple[tuple[str, str], ...] = ()

    @property
    def size(self) -> int:
        """The number of requests the plan makes."""
        return len(self.grant) + len(self.revoke) + len(self.grant_users) + len(self.revoke_users)


@dataclass
class ShareReport:
    """What :func:`apply_share_plan` did.

    ``granted``/``revoked``: students whose group share was granted/revoked;
    ``granted_users``/``revoked_users``: ``(student, user)`` user shares;
    ``errors``: ``(student, message)``.
    """

    granted: list[str] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)
    granted_users: list[tuple[str, str]] = field(default_factory=list)
    revoked_users: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def plan_shares(course_id: str, students: Iterable[str], shared: Iterable[str]) -> SharePlan:
    """Return the group shares to grant (students without one) and revoke (former students).

    Pure; the plan has no user shares (:func:`plan_team_shares` adds them).
    """
    want, have = set(students), set(shared)
    return SharePlan(course_id, tuple(sorted(want - have)), tuple(sorted(have - want)))


def plan_team_shares(
    course_id: str,
    students: Iterable[str],
    servers: Mapping[str, ServerShares],
    teams: Mapping[str, Iterable[str]],
) -> SharePlan:
    """Return the group and user shares of one course to grant and to revoke (pure).

    Parameters
    ----------
    course_id
        The course synced.
    students
        Its students (the hub group ``nbgrader-{course_id}``); a student
        missing from ``servers`` is left out of the plan.
    servers
        The shares of each server to look at, by owner: the course's
        students, and the former ones whose server still holds the team
        group's share.
    teams
        Members of the team groups (``formgrade-*``) found in ``servers``,
        by group name; a team group missing here has no members.

    Returns
    -------
    SharePlan
        The team group's share granted to each student, revoked from each
        former one (:func:`plan_shares`); then, on each server, a user share
        for every member of the teams whose group share the server holds
        afterwards (its owner excepted), and the other user shares revoked.
    """
    team = team_group(course_id)
    students = {s for s in students if s in servers}
    groups_plan = plan_shares(
        course_id, students, (owner for owner, sh in servers.items() if team in sh.groups)
    )
    grant_users: list[tuple[str, str]] = []
    revoke_users: list[tuple[str, str]] = []
    for owner in sorted(servers):
        groups = set(servers[owner].groups) - {team}
        if owner in students:
            groups.add(team)
        wanted = {
            member
            for group in groups
            if (parsed := parse_course_group(group)) and parsed[0] == "team"
            for member in teams.get(group, ())
        } - {owner}
        have = servers[owner].users
        grant_users += [(owner, user) for user in sorted(wanted - have)]
        revoke_users += [(owner, user) for user in sorted(have - wanted)]
    return SharePlan(
        course_id, groups_plan.grant, groups_plan.revoke, tuple(grant_users), tuple(revoke_users)
    )


def _q(name: str) -> str:
    return quote(name, safe="")


def read_shared_owners(client: HubClient, course_id: str) -> set[str]:
    """Return the owners of default servers shared with the course's team group.

    Raises
    ------
    HubError
        404 when the team group does not exist on the hub.
    """
    owners = set()
    for share in client.paginate(f"/groups/{_q(team_group(course_id))}/shared"):
        server = share.get("server") or {}
        if server.get("name", "") == "":
            owners.add(server["user"]["name"])
    return owners


def read_students(client: HubClient, course_id: str) -> list[str]:
    """Return the members of the course's student group on the hub ([] if the group is missing)."""
    group = client.get_group(student_group(course_id))
    return sorted(group.get("users", [])) if group else []


def read_server_shares(client: HubClient, owner: str) -> ServerShares:
    """Return whom ``owner``'s default server is shared with (``GET /shares/{owner}/``).

    Raises
    ------
    HubError
        404 when the hub has no such user or server.
    """
    groups, users = set(), set()
    for share in client.paginate(f"/shares/{_q(owner)}/"):
        if share.get("group"):
            groups.add(share["group"]["name"])
        elif share.get("user"):
            users.add(share["user"]["name"])
    return ServerShares(frozenset(groups), frozenset(users))


def read_member_shares(client: HubClient, member: str) -> set[str]:
    """Return the owners of default servers shared with ``member`` directly, not through a group.

    ``GET /users/{member}/shared`` lists both (``jupyterhub/apihandlers/shares.py``,
    ``UserShareListAPIHandler``); a group share has ``user`` None.

    Raises
    ------
    HubError
        404 when the hub has no such user.
    """
    owners = set()
    for share in client.paginate(f"/users/{_q(member)}/shared"):
        server = share.get("server") or {}
        if share.get("user") and server.get("name", "") == "":
            owners.add(server["user"]["name"])
    return owners


def apply_share_plan(client: HubClient, plan: SharePlan, pacer: Pacer | None = None) -> ShareReport:
    """Grant and revoke the shares of ``plan``, one paced request each; a refusal is reported.

    Group shares are granted first, then user shares granted, user shares
    revoked and group shares revoked. A refused request (:class:`HubError`)
    goes to ``errors`` and the rest goes on; a revocation the hub answers
    404 for (already gone) counts as done. A former student's group share
    is kept while one of its user shares could not be revoked: the group
    share is how the next sync finds the server again.

    Raises
    ------
    HubUnreachableError
        When the hub stops answering (the next sync resumes).
    SyncStoppedError
        Before a request, once the pacer's stop was set.
    """
    pacer = pacer or Pacer()
    report = ShareReport()
    team = team_group(plan.course_id)

    def send(student: str, what: str, method: str, path: str, body: object = None) -> bool:
        try:
            pacer.one(partial(client.request, method, path, body=body))
        except HubError as exc:
            if not (method != "POST" and exc.status == 404):
                report.errors.append((student, f"{what}: {exc}"))
                return False
        return True

    for student in plan.grant:
        if send(student, "grant", "POST", f"/shares/{_q(student)}/", {"group": team}):
            report.granted.append(student)
    for student, user in plan.grant_users:
        if send(student, f"grant to {user}", "POST", f"/shares/{_q(student)}/", {"user": user}):
            report.granted_users.append((student, user))
    kept: set[str] = set()  # a former student's group share stays while a user share does
    for student, user in plan.revoke_users:
        if send(student, f"revoke from {user}", "PATCH", f"/shares/{_q(student)}/", {"user": user}):
            report.revoked_users.append((student, user))
        else:
            kept.add(student)
    for student in plan.revoke:
        if student in kept:
            continue
        if send(student, "revoke", "DELETE", f"/groups/{_q(team)}/shared/{_q(student)}/"):
            report.revoked.append(student)
    return report


def sync_team_shares(
    client: HubClient, course_id: str, pacer: Pacer | None = None, *, grants_only: bool = False
) -> ShareReport:
    """Keep the shares of the students' servers of ``course_id`` in step with the hub's groups.

    Reads the course's two groups (written by ``coursehub hub sync``), the
    team group's shares, each student's (and former student's) server
    shares, and the other team groups those hold; plans
    (:func:`plan_team_shares`) and applies (:func:`apply_share_plan`).
    Reads and writes go through ``pacer`` (default: a fresh
    :class:`~coursehub.hub.pacing.Pacer`): about one read per student,
    then one request per change. A course whose team group is not on the
    hub yet gets nothing (empty report); a server the hub does not know
    (404) is reported and left out.

    With ``grants_only`` (the team's page, which should answer quickly): only
    the shares missing for the course's students and team members are
    granted, read from each member's direct shares (one read per member,
    :func:`read_member_shares`) instead of each server's; nothing is
    revoked, which the sync's own run does.

    Raises
    ------
    HubError
        When the hub refuses a read (other than a missing server).
    HubUnreachableError
        When the hub stops answering.
    """
    pacer = pacer or Pacer()
    team = pacer.one(partial(client.get_group, team_group(course_id)), items=0)
    if team is None:
        return ShareReport()
    members = list(team.get("users", []))
    teams: dict[str, list[str]] = {team_group(course_id): members}
    students = pacer.one(partial(read_students, client, course_id), items=0)
    shared = pacer.one(partial(read_shared_owners, client, course_id), items=0)
    errors: list[tuple[str, str]] = []
    servers: dict[str, ServerShares] = {}
    if grants_only:
        direct = {m: pacer.one(partial(read_member_shares, client, m), items=0) for m in members}
        for owner in students:
            groups = frozenset({team_group(course_id)} if owner in shared else ())
            users = frozenset(m for m in members if owner in direct[m])
            servers[owner] = ServerShares(groups, users)
        plan = plan_team_shares(course_id, students, servers, teams)
        plan = replace(plan, revoke=(), revoke_users=())
        return apply_share_plan(client, plan, pacer)
    for owner in sorted(set(students) | shared):
        try:
            servers[owner] = pacer.one(partial(read_server_shares, client, owner), items=0)
        except HubError as exc:
            if exc.status != 404:
                raise
            errors.append((owner, f"read: {exc}"))
    for name in sorted({g for sh in servers.values() for g in sh.groups} - set(teams)):
        parsed = parse_course_group(name)
        if parsed and parsed[0] == "team":
            group = pacer.one(partial(client.get_group, name), items=0)
            teams[name] = list(group.get("users", [])) if group else []
    report = apply_share_plan(client, plan_team_shares(course_id, students, servers, teams), pacer)
    report.errors[:0] = errors
    return report


def read_server_sharers(client: HubClient, username: str) -> list[str]:
    """Return the groups and users with whom ``username``'s default server is shared (sorted)."""
    names = []
    for share in client.paginate(f"/shares/{_q(username)}/"):
        who = share.get("group") or share.get("user") or {}
        if who.get("name"):
            names.append(("group " if share.get("group") else "user ") + who["name"])
    return sorted(names)
